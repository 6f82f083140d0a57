"""The 2022-2026 options of ViTConfig (registers, qk-norm, tanh-GELU and QuickGELU, LayerScale,
no_embed_class, DeiT's distillation token, SwiGLU, axial 2-D RoPE, class token optional), each
against an independent reference: timm's own modules (in a process of their own,
tests/timm_reference.py) or a formula written out here. Also: the default model computes exactly
what it computed before these options, bit for bit."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from references import randomize_

from utils.backward import vit_forward
from utils.embeddings import prepend_cls_token
from utils.encoder import MLP, QuickGELU, SwiGLU, activation
from utils.pretrained import config_from_state_dict, from_timm
from utils.rope import apply_rope, rope_angles, rope_sin_cos
from utils.vit import VisionTransformer, ViTConfig

OPTIONS = {
    "registers": dict(reg_tokens=4),
    "registers-no-class-token": dict(reg_tokens=2, class_token=False, pool="mean", fc_norm=True),
    "qk-norm": dict(qk_norm=True),
    "gelu-tanh": dict(act="gelu_tanh"),
    "quick-gelu": dict(act="quick_gelu"),
    "layer-scale": dict(layer_scale=0.1),
    "no-embed-class": dict(no_embed_class=True, reg_tokens=3),
    "no-embed-class-sincos": dict(no_embed_class=True, reg_tokens=1, pos_embed="sincos"),
    "distillation-token": dict(dist_token=True),
    "swiglu": dict(mlp="swiglu"),
    "rope2d": dict(pos_embed="rope2d"),
    "rope2d-registers": dict(pos_embed="rope2d", reg_tokens=2),
    "class-token-average": dict(pool="mean", class_token=True, fc_norm=True),
}


def model_with(options: dict, seed: int = 0) -> VisionTransformer:
    torch.manual_seed(seed)
    return randomize_(VisionTransformer(ViTConfig.tiny(depth=2, **options)), std=0.2).eval()


def legacy_forward(model: VisionTransformer, images: torch.Tensor) -> torch.Tensor:
    """The course's ViT as utils/vit.py computed it before the modern options: lesson 2's embedding
    (class token in front, then the table added), the blocks, the final norm, the class token."""
    x = model.patch_embed(images)
    x = prepend_cls_token(x, model.cls_token) + model.pos_embed
    for block in model.blocks:
        x = block(x)
    return model.head(model.norm(x)[:, 0])


# sums of the tiny model's tensors at seed 0, as utils/vit.py drew them before the modern options
# (commit 1ec3c69): (sum, sum of absolute values), rounded
DEFAULT_INIT = {
    "cls_token": (-0.05527, 0.90001),
    "pos_embed": (0.44956, 61.20509),
    "head.weight": (-0.65082, 9.45973),
    "patch_embed.proj.weight": (-1.72787, 219.47104),
    "blocks.3.mlp.fc2.weight": (3.35414, 120.15883),
}


def test_the_default_model_computes_exactly_what_it_computed_before():
    """The lessons' committed outputs and the shipped checkpoints depend on it: the same init draws
    in the same order (the new tokens draw after the old ones), the same tensors (no new names), and
    the forward of lesson 2's steps, bit for bit."""
    torch.manual_seed(0)
    model = VisionTransformer(ViTConfig.tiny()).eval()
    state = model.state_dict()
    for name, (total, absolute) in DEFAULT_INIT.items():
        assert (round(float(state[name].double().sum()), 5), round(float(state[name].double().abs().sum()), 5)) == (
            pytest.approx(total, abs=2e-5),
            pytest.approx(absolute, abs=2e-5),
        ), name
    assert not any(
        key.startswith(("reg_token", "dist_token", "head_dist")) or "norm.weight" in key.split("attn.")[-1][:7]
        for key in state
    )
    assert len(state) == 4 + 4 * 12 + 4, sorted(state)  # patch_embed 2, cls, pos; 12 per block; norm 2, head 2
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(model(images), legacy_forward(model, images))
    assert repr(ViTConfig.tiny()) == (
        "ViTConfig(image_size=32, patch_size=4, in_channels=3, num_classes=10, embed_dim=64, depth=4, num_heads=4, "
        "mlp_ratio=2.0, qkv_bias=True, dropout=0.0, attn_dropout=0.0, pool='cls', pos_embed='learned', norm_eps=1e-06)"
    )


