"""utils.pretrained (conversion) against transformers' ViT (random weights from configs: nothing downloaded)
and against our own timm-layout checkpoints written to disk."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import transformers
from references import randomize_, to_hub_file_layout, to_v5_names
from safetensors.torch import save_file

from utils.embeddings import resize_pos_embed, sincos_pos_embed_2d
from utils.pretrained import (
    VIT_B16_HF_CONFIG,
    check_vit_b16_shapes,
    config_from_state_dict,
    from_hf,
    from_timm,
    hf_to_timm,
    load_vit_b16,
    vit_b16_hf_config,
)
from utils.vit import VisionTransformer, ViTConfig
from utils.weights import TensorEntry, load_checkpoint, vit_b16_path

# (image_size, patch_size, num_channels, hidden_size, layers, heads, intermediate_size, qkv_bias, labels, eps)
HF_CONFIGS = {
    "32px-p8-1layer-1head": (32, 8, 3, 16, 1, 1, 64, True, 3, 1e-12),
    "48px-p16-3layers-no-qkv-bias": (48, 16, 3, 48, 3, 4, 80, False, 10, 1e-12),
    "28px-p4-gray-ratio-5/3": (28, 4, 1, 24, 2, 2, 40, True, 10, 1e-6),
    "32px-p8-ratio-1.5-no-qkv-bias": (32, 8, 3, 32, 2, 4, 48, False, 3, 1e-12),
    "32px-p8-ratio-61/28": (32, 8, 3, 28, 1, 2, 61, True, 3, 1e-12),  # 28 * (61 / 28) rounds to 60.99..
}


def hf_vit(name: str, classifier: bool = True, seed: int = 0):
    """A transformers ViT of config `name` with random weights (std 0.3, LayerNorms too), eval mode."""
    size, patch, channels, hidden, layers, heads, inter, qkv_bias, labels, eps = HF_CONFIGS[name]
    config = transformers.ViTConfig(
        image_size=size,
        patch_size=patch,
        num_channels=channels,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=inter,
        qkv_bias=qkv_bias,
        num_labels=labels,
        layer_norm_eps=eps,
        attn_implementation="eager",
    )
    torch.manual_seed(seed)
    model = transformers.ViTForImageClassification(config) if classifier else transformers.ViTModel(config)
    return randomize_(model).eval()


def test_the_hf_names_are_those_of_this_transformers():
    """transformers 5 renamed the layers' tensors; 4 (the compatibility lane's Colab stack) uses the
    hub files' names. The tests below read transformers 5's names through to_v5_names on either."""
    names = set(hf_vit("32px-p8-1layer-1head").state_dict())
    if int(transformers.__version__.split(".")[0]) < 5:
        assert names == set(to_hub_file_layout(to_v5_names(hf_vit("32px-p8-1layer-1head").state_dict())))
        assert "vit.encoder.layer.0.attention.attention.query.weight" in names
        return
    assert {
        "vit.layers.0.attention.q_proj.weight",
        "vit.layers.0.attention.o_proj.bias",
        "vit.layers.0.mlp.fc1.weight",
        "vit.layers.0.layernorm_before.weight",
        "vit.embeddings.patch_embeddings.projection.weight",
        "classifier.weight",
    } <= names
    old = to_hub_file_layout(hf_vit("32px-p8-1layer-1head").state_dict())
    assert "vit.encoder.layer.0.attention.attention.query.weight" in old
    assert "vit.encoder.layer.0.output.dense.weight" in old  # the MLP's fc2
    assert "vit.encoder.layer.0.attention.output.dense.weight" in old  # the attention's proj


@pytest.mark.parametrize("layout", ["module", "state_dict", "hub_file_state_dict"])
@pytest.mark.parametrize("name", HF_CONFIGS)
def test_from_hf_computes_what_transformers_computes(name, layout):
    hf = hf_vit(name)
    if layout == "module":
        ours = from_hf(hf)
    else:
        state = hf.state_dict() if layout == "state_dict" else to_hub_file_layout(hf.state_dict())
        ours = from_hf(state, config=hf.config if layout == "state_dict" else hf.config.to_dict())
    size, patch, channels, hidden, layers, heads, inter, qkv_bias, labels, eps = HF_CONFIGS[name]
    assert ours.config.norm_eps == eps and ours.config.qkv_bias == qkv_bias
    assert (ours.config.depth, ours.config.num_heads, ours.config.num_classes) == (layers, heads, labels)
    assert ours.blocks[0].mlp.fc1.out_features == inter
    torch.manual_seed(1)
    images = torch.randn(2, channels, size, size)
    with torch.no_grad():
        expected = hf(images, output_attentions=True)
        features = hf.vit(images).last_hidden_state  # (B, T, D), after the final LayerNorm
        logits, attn = ours(images, return_attention=True)
        ours_features = ours.forward_features(images)  # (B, T, D), after the final norm
    tol = dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits, expected.logits, **tol)
    torch.testing.assert_close(ours_features, features, **tol)
    assert attn.shape == (layers, 2, heads, (size // patch) ** 2 + 1, (size // patch) ** 2 + 1)
    torch.testing.assert_close(attn, torch.stack(expected.attentions), **tol)  # (depth, B, heads, T, T)


@pytest.mark.parametrize("layout", ["module", "hub_file_state_dict"])
def test_a_bare_vit_model_drops_its_pooler(layout):
    hf = hf_vit("48px-p16-3layers-no-qkv-bias", classifier=False)
    assert any(name.startswith("pooler.") for name in hf.state_dict())  # no "vit." prefix, a pooler
    ours = from_hf(hf) if layout == "module" else from_hf(to_hub_file_layout(hf.state_dict()), hf.config)
    assert ours.config.num_classes == 0
    images = torch.randn(1, 3, 48, 48)
    with torch.no_grad():
        expected = hf(images, output_attentions=True)
        features, attn = ours.forward_features(images, return_attention=True)
    torch.testing.assert_close(features, expected.last_hidden_state, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(attn, torch.stack(expected.attentions), rtol=1e-5, atol=1e-5)


def test_hf_to_timm_fuses_q_k_v_in_that_order():
    state = to_v5_names(hf_vit("32px-p8-1layer-1head").state_dict())
    fused = hf_to_timm(state)
    q, k, v = fused["blocks.0.attn.qkv.weight"].chunk(3)  # (D, D) each
    assert torch.equal(q, state["vit.layers.0.attention.q_proj.weight"])
    assert torch.equal(k, state["vit.layers.0.attention.k_proj.weight"])
    assert torch.equal(v, state["vit.layers.0.attention.v_proj.weight"])
    assert "blocks.0.attn.qkv.bias" in fused
    no_bias = hf_to_timm(hf_vit("32px-p8-ratio-1.5-no-qkv-bias").state_dict())
    assert "blocks.0.attn.qkv.bias" not in no_bias  # no zeros invented: the config says qkv_bias=False


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda s: s.update({"vit.layers.0.attention.rel_pos.weight": torch.zeros(3)}), "rel_pos"),
        (lambda s: s.pop("vit.layers.0.attention.k_proj.weight"), "layer 0"),
    ],
)
def test_hf_to_timm_rejects_unknown_keys_and_a_lone_projection(edit, key):
    state = to_v5_names(hf_vit("32px-p8-1layer-1head").state_dict())
    edit(state)
    with pytest.raises(ValueError, match=key):
        hf_to_timm(state)


def test_hf_to_timm_takes_pairs_in_any_order_and_fuses_as_they_come():
    state = to_v5_names(hf_vit("48px-p16-3layers-no-qkv-bias").state_dict())
    expected = hf_to_timm(state)
    shuffled = list(state.items())[::-1]  # v before k before q, the last layer first
    got = hf_to_timm(iter(shuffled))
    assert got.keys() == expected.keys()
    assert all(torch.equal(got[name], expected[name]) for name in expected)
    q, k, v = got["blocks.2.attn.qkv.weight"].chunk(3)
    assert torch.equal(q, state["vit.layers.2.attention.q_proj.weight"])
    assert torch.equal(v, state["vit.layers.2.attention.v_proj.weight"])


def test_hf_to_timm_rejects_q_k_v_of_different_shapes():
    state = to_v5_names(hf_vit("32px-p8-1layer-1head").state_dict())
    state["vit.layers.0.attention.k_proj.weight"] = torch.zeros(16, 8)
    with pytest.raises(ValueError, match="differ in shape"):
        hf_to_timm(state)


def test_from_timm_with_assign_takes_the_tensors_without_copying_them():
    torch.manual_seed(0)
    state = VisionTransformer(ViTConfig.tiny(depth=2)).state_dict()
    state = {name: tensor.clone() for name, tensor in state.items()}
    shared = from_timm(state, num_heads=4, assign=True)
    copied = from_timm(state, num_heads=4)
    assert shared.blocks[1].mlp.fc2.weight.data_ptr() == state["blocks.1.mlp.fc2.weight"].data_ptr()
    assert copied.blocks[1].mlp.fc2.weight.data_ptr() != state["blocks.1.mlp.fc2.weight"].data_ptr()
    assert not any(p.is_meta for p in shared.parameters()) and all(p.requires_grad for p in shared.parameters())
    images = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(shared(images), copied(images), rtol=0, atol=0)
    with pytest.raises(ValueError, match="missing: norm.weight"):  # nothing half-loaded on "meta"
        from_timm({k: v for k, v in state.items() if k != "norm.weight"}, num_heads=4, assign=True)


def test_load_vit_b16_says_how_to_get_the_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"make weights.*utils\.weights\.download_vit_b16"):
        load_vit_b16(vit_b16_path(tmp_path))


def test_from_hf_rejects_another_activation():
    hf = hf_vit("32px-p8-1layer-1head")
    with pytest.raises(ValueError, match="gelu_new"):
        from_hf(hf.state_dict(), {**hf.config.to_dict(), "hidden_act": "gelu_new"})


TIMM_CONFIGS = {
    "tiny": (ViTConfig.tiny(depth=2), {}),
    "mean-pool-no-qkv-bias-no-head": (
        ViTConfig.tiny(depth=1, pool="mean", qkv_bias=False, num_classes=0, mlp_ratio=1.5),
        {},
    ),
    "mean-pool-fc-norm": (ViTConfig.tiny(depth=1, pool="mean", fc_norm=True), {}),
    "sincos": (ViTConfig.tiny(depth=1, pos_embed="sincos"), {"pos_embed": "sincos"}),
    "no-positions-gray": (
        ViTConfig.tiny(depth=1, pos_embed="none", in_channels=1, image_size=24),
        {"image_size": 24},
    ),
}


@pytest.mark.parametrize("suffix", [".pt", ".safetensors", ".pth-wrapped"])
@pytest.mark.parametrize("name", TIMM_CONFIGS)
def test_a_timm_checkpoint_on_disk_loads_strictly_and_gives_the_same_logits(name, suffix, tmp_path):
    config, overrides = TIMM_CONFIGS[name]
    torch.manual_seed(0)
    original = randomize_(VisionTransformer(config)).eval()
    state = original.state_dict()
    if suffix == ".safetensors":
        path = tmp_path / "model.safetensors"
        save_file({k: v.contiguous() for k, v in state.items()}, path)
    elif suffix == ".pt":
        torch.save(state, path := tmp_path / "model.pt")
    else:
        torch.save({"model": state, "epoch": 3}, path := tmp_path / "model.pth")
    loaded = load_checkpoint(path)
    assert config_from_state_dict(loaded, num_heads=config.num_heads, **overrides) == config
    model = from_timm(loaded, num_heads=config.num_heads, **overrides)
    images = torch.randn(2, config.in_channels, config.image_size, config.image_size)
    with torch.no_grad():
        assert torch.equal(model(images), original(images))


def timm_avg_pool_logits(state: dict, num_heads: int, images: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """timm's VisionTransformer.forward (eval mode) for a model without a class token and with
    global_pool="avg", written out by hand from timm's code: patch_embed, + pos_embed, the blocks
    (x + attn(norm1(x)), x + mlp(norm2(x))), then forward_head. With "fc_norm.weight" in `state`
    (timm's default for global_pool="avg"), `norm` is an identity and fc_norm normalises the average;
    without it (fc_norm=False: timm's *_gap_* models), norm normalises every token before it."""
    P = state["patch_embed.proj.weight"].shape[-1]
    x = F.conv2d(images, state["patch_embed.proj.weight"], state["patch_embed.proj.bias"], stride=P)
    x = x.flatten(2).transpose(1, 2) + state["pos_embed"]  # (B, N, D)
    B, N, D = x.shape
    depth = len({name.split(".")[1] for name in state if name.startswith("blocks.")})
    for i in range(depth):
        block = {name.removeprefix(f"blocks.{i}."): t for name, t in state.items() if name.startswith(f"blocks.{i}.")}
        h = F.layer_norm(x, (D,), block["norm1.weight"], block["norm1.bias"], eps)
        qkv = F.linear(h, block["attn.qkv.weight"], block.get("attn.qkv.bias"))  # (B, N, 3D)
        q, k, v = qkv.reshape(B, N, 3, num_heads, D // num_heads).permute(2, 0, 3, 1, 4)  # (B, heads, N, d)
        attn = ((q * (D // num_heads) ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1)  # timm scales q first
        heads_out = (attn @ v).transpose(1, 2).reshape(B, N, D)  # (B, N, D), heads side by side
        x = x + F.linear(heads_out, block["attn.proj.weight"], block["attn.proj.bias"])
        h = F.layer_norm(x, (D,), block["norm2.weight"], block["norm2.bias"], eps)
        h = F.gelu(F.linear(h, block["mlp.fc1.weight"], block["mlp.fc1.bias"]))  # exact GELU, as timm's nn.GELU
        x = x + F.linear(h, block["mlp.fc2.weight"], block["mlp.fc2.bias"])
    if "fc_norm.weight" in state:  # use_fc_norm: self.norm = Identity, self.fc_norm = LayerNorm
        pooled = F.layer_norm(x.mean(dim=1), (D,), state["fc_norm.weight"], state["fc_norm.bias"], eps)
    else:  # fc_norm=False: self.norm = LayerNorm, self.fc_norm = Identity
        pooled = F.layer_norm(x, (D,), state["norm.weight"], state["norm.bias"], eps).mean(dim=1)
    return F.linear(pooled, state["head.weight"], state["head.bias"])


@pytest.mark.parametrize("fc_norm", [True, False])
def test_a_timm_average_pool_checkpoint_computes_what_timm_computes(fc_norm):
    """A state dict in timm's global_pool="avg" layout, written by hand (no class token; fc_norm.*
    and no norm.* with fc_norm, norm.* without), against timm's forward written out by hand."""
    torch.manual_seed(0)
    D, hidden, N, P, heads = 48, 96, 16, 4, 3
    state = {"patch_embed.proj.weight": torch.randn(D, 3, P, P) * 0.1, "patch_embed.proj.bias": torch.randn(D) * 0.1}
    state["pos_embed"] = torch.randn(1, N, D) * 0.3
    for i in range(2):
        for name, shape in [("norm1", (D,)), ("attn.qkv", (3 * D, D)), ("attn.proj", (D, D)), ("norm2", (D,)),
                            ("mlp.fc1", (hidden, D)), ("mlp.fc2", (D, hidden))]:  # fmt: skip
            state[f"blocks.{i}.{name}.weight"] = torch.randn(shape) * (0.3 if len(shape) == 2 else 1)
            state[f"blocks.{i}.{name}.bias"] = torch.randn(shape[0]) * 0.3
    norm = "fc_norm" if fc_norm else "norm"
    state |= {f"{norm}.weight": torch.randn(D) * 0.5 + 1, f"{norm}.bias": torch.randn(D) * 0.5}
    state |= {"head.weight": torch.randn(7, D) * 0.3, "head.bias": torch.randn(7) * 0.3}
    model = from_timm(dict(state), num_heads=heads)  # strict: every key used, none missing
    assert model.config.pool == "mean" and model.config.fc_norm is fc_norm and model.cls_token is None
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        torch.testing.assert_close(model(images), timm_avg_pool_logits(state, heads, images), rtol=1e-5, atol=1e-5)
        swapped = "norm" if fc_norm else "fc_norm"  # the same tensors read as the other layout
        other = {name.replace(norm, swapped, 1) if name.startswith(norm) else name: t for name, t in state.items()}
        difference = (timm_avg_pool_logits(other, heads, images) - model(images)).abs().max()
    assert difference > 0.1, difference  # normalise then average != average then normalise


@pytest.mark.parametrize(
    "layout",
    [
        dict(global_pool="avg", class_token=False),  # fc_norm: timm's default for "avg"
        dict(global_pool="avg", class_token=False, fc_norm=False),  # as timm's *_gap_* models
        dict(global_pool="token"),  # the class token, as ViT-B/16
    ],
)
@pytest.mark.timm
def test_timm_itself(layout, tmp_path):
    """The same against timm's own VisionTransformer, run in a process of its own (tests/timm_reference.py
    says why and where timm lives); timm 1.0.31."""
    output = tmp_path / "timm.pt"
    script = Path(__file__).with_name("timm_reference.py")
    done = subprocess.run([sys.executable, script, json.dumps(layout), output], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    reference = torch.load(output, weights_only=True)
    assert reference["version"] == "1.0.31"
    model = from_timm(reference["state_dict"], num_heads=3)
    assert model.config.fc_norm == ("fc_norm.weight" in reference["state_dict"])
    with torch.no_grad():
        torch.testing.assert_close(model(reference["images"]), reference["logits"], rtol=1e-5, atol=1e-5)


def test_a_timm_model_with_a_class_token_and_an_fc_norm_is_refused_with_the_reason():
    state = dict(VisionTransformer(ViTConfig.tiny(depth=1)).state_dict())
    state["fc_norm.weight"], state["fc_norm.bias"] = state.pop("norm.weight"), state.pop("norm.bias")
    with pytest.raises(ValueError, match=r"a class token and an fc_norm: timm's global_pool='avg' with a class token"):
        from_timm(state, num_heads=4)


def test_a_published_width_needs_no_head_count():
    state = VisionTransformer(ViTConfig(embed_dim=192, num_heads=3, depth=1, num_classes=5)).state_dict()
    assert config_from_state_dict(state).num_heads == 3
    odd = VisionTransformer(ViTConfig.tiny(embed_dim=40, num_heads=5, depth=1)).state_dict()
    with pytest.raises(ValueError, match="num_heads"):
        config_from_state_dict(odd)


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda s: s.pop("blocks.0.norm2.weight"), "missing: blocks.0.norm2.weight"),
        (lambda s: s.update({"blocks.0.attn.rel_pos": torch.zeros(3)}), "unexpected: blocks.0.attn.rel_pos"),
        (lambda s: s.update({"head.bias": torch.zeros(11)}), r"head.bias: checkpoint \(11,\), model \(10,\)"),
        # a bias one block lacks is damage, not an architecture: named, never read as zeros
        (lambda s: s.pop("blocks.1.attn.proj.bias"), "missing: blocks.1.attn.proj.bias"),
        (lambda s: s.pop("blocks.0.mlp.fc2.bias"), "missing: blocks.0.mlp.fc2.bias"),
        (lambda s: s.pop("patch_embed.proj.bias"), "missing: patch_embed.proj.bias"),
    ],
)
def test_from_timm_names_what_does_not_fit(edit, key):
    state = dict(VisionTransformer(ViTConfig.tiny(depth=2)).state_dict())
    edit(state)
    with pytest.raises(ValueError, match=key):
        from_timm(state, num_heads=4)


def test_a_224px_checkpoint_runs_at_384px_and_its_positions_resize_back():
    torch.manual_seed(0)
    state = VisionTransformer(ViTConfig(embed_dim=48, depth=1, num_heads=3, num_classes=7)).state_dict()
    # A trained position table is smooth over the grid (ViT paper, Fig. 7); a random one is not
    # and no resampling could bring it back. The fixed sin-cos table stands in for a trained one.
    state["pos_embed"] = sincos_pos_embed_2d(14, 48) + 0.0  # (1, 197, 48)
    state["pos_embed"][:, 0] = torch.randn(48)  # the class token's entry
    model = from_timm(state, num_heads=3)  # 224 px, 16 px patches: a 14 x 14 grid
    model.set_image_size(384)  # a 24 x 24 grid, as ViT-B/16 fine-tuned at 384 px
    with torch.no_grad():
        assert model(torch.randn(1, 3, 384, 384)).shape == (1, 7)
    assert model.pos_embed.shape == (1, 1 + 24 * 24, 48)
    back = resize_pos_embed(model.pos_embed.detach(), 24, 14)  # (1, 197, 48)
    assert torch.equal(back[:, 0], state["pos_embed"][:, 0])  # the class token's entry is kept
    # Up and down again is no identity: bicubic resampling (antialiased on the way down) blurs
    # the fastest sin-cos channels (6 patches a period) and the grid's border. Measured: max
    # error 0.063, mean 0.0026, on entries in [-1, 1] (std 0.55); the same table with its grid
    # transposed is off by 2.0, so the bounds catch a wrong row/column order.
    error = (back - state["pos_embed"]).abs()
    assert error.max() < 0.1 and error.mean() < 0.01, (error.max(), error.mean())


# ---- load_vit_b16 takes ViT-B/16 only, and says what else it was given ---------------------


def write_hub_file(path, hidden: int, layers: int, heads: int, image_size: int = 224, labels: int = 1000):
    """A transformers ViT of this shape (random weights) saved at `path` in the hub files' layout."""
    config = transformers.ViTConfig(
        image_size=image_size,
        patch_size=16,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        num_labels=labels,
    )
    torch.manual_seed(0)
    state = to_hub_file_layout(transformers.ViTForImageClassification(config).state_dict())
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({name: tensor.contiguous() for name, tensor in state.items()}, path)
    return path


@pytest.mark.parametrize(
    "hidden, layers, heads, image_size, found",
    [
        (96, 2, 3, 224, "224 px, 16 px patches, 96 wide, 2 layers, 1,000 classes"),  # 96 / 12 heads would load
        (192, 1, 3, 32, "32 px, 16 px patches, 192 wide, 1 layer, 1,000 classes"),  # DeiT-Ti's width
        (384, 1, 6, 32, "32 px, 16 px patches, 384 wide, 1 layer, 1,000 classes"),  # ViT-S's width
    ],
)
def test_load_vit_b16_refuses_a_file_of_another_vit(tmp_path, hidden, layers, heads, image_size, found):
    path = write_hub_file(tmp_path / "model.safetensors", hidden, layers, heads, image_size)
    with pytest.raises(ValueError, match="is not the published ViT-B/16") as error:
        load_vit_b16(path)
    message = str(error.value)
    assert f"it holds {found}" in message
    assert f"patch_embed.proj.weight: file ({hidden}, 3, 16, 16), ViT-B/16 (768, 3, 16, 16)" in message
    assert "from_hf(read_safetensors(path)" in message


def test_the_vit_b16_shape_check_passes_the_published_layout_and_names_a_missing_head():
    with torch.device("meta"):  # ViT-B/16's shapes without its 346 MB
        reference = transformers.ViTForImageClassification(transformers.ViTConfig(num_labels=1000))
    state = to_hub_file_layout(reference.state_dict())
    entries = {name: TensorEntry(t.dtype, tuple(t.shape), 0, 0) for name, t in state.items()}
    check_vit_b16_shapes(entries)  # the published file's names and shapes: no error
    del entries["classifier.weight"], entries["classifier.bias"]  # as an ImageNet-21k model has no 1k head
    with pytest.raises(ValueError, match=r"1,000 classes\); it holds .* 0 classes[\s\S]*missing: head.weight"):
        check_vit_b16_shapes(entries)


def test_load_vit_b16_on_a_timm_layout_file_says_which_layout_it_wants(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file(VisionTransformer(ViTConfig.tiny(depth=1)).state_dict(), path)
    with pytest.raises(ValueError, match="Hugging Face's layout.*timm's names: use from_timm"):
        load_vit_b16(path)


@pytest.mark.parametrize(
    "content, says",
    [
        (b"<!DOCTYPE html><html><body>Sign in</body></html>", "HTML"),
        (b"version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 346293852\n", "git-LFS pointer"),
        (b"\x20\x00\x00\x00\x00\x00\x00\x00{", "partial download"),
    ],
)
def test_load_vit_b16_on_a_file_that_is_no_safetensors_file(tmp_path, content, says):
    path = tmp_path / "model.safetensors"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=f"is not a safetensors file.*{says}.*make weights"):
        load_vit_b16(path)


def test_a_config_json_beside_the_file_gives_the_head_count(tmp_path):
    path = tmp_path / "model.safetensors"
    assert vit_b16_hf_config(path) == VIT_B16_HF_CONFIG  # no config.json: the published values
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 16, "layer_norm_eps": 1e-6, "x": 1}))
    config = vit_b16_hf_config(path)
    assert config["num_attention_heads"] == 16 and config["layer_norm_eps"] == 1e-6 and "x" not in config
    (tmp_path / "config.json").write_text("{'num_attention_heads': 12")
    with pytest.raises(ValueError, match="config.json beside the weights is no valid JSON"):
        vit_b16_hf_config(path)


# ---- the model is float32 whatever the checkpoint's dtype ------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("assign", [False, True])
def test_from_timm_keeps_the_model_float32(dtype, assign):
    torch.manual_seed(0)
    original = randomize_(VisionTransformer(ViTConfig.tiny(depth=1))).eval()
    state = {name: tensor.to(dtype) for name, tensor in original.state_dict().items()}
    model = from_timm(state, num_heads=4, assign=assign)
    assert {p.dtype for p in model.state_dict().values()} == {torch.float32}
    expected = VisionTransformer(ViTConfig.tiny(depth=1)).eval()
    expected.load_state_dict({name: tensor.float() for name, tensor in state.items()})
    images = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(images), expected(images), rtol=0, atol=0)  # runs, and as float32


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_from_hf_of_a_half_precision_file_gives_a_float32_model(dtype):
    hf = hf_vit("32px-p8-1layer-1head")
    state = {name: tensor.to(dtype) for name, tensor in to_hub_file_layout(hf.state_dict()).items()}
    ours = from_hf(state, hf.config.to_dict(), assign=True)
    assert {p.dtype for p in ours.parameters()} == {torch.float32}
    with torch.no_grad():
        assert ours(torch.rand(1, 3, 32, 32)).dtype == torch.float32


