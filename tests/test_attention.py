"""Attention against torch's F.scaled_dot_product_attention and nn.MultiheadAttention."""

import math

import pytest
import torch
import torch.nn.functional as F
from references import randomize_, torch_mha_from

from utils.attention import MultiHeadSelfAttention, merge_heads, scaled_dot_product_attention, split_heads

TOL = dict(atol=1e-5, rtol=1e-5)

# (q shape, k shape, v shape)
QKV_SHAPES = [
    ((5, 8), (5, 8), (5, 8)),  # one sequence, no batch
    ((2, 7, 16), (2, 7, 16), (2, 7, 16)),  # (B, N, d)
    ((2, 3, 6, 4), (2, 3, 6, 4), (2, 3, 6, 4)),  # (B, heads, N, d)
    ((2, 3, 4, 8), (2, 3, 9, 8), (2, 3, 9, 8)),  # N_q != N_k
    ((2, 3, 5, 8), (2, 3, 6, 8), (2, 3, 6, 3)),  # d_v != d
]


def reference_weights(q, k, mask=None):
    """softmax(q k^T / sqrt(d)) written independently, with masked scores at -inf."""
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)


@pytest.mark.parametrize("q_shape, k_shape, v_shape", QKV_SHAPES)
def test_sdpa_matches_torch(q_shape, k_shape, v_shape):
    torch.manual_seed(0)
    q, k, v = torch.randn(q_shape), torch.randn(k_shape), torch.randn(v_shape)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (*q_shape[:-1], v_shape[-1])
    assert weights.shape == (*q_shape[:-1], k_shape[-2])
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), **TOL)
    torch.testing.assert_close(weights, reference_weights(q, k), **TOL)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]), **TOL)


def test_sdpa_is_scaled_by_sqrt_d():
    # with large d the scale matters a lot: unscaled scores would make the softmax almost one-hot
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 4, 256), torch.randn(1, 6, 256), torch.randn(1, 6, 2)
    _, weights = scaled_dot_product_attention(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / 16.0, dim=-1)
    torch.testing.assert_close(weights, expected, **TOL)


def test_sdpa_with_key_padding_mask():
    torch.manual_seed(0)
    B, H, N, d = 3, 2, 6, 8
    q, k, v = (torch.randn(B, H, N, d) for _ in range(3))
    lengths = torch.tensor([6, 4, 1])
    keep = torch.arange(N)[None, :] < lengths[:, None]  # (B, N), True = a real token
    mask = keep[:, None, None, :]  # (B, 1, 1, N)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **TOL)
    torch.testing.assert_close(weights, reference_weights(q, k, mask), **TOL)
    hidden = ~mask.expand(B, H, N, N)
    assert torch.all(weights[hidden] == 0)  # exactly 0, not merely small
    assert torch.all(weights[~hidden] > 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, N), **TOL)
    # the last sequence has a single real key: all of its weight goes there
    assert torch.equal(weights[2, :, :, 0], torch.ones(H, N))


def test_sdpa_with_full_causal_mask():
    torch.manual_seed(0)
    B, H, N, d = 2, 3, 5, 4
    q, k, v = (torch.randn(B, H, N, d) for _ in range(3))
    mask = torch.ones(N, N, dtype=torch.bool).tril()  # (N, N), broadcast over B and heads
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **TOL)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), **TOL)
    assert torch.all(weights[..., ~mask] == 0)
    assert torch.equal(weights[..., 0, 0], torch.ones(B, H))  # the first query sees only itself


def test_sdpa_with_random_full_mask_per_batch_and_head():
    torch.manual_seed(0)
    B, H, N, d = 2, 2, 7, 4
    q, k, v = (torch.randn(B, H, N, d) for _ in range(3))
    mask = torch.rand(B, H, N, N) > 0.5
    mask[..., 0] = True  # every query sees at least one key
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **TOL)
    assert torch.all(weights[~mask] == 0)


