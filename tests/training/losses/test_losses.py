"""Every loss term against a plain, loop-by-loop reference (values and gradients), plus masks, CMR state,
and the combined objective's bookkeeping. Single process; see tests/training/test_distributed_losses.py for DDP."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from hf_hardpos.training.logit_scale import (
    MAX_LOGIT_SCALE,
    clamp_logit_scale,
    unwrap_model,
)
from hf_hardpos.training.losses import (
    CMRLoss,
    ContrastiveLoss,
    EmbeddingBatch,
    HardNegativeLoss,
    HardPositiveLoss,
    HardPosObjective,
    IMCLoss,
    Slots,
)

B, D, P, K = 5, 8, 2, 2


def _unit(*shape, generator):
    return F.normalize(torch.randn(*shape, D, generator=generator, dtype=torch.float64), dim=-1)


@pytest.fixture
def inputs():
    """Random unit embeddings (leaf tensors) with masks that leave holes: row 1 has no hard positive at
    all, row 3 has no hard negative at all, and some rows miss one slot."""
    g = torch.Generator().manual_seed(0)
    tensors = {
        "image": _unit(B, generator=g),
        "text": _unit(B, generator=g),
        "positives": _unit(B, P, generator=g),
        "negatives": _unit(B, K, generator=g),
        "logit_scale": torch.tensor(7.5, dtype=torch.float64),
    }
    for tensor in tensors.values():
        tensor.requires_grad_(True)
    tensors["positive_mask"] = torch.tensor([[1, 1], [0, 0], [1, 0], [0, 1], [1, 1]], dtype=torch.bool)
    tensors["negative_mask"] = torch.tensor([[1, 1], [1, 0], [0, 1], [0, 0], [1, 1]], dtype=torch.bool)
    return tensors


def _batch(x) -> EmbeddingBatch:
    return EmbeddingBatch.build(
        x["image"],
        x["text"],
        Slots(x["positives"], x["positive_mask"]),
        Slots(x["negatives"], x["negative_mask"]),
    )


def _grads(value: torch.Tensor, x) -> list[torch.Tensor]:
    leaves = [x[k] for k in ("image", "text", "positives", "negatives", "logit_scale")]
    grads = torch.autograd.grad(value, leaves, allow_unused=True)
    return [torch.zeros_like(leaf) if g is None else g for g, leaf in zip(grads, leaves)]


def _assert_same(loss, reference, x):
    torch.testing.assert_close(loss, reference)
    for got, want in zip(_grads(loss, x), _grads(reference, x)):
        torch.testing.assert_close(got, want)


def _ce(logits: list[torch.Tensor], target: int) -> torch.Tensor:
    """-log softmax(logits)[target], written out."""
    stacked = torch.stack(logits)
    return -(stacked[target] - torch.log(torch.exp(stacked).sum()))


def _mean(values: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    return torch.stack(values).mean() if values else like.sum() * 0


# ---------------------------------------------------------------- references (plain loops)


def ref_contrastive(x, with_negatives=True):
    v, t, tn, s, nm = x["image"], x["text"], x["negatives"], x["logit_scale"], x["negative_mask"]
    image_to_text, text_to_image = [], []
    for i in range(B):
        logits = [s * v[i] @ t[j] for j in range(B)]
        if with_negatives:
            logits += [s * v[i] @ tn[j, k] for j in range(B) for k in range(K) if nm[j, k]]
        image_to_text.append(_ce(logits, i))
        text_to_image.append(_ce([s * t[i] @ v[j] for j in range(B)], i))
    return (torch.stack(image_to_text).mean() + torch.stack(text_to_image).mean()) / 2


def ref_hard_negative(x):
    """SVLC's negative loss, TSVLC src/open_clip/loss.py `get_loss_neg_only` (SivanDoveh/TSVLC @90b18e7):
    per image that has negatives, CE over [s<I,T>, s<I,N_1>, ..., s<I,N_K>] with target 0; mean over those
    images. Missing negatives are not candidates."""
    v, t, tn, s, nm = x["image"], x["text"], x["negatives"], x["logit_scale"], x["negative_mask"]
    losses = [
        _ce([s * v[i] @ t[i]] + [s * v[i] @ tn[i, k] for k in range(K) if nm[i, k]], 0)
        for i in range(B)
        if nm[i].any()
    ]
    return _mean(losses, s)


def ref_hard_positive_contrastive(x):
    """SVLC's positive loss, TSVLC src/open_clip/loss.py `get_loss_pos_only` (@90b18e7, symmetric off):
    (CE(s*I*P^T, diag) + CE(s*T*P^T, diag)) / 2; with several hard positives per row, the row's other
    ones are not candidates."""
    v, t, tp, s, pm = x["image"], x["text"], x["positives"], x["logit_scale"], x["positive_mask"]
    image_losses, text_losses = [], []
    for i in range(B):
        for p in range(P):
            if not pm[i, p]:
                continue
            # candidates: every valid hard positive, except the row's *other* hard positives
            candidates = [(j, q) for j in range(B) for q in range(P) if pm[j, q] and (j != i or q == p)]
            target = candidates.index((i, p))
            image_losses.append(_ce([s * v[i] @ tp[j, q] for j, q in candidates], target))
            text_losses.append(_ce([s * t[i] @ tp[j, q] for j, q in candidates], target))
    return (_mean(image_losses, s) + _mean(text_losses, s)) / 2


def ref_hard_positive_ranking(x):
    v, tp, tn, s = x["image"], x["positives"], x["negatives"], x["logit_scale"]
    pm, nm = x["positive_mask"], x["negative_mask"]
    losses = [
        _ce([s * v[i] @ tp[i, p], s * v[i] @ tn[i, k]], 0)
        for i in range(B)
        for p in range(P)
        for k in range(K)
        if pm[i, p] and nm[i, k]
    ]
    return _mean(losses, s)


def ref_imc(x):
    v, t, tn, s, nm = x["image"], x["text"], x["negatives"], x["logit_scale"], x["negative_mask"]
    losses = []
    for i in range(B):
        negatives = [torch.exp(s * t[i] @ tn[i, k]) for k in range(K) if nm[i, k]]
        if negatives:
            losses.append(-torch.log(torch.exp(s * v[i] @ t[i]) / torch.stack(negatives).sum()))
    return _mean(losses, s)


def ref_imc_released(x):
    """CE-CLIP's released IMC, Enhance-FineGrained src/open_clip/loss.py `get_imc_loss` (lezhang7/
    Enhance-FineGrained @ef87eb7): CE over s * T_gt @ N^T (every negative of the batch, row-major (row,
    type)) with target 0 for every row. Missing negatives are not columns; the target is the first one
    that exists."""
    t, tn, s, nm = x["text"], x["negatives"], x["logit_scale"], x["negative_mask"]
    columns = [(j, k) for j in range(B) for k in range(K) if nm[j, k]]
    return torch.stack([_ce([s * t[i] @ tn[j, k] for j, k in columns], 0) for i in range(B)]).mean()


def ref_cmr(x, thresholds):
    """CE-CLIP's released CMR, Enhance-FineGrained src/open_clip/loss.py `get_cmr_loss` (@ef87eb7):
    relu(Th_k + S(I,T_k) - S(I,T)) * valid_mask, then .mean() over all B x K entries."""
    v, t, tn, s, nm = x["image"], x["text"], x["negatives"], x["logit_scale"], x["negative_mask"]
    total = s * 0
    for i in range(B):
        for k in range(K):
            if nm[i, k]:
                total = total + torch.clamp(s * v[i] @ tn[i, k] - s * v[i] @ t[i] + thresholds[k], min=0)
    return total / (B * K)


def ref_thresholds(x, previous, upper):
    """The same file's threshold update ('mean'), clamped in src/training/train.py to [0, upper_bound]:
    mean over all rows of S(I,T) minus mean over rows with a type-k negative of S(I,T_k); a type with no
    negative (0/0 upstream) keeps its previous value here."""
    v, t, tn, s, nm = x["image"], x["text"], x["negatives"], x["logit_scale"], x["negative_mask"]
    mean_original = sum((s * v[i] @ t[i]).item() for i in range(B)) / B
    out = []
    for k in range(K):
        rows = [i for i in range(B) if nm[i, k]]
        if not rows:
            out.append(previous[k])
            continue
        mean_negative = sum((s * v[i] @ tn[i, k]).item() for i in rows) / len(rows)
        out.append(min(max(mean_original - mean_negative, 0.0), upper))
    return out


# ---------------------------------------------------------------- each term vs its reference


@pytest.mark.parametrize("with_negatives", [True, False])
def test_contrastive_matches_reference(inputs, with_negatives):
    loss = ContrastiveLoss(use_hard_negatives=with_negatives)(_batch(inputs), inputs["logit_scale"])
    _assert_same(loss, ref_contrastive(inputs, with_negatives), inputs)


def test_contrastive_without_negatives_is_clip():
    g = torch.Generator().manual_seed(1)
    image, text = _unit(B, generator=g), _unit(B, generator=g)
    logits = 4.0 * image @ text.T
    labels = torch.arange(B)
    clip = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
    loss = ContrastiveLoss()(EmbeddingBatch.build(image, text), torch.tensor(4.0, dtype=torch.float64))
    torch.testing.assert_close(loss, clip)


def test_hard_negative_matches_reference(inputs):
    loss = HardNegativeLoss()(_batch(inputs), inputs["logit_scale"])
    _assert_same(loss, ref_hard_negative(inputs), inputs)


def test_hard_positive_contrastive_matches_reference(inputs):
    loss = HardPositiveLoss(mode="contrastive")(_batch(inputs), inputs["logit_scale"])
    _assert_same(loss, ref_hard_positive_contrastive(inputs), inputs)


def test_hard_positive_ranking_matches_reference(inputs):
    loss = HardPositiveLoss(mode="ranking")(_batch(inputs), inputs["logit_scale"])
    _assert_same(loss, ref_hard_positive_ranking(inputs), inputs)


def test_imc_matches_reference(inputs):
    loss = IMCLoss()(_batch(inputs), inputs["logit_scale"])
    _assert_same(loss, ref_imc(inputs), inputs)


def test_imc_released_code_form_matches_reference(inputs):
    loss = IMCLoss(form="released_code")(_batch(inputs), inputs["logit_scale"])
    _assert_same(loss, ref_imc_released(inputs), inputs)
    # row 0's first negative is missing here: the target moves to the first negative that exists
    x = dict(inputs, negative_mask=inputs["negative_mask"].clone())
    x["negative_mask"][0, 0] = False
    _assert_same(IMCLoss(form="released_code")(_batch(x), x["logit_scale"]), ref_imc_released(x), x)


def test_cmr_matches_reference(inputs):
    cmr = CMRLoss(("replace", "swap")).double().eval()  # eval: leave the thresholds alone here
    cmr.threshold_replace.fill_(0.7)
    cmr.threshold_swap.fill_(-0.3)
    loss = cmr(_batch(inputs), inputs["logit_scale"])
    _assert_same(loss, ref_cmr(inputs, [0.7, -0.3]), inputs)


# ---------------------------------------------------------------- masks


def test_masked_slots_contribute_nothing(inputs):
    """Changing the embedding in a masked slot changes no value, and its gradient is zero."""
    # eval(): the CMR thresholds must not move between the two calls
    objective = HardPosObjective(imc_weight=0.2, cmr_weight=0.4, negative_types=("a", "b")).double().eval()

    def run(positives, negatives):
        out = objective(inputs["image"], inputs["text"], inputs["logit_scale"], positives,
                        inputs["positive_mask"], negatives, inputs["negative_mask"])  # fmt: skip
        return out

    base = run(inputs["positives"], inputs["negatives"])
    g = torch.Generator().manual_seed(5)
    noisy_pos = torch.where(inputs["positive_mask"][..., None], inputs["positives"], _unit(B, P, generator=g))
    noisy_neg = torch.where(inputs["negative_mask"][..., None], inputs["negatives"], _unit(B, K, generator=g))
    noisy = run(noisy_pos, noisy_neg)
    for key in ("loss", "loss_clip", "loss_hn", "loss_hp", "loss_imc", "loss_cmr"):
        torch.testing.assert_close(noisy[key], base[key], msg=key)
    grad_pos, grad_neg = torch.autograd.grad(base["loss"], [inputs["positives"], inputs["negatives"]])
    assert torch.all(grad_pos[~inputs["positive_mask"]] == 0)
    assert torch.all(grad_neg[~inputs["negative_mask"]] == 0)
    assert torch.any(grad_pos[inputs["positive_mask"]] != 0) and torch.any(
        grad_neg[inputs["negative_mask"]] != 0
    )


def test_nothing_valid_gives_exact_zero_and_a_usable_graph(inputs):
    objective = HardPosObjective(imc_weight=0.2, cmr_weight=0.4, negative_types=("a", "b")).double()
    none_p = torch.zeros(B, P, dtype=torch.bool)
    none_n = torch.zeros(B, K, dtype=torch.bool)
    out = objective(inputs["image"], inputs["text"], inputs["logit_scale"], inputs["positives"], none_p,
                    inputs["negatives"], none_n)  # fmt: skip
    for key in ("loss_hn", "loss_hp", "loss_imc", "loss_cmr"):
        assert out[key].item() == 0.0, key
        assert out[key].requires_grad, key
    # no valid negative column: the contrastive term is plain CLIP
    torch.testing.assert_close(out["loss_clip"], ref_contrastive(inputs, with_negatives=False))
    out["loss"].backward()
    for name in ("image", "text", "positives", "negatives", "logit_scale"):
        assert torch.isfinite(inputs[name].grad).all(), name
    assert torch.all(inputs["positives"].grad == 0) and torch.all(inputs["negatives"].grad == 0)
    # a type with no valid row keeps its threshold
    assert objective.terms["cmr"].threshold_dict() == {"a": 0.0, "b": 0.0}


# ---------------------------------------------------------------- the combined objective


def test_objective_total_keys_and_weights(inputs):
    objective = HardPosObjective(
        hard_negative_weight=0.5,
        hard_positive_weight=0.25,
        imc_weight=0.2,
        cmr_weight=0.4,
        negative_types=("a", "b"),
    ).double()
    out = objective(inputs["image"], inputs["text"], inputs["logit_scale"], inputs["positives"],
                    inputs["positive_mask"], inputs["negatives"], inputs["negative_mask"])  # fmt: skip
    assert set(out) == {"loss", "loss_clip", "loss_hn", "loss_hp", "loss_imc", "loss_cmr",
                        "cmr_threshold/a", "cmr_threshold/b"}  # fmt: skip
    assert isinstance(out["cmr_threshold/a"], float)
    expected = (
        ref_contrastive(inputs)
        + 0.5 * ref_hard_negative(inputs)
        + 0.25 * ref_hard_positive_contrastive(inputs)
        + 0.2 * ref_imc(inputs)
        + 0.4 * ref_cmr(inputs, [0.0, 0.0])
    )
    _assert_same(out["loss"], expected, inputs)
    json.dumps(objective.get_config_dict())
    for key in ("radford2021learning", "doveh2023teaching", "zhang2024contrasting", "kamath2024hard"):
        assert objective.citation.count(key) == 1, key


def test_zero_weight_terms_are_absent_and_hp_only_sees_no_hard_negative(inputs):
    objective = HardPosObjective(hard_negative_weight=0.0, hard_positive_weight=1.0).double()
    one_type = {
        "negative_embeds": inputs["negatives"][:, :1],
        "negative_mask": inputs["negative_mask"][:, :1],
    }
    with_neg = objective(inputs["image"], inputs["text"], inputs["logit_scale"], inputs["positives"],
                         inputs["positive_mask"], **one_type)  # fmt: skip
    without = objective(inputs["image"], inputs["text"], inputs["logit_scale"], inputs["positives"],
                        inputs["positive_mask"])  # fmt: skip
    assert set(with_neg) == {"loss", "loss_clip", "loss_hp"}
    torch.testing.assert_close(with_neg["loss"], without["loss"])
    torch.testing.assert_close(with_neg["loss_clip"], ref_contrastive(inputs, with_negatives=False))

    ranking = HardPosObjective(
        hard_negative_weight=0.0, hard_positive_mode="ranking", negative_types=("a", "b")
    )
    out = ranking.double()(inputs["image"], inputs["text"], inputs["logit_scale"], inputs["positives"],
                           inputs["positive_mask"], inputs["negatives"], inputs["negative_mask"])  # fmt: skip
    torch.testing.assert_close(out["loss_hp"], ref_hard_positive_ranking(inputs))


def test_objective_rejects_bad_configuration_and_inputs(inputs):
    with pytest.raises(ValueError, match="hard_negative_weight"):
        HardPosObjective(hard_negative_weight=-1)
    with pytest.raises(ValueError, match="hard_positive_mode"):
        HardPosObjective(hard_positive_mode="triplet")
    with pytest.raises(ValueError, match="unique"):
        HardPosObjective(negative_types=("a", "a"))
    with pytest.raises(ValueError, match="negative type"):
        HardPosObjective(cmr_weight=1.0, negative_types=("a.b",))
    objective = HardPosObjective()
    with pytest.raises(ValueError, match="negative_embeds"):
        objective(inputs["image"], inputs["text"], inputs["logit_scale"], inputs["positives"])
    with pytest.raises(ValueError, match="positive_embeds"):
        objective(
            inputs["image"], inputs["text"], inputs["logit_scale"], negative_embeds=inputs["negatives"][:, :1]
        )
    # only CMR ties the slots to named types; SVLC's terms take any number of negatives per row
    objective(inputs["image"], inputs["text"], inputs["logit_scale"], inputs["positives"],
              negative_embeds=inputs["negatives"])  # fmt: skip
    with pytest.raises(ValueError, match="2 slots per row"):
        HardPosObjective(cmr_weight=1.0)(inputs["image"], inputs["text"], inputs["logit_scale"], inputs["positives"],
                                         negative_embeds=inputs["negatives"])  # fmt: skip
    with pytest.raises(ValueError, match="imc_form"):
        HardPosObjective(imc_form="code")
    with pytest.raises(ValueError, match="positive_mask must be"):
        objective(inputs["image"], inputs["text"], inputs["logit_scale"], inputs["positives"],
                  inputs["positive_mask"][:, :1], inputs["negatives"][:, :1])  # fmt: skip


# ---------------------------------------------------------------- CMR threshold state


def _cmr_objective():
    return HardPosObjective(hard_negative_weight=0, hard_positive_weight=0, cmr_weight=1.0,
                            cmr_upper_bound=3.0, negative_types=("a", "b")).double()  # fmt: skip


def _cmr_call(objective, x):
    return objective(x["image"], x["text"], x["logit_scale"], negative_embeds=x["negatives"],
                     negative_mask=x["negative_mask"])  # fmt: skip


def _fresh(x, seed):
    """A new batch whose captions lie closer to their images than random negatives do (positive gaps)."""
    g = torch.Generator().manual_seed(seed)
    image = _unit(B, generator=g)
    text = F.normalize(image + 0.6 * _unit(B, generator=g), dim=-1)
    return dict(x, image=image.requires_grad_(), text=text.requires_grad_(),
                negatives=_unit(B, K, generator=g).requires_grad_())  # fmt: skip


def test_cmr_thresholds_follow_previous_batch_over_several_steps(inputs):
    """Five steps: each step's loss uses the thresholds the previous step's batch set (CE-CLIP's update)."""
    objective = _cmr_objective()
    thresholds = [0.0, 0.0]
    for step in range(5):
        x = inputs if step == 0 else _fresh(inputs, 10 + step)
        if step == 3:  # a batch without any type-b negative: b keeps its threshold (0/0 upstream)
            assert thresholds[1] > 0
            x = dict(x, negative_mask=x["negative_mask"].clone())
            x["negative_mask"][:, 1] = False
        out = _cmr_call(objective, x)
        assert [out["cmr_threshold/a"], out["cmr_threshold/b"]] == pytest.approx(thresholds)
        torch.testing.assert_close(out["loss_cmr"], ref_cmr(x, thresholds))
        thresholds = ref_thresholds(x, thresholds, 3.0)
        assert list(objective.terms["cmr"].threshold_dict().values()) == pytest.approx(thresholds)
        assert all(math.isfinite(value) for value in thresholds)
    assert thresholds[0] > 0 and thresholds[1] > 0


def test_cmr_thresholds_clamp_to_zero_and_upper_bound(inputs):
    objective = _cmr_objective()
    x = _fresh(inputs, 3)
    # captions beat their negatives by far more than u
    x3 = dict(x, text=x["image"].detach().clone().requires_grad_(),
              negatives=(-x["image"].detach())[:, None].expand(B, K, D).clone().requires_grad_())  # fmt: skip
    _cmr_call(objective, x3)
    assert objective.terms["cmr"].threshold_dict() == {"a": 3.0, "b": 3.0}
    # negatives beat their captions: clamp at 0 (CE-CLIP's [0, u])
    x4 = dict(x, negatives=x["image"].detach()[:, None].expand(B, K, D).clone().requires_grad_(),
              text=(-x["image"].detach()).clone().requires_grad_())  # fmt: skip
    _cmr_call(objective, x4)
    assert objective.terms["cmr"].threshold_dict() == {"a": 0.0, "b": 0.0}


def test_cmr_thresholds_reset_at_a_new_epoch_but_not_on_a_resume_inside_it(inputs):
    objective = _cmr_objective()
    objective.start_epoch(0)
    _cmr_call(objective, _fresh(inputs, 11))
    moved = objective.terms["cmr"].threshold_dict()
    assert all(value > 0 for value in moved.values())
    state = objective.state_dict()
    assert int(state["terms.cmr.threshold_epoch"]) == 0
    # resume inside epoch 0: the restored thresholds stay
    resumed = _cmr_objective()
    resumed.load_state_dict(state)
    resumed.start_epoch(0)
    assert resumed.terms["cmr"].threshold_dict() == moved
    # epoch 1 starts fresh, in both
    for each in (objective, resumed):
        each.start_epoch(1)
        assert each.terms["cmr"].threshold_dict() == {"a": 0.0, "b": 0.0}
        assert int(each.state_dict()["terms.cmr.threshold_epoch"]) == 1


def test_cmr_deferred_updates_use_every_micro_batch_of_the_step(inputs):
    """Under gradient accumulation the trainer defers: one update per optimiser step, from all its rows."""
    objective = _cmr_objective()
    objective.defer_state_updates()
    x1, x2 = _fresh(inputs, 21), _fresh(inputs, 22)
    _cmr_call(objective, x1)
    out = _cmr_call(objective, x2)
    assert [out["cmr_threshold/a"], out["cmr_threshold/b"]] == [0.0, 0.0]  # nothing applied yet
    objective.apply_pending()
    both = {k: torch.cat([x1[k], x2[k]]).detach() for k in ("image", "text", "negatives", "negative_mask")}
    both["logit_scale"] = inputs["logit_scale"]
    v, t, tn, s, nm = (
        both["image"],
        both["text"],
        both["negatives"],
        both["logit_scale"],
        both["negative_mask"],
    )
    mean_original = (s * (v * t).sum(-1)).mean()
    expected = [
        (mean_original - (s * (v[nm[:, k]] * tn[nm[:, k], k]).sum(-1)).mean()).clamp(0, 3.0).item()
        for k in range(K)
    ]
    assert list(objective.terms["cmr"].threshold_dict().values()) == pytest.approx(expected)


def test_cmr_thresholds_do_not_move_in_eval_mode_but_do_without_grad(inputs):
    """eval() passes leave the state alone; a training-mode step under no_grad still updates it, as
    CE-CLIP's code does (its thresholds are detached statistics)."""
    objective = _cmr_objective()
    # captions equal to their images beat the random negatives: a positive gap, so thresholds above 0
    matched = inputs["image"].detach().clone()
    run = lambda: objective(inputs["image"], matched, inputs["logit_scale"],  # noqa: E731
                            negative_embeds=inputs["negatives"], negative_mask=inputs["negative_mask"])  # fmt: skip
    objective.eval()
    run()
    assert objective.terms["cmr"].threshold_dict() == {"a": 0.0, "b": 0.0}
    objective.train()
    with torch.no_grad():
        run()
    assert all(value > 0.0 for value in objective.terms["cmr"].threshold_dict().values())


def test_cmr_state_dict_round_trip(inputs):
    objective = _cmr_objective()
    objective(inputs["image"], inputs["text"], inputs["logit_scale"], negative_embeds=inputs["negatives"],
              negative_mask=inputs["negative_mask"])  # fmt: skip
    state = objective.state_dict()
    assert set(state) == {"terms.cmr.threshold_a", "terms.cmr.threshold_b", "terms.cmr.threshold_epoch"}
    restored = _cmr_objective()
    assert restored.terms["cmr"].threshold_dict() == {"a": 0.0, "b": 0.0}
    restored.load_state_dict(state)
    assert restored.terms["cmr"].threshold_dict() == objective.terms["cmr"].threshold_dict()
    args = (inputs["image"], inputs["text"], inputs["logit_scale"])
    kwargs = {"negative_embeds": inputs["negatives"], "negative_mask": inputs["negative_mask"]}
    torch.testing.assert_close(restored(*args, **kwargs)["loss_cmr"], objective(*args, **kwargs)["loss_cmr"])


# ---------------------------------------------------------------- logit scale clamp


def test_clamp_logit_scale_unwraps_and_clamps():
    from transformers import CLIPConfig, CLIPModel

    from hf_hardpos.training.lora import apply_lora

    config = CLIPConfig(
        text_config={"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                     "vocab_size": 64, "max_position_embeddings": 16},
        vision_config={"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "image_size": 8, "patch_size": 4},
        projection_dim=8,
    )  # fmt: skip
    model = CLIPModel(config)
    wrapped = apply_lora(model, r=2, alpha=2, target_modules=["q_proj", "v_proj"])  # a real peft wrapper
    assert unwrap_model(wrapped) is model
    with torch.no_grad():
        model.logit_scale.fill_(7.0)
    clamp_logit_scale(wrapped)
    assert model.logit_scale.item() == pytest.approx(MAX_LOGIT_SCALE) == pytest.approx(math.log(100))
    with torch.no_grad():
        model.logit_scale.fill_(-1.0)
    clamp_logit_scale(model)
    assert model.logit_scale.item() == 0.0
    with torch.no_grad():
        model.logit_scale.fill_(2.0)
    clamp_logit_scale(model)
    assert model.logit_scale.item() == 2.0
    with pytest.raises(AttributeError, match="Linear"):
        clamp_logit_scale(torch.nn.Linear(2, 2))


def test_distributed_helpers_are_identity_without_a_process_group():
    from hf_hardpos.training.distributed import (
        all_gather,
        all_gather_with_grad,
        all_reduce_sum,
        world_info,
    )

    x = torch.randn(3, 4, requires_grad=True)
    assert world_info() == (0, 1)
    assert all_gather_with_grad(x) is x
    assert all_gather(x) is x
    assert all_reduce_sum(x) is x


def test_objective_without_negative_columns_needs_none_unless_a_term_reads_them():
    from hf_hardpos.training.losses import HardPosObjective

    contrastive_only = HardPosObjective(hard_negative_weight=0.0, hard_positive_weight=0.0, negative_types=())
    image = torch.nn.functional.normalize(torch.randn(4, 8), dim=-1)
    text = torch.nn.functional.normalize(torch.randn(4, 8), dim=-1)
    out = contrastive_only(image, text, torch.tensor(10.0))
    assert set(out) == {"loss", "loss_clip"} and torch.isfinite(out["loss"])
    with pytest.raises(ValueError, match="negative_types is empty"):
        HardPosObjective(hard_negative_weight=1.0, negative_types=())
    with pytest.raises(ValueError, match="unique"):
        HardPosObjective(negative_types=("a", "a"))