def test_from_timm_refuses_weights_that_are_no_floats():
    state = dict(VisionTransformer(ViTConfig.tiny(depth=1)).state_dict())
    state["head.weight"] = state["head.weight"].to(torch.int8)
    with pytest.raises(ValueError, match=r"floating-point weights; these tensors are not: head.weight \(torch.int8\)"):
        from_timm(state, num_heads=4)


# ---- wrong arguments to the converters --------------------------------------------------------


def test_the_converters_name_a_path_a_model_or_a_list_given_for_a_state_dict(tmp_path):
    model = VisionTransformer(ViTConfig.tiny(depth=1))
    for convert in (from_timm, config_from_state_dict, hf_to_timm):
        with pytest.raises(TypeError, match=r"not a file's path .*load_checkpoint\(path\)"):
            convert(str(tmp_path / "model.safetensors"))
        with pytest.raises(TypeError, match=r"pass model.state_dict\(\)"):
            convert(model)
    with pytest.raises(TypeError, match="not a file's path"):
        from_hf(tmp_path / "model.safetensors")
    with pytest.raises(TypeError, match=r"takes a state dict \{name: tensor\}, got a list"):
        from_timm([1, 2, 3])
    with pytest.raises(TypeError, match=r"expected \(name, tensor\) pairs, got int"):
        hf_to_timm([1, 2, 3])
    state = {**model.state_dict(), "epoch": 3}
    with pytest.raises(ValueError, match=r"these entries are no tensors: epoch \(int\)"):
        from_timm(state, num_heads=4)