def test_sdpa_rejects_a_non_boolean_mask():
    q = torch.randn(1, 4, 8)
    additive = torch.zeros(4, 4)
    with pytest.raises(ValueError, match=r"boolean mask.*got torch.float32.*mask == 0"):
        scaled_dot_product_attention(q, q, q, additive)


@pytest.mark.parametrize("mask_shape", [(5, 4), (4, 3), (3, 4, 4), (2, 1, 4, 4)])
def test_sdpa_rejects_a_mask_that_does_not_broadcast(mask_shape):
    q = torch.randn(2, 4, 8)  # scores (2, 4, 4)
    mask = torch.ones(mask_shape, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"does not broadcast.*\(2, 4, 4\)"):
        scaled_dot_product_attention(q, q, q, mask)


def test_sdpa_rejects_a_mask_that_hides_a_whole_row():
    q = torch.randn(1, 4, 8)
    mask = torch.ones(4, 4, dtype=torch.bool)
    mask[2] = False
    with pytest.raises(ValueError, match=r"hides every key"):
        scaled_dot_product_attention(q, q, q, mask)


def test_sdpa_rejects_q_k_width_mismatch():
    q, k = torch.randn(1, 4, 8), torch.randn(1, 4, 6)
    with pytest.raises(ValueError, match=r"same width d, got 8 and 6"):
        scaled_dot_product_attention(q, k, k)


def test_sdpa_rejects_k_v_length_mismatch():
    q, v = torch.randn(1, 4, 8), torch.randn(1, 5, 8)
    with pytest.raises(ValueError, match=r"got 4 and 5 rows"):
        scaled_dot_product_attention(q, q, v)


# ---- MultiHeadSelfAttention vs nn.MultiheadAttention ------------------------------------


@pytest.mark.parametrize("B, N, D, heads", [(2, 5, 16, 4), (1, 9, 12, 3), (3, 4, 8, 1), (2, 7, 24, 8)])
def test_mhsa_matches_torch_multihead_attention(B, N, D, heads):
    torch.manual_seed(0)
    ours = randomize_(MultiHeadSelfAttention(D, heads)).eval()
    mha = torch_mha_from(ours)
    x = torch.randn(B, N, D)
    out, weights = ours(x, return_attention=True)
    assert out.shape == (B, N, D) and weights.shape == (B, heads, N, N)
    ref_out, ref_mean = mha(x, x, x, need_weights=True, average_attn_weights=True)
    _, ref_per_head = mha(x, x, x, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, **TOL)
    torch.testing.assert_close(weights.mean(1), ref_mean, **TOL)
    torch.testing.assert_close(weights, ref_per_head, **TOL)
    torch.testing.assert_close(ours(x), out)  # without return_attention: just the tokens


def test_mhsa_with_key_padding_mask_matches_torch():
    torch.manual_seed(0)
    B, N, D, heads = 3, 6, 16, 4
    ours = randomize_(MultiHeadSelfAttention(D, heads)).eval()
    mha = torch_mha_from(ours)
    x = torch.randn(B, N, D)
    padding = torch.arange(N)[None, :] >= torch.tensor([6, 3, 1])[:, None]  # torch: True = ignore
    out, weights = ours(x, mask=~padding[:, None, None, :], return_attention=True)
    ref_out, ref_weights = mha(x, x, x, key_padding_mask=padding, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, **TOL)
    torch.testing.assert_close(weights, ref_weights, **TOL)


def test_mhsa_without_qkv_bias():
    torch.manual_seed(0)
    ours = randomize_(MultiHeadSelfAttention(16, 4, qkv_bias=False)).eval()
    assert ours.qkv.bias is None
    assert ours.proj.bias is not None
    assert set(dict(ours.named_parameters())) == {"qkv.weight", "proj.weight", "proj.bias"}
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(ours(x), torch_mha_from(ours)(x, x, x)[0], **TOL)


def test_mhsa_layers_have_the_reference_shapes():
    ours = MultiHeadSelfAttention(48, 6)
    assert ours.head_dim == 8
    assert ours.qkv.weight.shape == (144, 48) and ours.qkv.bias.shape == (144,)
    assert ours.proj.weight.shape == (48, 48)


