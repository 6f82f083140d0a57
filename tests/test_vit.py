"""The whole ViT: config, timm parameter names, checkpoints, and an independent reference
forward pass built from torch's own Conv2d / TransformerEncoderLayer / LayerNorm / Linear."""

import dataclasses
import re

import pytest
import torch
from references import randomize_, torch_layer_from
from torch import nn

from utils.embeddings import sincos_pos_embed_2d
from utils.patches import patchify, unpatchify
from utils.vit import VisionTransformer, ViTConfig

TOL = dict(atol=1e-5, rtol=1e-5)


def tiny(**overrides) -> ViTConfig:
    """An even smaller config than the course's tiny one, to keep the suite fast."""
    return ViTConfig.tiny(**{"depth": 2, **overrides})


# ---- ViT-B/16 ----------------------------------------------------------------------------


def test_vit_b16_shapes_and_parameter_count():
    torch.manual_seed(0)
    config = ViTConfig.vit_b16()
    assert (config.image_size, config.patch_size, config.embed_dim, config.depth, config.num_heads) == (
        224,
        16,
        768,
        12,
        12,
    )
    assert config.num_patches == 196 and config.num_tokens == 197
    model = VisionTransformer(config).eval()
    assert sum(p.numel() for p in model.parameters()) == 86_567_656
    with torch.no_grad():
        tokens = model.forward_features(torch.randn(1, 3, 224, 224))
        assert tokens.shape == (1, 197, 768)
        assert model.head(tokens[:, 0]).shape == (1, 1000)


# ---- config validation -------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(embed_dim=64, num_heads=5), r"embed_dim 64 is not divisible by num_heads 5"),
        (dict(image_size=30), r"image_size 30x30 is not divisible by patch_size 4"),
        (dict(image_size=(32, 30)), r"image_size 32x30 is not divisible by patch_size 4"),
        (dict(pool="max"), r"pool must be 'cls' or 'mean', got 'max'"),
        (dict(pos_embed="rope"), r"pos_embed must be one of .*got 'rope'"),
        (dict(pos_embed="sincos", embed_dim=66, num_heads=3), r"divisible by 4, got 66"),
        (dict(fc_norm=True), r"fc_norm=True normalises the average .* needs pool='mean', got pool='cls'"),
    ],
)
def test_config_rejects_bad_values(overrides, message):
    with pytest.raises(ValueError, match=message):
        ViTConfig.tiny(**overrides)


def test_tiny_preset():
    config = ViTConfig.tiny()
    assert config.num_patches == 64 and config.num_tokens == 65
    assert ViTConfig.tiny(pool="mean").num_tokens == 64


# ---- parameter names and checkpoints -----------------------------------------------------


def timm_shapes(config: ViTConfig) -> dict[str, tuple[int, ...]]:
    """The state dict of timm's VisionTransformer for this config, written out by hand."""
    D, C, P, K = config.embed_dim, config.in_channels, config.patch_size, config.num_classes
    hidden = int(D * config.mlp_ratio)
    shapes = {
        **({"cls_token": (1, 1, D)} if config.pool == "cls" else {}),
        "pos_embed": (1, config.num_tokens, D),
        "patch_embed.proj.weight": (D, C, P, P),
        "patch_embed.proj.bias": (D,),
    }
    for i in range(config.depth):
        shapes |= {
            f"blocks.{i}.norm1.weight": (D,),
            f"blocks.{i}.norm1.bias": (D,),
            f"blocks.{i}.attn.qkv.weight": (3 * D, D),
            f"blocks.{i}.attn.qkv.bias": (3 * D,),
            f"blocks.{i}.attn.proj.weight": (D, D),
            f"blocks.{i}.attn.proj.bias": (D,),
            f"blocks.{i}.norm2.weight": (D,),
            f"blocks.{i}.norm2.bias": (D,),
            f"blocks.{i}.mlp.fc1.weight": (hidden, D),
            f"blocks.{i}.mlp.fc1.bias": (hidden,),
            f"blocks.{i}.mlp.fc2.weight": (D, hidden),
            f"blocks.{i}.mlp.fc2.bias": (D,),
        }
    norm = "fc_norm" if config.fc_norm else "norm"  # timm's global_pool="avg": norm is an identity, no tensors
    shapes |= {f"{norm}.weight": (D,), f"{norm}.bias": (D,), "head.weight": (K, D), "head.bias": (K,)}
    if config.norm_pre:  # timm's pre_norm=True
        shapes |= {"norm_pre.weight": (D,), "norm_pre.bias": (D,)}
    return shapes