@pytest.mark.parametrize("num_heads, says", [(0, "num_heads must be a whole"), (2.0, "num_heads=2"), (5, "one of")])
def test_a_head_count_that_cannot_split_the_width_is_refused(num_heads, says):
    state = VisionTransformer(ViTConfig.tiny(depth=1)).state_dict()  # 64 wide
    with pytest.raises(ValueError, match=says):
        from_timm(state, num_heads=num_heads)


def test_hf_to_timm_on_timm_names_and_from_timm_on_hf_names_point_to_the_other():
    timm_state = VisionTransformer(ViTConfig.tiny(depth=1)).state_dict()
    with pytest.raises(ValueError, match="timm's names: use from_timm") as error:
        hf_to_timm(timm_state)
    assert "and " in str(error.value) and "more" in str(error.value)  # a long list is cut short
    hf_state = to_hub_file_layout(hf_vit("32px-p8-1layer-1head").state_dict())
    with pytest.raises(ValueError, match="Hugging Face's layout: use from_hf"):
        from_timm(hf_state, num_heads=1)


def test_from_hf_refuses_a_config_of_the_wrong_kind(tmp_path):
    state = hf_vit("32px-p8-1layer-1head").state_dict()
    with pytest.raises(TypeError, match="got a path: json.load it first"):
        from_hf(state, str(tmp_path / "config.json"))
    with pytest.raises(TypeError, match="config should be a dict or a transformers ViTConfig, got int"):
        from_hf(state, 12)