@pytest.mark.parametrize("name", OPTIONS)
def test_each_option_explicit_and_fused_attention_agree_and_the_weights_come_back(name):
    model = model_with(OPTIONS[name])
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        fused = model(images)
        for block in model.blocks:
            block.attn.implementation = "explicit"
        explicit, weights = model(images, return_attention=True)
    T = model.config.num_tokens
    assert weights.shape == (2, 2, 4, T, T)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 4, T), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(explicit, fused, rtol=1e-5, atol=1e-5)
    assert eval(repr(model.config)) == model.config


@pytest.mark.parametrize("name", OPTIONS)
def test_lesson_10s_backward_refuses_each_option_it_does_not_cover_by_name(name):
    model = model_with(OPTIONS[name])
    images, labels = torch.randn(2, 3, 32, 32), torch.tensor([1, 2])
    feature = {
        "registers": "register tokens",
        "registers-no-class-token": "register tokens",
        "qk-norm": "qk_norm",
        "gelu-tanh": "exact GELU",
        "quick-gelu": "exact GELU",
        "layer-scale": "LayerScale",
        "no-embed-class": "register tokens",
        "no-embed-class-sincos": "register tokens",
        "distillation-token": "distillation token",
        "swiglu": "SwiGLU",
        "rope2d": "rotary positions",
        "rope2d-registers": "register tokens",
        "class-token-average": "class_token with pool='mean'",
    }[name]
    with pytest.raises(ValueError, match=feature):
        vit_forward(model, images, labels)


def test_activations_against_their_formulas():
    x = torch.linspace(-6, 6, 1001)
    torch.testing.assert_close(activation("gelu")(x), x * 0.5 * (1 + torch.erf(x / 2**0.5)))
    tanh = 0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x**3)))
    torch.testing.assert_close(activation("gelu_tanh")(x), tanh)
    torch.testing.assert_close(QuickGELU()(x), x / (1 + torch.exp(-1.702 * x)))
    assert (
        1e-4 < (activation("gelu_tanh")(x) - activation("gelu")(x)).abs().max() < 5e-4
    )  # why a state dict cannot tell
    with pytest.raises(ValueError, match=r"act must be one of \('gelu', 'gelu_tanh', 'quick_gelu'\), got 'relu'"):
        MLP(8, 16, act="relu")


def test_swiglu_against_its_formula():
    torch.manual_seed(0)
    mlp = randomize_(SwiGLU(8, 12))
    x = torch.randn(3, 5, 8)
    gate = F.linear(x, mlp.fc1_g.weight, mlp.fc1_g.bias)
    value = F.linear(x, mlp.fc1_x.weight, mlp.fc1_x.bias)
    expected = F.linear(gate * torch.sigmoid(gate) * value, mlp.fc2.weight, mlp.fc2.bias)
    torch.testing.assert_close(mlp(x), expected)


def test_qk_norm_against_its_formula():
    model = model_with(dict(qk_norm=True))
    attn, x = model.blocks[0].attn, torch.randn(2, 7, 64)
    q, k, v = F.linear(x, attn.qkv.weight, attn.qkv.bias).reshape(2, 7, 3, 4, 16).permute(2, 0, 3, 1, 4)
    q = F.layer_norm(q, (16,), attn.q_norm.weight, attn.q_norm.bias, 1e-6)
    k = F.layer_norm(k, (16,), attn.k_norm.weight, attn.k_norm.bias, 1e-6)
    heads = ((q @ k.transpose(-2, -1)) / 4).softmax(-1) @ v  # (B, heads, N, 16)
    expected = F.linear(heads.transpose(1, 2).reshape(2, 7, 64), attn.proj.weight, attn.proj.bias)
    with torch.no_grad():
        torch.testing.assert_close(attn(x), expected, rtol=1e-5, atol=1e-5)


def test_registers_are_in_the_sequence_but_never_pooled():
    model = model_with(dict(reg_tokens=4))
    images = torch.randn(2, 3, 32, 32)
    assert model.reg_token.shape == (1, 4, 64) and model.config.num_tokens == 1 + 4 + 64
    with torch.no_grad():
        before = model(images)
        model.head.weight.zero_()  # the head reads the class token only
        tokens = model.forward_features(images)
    assert tokens.shape == (2, 69, 64)
    assert not torch.equal(before, model(images))