@pytest.mark.parametrize(
    "config",
    [
        tiny(),
        tiny(depth=3, embed_dim=48, num_heads=3, mlp_ratio=3.0),
        tiny(pool="mean"),
        tiny(pool="mean", fc_norm=True),
        tiny(norm_pre=True),
        tiny(pool="mean", fc_norm=True, norm_pre=True),
    ],
)
def test_state_dict_has_exactly_the_timm_names_and_shapes(config):
    model = VisionTransformer(config)
    own = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    assert own == timm_shapes(config)


@pytest.mark.parametrize("config", [tiny(), tiny(pool="mean", fc_norm=True), tiny(norm_pre=True)])
def test_a_timm_layout_checkpoint_loads_strictly_and_round_trips(config):
    torch.manual_seed(0)
    checkpoint = {name: torch.randn(shape) for name, shape in timm_shapes(config).items()}
    model = VisionTransformer(config)
    result = model.load_state_dict(checkpoint)
    assert not result.missing_keys and not result.unexpected_keys
    reloaded = model.state_dict()
    assert reloaded.keys() == checkpoint.keys()
    for name, tensor in checkpoint.items():
        assert torch.equal(reloaded[name], tensor), name
    # and the model uses them: a second model loaded the same way gives the same logits
    other = VisionTransformer(config)
    other.load_state_dict(checkpoint)
    images = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(model.eval()(images), other.eval()(images), rtol=0, atol=0)


@pytest.mark.parametrize(
    "name, shape",
    [("pos_embed", (1, 17, 64)), ("head.weight", (5, 64)), ("blocks.1.attn.qkv.weight", (96, 64))],
)
def test_a_checkpoint_of_another_shape_raises_a_value_error_naming_the_key(name, shape):
    torch.manual_seed(0)
    config = tiny()
    checkpoint = {n: torch.randn(s) for n, s in timm_shapes(config).items()}
    checkpoint[name] = torch.randn(shape)
    model = VisionTransformer(config)
    with pytest.raises(ValueError, match=re.escape(f"{name}: checkpoint {shape}")):
        model.load_state_dict(checkpoint)


# ---- training and attention --------------------------------------------------------------


@pytest.mark.parametrize("pool", ["cls", "mean"])
def test_gradients_reach_every_parameter(pool):
    torch.manual_seed(0)
    model = VisionTransformer(tiny(pool=pool))
    logits = model(torch.randn(2, 3, 32, 32))
    nn.functional.cross_entropy(logits, torch.tensor([1, 7])).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert p.grad.abs().sum() > 0, name


def test_return_attention_shapes_and_rows():
    torch.manual_seed(0)
    config = tiny(depth=3)
    model = VisionTransformer(config).eval()
    images = torch.randn(2, 3, 32, 32)
    logits, attn = model(images, return_attention=True)
    assert logits.shape == (2, 10)
    assert attn.shape == (3, 2, 4, 65, 65)  # (depth, B, heads, T, T)
    torch.testing.assert_close(attn.sum(-1), torch.ones(3, 2, 4, 65), **TOL)
    with torch.no_grad():  # inference runs the fused kernel: the same logits to float32 rounding
        torch.testing.assert_close(model(images), logits, **TOL)
    torch.testing.assert_close(model(images), logits, **TOL)  # with autograd: the fused kernel too
    features, attn2 = model.forward_features(images, return_attention=True)
    assert features.shape == (2, 65, 64)
    assert torch.equal(attn, attn2)


def test_mean_pool_has_no_class_token():
    torch.manual_seed(0)
    model = VisionTransformer(tiny(pool="mean")).eval()
    assert model.cls_token is None
    assert "cls_token" not in model.state_dict()
    assert model.pos_embed.shape == (1, 64, 64)
    images = torch.randn(2, 3, 32, 32)
    tokens = model.forward_features(images)
    assert tokens.shape == (2, 64, 64)  # T = N
    torch.testing.assert_close(model(images), model.head(tokens.mean(1)), **TOL)


