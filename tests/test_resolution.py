"""Lesson 12's experiments (utils.resolution): the arms compare like with like, the forward passes by
hand equal the model's, FlexiViT's kernel keeps tokens and trains, and every verdict the lesson
prints is re-derived from the shipped results."""

import json

import pytest
import torch
import torch.nn.functional as F

from utils.ablations import SEEDS, experiment_data, read_results
from utils.patches import resize_patch_embed
from utils.resolution import (
    ARMS,
    COMMAND,
    FAMILIES,
    FLEXI_PATCHES,
    KEEPS,
    POSITIONS,
    RESULTS_FILE,
    STEPS,
    TokenDrop,
    flexi_kernel,
    forward_kept,
    forward_tokens,
    forward_with_rope,
    middle_patches,
    on_canvas,
    run_arm,
    scaled_rope,
    shipped_runs,
    token_norms,
    upsampled,
    verdicts,
)
from utils.rubric import grade_family
from utils.vit import VisionTransformer, ViTConfig

# What the lesson's text says of each verdict (notebooks/12_positions_beyond_grid.ipynb)
EXPECTED = {
    "RoPE = learned at 8 x 8": "refuted",
    "RoPE = sin-cos at 8 x 8": "inconclusive",
    "RoPE > learned, 12 x 12 canvas": "supported",
    "RoPE > sin-cos, 12 x 12 canvas": "inconclusive",
    "learned > RoPE, upsampled": "inconclusive",
    "scaled RoPE > RoPE, upsampled": "supported",
    "FlexiViT > 4 px only, at 2 px": "supported",
    "FlexiViT > 4 px only, at 8 px": "supported",
    "FlexiViT = 4 px only, at 4 px": "inconclusive",
    "trained keeping half > RoPE, half kept": "supported",
    "registers lower the norm ratio": "refuted",
    "registers = none, accuracy": "inconclusive",
}


def _tiny(**options) -> VisionTransformer:
    torch.manual_seed(0)
    return VisionTransformer(ViTConfig.tiny(image_size=8, in_channels=1, patch_size=2, **options)).eval()


def test_every_arm_trains_the_same_budget_and_recipe_and_differs_in_one_setting():
    fits = {json.dumps(dict(arm.experiment.fit), sort_keys=True) for arm in ARMS.values()}
    assert len(fits) == 1 and dict(next(iter(ARMS.values())).experiment.fit)["steps"] == STEPS
    for name, kind in POSITIONS.items():
        assert ARMS[name].experiment.config.pos_embed == kind and ARMS[name].kind == "plain"
    assert ARMS["learned + 4 registers"].experiment.config.reg_tokens == 4
    assert ARMS["RoPE, trained keeping half"].experiment.config == ARMS["RoPE"].experiment.config
    assert ARMS["FlexiViT"].patch_sizes == FLEXI_PATCHES and ARMS["4 px patches only"].patch_sizes == (4,)
    torch.manual_seed(0)
    flexi = ARMS["FlexiViT"].build()
    torch.manual_seed(0)
    fixed = ARMS["4 px patches only"].build()
    assert all(torch.equal(a, b) for a, b in zip(flexi.parameters(), fixed.parameters()))  # the same init


@pytest.mark.parametrize("kind", ["learned", "sincos", "rope2d"])
def test_the_forward_passes_by_hand_equal_the_models(kind):
    model = _tiny(pos_embed=kind)
    images = torch.rand(3, 1, 8, 8)
    with torch.no_grad():
        expected = model(images)
        assert torch.allclose(forward_kept(model, images, 1.0), expected, atol=1e-6)
        assert torch.allclose(forward_tokens(model, images, torch.arange(16)), expected, atol=1e-6)
        if kind == "rope2d":
            assert torch.allclose(
                forward_with_rope(model, images, scaled_rope(model, (4, 4), 1.0)), expected, atol=1e-6
            )
        kept = forward_kept(model, images, 0.5, torch.Generator().manual_seed(0))
    assert kept.shape == (3, 10) and not torch.allclose(kept, expected, atol=1e-3)
    with pytest.raises(ValueError, match="keep must be a share"):
        forward_kept(model, images, 0.0)


def test_dropping_keeps_the_kept_tokens_positions():
    model = _tiny(pos_embed="rope2d")
    images = torch.rand(2, 1, 8, 8)
    kept = torch.tensor([0, 5, 10, 15])  # the diagonal: with RoPE its angles must come along
    with torch.no_grad():
        by_hand = forward_tokens(model, images, kept)
        x = model.embed_tokens(model.patch_embed(images))[:, [0, 1, 6, 11, 16]]  # class token + the four
        sin, cos, prefix = model.rope((4, 4), x)
        for block in model.blocks:
            x = block(x, rope=(sin[kept], cos[kept], prefix))
        x = model.norm(x)
    assert torch.allclose(by_hand, model.head(x[:, 0]), atol=1e-6)
    drop = TokenDrop(model, 0.5)
    assert drop.no_weight_decay() == {f"vit.{name}" for name in model.no_weight_decay()}
    assert torch.equal(drop.eval()(images), model(images))