def test_the_distillation_token_averages_two_heads():
    model = model_with(dict(dist_token=True))
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        x = model.forward_features(images)
        expected = (model.head(x[:, 0]) + model.head_dist(x[:, 1])) / 2
        torch.testing.assert_close(model(images), expected)


def test_no_embed_class_adds_the_table_to_the_patches_only():
    model = model_with(dict(no_embed_class=True, reg_tokens=2))
    assert model.pos_embed.shape == (1, 64, 64)
    patches = torch.randn(2, 64, 64)
    tokens = model.embed_tokens(patches)
    torch.testing.assert_close(tokens[:, 3:], patches + model.pos_embed)
    assert torch.equal(tokens[:, 0], model.cls_token[0].expand(2, -1))
    assert torch.equal(tokens[:, 1:3], model.reg_token.expand(2, -1, -1))


# Each option as timm builds it: (timm's VisionTransformer keywords, from_timm's overrides for what a
# state dict cannot show)
TIMM_OPTIONS = {
    "registers": (dict(reg_tokens=4), {}),
    "registers-no-class-token-avg": (
        dict(reg_tokens=2, class_token=False, global_pool="avg", no_embed_class=True),
        {},
    ),
    "qk-norm": (dict(qk_norm=True), {}),
    "gelu-tanh": (dict(act_layer="gelu_tanh"), {"act": "gelu_tanh"}),
    "quick-gelu-pre-norm": (dict(act_layer="quick_gelu", pre_norm=True), {"act": "quick_gelu"}),
    "layer-scale": (dict(init_values=1e-5), {}),
    "deit3-no-embed-class": (dict(no_embed_class=True, init_values=0.1), {}),
    "distilled": (dict(distilled=True), {}),
    "swiglu": (dict(mlp_layer="SwiGLU", act_layer="silu"), {}),
    "swiglu-packed": (dict(mlp_layer="SwiGLUPacked", act_layer="silu", mlp_ratio=8.0), {}),
    "class-token-average": (dict(global_pool="avg"), {"pool": "mean"}),
}