def test_fc_norm_normalises_the_average_not_the_tokens_and_is_another_function():
    torch.manual_seed(0)
    per_token = randomize_(VisionTransformer(tiny(pool="mean")), std=0.2).eval()
    state = {
        name.replace("norm.", "fc_norm.") if name.startswith("norm.") else name: t
        for name, t in per_token.state_dict().items()
    }  # the same tensors, timm's average-pool names
    averaged = VisionTransformer(tiny(pool="mean", fc_norm=True)).eval()
    averaged.load_state_dict(state)  # strict: norm holds nothing, fc_norm everything norm held
    assert isinstance(averaged.norm, nn.Identity) and isinstance(per_token.fc_norm, nn.Identity)
    images = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        tokens = averaged.forward_features(images)  # (3, 64, 64), not normalised: timm's forward_features
        expected = averaged.head(
            nn.functional.layer_norm(tokens.mean(1), (64,), state["fc_norm.weight"], state["fc_norm.bias"], eps=1e-6)
        )
        torch.testing.assert_close(averaged(images), expected, **TOL)
        torch.testing.assert_close(per_token.forward_features(images), per_token.norm(tokens), **TOL)
        difference = (averaged(images) - per_token(images)).abs().max()
    assert difference > 0.1, difference  # LayerNorm then mean != mean then LayerNorm


def hand_tokens_before_block_0(model: VisionTransformer, images: torch.Tensor) -> torch.Tensor:
    """patch_embed + class token + positions, then F.layer_norm with norm_pre's tensors when the
    config has norm_pre: what should enter block 0, written out without the model's forward."""
    x = model.patch_embed(images)  # (B, N, D)
    if model.cls_token is not None:
        x = torch.cat([model.cls_token.expand(len(x), -1, -1), x], dim=1)  # (B, T, D)
    x = x + model.pos_embed
    if not model.config.norm_pre:
        return x
    D, eps = model.config.embed_dim, model.config.norm_eps
    return nn.functional.layer_norm(x, (D,), model.norm_pre.weight, model.norm_pre.bias, eps)


def tokens_entering_block_0(model: VisionTransformer, images: torch.Tensor, **kwargs) -> torch.Tensor:
    """What block 0 receives in model(images, **kwargs), caught with a forward pre-hook."""
    seen = []
    handle = model.blocks[0].register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone()))
    try:
        model(images, **kwargs)
    finally:
        handle.remove()
    return seen[0]


def test_norm_pre_is_off_by_default_and_changes_nothing_then():
    torch.manual_seed(0)
    model = randomize_(VisionTransformer(tiny()), std=0.2).eval()
    assert tiny().norm_pre is False and isinstance(model.norm_pre, nn.Identity)
    assert not any(name.startswith("norm_pre") for name in model.state_dict())
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(tokens_entering_block_0(model, images), hand_tokens_before_block_0(model, images))
        x = hand_tokens_before_block_0(model, images)
        for block in model.blocks:
            x = block(x)
        torch.testing.assert_close(model(images), model.head(model.norm(x)[:, 0]), **TOL)


