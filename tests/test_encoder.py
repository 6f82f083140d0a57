"""MLP and EncoderBlock against torch's nn.TransformerEncoderLayer with copied weights."""

import pytest
import torch
import torch.nn.functional as F
from references import randomize_, torch_layer_from

from utils.encoder import MLP, EncoderBlock, LayerScale

TOL = dict(atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
@pytest.mark.parametrize(
    "B, T, D, heads, mlp_ratio, eps",
    [(2, 5, 16, 4, 4.0, 1e-6), (1, 9, 24, 3, 2.0, 1e-5), (3, 4, 8, 1, 3.0, 1e-6)],
)
def test_block_matches_transformer_encoder_layer(norm_first, B, T, D, heads, mlp_ratio, eps):
    torch.manual_seed(0)
    block = randomize_(EncoderBlock(D, heads, mlp_ratio, norm_first=norm_first, norm_eps=eps)).eval()
    layer = torch_layer_from(block)
    x = torch.randn(B, T, D)
    out, weights = block(x, return_attention=True)
    assert out.shape == (B, T, D) and weights.shape == (B, heads, T, T)
    torch.testing.assert_close(out, layer(x), **TOL)
    torch.testing.assert_close(block(x), out)


def test_pre_norm_and_post_norm_differ():
    torch.manual_seed(0)
    pre = randomize_(EncoderBlock(16, 4, norm_first=True)).eval()
    post = EncoderBlock(16, 4, norm_first=False).eval()
    post.load_state_dict(pre.state_dict())
    x = torch.randn(2, 5, 16)
    assert not torch.allclose(pre(x), post(x), atol=1e-3)


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
def test_block_with_key_padding_mask_matches_torch(norm_first):
    torch.manual_seed(0)
    B, T, D, heads = 3, 6, 16, 4
    block = randomize_(EncoderBlock(D, heads, norm_first=norm_first)).eval()
    layer = torch_layer_from(block)
    x = torch.randn(B, T, D)
    padding = torch.arange(T)[None, :] >= torch.tensor([6, 4, 2])[:, None]  # torch: True = ignore
    ours = block(x, mask=~padding[:, None, None, :])  # ours: True = attend
    theirs = layer(x, src_key_padding_mask=padding)
    real = ~padding  # torch's fast path may zero the padded positions; compare the real tokens
    torch.testing.assert_close(ours[real], theirs[real], **TOL)


def test_block_attention_weights_come_from_the_normed_input():
    torch.manual_seed(0)
    block = randomize_(EncoderBlock(16, 4, norm_first=True)).eval()
    x = torch.randn(2, 5, 16)
    _, weights = block(x, return_attention=True)
    _, expected = block.attn(block.norm1(x), return_attention=True)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 5), **TOL)


def test_block_names_follow_the_reference_vit():
    block = EncoderBlock(16, 4, mlp_ratio=4.0)
    names = {name for name, _ in block.named_parameters()}
    assert names == {
        f"{layer}.{kind}"
        for layer in ("norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2")
        for kind in ("weight", "bias")
    }
    assert block.mlp.fc1.out_features == 64
    assert block.norm1.eps == 1e-6


def test_block_dropout_only_in_training():
    torch.manual_seed(0)
    block = EncoderBlock(16, 4, dropout=0.3, attn_dropout=0.3)
    x = torch.randn(2, 5, 16)
    block.eval()
    assert torch.equal(block(x), block(x))
    block.train()
    assert not torch.allclose(block(x), block(x))


# ---- MLP ---------------------------------------------------------------------------------


def test_mlp_shape_and_exact_gelu():
    torch.manual_seed(0)
    mlp = randomize_(MLP(8, 32)).eval()
    x = torch.randn(2, 5, 8)
    out = mlp(x)
    assert out.shape == (2, 5, 8)
    assert mlp.fc1.weight.shape == (32, 8) and mlp.fc2.weight.shape == (8, 32)
    expected = F.linear(F.gelu(F.linear(x, mlp.fc1.weight, mlp.fc1.bias)), mlp.fc2.weight, mlp.fc2.bias)
    torch.testing.assert_close(out, expected, **TOL)
    tanh_gelu = F.linear(
        F.gelu(F.linear(x, mlp.fc1.weight, mlp.fc1.bias), approximate="tanh"), mlp.fc2.weight, mlp.fc2.bias
    )
    assert not torch.allclose(out, tanh_gelu, atol=1e-6, rtol=0)  # the exact (erf) GELU, as in ViT


