"""A recipe or arguments file sets training options only: where a run publishes, reports and writes comes
from the command line, and every value has its flag's type (`training.recipe`)."""

import shutil
from pathlib import Path

import pytest

from hf_hardpos.commands.train import finetune
from hf_hardpos.errors import UserInputError
from hf_hardpos.training.finetune_args import parse_arguments

RECIPES = Path(__file__).resolve().parents[1] / "examples" / "recipes"


def _recipe(tmp_path, extra: str, header: str = "  name: x\n  version: 1\n  source: s\n") -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text("recipe:\n" + header + "learning_rate: 1.0e-5\n" + extra)
    return path


@pytest.mark.parametrize(
    "extra",
    [
        "push_to_hub: true\nhub_model_id: attacker-org/stolen-model\nhub_private_repo: false\n",
        "report_to: all\n",
        "output_dir: /tmp/elsewhere\n",
        "hub_token: hf_x\n",
        "hub_strategy: every_save\n",
        "run_name: r\n",
        "resume_from_checkpoint: /tmp/x\n",
    ],
)
def test_hub_reporting_and_output_settings_in_a_recipe_are_refused(tmp_path, extra):
    path = _recipe(tmp_path, extra)
    with pytest.raises(UserInputError, match="command line only") as err:
        parse_arguments([str(path), "--output_dir", str(tmp_path / "run")])
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_the_shipped_recipes_set_none_of_them(tmp_path):
    for recipe in sorted(RECIPES.glob("*.yaml")):
        *_, args, parsed = parse_arguments(
            [str(recipe), "--dataset", "hardpos/coco", "--output_dir", str(tmp_path)]
        )
        assert parsed is not None and not args.push_to_hub and args.hub_model_id is None


@pytest.mark.parametrize(
    "extra, field",
    [
        ("seed: 1.5\n", "seed"),
        ("max_steps: [1, 2]\n", "max_steps"),
        ("weight_decay: {a: 1}\n", "weight_decay"),
        ("use_lora: 3\n", "use_lora"),
        ("lr_scheduler_type: sideways\n", "lr_scheduler_type"),
        ("warmup_steps: .nan\n", "warmup_steps"),
        ("seed: true\n", "seed"),
    ],
)
def test_values_of_the_wrong_type_are_one_line_naming_file_and_field(tmp_path, extra, field, capsys):
    path = _recipe(tmp_path, extra)
    assert finetune([str(path), "--output_dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and repr(field) in err and "Traceback" not in err


def test_a_list_value_where_one_number_is_expected_is_refused(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text("recipe:\n  name: x\n  version: 1\n  source: s\nlearning_rate: [1, 2]\n")
    with pytest.raises(UserInputError, match="'learning_rate'"):
        parse_arguments([str(path), "--output_dir", str(tmp_path / "run")])


@pytest.mark.parametrize(
    "header, field",
    [
        ("  name: x\n  version: .nan\n  source: s\n", "version"),
        ("  name: x\n  version: 1.5\n  source: s\n", "version"),
        ("  name: [x]\n  version: 1\n  source: s\n", "name"),
        ("  name: x\n  version: 1\n  source: s\n  global_batch_size: big\n", "global_batch_size"),
        ("  name: x\n  version: 1\n  source: s\n  notes: 3\n", "notes"),
    ],
)
def test_recipe_headers_of_the_wrong_type_are_one_line(tmp_path, header, field, capsys):
    path = _recipe(tmp_path, "", header)
    assert finetune([str(path), "--output_dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"recipe.{field}" in err and str(path) in err


def test_a_recipe_that_is_not_utf8_is_one_line(tmp_path, capsys):
    path = tmp_path / "recipe.yaml"
    shutil.copy(RECIPES / "svlc.yaml", path)
    path.write_bytes(path.read_bytes() + b"\n# caf\xe9\n")
    assert finetune([str(path), "--output_dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "UTF-8" in err