@pytest.mark.parametrize("dim, heads", [(10, 3), (64, 5), (8, 16)])
def test_mhsa_rejects_dim_not_divisible_by_heads(dim, heads):
    with pytest.raises(ValueError, match=rf"embed_dim {dim} is not divisible by num_heads {heads}"):
        MultiHeadSelfAttention(dim, heads)


@pytest.mark.parametrize("shape", [(2, 5, 12), (5, 16), (1, 2, 5, 16)])
def test_mhsa_rejects_tokens_of_the_wrong_shape(shape):
    ours = MultiHeadSelfAttention(16, 4)
    with pytest.raises(ValueError, match=r"expected tokens shaped \(B, N, D=16\)"):
        ours(torch.zeros(shape))


def test_mhsa_attention_dropout_only_in_training():
    torch.manual_seed(0)
    ours = MultiHeadSelfAttention(16, 4, attn_drop=0.5)
    x = torch.randn(2, 5, 16)
    ours.eval()
    torch.testing.assert_close(ours(x), ours(x), rtol=0, atol=0)
    ours.train()
    assert not torch.allclose(ours(x), ours(x))


# ---- split_heads / merge_heads -----------------------------------------------------------


def test_split_heads_matches_torch_multihead_layout():
    # nn.MultiheadAttention splits its projections as view(N, B * heads, head_dim): head h owns
    # the columns [h * head_dim, (h + 1) * head_dim) of every token
    torch.manual_seed(0)
    x = torch.randn(2, 5, 12)
    heads = split_heads(x, 3)  # (2, 3, 5, 4)
    assert heads.shape == (2, 3, 5, 4)
    for h in range(3):
        assert torch.equal(heads[:, h], x[..., 4 * h : 4 * (h + 1)])
    assert torch.equal(merge_heads(heads), x)


def test_split_heads_rejects_a_width_not_divisible_by_the_heads():
    with pytest.raises(ValueError, match="width 10 is not divisible by num_heads 3"):
        split_heads(torch.randn(1, 2, 10), 3)


# ---- the two implementations: explicit weights, or torch's fused kernel ------------------


@pytest.fixture
def calls(monkeypatch):
    """Count which attention runs: the course's explicit one or torch's fused kernel."""
    import utils.attention

    counts = {"explicit": 0, "fused": 0, "dropout_p": []}
    explicit, fused = utils.attention.scaled_dot_product_attention, F.scaled_dot_product_attention

    def count_explicit(*args, **kwargs):
        counts["explicit"] += 1
        return explicit(*args, **kwargs)

    def count_fused(*args, **kwargs):
        counts["fused"] += 1
        counts["dropout_p"].append(kwargs.get("dropout_p", 0.0))
        return fused(*args, **kwargs)

    monkeypatch.setattr(utils.attention, "scaled_dot_product_attention", count_explicit)
    monkeypatch.setattr(F, "scaled_dot_product_attention", count_fused)
    return counts


def ran(calls) -> str:
    """'explicit' or 'fused', whichever ran exactly once since the last reset."""
    which = [name for name in ("explicit", "fused") if calls[name]]
    assert len(which) == 1 and calls[which[0]] == 1, calls
    calls["explicit"] = calls["fused"] = 0
    return which[0]


def test_auto_implementation_fused_when_training_without_weights(calls):
    attn = MultiHeadSelfAttention(16, 4)
    x = torch.randn(2, 5, 16)
    assert attn.implementation == "auto"
    attn(x)  # autograd records it: training
    assert ran(calls) == "fused"
    attn.eval()(x)  # eval mode, but autograd still records it
    assert ran(calls) == "fused"
    attn.train()(x, mask=torch.ones(5, 5, dtype=torch.bool))
    assert ran(calls) == "fused"