@pytest.mark.parametrize("config", [tiny(norm_pre=True), tiny(norm_pre=True, pool="mean", pos_embed="sincos")])
def test_norm_pre_normalises_every_token_before_the_first_block(config):
    torch.manual_seed(0)
    model = VisionTransformer(config).eval()  # norm_pre at PyTorch's init: weight 1, bias 0
    assert isinstance(model.norm_pre, nn.LayerNorm) and model.norm_pre.eps == config.norm_eps
    state = model.state_dict()
    assert state["norm_pre.weight"].shape == state["norm_pre.bias"].shape == (config.embed_dim,)
    images = torch.rand(3, 3, 32, 32)
    with torch.no_grad():
        tokens = tokens_entering_block_0(model, images)  # (3, T, D)
    assert tokens.shape == (3, config.num_tokens, config.embed_dim)
    torch.testing.assert_close(tokens.mean(-1), torch.zeros(3, config.num_tokens), atol=1e-5, rtol=0)
    torch.testing.assert_close(tokens.std(-1, correction=0), torch.ones(3, config.num_tokens), atol=1e-2, rtol=0)
    without = VisionTransformer(dataclasses.replace(config, norm_pre=False)).eval()
    without.load_state_dict({k: v for k, v in state.items() if not k.startswith("norm_pre")})
    with torch.no_grad():
        before = tokens_entering_block_0(without, images)  # (3, T, D), the same tokens not normalised
    assert (before.std(-1) - 1).abs().max() > 0.5  # without it the tokens are far from unit scale
    variance = before.var(-1, correction=0)  # (3, T); the class token's, from std-0.02 draws, is small ...
    expected = (variance / (variance + config.norm_eps)).sqrt()  # ... so eps lowers its std a little below 1
    torch.testing.assert_close(tokens.std(-1, correction=0), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("return_attention", [False, True])
def test_norm_pre_is_a_layer_norm_of_patches_class_token_and_positions_in_both_paths(return_attention):
    torch.manual_seed(0)
    model = randomize_(VisionTransformer(tiny(norm_pre=True)), std=0.2).eval()  # a weight and bias far from 1, 0
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        tokens = tokens_entering_block_0(model, images, return_attention=return_attention)
        torch.testing.assert_close(tokens, hand_tokens_before_block_0(model, images), **TOL)
        logits, attention = model(images, return_attention=True)
        torch.testing.assert_close(logits, model(images), **TOL)  # the same function in both paths
        assert attention.shape == (2, 2, 4, 65, 65)
        model.norm_pre.weight.mul_(torch.rand(64) + 0.5)  # norm_pre's tensors reach the logits in both paths
        assert (model(images) - logits).abs().max() > 1e-3
        assert (model(images, return_attention=True)[0] - logits).abs().max() > 1e-3


def test_a_checkpoint_without_norm_pre_misses_exactly_its_two_tensors():
    state = VisionTransformer(tiny()).state_dict()
    result = VisionTransformer(tiny(norm_pre=True)).load_state_dict(state, strict=False)
    assert sorted(result.missing_keys) == ["norm_pre.bias", "norm_pre.weight"] and not result.unexpected_keys


def test_late_flags_are_shown_in_the_repr_only_when_set():
    for config in (ViTConfig.tiny(norm_pre=True), ViTConfig.tiny(pool="mean", fc_norm=True, norm_pre=True)):
        assert eval(repr(config)) == config
    for config in (ViTConfig.tiny(), ViTConfig.tiny(pool="mean", fc_norm=True), ViTConfig.vit_b16()):
        assert "norm_pre" not in repr(config)  # printed as before the field came
    assert repr(ViTConfig.tiny(norm_pre=True)).endswith("norm_eps=1e-06, norm_pre=True)")
    assert repr(ViTConfig.tiny(pool="mean", fc_norm=True, norm_pre=True)).endswith(
        "norm_eps=1e-06, fc_norm=True, norm_pre=True)"
    )
    np = pytest.importorskip("numpy")
    config = ViTConfig.tiny(norm_pre=np.True_, qkv_bias=np.False_)
    assert config.norm_pre is True and config.qkv_bias is False  # plain bools, printed as such
    assert eval(repr(config)) == config


def test_fc_norm_is_shown_in_the_repr_only_when_set():
    assert "fc_norm" not in repr(ViTConfig.tiny()) and repr(ViTConfig.tiny()).endswith("norm_eps=1e-06)")
    for config in (ViTConfig.tiny(), ViTConfig.tiny(pool="mean", fc_norm=True), ViTConfig.vit_b16()):
        assert eval(repr(config)) == config  # the repr is still the config
    assert repr(ViTConfig.tiny(pool="mean", fc_norm=True)).endswith("norm_eps=1e-06, fc_norm=True)")


@pytest.mark.parametrize("pool", ["cls", "mean"])
def test_sincos_positions_are_a_fixed_buffer(pool):
    model = VisionTransformer(tiny(pos_embed="sincos", pool=pool))
    assert "pos_embed" not in dict(model.named_parameters())
    assert "pos_embed" in dict(model.named_buffers())
    assert "pos_embed" in model.state_dict()
    assert torch.equal(model.pos_embed, sincos_pos_embed_2d(8, 64, cls_token=pool == "cls"))


def test_no_positions():
    model = VisionTransformer(tiny(pos_embed="none"))
    assert model.pos_embed is None
    assert "pos_embed" not in model.state_dict()


def test_no_weight_decay_names_the_class_token_and_the_learned_positions_as_timm_does():
    model = VisionTransformer(tiny())
    assert model.no_weight_decay() == {"pos_embed", "cls_token"}  # timm's names (it adds dist_token)
    parameters = dict(model.named_parameters())
    assert all(
        parameters[name].ndim == 3 for name in model.no_weight_decay()
    )  # real parameters, not the ndim <= 1 rule


def permute_patches(images: torch.Tensor, perm: torch.Tensor, P: int) -> torch.Tensor:
    """The same images with their P x P patches shuffled by `perm`."""
    return unpatchify(patchify(images, P)[:, perm], P, tuple(images.shape[-2:]))


def test_without_positions_the_model_is_permutation_equivariant():
    torch.manual_seed(0)
    model = randomize_(VisionTransformer(tiny(pos_embed="none", pool="mean")), std=0.2).eval()
    images = torch.randn(2, 3, 32, 32)
    perm = torch.randperm(64)
    shuffled = permute_patches(images, perm, 4)
    tokens, tokens_shuffled = model.forward_features(images), model.forward_features(shuffled)
    torch.testing.assert_close(tokens_shuffled, tokens[:, perm], **TOL)
    torch.testing.assert_close(model(shuffled), model(images), **TOL)  # mean pool: invariant


def test_with_positions_shuffling_patches_changes_the_output():
    torch.manual_seed(0)
    model = randomize_(VisionTransformer(tiny(pos_embed="learned", pool="mean")), std=0.2).eval()
    images = torch.randn(2, 3, 32, 32)
    perm = torch.randperm(64)
    shuffled = permute_patches(images, perm, 4)
    assert not torch.allclose(model(shuffled), model(images), atol=1e-3)


# ---- an independent reference built from torch's modules ---------------------------------


def reference_logits(model: VisionTransformer, images: torch.Tensor) -> torch.Tensor:
    """The ViT forward pass rebuilt from torch modules, with the model's weights copied in."""
    config = model.config
    D, P = config.embed_dim, config.patch_size
    conv = nn.Conv2d(config.in_channels, D, kernel_size=P, stride=P)
    conv.load_state_dict(model.patch_embed.proj.state_dict())
    x = conv(images).flatten(2).transpose(1, 2)  # (B, N, D)
    if config.pool == "cls":
        x = torch.cat([model.cls_token.expand(len(x), 1, D), x], dim=1)
    if config.pos_embed != "none":
        x = x + model.pos_embed
    if config.norm_pre:  # timm's pre_norm: one LayerNorm before the first block
        norm_pre = nn.LayerNorm(D, eps=config.norm_eps)
        norm_pre.load_state_dict(model.norm_pre.state_dict())
        x = norm_pre(x)
    for block in model.blocks:
        x = torch_layer_from(block)(x)  # torch's own encoder layer
    norm = nn.LayerNorm(D, eps=config.norm_eps)
    norm.load_state_dict((model.fc_norm if config.fc_norm else model.norm).state_dict())
    head = nn.Linear(D, config.num_classes)
    head.load_state_dict(model.head.state_dict())
    if config.fc_norm:  # timm's global_pool="avg" with fc_norm: average, then normalise
        return head(norm(x.mean(1)))
    x = norm(x)
    pooled = x[:, 0] if config.pool == "cls" else x.mean(1)
    return head(pooled)


REFERENCE_CONFIGS = {
    "tiny": ViTConfig.tiny(),
    "non-square-gray": ViTConfig(
        image_size=(24, 40),
        patch_size=8,
        in_channels=1,
        num_classes=5,
        embed_dim=48,
        depth=2,
        num_heads=3,
        mlp_ratio=3.0,
        norm_eps=1e-5,
    ),
    "mean-sincos-no-qkv-bias": ViTConfig(
        image_size=16,
        patch_size=4,
        in_channels=2,
        num_classes=3,
        embed_dim=32,
        depth=3,
        num_heads=8,
        mlp_ratio=1.5,
        qkv_bias=False,
        pool="mean",
        pos_embed="sincos",
    ),
    "mean-fc-norm": ViTConfig.tiny(depth=2, pool="mean", fc_norm=True, norm_eps=1e-5),
    "norm-pre": ViTConfig.tiny(depth=2, norm_pre=True, norm_eps=1e-5),
    "mean-sincos-norm-pre": ViTConfig.tiny(depth=1, pool="mean", pos_embed="sincos", norm_pre=True),
}


@pytest.mark.parametrize("name", REFERENCE_CONFIGS)
def test_logits_match_a_reference_built_from_torch_modules(name):
    torch.manual_seed(0)
    config = REFERENCE_CONFIGS[name]
    model = randomize_(VisionTransformer(config), std=0.2).eval()
    H, W = (config.image_size,) * 2 if isinstance(config.image_size, int) else config.image_size
    images = torch.randn(3, config.in_channels, H, W)
    logits = model(images)
    assert logits.shape == (3, config.num_classes)
    torch.testing.assert_close(logits, reference_logits(model, images), **TOL)


# ---- image size, determinism, dropout ----------------------------------------------------


def test_set_image_size_resizes_the_learned_position_table():
    torch.manual_seed(0)
    model = randomize_(VisionTransformer(tiny()), std=0.2).eval()
    old_cls_position = model.pos_embed[:, 0].detach().clone()
    with pytest.raises(ValueError, match=r"expected 32x32 images.*got 48x48.*set_image_size"):
        model(torch.randn(1, 3, 48, 48))
    model.set_image_size(48)
    assert isinstance(model.pos_embed, nn.Parameter)
    assert model.pos_embed.shape == (1, 1 + 12 * 12, 64)
    assert torch.equal(model.pos_embed[:, 0], old_cls_position)
    assert model.config.image_size == 48 and model.config.num_tokens == 145
    assert model(torch.randn(2, 3, 48, 48)).shape == (2, 10)
    with pytest.raises(ValueError, match=r"expected 48x48 images.*got 32x32"):
        model(torch.randn(1, 3, 32, 32))


def test_set_image_size_rebuilds_the_sincos_table():
    model = VisionTransformer(tiny(pos_embed="sincos")).eval()
    model.set_image_size((32, 48))
    assert "pos_embed" in dict(model.named_buffers())
    assert "pos_embed" not in dict(model.named_parameters())
    assert torch.equal(model.pos_embed, sincos_pos_embed_2d((8, 12), 64))
    _, attn = model(torch.randn(1, 3, 32, 48), return_attention=True)
    assert attn.shape == (2, 1, 4, 97, 97)


def test_set_image_size_rejects_a_size_not_divisible_by_the_patch():
    model = VisionTransformer(tiny())
    with pytest.raises(ValueError, match=r"not divisible by the patch size 4"):
        model.set_image_size(30)


def test_eval_mode_is_deterministic():
    torch.manual_seed(0)
    model = VisionTransformer(tiny(dropout=0.2, attn_dropout=0.2)).eval()
    images = torch.randn(2, 3, 32, 32)
    assert torch.equal(model(images), model(images))


def test_dropout_acts_in_training_only():
    torch.manual_seed(0)
    images = torch.randn(2, 3, 32, 32)
    model = VisionTransformer(tiny(dropout=0.2, attn_dropout=0.2))
    model.train()
    assert not torch.allclose(model(images), model(images))
    no_dropout = VisionTransformer(tiny())
    no_dropout.load_state_dict(model.state_dict())
    eval_logits = model.eval()(images)
    torch.testing.assert_close(no_dropout.train()(images), eval_logits, rtol=0, atol=0)


def test_model_rejects_images_with_the_wrong_channels():
    model = VisionTransformer(tiny())
    with pytest.raises(ValueError, match=r"expected 3 channels"):
        model(torch.randn(1, 1, 32, 32))


# ---- the attention implementation: weights only when asked for --------------------------


def test_training_builds_no_attention_weights(explicit_attention_calls):
    torch.manual_seed(0)
    model = VisionTransformer(tiny(depth=3)).train()
    logits = model(torch.randn(2, 3, 32, 32))
    nn.functional.cross_entropy(logits, torch.tensor([1, 7])).backward()
    assert explicit_attention_calls == []  # every block ran the fused kernel
    model.forward_features(torch.randn(2, 3, 32, 32))
    assert explicit_attention_calls == []
    _, attn = model(torch.randn(2, 3, 32, 32), return_attention=True)
    assert len(explicit_attention_calls) == 3 and attn.shape == (3, 2, 4, 65, 65)  # one per block


def test_the_model_does_not_request_weights_without_return_attention(explicit_attention_calls):
    model = VisionTransformer(tiny(depth=3)).eval()  # implementation "auto": inference takes the fused kernel
    with torch.no_grad():
        model(torch.randn(2, 3, 32, 32))
        model.forward_features(torch.randn(2, 3, 32, 32))
    assert explicit_attention_calls == []


def test_the_implementations_give_the_same_logits_and_gradients():
    torch.manual_seed(0)
    explicit = randomize_(VisionTransformer(tiny()), std=0.2).train()
    fused = VisionTransformer(tiny()).train()
    fused.load_state_dict(explicit.state_dict())
    for block in explicit.blocks:
        block.attn.implementation = "explicit"
    images, labels = torch.randn(4, 3, 32, 32), torch.tensor([0, 3, 5, 9])
    logits = {}
    for name, model in (("explicit", explicit), ("fused", fused)):
        logits[name] = model(images)
        nn.functional.cross_entropy(logits[name], labels).backward()
    torch.testing.assert_close(logits["fused"], logits["explicit"], **TOL)
    for (name, p), q in zip(explicit.named_parameters(), fused.parameters()):
        torch.testing.assert_close(q.grad, p.grad, **TOL, msg=name)


# ---- bad configs and inputs: a clear error that names the field ---------------------------


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(num_classes=-5), r"num_classes must be a whole number, at least 0, got -5"),
        (dict(depth=-1), r"depth must be a whole number, at least 0, got -1"),
        (dict(norm_eps=-1), r"norm_eps must be a finite number, greater than 0, got -1"),
        (dict(norm_eps=float("nan")), r"norm_eps must be a finite number, greater than 0, got nan"),
        (dict(norm_eps=0), r"norm_eps must be a finite number, greater than 0, got 0"),
        (dict(image_size="88"), r"image_size must be a whole number \(one side\) or a pair \(H, W\).*'88' \(str\)"),
        (dict(image_size=0), r"image_size must be a whole number, at least 1, got 0"),
        (dict(image_size=-32), r"image_size must be .* got -32"),
        (dict(image_size=(32, 32, 3)), r"image_size must be one side or a pair"),
        (dict(image_size=32.0), r"image_size must be .* got 32.0 \(float\)"),
        (dict(qkv_bias="no"), r"qkv_bias must be True or False, got 'no'"),
        (dict(qkv_bias=1), r"qkv_bias must be True or False, got 1"),
        (dict(patch_size=0), r"patch_size must be .* got 0"),
        (dict(patch_size="4"), r"patch_size must be .* got '4' \(str\)"),
        (dict(in_channels=0), r"in_channels must be .* got 0"),
        (dict(embed_dim=True), r"embed_dim must be .* got True \(bool\)"),
        (dict(num_heads=0), r"num_heads must be .* got 0"),
        (dict(mlp_ratio=0), r"mlp_ratio must be a finite number, greater than 0, got 0"),
        (dict(mlp_ratio=float("inf")), r"mlp_ratio must be a finite number, greater than 0, got inf"),
        (dict(mlp_ratio=0.001), r"0 hidden units"),
        (dict(dropout=1.0), r"^dropout must be a number, from 0 up to \(not including\) 1, got 1.0"),
        (dict(attn_dropout=-0.1), r"attn_dropout must be a number, from 0 up to \(not including\) 1, got -0.1"),
        (
            dict(attn_dropout="0.1"),
            r"attn_dropout must be a number, from 0 up to \(not including\) 1, got '0.1' \(str\)",
        ),
        (dict(pool=None), r"pool must be one of \('cls', 'mean'\), got None"),
        (dict(pos_embed=["learned"]), r"pos_embed must be one of .* got \['learned'\]"),
        (dict(pool="mean", fc_norm="yes"), r"fc_norm must be True or False, got 'yes'"),
        (dict(norm_pre="yes"), r"norm_pre must be True or False, got 'yes' \(str\)"),
        (dict(norm_pre=1), r"norm_pre must be True or False, got 1 \(int\)"),
        (dict(norm_pre=None), r"norm_pre must be True or False, got None"),
    ],
)
def test_config_names_every_bad_field(overrides, message):
    with pytest.raises(ValueError, match=message):
        ViTConfig.tiny(**overrides)