def run_timm_reference(arguments: list[str], output: Path):
    script = Path(__file__).with_name("timm_reference.py")
    done = subprocess.run([sys.executable, script, *arguments, output], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return torch.load(output, weights_only=True)


@pytest.fixture(scope="module")
def timm_models(tmp_path_factory):
    """timm's logits for every layout of TIMM_OPTIONS, in one process of timm's own (its import takes seconds)."""
    layouts = {name: layout for name, (layout, _) in TIMM_OPTIONS.items()}
    return run_timm_reference(["many", json.dumps(layouts)], tmp_path_factory.mktemp("timm") / "models.pt")


@pytest.mark.timm
@pytest.mark.parametrize("name", TIMM_OPTIONS)
def test_each_option_computes_what_timm_computes(name, timm_models):
    reference = timm_models[name]
    assert reference["version"] == "1.0.31"
    overrides = TIMM_OPTIONS[name][1]
    model = from_timm(reference["state_dict"], num_heads=3, **overrides)
    with torch.no_grad():
        torch.testing.assert_close(model(reference["images"]), reference["logits"], rtol=1e-5, atol=1e-5)
        for block in model.blocks:
            block.attn.implementation = "explicit"
        logits, _ = model(reference["images"], return_attention=True)
        torch.testing.assert_close(logits, reference["logits"], rtol=1e-5, atol=1e-5)
    if overrides.get("act"):  # what a state dict alone cannot show: loaded without it, another function
        plain = from_timm(reference["state_dict"], num_heads=3)
        with torch.no_grad():
            assert (plain(reference["images"]) - reference["logits"]).abs().max() > 1e-5


ROPE_CASES = [((3, 5), 16), ((4, 4), 32)]


@pytest.mark.timm
def test_rope_is_timms_rotary_embedding_cat(tmp_path):
    """The layout of timm's RotaryEmbeddingCat(in_pixels=False), as its EVA models use it."""
    references = run_timm_reference(["rope", json.dumps(ROPE_CASES)], tmp_path / "rope.pt")
    for (grid, head_dim), reference in zip(ROPE_CASES, references, strict=True):
        sin, cos = rope_sin_cos(rope_angles(grid, head_dim))
        torch.testing.assert_close(torch.cat([sin, cos], dim=-1), reference["sin_cos"], rtol=0, atol=1e-6)
        torch.testing.assert_close(apply_rope(reference["q"], sin, cos), reference["rotated"], rtol=1e-6, atol=1e-6)


def test_rope_scores_depend_on_the_offset_only():
    """q at patch a and k at patch b, turned by RoPE: q_a . k_b is a function of b - a alone."""
    torch.manual_seed(0)
    rows, cols, d = 5, 6, 16
    sin, cos = rope_sin_cos(rope_angles((rows, cols), d))  # (N, d)
    q, k = torch.randn(d), torch.randn(d)
    turned_q = apply_rope(q.expand(1, 1, rows * cols, d), sin, cos)[0, 0]  # (N, d): q at every patch
    turned_k = apply_rope(k.expand(1, 1, rows * cols, d), sin, cos)[0, 0]
    scores = turned_q @ turned_k.T  # (N, N)
    position = torch.stack(torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij"), -1).reshape(-1, 2)
    offsets = position[None] - position[:, None]  # (N, N, 2): b - a
    by_offset = {}
    for a in range(rows * cols):
        for b in range(rows * cols):
            by_offset.setdefault(tuple(offsets[a, b].tolist()), []).append(scores[a, b])
    spread = max((torch.stack(s).max() - torch.stack(s).min()).item() for s in by_offset.values())
    assert spread < 1e-5 * scores.abs().max(), spread  # float32 rounding
    assert len({round(s[0].item(), 3) for s in by_offset.values()}) > 50  # and the offset does matter
    torch.testing.assert_close(scores.diagonal(), (q @ k).expand(rows * cols), rtol=1e-5, atol=1e-5)


def test_rope_leaves_the_prefix_tokens_alone():
    sin, cos = rope_sin_cos(rope_angles((2, 2), 8))
    x = torch.randn(1, 2, 3 + 4, 8)
    turned = apply_rope(x, sin, cos, num_prefix_tokens=3)
    assert torch.equal(turned[:, :, :3], x[:, :, :3])
    assert not torch.allclose(turned[:, :, 4:], x[:, :, 4:])
    torch.testing.assert_close(turned[:, :, 3], x[:, :, 3])  # patch (0, 0): angle 0


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(act="relu"), r"act must be one of \('gelu', 'gelu_tanh', 'quick_gelu'\), got 'relu'"),
        (dict(mlp="geglu"), r"mlp must be one of \('gelu', 'swiglu'\), got 'geglu'"),
        (dict(mlp="swiglu", act="quick_gelu"), r"mlp='swiglu' gates with SiLU"),
        (dict(class_token=False), r"pool='cls' classifies the class token, and class_token=False"),
        (dict(dist_token=True, pool="mean"), r"dist_token=True \(DeiT's distillation token\) needs the class token"),
        (dict(no_embed_class=True, pos_embed="rope2d"), r"no_embed_class=True .* pos_embed='rope2d' has no table"),
        (dict(pos_embed="rope2d", embed_dim=40, num_heads=4), r"rope2d' needs a head width divisible by 4"),
        (dict(reg_tokens=-1), r"reg_tokens"),
        (dict(layer_scale=0), r"layer_scale"),
        (dict(qk_norm="yes"), r"qk_norm"),
    ],
)
def test_the_config_refuses_bad_options_with_a_clear_message(fields, message):
    with pytest.raises((ValueError, TypeError), match=message):
        ViTConfig.tiny(**fields)


def test_a_bare_state_dict_reads_the_modern_options():
    for name, options in OPTIONS.items():
        if options.get("pos_embed") in ("rope2d", "sincos") or "class_token" in options:
            continue  # rope leaves no tensor; a fixed table is no state; pool is no tensor either
        config = ViTConfig.tiny(depth=1, **options)
        state = VisionTransformer(config).state_dict()
        read = config_from_state_dict(state, num_heads=4, **({"act": config.act} if config.act != "gelu" else {}))
        assert read == dataclasses_replace(config, layer_scale=1e-5 if config.layer_scale else None), name


def dataclasses_replace(config, **fields):
    import dataclasses

    return dataclasses.replace(config, **fields)


def test_from_timm_refuses_a_module_that_is_no_timm_vit_and_a_name_without_tensors():
    with pytest.raises(TypeError, match=r"pass model.state_dict\(\)"):
        from_timm(model_with({}))
    with pytest.raises(TypeError, match="a model name needs its state dict"):
        from_timm("vit_tiny_patch16_224", 3)
    with pytest.raises(TypeError, match="not a file's path"):
        from_timm("weights/vit_tiny_patch16_224.pth")
