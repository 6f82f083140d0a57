"""Lesson 11's experiment (utils.stability): the arms differ in one setting each, the loop is fit's,
the by-hand pieces are right, and every verdict the lesson prints is re-derived from the shipped
results."""

import math

import pytest
import torch

from utils.ablations import SEEDS, experiment_data, read_results
from utils.rubric import grade_family
from utils.runtime import set_seed
from utils.stability import (
    ARMS,
    LRS,
    RECIPE,
    RECIPE_LR,
    RESULTS_FILE,
    STABILISERS,
    STEPS,
    Arm,
    first_divergence,
    flip_batch,
    mixup_batch,
    qk_norm_bound,
    recipe_family,
    recipe_name,
    run_arm,
    shipped_runs,
    sweep_family,
    sweep_name,
    train,
)
from utils.training import fit
from utils.vit import VisionTransformer, ViTConfig


def test_every_sweep_arm_differs_from_plain_in_one_setting():
    assert len(ARMS) == len(STABILISERS) * len(LRS) + len(RECIPE)
    for lr in LRS:
        plain = ARMS[sweep_name("plain", lr)].experiment
        for stabiliser in STABILISERS:
            arm = ARMS[sweep_name(stabiliser, lr)].experiment
            assert arm.data == "digits" and arm.fit["steps"] == STEPS and arm.fit["lr"] == lr
            changed = {k for k in {**arm.fit, **plain.fit} if arm.fit.get(k) != plain.fit.get(k)}
            changed |= {k for k in {**arm.vit, **plain.vit} if arm.vit.get(k) != plain.vit.get(k)}
            assert len(changed) == (stabiliser != "plain"), (stabiliser, changed)
    base = ARMS[recipe_name("base")].experiment
    assert base.fit["lr"] == RECIPE_LR and base.fit["warmup"] == 0.1 and base.fit["steps"] == STEPS
    assert sweep_name("qk-norm", 1e-2) == "qk-norm, lr 0.01" and recipe_name("Mixup") == "recipe: Mixup"
    with pytest.raises(ValueError, match="stabiliser must be one of"):
        sweep_name("dropout", 1e-2)


def test_the_loop_is_fit_when_nothing_is_added():
    data = experiment_data("digits")
    options = dict(steps=20, lr=1e-2, warmup=0.1, max_shift=1, label_smoothing=0.1, seed=3)
    set_seed(0)
    by_fit = VisionTransformer(ViTConfig.tiny(image_size=8, in_channels=1, patch_size=4))
    fit(by_fit, data.train, data.val, progress=False, **options)
    set_seed(0)
    by_loop = VisionTransformer(ViTConfig.tiny(image_size=8, in_channels=1, patch_size=4))
    record = train(by_loop, data, record_every=5, **options)
    for a, b in zip(by_fit.parameters(), by_loop.parameters(), strict=True):
        assert torch.equal(a, b)
    assert record["record_step"] == [0, 5, 10, 15, 20] and record["loss"][0] is None and record["finite"]
    assert all(value > 0 for value in record["max_logit"])


def test_qk_norm_bounds_the_logits_of_the_library_model():
    torch.manual_seed(0)
    model = VisionTransformer(ViTConfig.tiny(image_size=8, in_channels=1, patch_size=4, qk_norm=True)).eval()
    with torch.no_grad():
        for block in model.blocks:
            block.attn.qkv.weight.mul_(1000)  # plain attention's logits would grow a million-fold
    from utils.claims import max_attention_logits

    largest = max(max_attention_logits(model, torch.rand(16, 1, 8, 8)))
    assert largest <= qk_norm_bound(model.blocks[0].attn.head_dim) == 4.0
    gamma = torch.tensor([1.0, -3.0, 2.0, 0.5])
    assert math.isclose(qk_norm_bound(4, gamma, torch.zeros(4), None, torch.ones(4)), (3 * 2) * (2 + 2) / 2)


def test_mixup_and_flip():
    images, labels = torch.rand(4, 1, 8, 8), torch.tensor([0, 1, 2, 3])
    order = torch.tensor([1, 0, 3, 2])
    mixed, targets = mixup_batch(images, labels, 0.75, order, 10)
    assert torch.allclose(mixed[0], 0.75 * images[0] + 0.25 * images[1])
    assert torch.allclose(targets.sum(1), torch.ones(4)) and targets[0, 0] == 0.75 and targets[0, 1] == 0.25
    flipped = flip_batch(images, torch.Generator().manual_seed(0))
    for image, out in zip(images, flipped, strict=True):
        assert torch.equal(out, image) or torch.equal(out, image.flip(-1))
    with pytest.raises(ValueError, match="order must be a permutation"):
        mixup_batch(images, labels, 0.5, [1, 0, 3, 2], 10)
    with pytest.raises(ValueError, match="lam"):
        mixup_batch(images, labels, 1.5, order, 10)


def test_first_divergence():
    assert first_divergence([2.3, 1.0, 0.8, 1.7]) == 3
    assert first_divergence([2.3, 1.0, None]) == 2 and first_divergence([2.3, float("nan")]) == 1
    assert first_divergence([2.3, 1.0, 2.0]) is None and first_divergence([]) is None
    with pytest.raises(TypeError, match="losses must be a list"):
        first_divergence("2.3")