def test_auto_implementation_explicit_only_when_weights_are_requested(calls):
    attn = MultiHeadSelfAttention(16, 4)
    x = torch.randn(2, 5, 16)
    attn(x, return_attention=True)
    assert ran(calls) == "explicit"
    with torch.no_grad():  # inference takes the fused kernel too
        attn(x)
    assert ran(calls) == "fused"
    with torch.inference_mode():
        attn(x)
    assert ran(calls) == "fused"
    with torch.no_grad():
        attn(x, return_attention=True)  # the weights are built only when asked for
    assert ran(calls) == "explicit"
    frozen = MultiHeadSelfAttention(16, 4).requires_grad_(False)
    frozen(x)
    assert ran(calls) == "fused"


def test_inference_and_return_attention_agree_to_float32_rounding():
    """The fused inference path and the explicit one (return_attention=True) compute the same
    function; they add in different orders, so they agree to float32 rounding, not bit for bit."""
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(64, 4).eval()
    x = torch.randn(8, 65, 64)
    with torch.no_grad():
        fused = attn(x)
        explicit, _ = attn(x, return_attention=True)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)


def test_forced_implementations(calls):
    attn = MultiHeadSelfAttention(16, 4)
    x = torch.randn(2, 5, 16)
    attn.implementation = "explicit"
    attn(x)
    assert ran(calls) == "explicit"
    attn.implementation = "fused"
    with torch.no_grad():
        attn(x)
    assert ran(calls) == "fused"
    attn(x, return_attention=True)  # the weights win over the implementation
    assert ran(calls) == "explicit"
    attn.implementation = "flash"
    with pytest.raises(ValueError, match=r"implementation must be one of \('auto', 'explicit', 'fused'\), got 'flash'"):
        attn(x)


def test_return_attention_gives_exactly_the_explicit_softmax_weights_in_training():
    torch.manual_seed(0)
    attn = randomize_(MultiHeadSelfAttention(16, 4)).train()
    x = torch.randn(2, 6, 16, requires_grad=True)
    out, weights = attn(x, return_attention=True)
    q, k, v = attn.qkv(x).reshape(2, 6, 3, 4, 4).permute(2, 0, 3, 1, 4)
    expected_out, expected_weights = scaled_dot_product_attention(q, k, v)
    assert torch.equal(weights, expected_weights)  # bit for bit
    torch.testing.assert_close(weights, reference_weights(q, k), **TOL)
    assert torch.equal(out, attn.proj(merge_heads(expected_out)))


MASKS = {
    "no mask": None,
    "key padding": (torch.arange(7)[None, :] < torch.tensor([7, 4, 1])[:, None])[:, None, None, :],
    "causal": torch.ones(7, 7, dtype=torch.bool).tril(),
    "per head": torch.cat(  # random, with the first key always allowed
        [
            torch.ones(3, 4, 7, 1, dtype=torch.bool),
            torch.rand(3, 4, 7, 6, generator=torch.Generator().manual_seed(0)) > 0.5,
        ],
        dim=-1,
    ),
}