def test_config_stores_plain_python_sizes():
    np = pytest.importorskip("numpy")
    config = ViTConfig.tiny(
        image_size=[np.int64(32), 32], patch_size=np.int64(4), depth=np.int32(2), mlp_ratio=np.float32(1.5)
    )
    assert config.image_size == (32, 32) and type(config.image_size[0]) is int
    assert type(config.patch_size) is int and type(config.depth) is int and type(config.mlp_ratio) is float
    assert ViTConfig.tiny(mlp_ratio=2).mlp_ratio == 2  # plain Python numbers are kept as they are
    hash(config)  # a list would make the frozen config unhashable


def test_num_classes_zero_returns_the_pooled_features():
    model = VisionTransformer(tiny(num_classes=0)).eval()
    assert isinstance(model.head, nn.Identity)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 64)


def test_a_model_without_blocks_returns_an_empty_attention_stack():
    model = VisionTransformer(tiny(depth=0)).eval()
    logits, attn = model(torch.randn(2, 3, 32, 32), return_attention=True)
    assert logits.shape == (2, 10) and attn.shape == (0, 2, 4, 65, 65)


def test_a_config_too_big_for_memory_is_refused_before_anything_is_allocated():
    config = tiny(embed_dim=76800, num_heads=4)  # a typo for 768: 94 billion parameters
    with pytest.raises(ValueError, match=r"about 94.4 billion parameters .* check embed_dim=76800"):
        VisionTransformer(config)
    with torch.device("meta"):  # shapes only: allocates nothing, so it may be built
        assert VisionTransformer(config).pos_embed.shape == (1, 65, 76800)


