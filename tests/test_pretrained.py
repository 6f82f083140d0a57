"""utils.pretrained (conversion) against transformers' ViT (random weights from configs: nothing downloaded)
and against our own timm-layout checkpoints written to disk."""

import pytest
import torch
import transformers
from references import randomize_, to_hub_file_layout
from safetensors.torch import save_file

from utils.embeddings import resize_pos_embed, sincos_pos_embed_2d
from utils.pretrained import config_from_state_dict, from_hf, from_timm, hf_to_timm, load_vit_b16
from utils.vit import VisionTransformer, ViTConfig
from utils.weights import load_checkpoint, vit_b16_path

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


def test_the_hf_names_are_those_of_transformers_5():
    names = set(hf_vit("32px-p8-1layer-1head").state_dict())
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
    state = hf_vit("32px-p8-1layer-1head").state_dict()
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
    state = dict(hf_vit("32px-p8-1layer-1head").state_dict())
    edit(state)
    with pytest.raises(ValueError, match=key):
        hf_to_timm(state)


def test_hf_to_timm_takes_pairs_in_any_order_and_fuses_as_they_come():
    state = hf_vit("48px-p16-3layers-no-qkv-bias").state_dict()
    expected = hf_to_timm(state)
    shuffled = list(state.items())[::-1]  # v before k before q, the last layer first
    got = hf_to_timm(iter(shuffled))
    assert got.keys() == expected.keys()
    assert all(torch.equal(got[name], expected[name]) for name in expected)
    q, k, v = got["blocks.2.attn.qkv.weight"].chunk(3)
    assert torch.equal(q, state["vit.layers.2.attention.q_proj.weight"])
    assert torch.equal(v, state["vit.layers.2.attention.v_proj.weight"])


def test_hf_to_timm_rejects_q_k_v_of_different_shapes():
    state = dict(hf_vit("32px-p8-1layer-1head").state_dict())
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
    ],
)
def test_from_timm_names_what_does_not_fit(edit, key):
    state = dict(VisionTransformer(ViTConfig.tiny(depth=1)).state_dict())
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