def test_test_images_and_the_middle_patches():
    images = torch.rand(2, 1, 8, 8)
    assert upsampled(images).shape == on_canvas(images).shape == (2, 1, 12, 12)
    assert torch.equal(on_canvas(images)[..., 2:10, 2:10], images) and on_canvas(images)[..., :2, :].abs().sum() == 0
    assert middle_patches(6, 4).tolist() == [7, 8, 9, 10, 13, 14, 15, 16, 19, 20, 21, 22, 25, 26, 27, 28]
    with pytest.raises(ValueError, match="even margin"):
        on_canvas(images, 11)


def test_flexi_kernel_is_resize_patch_embed_and_lets_gradients_through():
    weight = torch.randn(8, 1, 4, 4, requires_grad=True)
    for Q in FLEXI_PATCHES:
        assert torch.allclose(flexi_kernel(weight, Q), resize_patch_embed(weight, Q), atol=1e-5)
    flexi_kernel(weight, 8).sum().backward()
    assert weight.grad is not None and weight.grad.abs().sum() > 0


def test_flexivit_at_its_base_size_is_the_plain_vit_on_doubled_digits():
    torch.manual_seed(0)
    model = ARMS["FlexiViT"].build().eval()
    images = torch.rand(2, 1, 8, 8)
    doubled = F.interpolate(images, size=(16, 16), mode="nearest")
    with torch.no_grad():
        assert torch.allclose(model(images), model.vit(doubled), atol=1e-6)
        for P in FLEXI_PATCHES:
            model.set_patch_size(P)
            assert model(images).shape == (2, 10)
    with pytest.raises(ValueError, match="must divide 16"):
        model.set_patch_size(3)


def test_token_norms_measures_registers_only_where_there_are_some():
    images = torch.rand(4, 1, 8, 8)
    plain, registers = token_norms(_tiny(), images), token_norms(_tiny(reg_tokens=4), images)
    assert len(plain["norm_ratio"]) == 4 and all(r >= 1 for r in plain["norm_ratio"])
    assert plain["cls_to_registers"] == 0 and 0 < registers["cls_to_registers"] < 1


def test_an_arm_refuses_another_name_or_data():
    with pytest.raises(ValueError, match="no arm 'rope'"):
        run_arm("rope", 0)
    with pytest.raises(ValueError, match="trains on"):
        run_arm("RoPE", 0, experiment_data("same_colour"))


def test_the_shipped_file_holds_every_arm_over_five_seeds():
    results = read_results(RESULTS_FILE)  # checks the checksum tools/run_experiments.py stored
    assert results["produced_by"] == COMMAND and list(results["experiments"]) == list(ARMS)
    for name, arm in ARMS.items():
        runs = shipped_runs(name)
        assert [run["seed"] for run in runs] == list(SEEDS) and all(run["steps"] == STEPS for run in runs)
        if arm.kind == "flexi":
            assert all(f"val_patch_{P}" in run for run in runs for P in FLEXI_PATCHES)
        else:
            assert all(f"val_keep_{keep:g}" in run for run in runs for keep in KEEPS[1:])


def test_every_verdict_is_re_derived_from_the_file():
    stored = json.loads(RESULTS_FILE.read_text(encoding="utf-8"))["experiments"]

    def values(arm, key):
        runs = stored[arm]["runs"]
        return [run["norm_ratio"][-1] for run in runs] if key == "last_norm_ratio" else [run[key] for run in runs]

    for question, family in FAMILIES.items():
        again = grade_family(
            {
                label: dict(
                    a=values(a, key_a),
                    b=values(b, key_b),
                    claim=claim,
                    effect=effect,
                    percent=key_a != "last_norm_ratio",
                    names=(f"{a} ({key_a})", f"{b} ({key_b})"),
                )
                for label, (a, key_a, b, key_b, claim, effect) in family.items()
            }
        )
        shown = verdicts(question)
        assert {label: str(grade) for label, grade in shown.items()} == {label: str(g) for label, g in again.items()}
        for label, grade in shown.items():
            if label in EXPECTED:
                assert grade.outcome == EXPECTED[label], f"the lesson says {label!r} is {EXPECTED[label]}: {grade}"
    assert set(EXPECTED) <= {label for family in FAMILIES.values() for label in family}


def test_measuring_leaves_the_model_as_it_was():
    from utils.resolution import measure

    model = _tiny()  # a learned table: a resize there and back would change it
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    out = measure(model, experiment_data("digits"), ARMS["learned"])
    assert {"val_upsampled", "val_canvas", "val_canvas_digit_only", "test_keep_0.5", "norm_ratio"} <= set(out)
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[name], after[name]) for name in before)