@pytest.mark.parametrize("mask_name", MASKS)
def test_fused_and_explicit_implementations_agree_in_outputs_and_gradients(mask_name):
    torch.manual_seed(0)
    mask = MASKS[mask_name]
    explicit = randomize_(MultiHeadSelfAttention(16, 4)).train()  # dropout 0: train mode is exact
    explicit.implementation = "explicit"
    fused = MultiHeadSelfAttention(16, 4).train()
    fused.load_state_dict(explicit.state_dict())
    fused.implementation = "fused"
    x = torch.randn(3, 7, 16)
    grad_out = torch.randn(3, 7, 16)
    results = []
    for module in (explicit, fused):
        x_ = x.clone().requires_grad_()
        out = module(x_, mask)
        out.backward(grad_out)
        grads = {name: p.grad for name, p in module.named_parameters()}
        results.append((out, x_.grad, grads))
    (out_e, dx_e, grads_e), (out_f, dx_f, grads_f) = results
    torch.testing.assert_close(out_f, out_e, **TOL)
    torch.testing.assert_close(dx_f, dx_e, **TOL)
    assert grads_e.keys() == grads_f.keys() == {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"}
    for name in grads_e:
        torch.testing.assert_close(grads_f[name], grads_e[name], **TOL, msg=name)
    if mask is not None:  # and a mask matters in both implementations
        assert not torch.allclose(fused(x), out_f, atol=1e-3)


def test_fused_implementation_applies_attention_dropout_in_training_only(calls):
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(16, 4, attn_drop=0.5)
    attn.implementation = "fused"
    x = torch.randn(2, 9, 16)
    a, b = attn(x), attn(x)
    assert calls["dropout_p"] == [0.5, 0.5]
    assert not torch.allclose(a, b)
    attn.eval()
    assert torch.equal(attn(x), attn(x))
    assert calls["dropout_p"][-2:] == [0.0, 0.0]
    reference = MultiHeadSelfAttention(16, 4).eval()  # no dropout at all
    reference.load_state_dict(attn.state_dict())
    torch.testing.assert_close(attn(x), reference(x, return_attention=True)[0], **TOL)


def test_fused_implementation_dropout_matches_the_explicit_one_on_average():
    # each weight is kept with probability 1 - p and scaled by 1 / (1 - p): the mean output is
    # the output without dropout, in both implementations
    torch.manual_seed(0)
    attn = randomize_(MultiHeadSelfAttention(8, 2, attn_drop=0.3)).train()
    x = torch.randn(1, 6, 8).expand(4000, 6, 8)
    with torch.no_grad():
        expected = attn.eval()(x[:1])
        attn.train()
        for implementation in ("explicit", "fused"):
            attn.implementation = implementation
            mean = attn(x).mean(0, keepdim=True)
            torch.testing.assert_close(mean, expected, atol=0.1, rtol=0, msg=implementation)


def test_fused_implementation_checks_the_mask_like_the_explicit_one():
    attn = MultiHeadSelfAttention(16, 4)
    attn.implementation = "fused"
    x = torch.randn(2, 4, 16)
    with pytest.raises(ValueError, match=r"boolean mask.*got torch.float32"):
        attn(x, torch.zeros(4, 4))
    with pytest.raises(ValueError, match=r"does not broadcast"):
        attn(x, torch.ones(3, 4, 4, dtype=torch.bool))
    hides_a_row = torch.ones(4, 4, dtype=torch.bool)
    hides_a_row[1] = False
    with pytest.raises(ValueError, match=r"hides every key"):
        attn(x, hides_a_row)


# ---- bad arguments: a clear error, never a NaN or a silent broadcast ----------------------


@pytest.mark.parametrize("dropout_p", [-0.1, 1.0, 1.5, float("nan"), "0.1", None])
def test_sdpa_rejects_a_dropout_that_is_no_probability(dropout_p):
    q = torch.randn(1, 4, 8)
    with pytest.raises(ValueError, match=r"dropout_p must be a number, from 0 up to \(not including\) 1, got"):
        scaled_dot_product_attention(q, q, q, dropout_p=dropout_p)


def test_sdpa_rejects_no_keys_and_zero_width():
    q = torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match=r"at least one key .* got q \(2, 4, 8\) and k \(2, 0, 8\)"):
        scaled_dot_product_attention(q, q[:, :0], q[:, :0])  # softmax over nothing: 0/0
    with pytest.raises(ValueError, match=r"width d >= 1"):
        scaled_dot_product_attention(q[..., :0], q[..., :0], q)  # scale 1/sqrt(0)


@pytest.mark.parametrize("k_batch", [1, 3])
def test_sdpa_does_not_broadcast_q_k_v_of_another_batch(k_batch):
    q, k = torch.randn(2, 4, 8), torch.randn(k_batch, 4, 8)
    with pytest.raises(ValueError, match=r"the same leading axes .* got \(2, 4, 8\), \(" + str(k_batch)):
        scaled_dot_product_attention(q, k, k)