def test_the_exact_and_the_tanh_gelu_differ_by_less_than_5e_4():
    """MLP's docstring: the JAX code's tanh GELU is within 5e-4 of the exact one, everywhere."""
    x = torch.linspace(-20, 20, 400_001, dtype=torch.float64)
    difference = (F.gelu(x) - F.gelu(x, approximate="tanh")).abs()
    assert 4e-4 < difference.max() < 5e-4


def test_mlp_acts_on_each_token_alone():
    torch.manual_seed(0)
    mlp = randomize_(MLP(8, 16)).eval()
    x = torch.randn(1, 6, 8)
    out = mlp(x)
    x2 = x.clone()
    x2[0, 3] = torch.randn(8)  # change one token
    out2 = mlp(x2)
    changed = (out2 - out).abs().sum(-1)[0] > 0
    assert changed.tolist() == [False, False, False, True, False, False]


# ---- the attention implementation --------------------------------------------------------


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
def test_block_requests_weights_only_when_asked(norm_first, explicit_attention_calls):
    torch.manual_seed(0)
    block = randomize_(EncoderBlock(16, 4, norm_first=norm_first)).train()
    x = torch.randn(2, 5, 16, requires_grad=True)
    fast = block(x)  # training: the fused kernel, no weights built
    fast.sum().backward()
    assert explicit_attention_calls == []
    out, weights = block(x, return_attention=True)
    assert explicit_attention_calls == [1]
    assert weights.shape == (2, 4, 5, 5)
    torch.testing.assert_close(fast, out, **TOL)


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
def test_block_implementations_agree_in_outputs_and_gradients(norm_first):
    torch.manual_seed(0)
    block = randomize_(EncoderBlock(16, 4, norm_first=norm_first)).train()
    x = torch.randn(3, 6, 16)
    mask = (torch.arange(6)[None, :] < torch.tensor([6, 3, 1])[:, None])[:, None, None, :]
    grads = {}
    for implementation in ("explicit", "fused"):
        block.attn.implementation = implementation
        block.zero_grad()
        x_ = x.clone().requires_grad_()
        out = block(x_, mask)
        out.pow(2).sum().backward()
        grads[implementation] = (out, x_.grad, {n: p.grad.clone() for n, p in block.named_parameters()})
    (out_e, dx_e, g_e), (out_f, dx_f, g_f) = grads["explicit"], grads["fused"]
    torch.testing.assert_close(out_f, out_e, **TOL)
    torch.testing.assert_close(dx_f, dx_e, **TOL)
    for name in g_e:
        torch.testing.assert_close(g_f[name], g_e[name], **TOL, msg=name)


# ---- bad arguments and tokens ---------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
def test_pre_and_post_norm_blocks_refuse_tokens_of_the_wrong_width_alike(norm_first):
    block = EncoderBlock(16, 4, norm_first=norm_first)
    with pytest.raises(ValueError, match=r"expected tokens shaped \(B, N, D=16\).*got \(2, 5, 12\)"):
        block(torch.randn(2, 5, 12))  # pre-norm used to fail inside LayerNorm with a RuntimeError
    with pytest.raises(ValueError, match=r"expected tokens of dtype torch.float32 .*got torch.int64"):
        block(torch.ones(2, 5, 16, dtype=torch.long))


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(dim=-16), r"dim must be a whole number, .* got -16"),
        (dict(num_heads=0), r"num_heads must be a whole number, .* got 0"),
        (dict(mlp_ratio=-1), r"mlp_ratio must be a finite number, greater than 0, got -1"),
        (dict(mlp_ratio=0.01), r"mlp_ratio 0.01 gives int\(16 \* 0.01\) = 0 hidden units"),
        (dict(qkv_bias="no"), r"qkv_bias must be True or False"),
        (dict(dropout=1.0), r"^dropout must be a number, from 0 up to \(not including\) 1, got 1.0"),
        (dict(attn_dropout=-0.5), r"^attn_dropout must be a number, from 0 up to \(not including\) 1"),
        (dict(norm_first="yes"), r"norm_first must be True or False, got 'yes'"),
        (dict(norm_eps=0), r"norm_eps must be a finite number, greater than 0, got 0"),
        (dict(norm_eps=float("nan")), r"norm_eps must be a finite number, greater than 0, got nan"),
        (dict(layer_scale=0), r"^layer_scale must be a finite number \(LayerScale's starting value; None for no"),
        (dict(layer_scale=-1e-5), r"^layer_scale must be .* greater than 0, got -1e-05"),
        (dict(layer_scale=float("inf")), r"^layer_scale must be a finite number"),
    ],
)
def test_block_rejects_bad_arguments_in_its_own_names(kwargs, words):
    with pytest.raises(ValueError, match=words):
        EncoderBlock(**{**dict(dim=16, num_heads=4), **kwargs})


