"""The loss-term registry (hf_hardpos.training.losses.registry): every consumer reads a term from its one entry.

A term added to the registry is built, weighted and reported by the objective, and described for the card,
with no other edit; the arguments, their checks and the data validation agree on what each term reads.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from datasets import Dataset
from torch import nn
from transformers import HfArgumentParser, TrainingArguments

from hf_hardpos import columns
from hf_hardpos.errors import UserInputError
from hf_hardpos.training.losses import HardPosObjective, registry
from hf_hardpos.training.training_args import HardPosTrainingArguments
from hf_hardpos.training.validation import validate_training_data


class _MeanPositiveSimilarity(nn.Module):
    """A made-up term for the test: minus the mean scaled cosine of image and valid hard positives."""

    citation = ""

    def forward(self, batch, logit_scale):
        scores = torch.einsum("bd,bpd->bp", batch.image, batch.positives) * logit_scale
        return -scores[batch.positive_mask].mean()

    def get_config_dict(self):
        return {}


NEW_TERM = registry.LossTerm(
    key="pos", symbol="L_pos", weight="positive_similarity_weight", default_weight=0.0, help="test term",
    reads=frozenset({registry.HARD_POSITIVES}), citation="test", build=lambda settings, types: _MeanPositiveSimilarity(),
)  # fmt: skip


def _inputs(rows=4, dim=8, slots=2, seed=0):
    generator = torch.Generator().manual_seed(seed)

    def unit(*shape):
        return nn.functional.normalize(torch.randn(*shape, generator=generator, dtype=torch.float64), dim=-1)

    return {"image_embeds": unit(rows, dim), "text_embeds": unit(rows, dim), "logit_scale": torch.tensor(10.0, dtype=torch.float64),
                "positive_embeds": unit(rows, slots, dim), "negative_embeds": unit(rows, slots, dim)}  # fmt: skip


def test_a_registered_term_is_built_weighted_reported_and_described(monkeypatch):
    inputs = _inputs()
    base = HardPosObjective(negative_types=("a", "b")).double()(**inputs)
    monkeypatch.setattr(registry, "TERMS", (*registry.TERMS, NEW_TERM))
    objective = HardPosObjective(negative_types=("a", "b"), positive_similarity_weight=0.5).double()
    out = objective(**inputs)
    image, positives = inputs["image_embeds"], inputs["positive_embeds"]
    expected = -(10.0 * torch.einsum("bd,bpd->bp", image, positives)).mean()  # independent restatement
    torch.testing.assert_close(out["loss_pos"], expected)
    torch.testing.assert_close(out["loss"], base["loss"] + 0.5 * expected)
    assert list(objective.terms) == ["hn", "hp", "pos"]
    assert objective.get_config_dict()["positive_similarity_weight"] == 0.5
    described = registry.describe(objective.get_config_dict())
    assert [(d["key"], d["weight"], d["reads"]) for d in described][-1] == ("pos", 0.5, ["hard_positives"])
    with pytest.raises(TypeError, match="unknown argument"):
        HardPosObjective(no_such_weight=1.0)


def test_every_weight_and_option_is_a_training_argument_and_survives_the_saved_arguments(tmp_path):
    fields = {f.name: f for f in dataclasses.fields(HardPosTrainingArguments)}
    names = [name for name, _, _ in registry.argument_fields()]
    trainer_fields = {f.name for f in dataclasses.fields(TrainingArguments)}
    assert len(set(names)) == len(names) and not set(names) & trainer_fields  # no term shadows another option
    assert len({t.key for t in registry.TERMS}) == len(registry.TERMS)
    for term in registry.TERMS:
        assert fields[term.weight].default == term.default_weight
        for option in term.options:
            assert fields[option.name].default == option.default
    (args,) = HfArgumentParser(HardPosTrainingArguments).parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), "--imc_weight", "0.2", "--imc_form", "released_code", "--cmr_weight", "0.4",
         "--cmr_upper_bound", "5", "--hard_positive_mode", "ranking", "--report_to", "none"])  # fmt: skip
    torch.save(args, tmp_path / "training_args.bin")
    loaded = torch.load(tmp_path / "training_args.bin", weights_only=False)
    assert registry.settings_of(loaded) == {
        "hard_negative_weight": 1.0, "hard_positive_weight": 1.0, "hard_positive_mode": "ranking", "imc_weight": 0.2,
        "imc_form": "released_code", "cmr_weight": 0.4, "cmr_upper_bound": 5.0,
    }  # fmt: skip
    assert [d["symbol"] for d in registry.describe(loaded)] == ["L_clip", "L_hn", "L_hp", "L_imc", "L_cmr"]
    assert registry.describe(loaded)[2]["reads"] == ["hard_negatives", "hard_positives"]  # ranking mode
    with pytest.raises(SystemExit):  # a choice outside the registry's is refused by the parser
        HfArgumentParser(HardPosTrainingArguments).parse_args_into_dataclasses(
            ["--output_dir", str(tmp_path), "--imc_form", "code"])  # fmt: skip


def test_the_checks_follow_what_each_term_reads(tmp_path):
    def args(**overrides):
        return HardPosTrainingArguments(output_dir=str(tmp_path), report_to="none", **overrides)

    # A ranking-mode hard-positive term reads hard negatives: the arguments refuse it without negative
    # columns (before the registry only the objective noticed, with a ValueError at construction).
    with pytest.raises(UserInputError, match="negative_columns is empty"):
        args(hard_negative_weight=0, hard_positive_mode="ranking", negative_columns=[])
    assert args(hard_negative_weight=0, negative_columns=[]).negative_columns == []
    with pytest.raises(UserInputError, match="cmr_weight"):
        args(cmr_weight=0.4, hard_example_sampling="one_per_row")
    with pytest.raises(UserInputError, match="imc_weight must be a finite number >= 0"):
        args(imc_weight=float("nan"))
    assert args(imc_form="released_code", cmr_upper_bound=5.0).inert_options() == {
        "imc_form": "imc_form='released_code' has no effect with imc_weight=0",
        "cmr_upper_bound": "cmr_upper_bound=5.0 has no effect with cmr_weight=0",
    }


def test_data_validation_refuses_all_null_negatives_for_a_ranking_hard_positive_term(tmp_path):
    from PIL import Image

    image = Image.new("RGB", (4, 4))
    rows = {"image": [image] * 3, "caption": ["a cat"] * 3, columns.HARD_POSITIVE_REPLACE: ["a feline"] * 3,
            columns.HARD_NEGATIVE_REPLACE: [None] * 3}  # fmt: skip
    data = Dataset.from_dict(rows)

    def args(**overrides):
        return HardPosTrainingArguments(
            output_dir=str(tmp_path), report_to="none", hard_negative_weight=0, positive_columns=[columns.HARD_POSITIVE_REPLACE],
            negative_columns=[columns.HARD_NEGATIVE_REPLACE], **overrides,
        )  # fmt: skip

    assert validate_training_data(data, args())["rows"] == 3  # contrastive hard positives read no negative
    with pytest.raises(UserInputError, match="hard_positive_weight 0"):
        validate_training_data(data, args(hard_positive_mode="ranking"))


def test_loss_arguments_are_the_fields_the_terms_declare():
    """`LossArguments` is written out for type checkers; it must be exactly what the terms declare (name,
    type, default, `--help`, choices, in registry order), each term's declaration on its own class."""

    def facts(name, kind, field):  # HfArgumentParser resolves a field's type in place: compare names
        kind = kind if isinstance(kind, str) else kind.__name__
        return name, kind, field.default, field.metadata.get("help"), field.metadata.get("choices")

    written = [facts(f.name, f.type, f) for f in dataclasses.fields(registry.LossArguments)]
    declared = [facts(name, kind, field) for name, kind, field in registry.argument_fields()]
    assert written == declared
    assert [type(term.build(registry.settings_of({}), ("a",))).TERM for term in registry.TERMS] == list(
        registry.TERMS
    )