def test_an_arm_refuses_another_experiments_data_and_unknown_options():
    with pytest.raises(ValueError, match="trains on"):
        run_arm(sweep_name("plain", 1e-2), 0, experiment_data("same_colour"))
    with pytest.raises(ValueError, match="train takes"):
        Arm(ARMS[recipe_name("base")].experiment.__class__("digits", "vit", {"steps": 10, "dropout": 0.1}))
    with pytest.raises(ValueError, match="no arm 'plain, lr 0.1'"):
        shipped_runs("plain, lr 0.1")


# ---- the shipped results and the verdicts the lesson prints ------------------------------------


def test_the_shipped_file_holds_every_arm_over_five_seeds():
    results = read_results(RESULTS_FILE)  # checks the checksum that tools/run_experiments.py stored
    assert results["produced_by"] == "python tools/run_experiments.py --suite stability"
    assert set(results["experiments"]) == set(ARMS)
    for name in ARMS:
        runs = shipped_runs(name)
        assert [run["seed"] for run in runs] == list(SEEDS)
        steps = ARMS[name].experiment.fit["steps"]
        assert all(run["steps"] == steps and run["record_step"][-1] == steps for run in runs)
        watched = name.startswith(tuple(STABILISERS))
        assert ("cls_attention" in runs[0]) == watched and all("cls_attention" not in r for r in runs[1:])


def _values(results, name, key="val_accuracy"):
    return [run[key] for run in results["experiments"][name]["runs"]]


def test_the_verdicts_the_lesson_prints_come_from_the_shipped_file():
    results = read_results(RESULTS_FILE)  # read on its own, not through the module's helpers
    expected = {
        "qk-norm": ["inconclusive"] * 3,
        "warm-up": ["inconclusive", "inconclusive", "supported"],
        "LayerScale": ["inconclusive"] * 3,
    }
    for stabiliser, outcomes in expected.items():
        family = {
            f"lr {lr:g}": dict(
                a=_values(results, sweep_name(stabiliser, lr)),
                b=_values(results, sweep_name("plain", lr)),
                claim="higher",
                effect=0.02,
                names=(stabiliser, "plain"),
                percent=True,
            )
            for lr in LRS
        }
        assert [grade.outcome for grade in grade_family(family).values()] == outcomes, stabiliser
        assert {k: str(g) for k, g in grade_family(family).items()} == {
            k: str(g) for k, g in grade_family(sweep_family(stabiliser)).items()
        }
    claims = {"mean pooling": "higher", "sin-cos positions": "higher", "Mixup": "higher", "flips": "lower"}
    claims |= {"900 steps": "higher", "all four": "higher"}
    base = _values(results, recipe_name("base"))
    family = {
        item: dict(a=_values(results, recipe_name(item)), b=base, claim=claim, effect=0.02, percent=True)
        for item, claim in claims.items()
    }
    outcomes = [grade.outcome for grade in grade_family(family).values()]
    assert outcomes == ["refuted"] * 3 + ["supported"] * 3
    assert [g.outcome for g in grade_family(recipe_family()).values()] == outcomes


def test_the_numbers_the_lesson_states_in_words():
    results = read_results(RESULTS_FILE)

    def mean(values):
        return sum(values) / len(values)

    def largest(name):
        return [max(run["max_logit"]) for run in results["experiments"][name]["runs"]]

    assert [round(mean(largest(sweep_name("qk-norm", lr))), 1) for lr in LRS] == [4.6, 6.2, 9.8]
    assert [round(mean(largest(sweep_name("plain", lr)))) for lr in LRS] == [23, 194, 827]
    assert max(max(largest(sweep_name("qk-norm", lr))) for lr in LRS) < 12  # "kept the logits under 12"
    assert round(mean(largest(sweep_name("warm-up", 3e-2)))) == 1471
    ends = [mean([run["max_logit"][-1] for run in shipped_runs(sweep_name("plain", lr))]) for lr in LRS]
    assert [round(end, -1) for end in ends] == [20, 180, 790]  # "near 20, 180 and 800"
    assert all(first_divergence(run["loss"][1:]) is None for name in ARMS for run in shipped_runs(name))
    assert _values(results, recipe_name("base")) == _values(results, sweep_name("warm-up", 3e-3))  # one recipe
    flips, base = _values(results, recipe_name("flips")), _values(results, recipe_name("base"))
    assert all(f < b for f, b in zip(flips, base, strict=True))


def test_the_explorer_numbers_and_seed_zero_the_lesson_quotes():
    def entropy(name):
        weights = torch.tensor(shipped_runs(name)[0]["cls_attention"][-1])  # (heads, T) at step 300
        return (-(weights * weights.clamp_min(1e-12).log()).sum(-1)).mean().item()

    assert round(entropy(sweep_name("plain", 3e-2)), 2) == 0.79
    assert round(entropy(sweep_name("qk-norm", 3e-2)), 2) == 1.60
    run = shipped_runs(sweep_name("plain", 3e-2))[0]
    assert round(run["max_logit"][0], 1) == 0.1 and 1000 < run["max_logit"][20] < 1200  # step 200
    assert run["record_step"][20] == 200 and round(run["loss"][-1], 2) == 1.78
    two_failed = [r for r in shipped_runs(sweep_name("qk-norm", 3e-2)) if r["val_accuracy"] < 0.35]
    assert [round(max(r["max_logit"]), 1) for r in two_failed] == [8.0, 6.5]