def test_block_registers_its_layers_in_the_reference_order():
    # the order fixes the random init of a seeded model and the order of its parameters
    names = [name.rsplit(".", 1)[0] for name, _ in EncoderBlock(16, 4).named_parameters()][::2]
    assert names == ["norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2"]


@pytest.mark.parametrize(
    "args, words",
    [((0, 4), r"dim must be .* got 0"), ((8, -1), r"hidden_dim must be .* got -1"), ((8, 16, 1.0), r"dropout must be")],
)
def test_mlp_rejects_bad_arguments(args, words):
    with pytest.raises(ValueError, match=words):
        MLP(*args)


def test_mlp_names_the_tokens_it_needs():
    mlp = MLP(8, 16)
    assert mlp(torch.randn(5, 8)).shape == (5, 8)  # any leading axes
    with pytest.raises(ValueError, match=r"expected tokens shaped \(\.\.\., D=8\), got \(2, 5, 7\)"):
        mlp(torch.randn(2, 5, 7))
    with pytest.raises(ValueError, match=r"got torch.int64; convert with `tokens.float\(\)`"):
        mlp(torch.ones(2, 5, 8, dtype=torch.long))


# ---- LayerScale (CaiT) --------------------------------------------------------------------


def folded(block: EncoderBlock) -> EncoderBlock:
    """A block without LayerScale that computes the same: each gamma multiplied into the rows of
    the last Linear of its branch (attn.proj for ls1, mlp.fc2 for ls2), weights and biases."""
    plain = EncoderBlock(
        block.norm1.normalized_shape[0],
        block.attn.num_heads,
        block.mlp.fc1.out_features / block.mlp.fc1.in_features,
        norm_first=block.norm_first,
        norm_eps=block.norm1.eps,
    ).eval()
    state = {k: v.clone() for k, v in block.state_dict().items() if ".gamma" not in k}
    for layer, scale in (("attn.proj", block.ls1.gamma), ("mlp.fc2", block.ls2.gamma)):
        state[f"{layer}.weight"] = state[f"{layer}.weight"] * scale.detach()[:, None]  # row d times gamma[d]
        state[f"{layer}.bias"] = state[f"{layer}.bias"] * scale.detach()
    plain.load_state_dict(state)
    return plain


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
def test_layer_scale_equals_gamma_folded_into_each_branchs_last_layer(norm_first):
    """The independent reference: torch's nn.TransformerEncoderLayer holding the folded weights."""
    torch.manual_seed(0)
    block = randomize_(EncoderBlock(24, 3, mlp_ratio=2.0, norm_first=norm_first, layer_scale=0.1)).eval()
    x = torch.randn(2, 7, 24)
    layer = torch_layer_from(folded(block))
    torch.testing.assert_close(block(x), layer(x), **TOL)
    out, weights = block(x, return_attention=True)
    torch.testing.assert_close(out, layer(x), **TOL)
    assert weights.shape == (2, 3, 7, 7)
    assert not torch.allclose(block(x), torch_layer_from(block)(x), atol=1e-3)  # the scales do matter


def test_layer_scale_names_and_start_follow_timm():
    block = EncoderBlock(16, 4, layer_scale=1e-5)
    names = [name for name, _ in block.named_parameters()]
    assert names[6] == "ls1.gamma" and names[-1] == "ls2.gamma" and len(names) == 14
    for scale in (block.ls1.gamma, block.ls2.gamma):
        assert scale.shape == (16,) and torch.equal(scale.detach(), torch.full((16,), 1e-5))
    plain = EncoderBlock(16, 4)
    assert not any("gamma" in name for name, _ in plain.named_parameters())
    assert isinstance(plain.ls1, torch.nn.Identity) and isinstance(plain.ls2, torch.nn.Identity)


def test_a_small_layer_scale_starts_the_block_near_the_identity():
    """Each branch's output times 1e-5: the block changes its input by about 1e-5 of its size, at
    any width (without it, the branches of a 768-wide block are a sizeable part of the stream)."""
    torch.manual_seed(0)
    block = EncoderBlock(96, 4, layer_scale=1e-5).eval()
    x = torch.randn(2, 5, 96)
    change = (block(x) - x).norm() / x.norm()
    assert 0 < change < 1e-4


def test_layer_scale_multiplies_each_feature():
    scale = LayerScale(4, 0.5)
    with torch.no_grad():
        scale.gamma.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    x = torch.ones(2, 3, 4)
    assert torch.equal(scale(x), torch.tensor([1.0, 2.0, 3.0, 4.0]).expand(2, 3, 4))
    with pytest.raises(ValueError, match="layer_scale must be"):
        LayerScale(4, 0.0)