# ---- weights that hold NaN or infinity are refused, by name ----------------------------------


def test_a_checkpoint_of_nan_weights_is_refused_by_from_timm(tmp_path):
    """S13: an all-NaN file loaded without a word, and the model gave NaN logits."""
    tiny = ViTConfig.tiny(image_size=8, patch_size=4, in_channels=1, embed_dim=16, depth=2, num_heads=2)
    state = VisionTransformer(tiny).state_dict()
    save_file(
        {name: torch.full_like(tensor, float("nan")) for name, tensor in state.items()}, tmp_path / "m.safetensors"
    )
    loaded = load_checkpoint(tmp_path / "m.safetensors")
    first = re.escape(", ".join(list(loaded)[:4]))
    with pytest.raises(
        ValueError,
        match=rf"^{len(state)} tensors of the checkpoint hold NaN or infinity \({first} and {len(state) - 4} more\): "
        r"a corrupt file\?$",
    ):
        from_timm(loaded, num_heads=2)
    one_inf = {**state, "head.bias": torch.tensor([0.0] * 9 + [float("-inf")])}
    with pytest.raises(ValueError, match=r"^1 tensor of the checkpoint holds NaN or infinity \(head\.bias\)"):
        from_timm(one_inf, num_heads=2, assign=True)


def test_from_hf_refuses_a_nan_weight_naming_it(tmp_path):
    state = to_v5_names(hf_vit("32px-p8-1layer-1head").state_dict())
    state["vit.layers.0.attention.k_proj.weight"][2, 3] = float("nan")
    with pytest.raises(ValueError, match=r"1 tensor of the checkpoint holds NaN .*\(blocks\.0\.attn\.qkv\.weight\)"):
        from_hf(state, {"num_attention_heads": 1})


# ---- load_vit_b16 takes the folder that holds model.safetensors -------------------------------


def test_load_vit_b16_reads_model_safetensors_in_a_folder(tmp_path):
    """Obscure: load_vit_b16(folder) said "no ViT-B/16 weights at <folder>"."""
    path = write_hub_file(tmp_path / "model.safetensors", 96, 1, 3, 32)
    with pytest.raises(ValueError, match=rf"^{path} is not the published ViT-B/16.*96 wide"):
        load_vit_b16(tmp_path)  # the file in the folder was read: its shapes are ViT-S-like, not B/16's
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=rf"no ViT-B/16 weights at {tmp_path / 'empty' / 'model.safetensors'}"):
        load_vit_b16(tmp_path / "empty")