def test_vision_transformer_needs_a_config():
    with pytest.raises(TypeError, match=r"expected a ViTConfig, got dict"):
        VisionTransformer(dict(image_size=32))


@pytest.mark.parametrize("size", ["48", 0, -4, 30, 10**6])
def test_set_image_size_refuses_a_bad_size_and_changes_nothing(size):
    model = VisionTransformer(tiny())
    table = model.pos_embed.detach().clone()
    with pytest.raises(ValueError, match=r"image_size|image size|billion"):
        model.set_image_size(size)
    assert model.config == tiny() and model.patch_embed.image_size == (32, 32)
    assert torch.equal(model.pos_embed, table)


@pytest.mark.parametrize(
    "dtype, words",
    [
        (torch.uint8, r"got torch.uint8; convert with `images.float\(\)` \(and divide by 255"),
        (torch.float64, r"got torch.float64; convert with `images.float\(\)`"),
        (torch.float16, r"got torch.float16; convert with `images.float\(\)`"),
    ],
)
def test_model_names_the_image_dtype_it_needs(dtype, words):
    model = VisionTransformer(tiny())
    with pytest.raises(ValueError, match=r"expected images of dtype torch.float32 .*" + words):
        model(torch.zeros(1, 3, 32, 32).to(dtype))


def test_model_rejects_a_return_attention_that_is_no_flag():
    model = VisionTransformer(tiny())
    with pytest.raises(TypeError, match=r"return_attention must be True or False, got 'no'"):
        model(torch.zeros(1, 3, 32, 32), return_attention="no")  # used to return a tuple


def test_load_state_dict_refuses_a_whole_checkpoint_and_what_is_no_mapping():
    model = VisionTransformer(tiny())
    checkpoint = {"config": {}, "state_dict": model.state_dict()}
    with pytest.raises(ValueError, match=r"other values under \['config', 'state_dict'\].*checkpoint\['state_dict'\]"):
        model.load_state_dict(checkpoint, strict=False)  # used to load nothing, silently
    with pytest.raises(TypeError, match=r"expected a state dict .* got list"):
        model.load_state_dict(list(model.state_dict().values()))