def test_sdpa_names_the_dtype_and_type_it_needs():
    q = torch.randn(1, 4, 8)
    with pytest.raises(
        ValueError, match=r"expected q of dtype torch.float32, got torch.int64; convert with `q.float\(\)`"
    ):
        scaled_dot_product_attention(q.long(), q, q)
    with pytest.raises(ValueError, match=r"one dtype, got torch.float32, torch.float64 and torch.float32"):
        scaled_dot_product_attention(q, q.double(), q)
    with pytest.raises(TypeError, match=r"expected k as a torch.Tensor .* got list"):
        scaled_dot_product_attention(q, [[0.0]], q)


def test_sdpa_names_the_mask_it_needs():
    q = torch.randn(1, 4, 8)
    with pytest.raises(ValueError, match=r"boolean mask .* got torch.int64; from a 0/1 mask: `mask.bool\(\)`"):
        scaled_dot_product_attention(q, q, q, torch.ones(4, 4, dtype=torch.long))
    with pytest.raises(TypeError, match=r"boolean mask tensor .* got list"):
        scaled_dot_product_attention(q, q, q, [[True] * 4] * 4)


@pytest.mark.parametrize("num_heads, words", [(0, r"at least 1, got 0"), (-2, r"got -2"), (2.0, r"got 2.0 \(float\)")])
def test_split_heads_and_attention_name_a_bad_head_count(num_heads, words):
    with pytest.raises(ValueError, match=r"num_heads must be a whole number, .*" + words):
        split_heads(torch.randn(1, 2, 8), num_heads)
    with pytest.raises(ValueError, match=r"num_heads must be a whole number, .*" + words):
        MultiHeadSelfAttention(16, num_heads)


def test_split_and_merge_heads_name_the_shape_they_need():
    with pytest.raises(ValueError, match=r"expected x shaped \(B, N, D\), got a 2-D tensor of shape \(4, 8\)"):
        split_heads(torch.randn(4, 8), 2)
    with pytest.raises(ValueError, match=r"expected x shaped \(B, heads, N, head_dim\), got a 3-D tensor"):
        merge_heads(torch.randn(2, 4, 8))


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(dim=0), r"dim must be a whole number, .* got 0"),
        (dict(dim=-16), r"dim must be .* got -16"),
        (dict(qkv_bias="no"), r"qkv_bias must be True or False, got 'no'"),
        (dict(attn_drop=1.5), r"attn_drop must be a number, from 0 up to \(not including\) 1, got 1.5"),
        (dict(proj_drop=-0.1), r"proj_drop must be a number, from 0 up to \(not including\) 1, got -0.1"),
    ],
)
def test_mhsa_rejects_bad_arguments(kwargs, words):
    with pytest.raises(ValueError, match=words):
        MultiHeadSelfAttention(**{**dict(dim=16, num_heads=4), **kwargs})


def test_mhsa_lists_the_head_counts_that_fit_without_counting_to_a_huge_width():
    with pytest.raises(ValueError, match=r"not divisible by num_heads 7.*fit: \[1, 2, 4, 5, 8, 10, 16, 20, 25, 32\]"):
        MultiHeadSelfAttention(10**12, 7)  # the old divisor loop ran 10**12 times


def test_mhsa_names_the_tokens_it_needs():
    attn = MultiHeadSelfAttention(16, 4)
    with pytest.raises(ValueError, match=r"expected tokens of dtype torch.float32 .* got torch.int64"):
        attn(torch.ones(2, 5, 16, dtype=torch.long))
    with pytest.raises(ValueError, match=r"got torch.float64; convert with `tokens.float\(\)`"):
        attn(torch.ones(2, 5, 16, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"with at least one token, got \(2, 0, 16\)"):
        attn(torch.ones(2, 0, 16))
    with pytest.raises(TypeError, match=r"return_attention must be True or False, got 'no'"):
        attn(torch.ones(2, 5, 16), return_attention="no")


def test_mhsa_checks_an_attention_dropout_set_after_construction():
    attn = MultiHeadSelfAttention(16, 4).train()
    attn.attn_drop = 1.5
    for implementation in ("explicit", "fused"):
        attn.implementation = implementation
        with pytest.raises(ValueError, match=r"attn_drop must be a number, from 0 up to \(not including\) 1"):
            attn(torch.randn(2, 5, 16))
