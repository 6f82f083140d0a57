"""Lesson 4's checkers pass the reference, name each typical mistake in words, and turn whatever
else comes back into a failure that says what came."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from checker_cases import assert_each_named_as_itself
from references import randomize_, torch_mha_from
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from utils import MultiHeadSelfAttention, merge_heads, scaled_dot_product_attention, split_heads
from utils.checks.core import CheckFailed
from utils.checks.multi_head import (
    COST_CASES,
    check_fuse_head_weights,
    check_grouped_query_attention,
    check_grouped_query_cost,
    check_merge_heads,
    check_multi_head_attention,
    check_split_heads,
    check_split_kv_heads,
    gqa_layers,
    grouped_query_cost,
    paper_head_matrices,
    paper_multi_head,
    reference_grouped_query_attention,
    reference_multi_head,
    reference_split_kv_heads,
)

# Each checker gets a learner's function that returns the reference's answer passed through one
# of these: what comes back is of the wrong kind, and the failure must say what came.
GARBAGE = [
    (lambda t: None, "^expected a torch.Tensor, got None"),
    (lambda t: 0.5, "^expected a torch.Tensor, got float"),
    (lambda t: "tensor", "^expected a torch.Tensor, got str"),
    (lambda t: t.tolist(), "^expected a torch.Tensor, got list"),
    (lambda t: t.numpy(), "^expected a torch.Tensor, got ndarray"),
    (lambda t: nn.Linear(2, 2), r"^expected a torch.Tensor, got Linear \(a layer\)"),
    (lambda t: t.long(), r"^expected a float32 tensor, got int64 for x"),
    (lambda t: t > 0, r"^expected a float32 tensor, got bool for x"),
    (lambda t: t.half(), r"^expected a float32 tensor, got float16 for x"),
    (lambda t: t.to(torch.complex64), r"^expected a float32 tensor, got complex64 for x"),
    (lambda t: t * float("nan"), r"NaN"),
    (lambda t: t.flatten().index_fill(0, torch.tensor([0]), math.inf).reshape(t.shape), r"infinite"),
    (lambda t: t.to("meta"), r"is a tensor on the meta device .*keeps shapes but no values"),
]


def garbage_from(reference):
    """(learner, words) pairs: the reference's answer turned into each kind of garbage."""
    return [
        pytest.param(lambda *args, turn=turn: turn(reference(*args)), words, id=f"garbage{i}")
        for i, (turn, words) in enumerate(GARBAGE)
    ]


# --- split_heads ---------------------------------------------------------------------------


def shape_of(x, num_heads):
    B, T, D = x.shape
    return B, T, num_heads, D // num_heads


def no_transpose(x, num_heads):
    return x.reshape(*shape_of(x, num_heads))  # (B, T, heads, head_dim)


def straight_to_final_shape(x, num_heads):
    B, T, h, hd = shape_of(x, num_heads)
    return x.reshape(B, h, T, hd)


def width_cut_head_dim_first(x, num_heads):
    B, T, h, hd = shape_of(x, num_heads)
    return x.reshape(B, T, hd, h).transpose(1, 2)


def width_cut_head_dim_first_no_transpose(x, num_heads):
    B, T, h, hd = shape_of(x, num_heads)
    return x.reshape(B, T, hd, h)


def width_cut_head_dim_first_permuted(x, num_heads):
    B, T, h, hd = shape_of(x, num_heads)
    return x.reshape(B, T, hd, h).permute(0, 3, 1, 2)


def transpose_before_reshape(x, num_heads):
    B, T, h, hd = shape_of(x, num_heads)
    return x.transpose(1, 2).reshape(B, h, T, hd)


def last_two_axes_swapped(x, num_heads):
    return no_transpose(x, num_heads).transpose(2, 3)


def tokens_last(x, num_heads):
    return no_transpose(x, num_heads).permute(0, 2, 3, 1)  # (B, heads, head_dim, T)


def head_dim_in_front(x, num_heads):
    return no_transpose(x, num_heads).permute(0, 3, 1, 2)  # (B, head_dim, T, heads)


def heads_in_batch(x, num_heads):
    return split_heads(x, num_heads).flatten(0, 1)


def chunks_not_stacked(x, num_heads):
    return x.chunk(num_heads, dim=-1)


SPLIT_MISTAKES = [  # the typical wrong split_heads, and the words that name each mistake
    (no_transpose, r"expected \(2, 4, 17, 16\), got \(2, 17, 4, 16\) .*did you transpose\?"),
    (straight_to_final_shape, r"reshaped straight to \(B, heads, T, head_dim\) without a transpose"),
    (width_cut_head_dim_first, r"^you cut the width as \(head_dim, heads\); cut it as \(heads, head_dim\), so that"),
    (width_cut_head_dim_first_no_transpose, r"cut the width as \(head_dim, heads\) and did not move the heads"),
    (width_cut_head_dim_first_permuted, "each head must get one contiguous slice .* takes every 4-th feature"),
    (transpose_before_reshape, "you transposed before cutting the width"),
    (last_two_axes_swapped, r"you swapped the last two axes \(transpose\(2, 3\)\)"),
    (tokens_last, r"got \(2, 4, 16, 17\) .*the last two axes are swapped: \(B, heads, head_dim, T\)"),
    (head_dim_in_front, "you moved head_dim in front of the tokens"),
    (heads_in_batch, "folded the heads into the batch"),
    (lambda x, h: x, r"x came back unsplit"),
    (lambda x, h: x[:, None].expand(-1, h, -1, -1), r"each head gets its own head_dim = D // heads slice"),
    (
        chunks_not_stacked,
        r"got tuple of 4 \(Tensor, .*\) for x .*: if these are the heads' slices, .* torch.stack them along dim 1",
    ),
]


@pytest.mark.parametrize("wrong, words", SPLIT_MISTAKES)
def test_check_split_heads_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_split_heads(wrong)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda x, h: split_heads(x, h).reshape(x.shape[0], h, -1), "right numbers, but not in the shape"),
        (lambda x, h: split_heads(x, h).flip(-1), "max difference"),  # x's numbers, in no axis order
        (lambda x, h: split_heads(x, h) * 1.01, "other numbers than the input .*: split_heads only moves"),
        (lambda x, h: split_heads(x, h) / h, "other numbers than the input"),
        (lambda x, h: x.view(3, 7), "your function raised RuntimeError"),
        *garbage_from(split_heads),
    ],
)
def test_check_split_heads_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_split_heads(wrong)


def test_check_split_heads_passes_the_reference(capsys):
    check_split_heads(split_heads)
    check_split_heads(lambda x, h: x.view(x.shape[0], x.shape[1], h, -1).permute(0, 2, 1, 3))
    check_split_heads(lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1))
    check_split_heads(lambda x, h: split_heads(x, h).requires_grad_())
    check_split_heads(lambda x, h: split_heads(x, h).double())  # the same numbers in float64
    assert capsys.readouterr().out.count("✓ split_heads matches the reference on 4 inputs: exact") == 5


# --- merge_heads ---------------------------------------------------------------------------


def view_after_transpose(x):
    B, h, T, hd = x.shape
    return x.transpose(1, 2).view(B, T, h * hd)


def merged_shape(x):
    B, h, T, hd = x.shape
    return B, T, h * hd


MERGE_MISTAKES = [  # the typical wrong merge_heads, and the words that name each mistake
    (lambda x: x.flatten(2), "forgot to transpose back"),
    (lambda x: x.reshape(merged_shape(x)), r"reshaped to \(B, T, D\) without transposing back"),
    (lambda x: x.permute(0, 2, 3, 1).flatten(2), "interleaved"),
    (lambda x: x.transpose(1, 2), "heads are not merged yet"),
    (view_after_transpose, "use `.reshape`"),
    (lambda x: x.sum(dim=1), "you added the heads up; merging puts them side by side"),
    (lambda x: x.mean(dim=1), "you averaged the heads; merging puts them side by side"),
    (lambda x: x[:, 0], "you kept only head 0"),
    (lambda x: x.transpose(2, 3).reshape(merged_shape(x)), r"swapped the last two axes \(transpose\(2, 3\)\)"),
    (lambda x: torch.cat(x.unbind(1), dim=1), r"the heads' tokens are one after the other, \(B, heads \* T"),
    (lambda x: x.transpose(1, 2).flatten(1), "you flattened the tokens too"),
    (lambda x: x, "x came back unmerged"),
]


@pytest.mark.parametrize("wrong, words", MERGE_MISTAKES)
def test_check_merge_heads_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_merge_heads(wrong)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda x: merge_heads(x).transpose(1, 2), "right numbers, but not in the shape"),
        (lambda x: merge_heads(x).flip(-1), "max difference"),  # x's numbers, in no axis order
        (lambda x: merge_heads(x) + 0.1, "other numbers than the input .*: merge_heads only moves the numbers"),
        (lambda x: x.sum(1).repeat(1, 1, x.shape[1]), "other numbers than the input"),
        *garbage_from(merge_heads),
    ],
)
def test_check_merge_heads_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_merge_heads(wrong)


def test_check_merge_heads_passes_the_reference(capsys):
    check_merge_heads(merge_heads)
    check_merge_heads(lambda x: x.permute(0, 2, 1, 3).flatten(2))
    check_merge_heads(lambda x: torch.cat(x.unbind(1), dim=-1))
    check_merge_heads(lambda x: merge_heads(x).double())  # the same numbers in float64
    assert capsys.readouterr().out.count("✓ merge_heads matches the reference on 4 inputs: exact") == 4


# --- the whole forward ---------------------------------------------------------------------


def written_out(x, qkv, proj, num_heads):
    """A correct solution written independently of the checker's reference."""
    q, k, v = F.linear(x, qkv.weight, qkv.bias).chunk(3, dim=-1)  # each (B, T, D)
    q, k, v = (split_heads(t, num_heads) for t in (q, k, v))  # each (B, heads, T, head_dim)
    out, _ = scaled_dot_product_attention(q, k, v)  # (B, heads, T, head_dim)
    return proj(merge_heads(out))  # (B, T, D)


def by_hand(
    x, qkv, proj, num_heads, scale=None, softmax_dim=-1, kq=False, residual=False, bias=True, heads=None, dropout=0.0
):
    """The forward written by hand, with switches for the mistakes."""
    B, T, D = x.shape
    h = heads or num_heads
    hd = D // h
    t = qkv(x) if bias else x @ qkv.weight.T  # (B, T, 3D)
    q, k, v = t.reshape(B, T, 3, h, hd).permute(2, 0, 3, 1, 4)  # each (B, heads, T, head_dim)
    scores = (k @ q.transpose(-2, -1)) if kq else (q @ k.transpose(-2, -1))  # (B, heads, T, T)
    scores = scores / (math.sqrt(hd) if scale is None else scale(hd))
    weights = scores if softmax_dim is None else scores.softmax(dim=softmax_dim)
    weights = F.dropout(weights, dropout) if dropout else weights  # F.dropout drops even here: training=True
    out = proj((weights @ v).transpose(1, 2).reshape(B, T, D))  # (B, T, D)
    return x + out if residual else out


def wrong(**mistake):
    return lambda x, qkv, proj, h: reference_multi_head(x, qkv, proj, h, **mistake)


def mistake(**switches):
    return lambda x, qkv, proj, h: by_hand(x, qkv, proj, h, **switches)


FORWARD_MISTAKES = [  # the typical wrong forwards, and the words that name each mistake
    (wrong(project=False), "forgot the output projection"),
    (wrong(scale="none"), r"forgot the scale: divide .* sqrt\(head_dim\) = sqrt\(6\)"),
    (wrong(scale="D"), r"scaled the scores by sqrt\(D\) = sqrt\(24\)"),
    (mistake(scale=lambda hd: hd), r"you divided the scores by head_dim = 6; divide by its square root"),
    (mistake(scale=lambda hd: 1 / math.sqrt(hd)), r"you multiplied the scores by sqrt\(head_dim\)"),
    (wrong(order=(1, 0, 2)), r"q and k are swapped: .*wrong order \(yours are its \(k, q, v\) parts\)"),
    (wrong(order=(0, 2, 1)), r"wrong order \(yours are its \(q, v, k\) parts\)"),
    (wrong(order=(2, 1, 0)), r"wrong order \(yours are its \(v, k, q\) parts\)"),
    (wrong(split="no_transpose"), "split the heads wrongly: .* without a transpose"),
    (wrong(split="interleaved"), "split the heads wrongly: .* contiguous slice"),
    (wrong(split="heads_first"), r"split the heads wrongly: .* not \(B, T, heads, 3, head_dim\)"),
    (wrong(softmax_dim=-2), "softmax runs over the wrong axis"),
    (mistake(softmax_dim=1), r"the softmax runs over the heads axis \(dim=1\)"),
    (mistake(softmax_dim=None), "you forgot the softmax"),
    (mistake(kq=True), r"q and k are swapped: .*or you computed the scores as k qᵀ"),
    (wrong(merge="no_transpose"), "merged the heads without transposing back"),
    (mistake(residual=True), "you added x to the output: the residual connection belongs to the encoder block"),
    (mistake(bias=False), "you left out qkv's bias"),
    (mistake(heads=1), r"one head over the whole width .*num_heads = 4 was not used"),
    (
        lambda x, qkv, proj, h: by_hand(x, qkv, proj, h, scale=lambda hd: math.sqrt(h)),
        r"you divided the scores by sqrt\(num_heads\) = sqrt\(4\)",
    ),
    (lambda x, qkv, proj, h: proj(written_out(x, qkv, proj, h)), "you applied proj twice"),
    (lambda x, qkv, proj, h: split_heads(qkv(x)[..., : x.shape[-1]], h), "these are the heads' outputs"),
    (mistake(dropout=0.1), r"your attention gives another result each time on the same x .* is there a dropout"),
    (lambda x, qkv, proj, h: (written_out(x, qkv, proj, h), None), "expected a torch.Tensor, got tuple"),
]


@pytest.mark.parametrize("learner, words", FORWARD_MISTAKES)
def test_check_multi_head_attention_names_the_mistake(learner, words):
    with pytest.raises(CheckFailed, match=words):
        check_multi_head_attention(learner)


@pytest.mark.parametrize(
    "learner, words",
    [
        (wrong(project=False, scale="none"), "go through the steps in order"),
        (
            lambda x, qkv, proj, h: (written_out(x, qkv, proj, h), torch.ones(1)),
            r"^expected a torch.Tensor, got tuple of 2 \(Tensor, Tensor\) for x .*: "
            r"return one tensor, the output \(B, T, D\) \(the weights stay inside\)$",
        ),
        (
            lambda x, qkv, proj, h: proj,
            r"^expected a torch.Tensor, got Linear \(a layer\) for x .*: call it on a tensor",
        ),
        *garbage_from(written_out),
    ],
)
def test_check_multi_head_attention_says_what_came(learner, words):
    with pytest.raises(CheckFailed, match=words):
        check_multi_head_attention(learner)


def test_check_multi_head_attention_passes_a_correct_forward(capsys):
    check_multi_head_attention(written_out)
    check_multi_head_attention(reference_multi_head)
    check_multi_head_attention(by_hand)
    check_multi_head_attention(lambda x, qkv, proj, h: written_out(x.double(), qkv.double(), proj.double(), h))
    assert capsys.readouterr().out.count("✓ multi_head_attention") == 4


def test_the_mistake_switches_default_to_torch_multihead_attention():
    torch.manual_seed(0)
    ours = randomize_(MultiHeadSelfAttention(24, 4))
    x = torch.randn(2, 7, 24)
    expected, _ = torch_mha_from(ours)(x, x, x, need_weights=False)
    torch.testing.assert_close(reference_multi_head(x, ours.qkv, ours.proj, 4), expected, atol=1e-5, rtol=1e-5)
    # and each switch really changes the output
    for mistake in [dict(scale="none"), dict(split="interleaved"), dict(order=(1, 0, 2)), dict(merge="no_transpose")]:
        assert not torch.allclose(reference_multi_head(x, ours.qkv, ours.proj, 4, **mistake), expected, atol=1e-3)


# --- the paper's per-head matrices, fused ---------------------------------------------------


def fuse(W_Q, W_K, W_V):
    """A correct solution: every head's (head_dim, D) block, queries first, then keys, then values."""
    return torch.cat([W.T for W in [*W_Q, *W_K, *W_V]])  # (3D, D)


def side_by_side_then_transposed(W_Q, W_K, W_V):
    """Another correct solution: the paper's matrices side by side, (D, 3D), then transposed."""
    return torch.cat([*W_Q, *W_K, *W_V], dim=1).T


def stacked_then_flattened(W_Q, W_K, W_V):
    """A third: (3, heads, D, head_dim) stacked, each block transposed, then flattened to (3D, D)."""
    stacked = torch.stack([torch.stack(Ws) for Ws in (W_Q, W_K, W_V)])  # (3, heads, D, head_dim)
    return stacked.transpose(-2, -1).flatten(0, 2)  # (3 * heads * head_dim, D)


def transposed_in_place(W_Q, W_K, W_V):
    """Correct too, though it changes the matrices it was given (the checker passes copies)."""
    return torch.cat([W.t_() for W in [*W_Q, *W_K, *W_V]])


def by_head(W_Q, W_K, W_V):
    return torch.cat([W.T for i in range(len(W_Q)) for W in (W_Q[i], W_K[i], W_V[i])])


def rows_interleaved(W_Q, W_K, W_V):
    return torch.cat([torch.stack([W.T for W in Ws], dim=1).flatten(0, 1) for Ws in (W_Q, W_K, W_V)])


FUSE_MISTAKES = [  # (name, the typical wrong fuse_head_weights, the words that name it)
    ("by head", by_head, r"^you grouped the rows by head, \[q1; k1; v1; q2; k2; v2; ...\]: .*\(for 3 heads"),
    ("rows interleaved", rows_interleaved, r"^the heads' rows are interleaved \(row 0 of every head, then row 1"),
    ("q, k swapped", lambda Q, K, V: fuse(K, Q, V), r"^q and k are swapped: your rows are \[keys; queries; values\]"),
    ("v, k, q", lambda Q, K, V: fuse(V, K, Q), r"^q, k and v are in the wrong order: your rows are \[values; keys; q"),
    ("q, v, k", lambda Q, K, V: fuse(Q, V, K), r"^q, k and v are in the wrong order: your rows are \[queries; values"),
    (
        "not transposed",
        lambda Q, K, V: torch.cat([*Q, *K, *V]),
        r"^you kept the paper's \(D, head_dim\) matrices as they are: nn.Linear stores its weight as \(out, in\)",
    ),
    (
        "(D, 3D)",
        lambda Q, K, V: torch.cat([*Q, *K, *V], dim=1),
        r"^your weight is \(D, 3D\), the paper's \(in, out\) layout: .*transpose it",
    ),
    (
        "stacked",
        lambda Q, K, V: torch.stack([torch.stack([W.T for W in Ws]) for Ws in (Q, K, V)]),
        r"got \(3, 3, 4, 12\) .*: you stacked the blocks into \(3, heads, head_dim, D\); nn.Linear's weight is 2-D",
    ),
    (
        "stacked flat",
        lambda Q, K, V: torch.stack([W.T for W in [*Q, *K, *V]]),
        r"got \(9, 4, 12\) .*you stacked the blocks into \(3 \* heads, head_dim, D\)",
    ),
    (
        "stacked, not transposed",
        lambda Q, K, V: torch.stack([*Q, *K, *V]),
        r"got \(9, 12, 4\) .*you stacked the paper's \(D, head_dim\) matrices as they are; .*transpose each",
    ),
    (
        "side by side",
        lambda Q, K, V: torch.cat([W.T for W in [*Q, *K, *V]], dim=1),
        r"got \(4, 108\) .*you put the transposed blocks side by side \(dim=1\)",
    ),
    ("queries only", lambda Q, K, V: torch.cat([W.T for W in Q]), r"got \(12, 12\) .*that is one projection, \(D, D\)"),
    (
        "heads reversed",
        lambda Q, K, V: fuse(Q[::-1], K, V),
        r"^rows 0:4 of your weight hold W_Q\[2\]\.T, but MultiHeadSelfAttention reads rows 0:4 as head 0's "
        r"query projection, W_Q\[0\]\.T \(for 3 heads of head_dim 4, D = 12\)$",
    ),
    (
        "keys rotated",
        lambda Q, K, V: fuse(Q, K[1:] + K[:1], V),
        r"^rows 12:16 of your weight hold W_K\[1\]\.T, but MultiHeadSelfAttention reads rows 12:16 as head 0's key",
    ),
    (
        "noise",
        lambda Q, K, V: fuse(Q, K, V) + 0.01,
        r"^rows 0:4 of your weight match none of the given matrices \(transposed or not\)",
    ),
]


@pytest.mark.parametrize("name, wrong, words", FUSE_MISTAKES, ids=[case[0] for case in FUSE_MISTAKES])
def test_check_fuse_head_weights_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_fuse_head_weights(wrong)


def test_check_fuse_head_weights_names_the_mistakes_of_one_head_too():
    """With one head (the last case), grouping by head is right; leaving the paper's square matrix
    untransposed is a wrong value, not a wrong shape, and is still named."""

    def untransposed_when_one_head(W_Q, W_K, W_V):
        right = fuse(W_Q, W_K, W_V)
        return torch.cat([*W_Q, *W_K, *W_V]) if len(W_Q) == 1 else right

    with pytest.raises(
        CheckFailed, match=r"^you kept the paper's \(D, head_dim\) matrices .*\(for 1 head of head_dim 8, D = 8\)"
    ):
        check_fuse_head_weights(untransposed_when_one_head)
    check_fuse_head_weights(lambda W_Q, W_K, W_V: by_head(W_Q, W_K, W_V) if len(W_Q) == 1 else fuse(W_Q, W_K, W_V))


@pytest.mark.parametrize(
    "learner, words",
    [
        (lambda Q, K, V: None, "^expected a torch.Tensor, got None"),
        (lambda Q, K, V: 0.5, "^expected a torch.Tensor, got float"),
        (
            lambda Q, K, V: Q,
            r"^expected a torch.Tensor, got list of 3 \(Tensor, Tensor, Tensor\) for 3 heads .*: "
            r"return one tensor, qkv.weight of shape \(3D, D\)",
        ),
        (lambda Q, K, V: fuse(Q, K, V).tolist(), "^expected a torch.Tensor, got list of 36"),
        (lambda Q, K, V: fuse(Q, K, V).numpy(), "^expected a torch.Tensor, got ndarray"),
        (
            lambda Q, K, V: nn.Linear(12, 36),
            r"^expected a torch.Tensor, got Linear \(a layer\) .*: return the weight itself",
        ),
        (lambda Q, K, V: fuse(Q, K, V).long(), r"^expected a float32 tensor, got int64 for 3 heads"),
        (lambda Q, K, V: fuse(Q, K, V) > 0, r"^expected a float32 tensor, got bool for 3 heads"),
        (lambda Q, K, V: fuse(Q, K, V).half(), r"^expected a float32 tensor, got float16"),
        (lambda Q, K, V: fuse(Q, K, V).to("meta"), r"is a tensor on the meta device .*keeps shapes but no values"),
        (lambda Q, K, V: fuse(Q, K, V) * float("nan"), r"^the layer's output: 120 of 120 values are NaN .*holds NaN"),
        (lambda Q, K, V: fuse(Q, K, V).reshape(12, 36), r"got \(12, 36\) .*the paper's \(in, out\) layout"),
        (
            lambda Q, K, V: fuse(Q, K, V).reshape(6, 72),
            r"got \(6, 72\) .*the right numbers, but not in the shape \(3D, D\)",
        ),
        (lambda Q, K, V: torch.zeros(5, 5), r"got \(5, 5\) .*MultiHeadSelfAttention\(12, 3\).qkv.weight is \(3D, D\)"),
        (lambda Q, K, V: Q.T, r"raised AttributeError .*W_Q, W_K and W_V are Python lists of \(D, head_dim\) tensors"),
    ],
)
def test_check_fuse_head_weights_says_what_came(learner, words):
    with pytest.raises(CheckFailed, match=words):
        check_fuse_head_weights(learner)


def test_a_blank_fuse_head_weights_is_left_to_the_learner():
    def blank(W_Q, W_K, W_V):
        raise NotImplementedError("Hint: ...")

    with pytest.raises(NotImplementedError, match="Hint"):
        check_fuse_head_weights(blank)


def test_check_fuse_head_weights_passes_correct_weights(capsys):
    for solution in [fuse, side_by_side_then_transposed, stacked_then_flattened, transposed_in_place]:
        check_fuse_head_weights(solution)
    check_fuse_head_weights(lambda *heads: fuse(*heads).double())  # copying into the layer casts it
    check_fuse_head_weights(lambda *heads: nn.Parameter(fuse(*heads)))
    assert capsys.readouterr().out.count("✓ fuse_head_weights: MultiHeadSelfAttention holding your qkv.weight") == 6


def test_the_paper_formula_equals_torch_multihead_attention_with_the_fused_weights():
    """The checker's reference, the formula one head at a time, against torch's own module."""
    generator = torch.Generator().manual_seed(0)
    D, h = 12, 3
    W_Q, W_K, W_V = paper_head_matrices(D, h, generator)
    W_O, b_O = torch.randn(D, D, generator=generator), torch.randn(D, generator=generator)
    x = torch.randn(2, 5, D, generator=generator)
    mha = nn.MultiheadAttention(D, h, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(fuse(W_Q, W_K, W_V))
        mha.in_proj_bias.zero_()
        mha.out_proj.weight.copy_(W_O.T)
        mha.out_proj.bias.copy_(b_O)
        expected, _ = mha(x, x, x, need_weights=False)
    torch.testing.assert_close(paper_multi_head(x, W_Q, W_K, W_V, W_O, b_O), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "mistakes, checker",
    [
        (SPLIT_MISTAKES, check_split_heads),
        (MERGE_MISTAKES, check_merge_heads),
        (FORWARD_MISTAKES, check_multi_head_attention),
        (FUSE_MISTAKES, check_fuse_head_weights),
    ],
    ids=["split_heads", "merge_heads", "multi_head_attention", "fuse_head_weights"],
)
def test_no_mistake_is_named_as_another(mistakes, checker):
    assert_each_named_as_itself(checker, mistakes)


def test_a_forward_that_changes_its_layers_is_not_called_random():
    """Each call gets its own copies of qkv and proj: what a learner's forward does to them does not
    make a second call differ, so it is not taken for a dropout."""

    def doubles_qkv(x, qkv, proj, num_heads):
        qkv.weight.data.mul_(2)
        return written_out(x, qkv, proj, num_heads)

    with pytest.raises(CheckFailed, match="^values differ from the reference"):
        check_multi_head_attention(doubles_qkv)


# --- grouped-query attention: split_kv_heads ------------------------------------------------


def kv_split(x, num_kv_heads, num_heads):
    """A correct solution written independently of the checker's reference."""
    B, T, D_kv = x.shape
    heads = x.reshape(B, T, num_kv_heads, D_kv // num_kv_heads).transpose(1, 2)  # (B, kv, T, hd)
    return heads.repeat_interleave(num_heads // num_kv_heads, dim=1)


def kv_by_index(x, num_kv_heads, num_heads):
    """Another: gather the key/value head h // group for each query head h."""
    group = num_heads // num_kv_heads
    return split_heads(x, num_kv_heads)[:, torch.arange(num_heads) // group]


def kv_expanded(x, num_kv_heads, num_heads):
    """A third: expand a group axis, then fold it into the heads (what Llama's repeat_kv does)."""
    B, T, D_kv = x.shape
    heads = split_heads(x, num_kv_heads)  # (B, kv, T, hd)
    group = num_heads // num_kv_heads
    return heads[:, :, None].expand(B, num_kv_heads, group, T, D_kv // num_kv_heads).reshape(B, num_heads, T, -1)


def kv_mistake(split="right", share="interleave", count=None, axis=1):
    """split_kv_heads with switches for the typical mistakes."""

    def wrong(x, num_kv_heads, num_heads):
        B, T, D_kv = x.shape
        kv, hd = num_kv_heads, D_kv // num_kv_heads
        group = num_heads // kv if count is None else count(num_kv_heads, num_heads)
        if split == "right":
            heads = x.reshape(B, T, kv, hd).transpose(1, 2)
        elif split == "swapped":  # heads and head_dim swapped in the reshape
            heads = x.reshape(B, T, hd, kv).permute(0, 3, 1, 2)
        elif split == "straight":
            heads = x.reshape(B, kv, T, hd)
        elif split == "num_heads":  # head_dim taken as D_kv // num_heads
            return x.reshape(B, T, num_heads, D_kv // num_heads).transpose(1, 2)
        elif split == "no_transpose":
            return x.reshape(B, T, kv, hd).repeat_interleave(group, dim=2)
        if share == "repeat":
            return heads.repeat(1, group, 1, 1)
        if share == "none":
            return heads
        if share == "features":
            return x.repeat_interleave(group, dim=-1).reshape(B, T, num_heads, hd).transpose(1, 2)
        return heads.repeat_interleave(group, dim=axis)

    return wrong


KV_SPLIT_MISTAKES = [  # (name, the typical wrong split_kv_heads, the words that name it)
    (
        "repeat, not repeat_interleave",
        kv_mistake(share="repeat"),
        r"^query heads 0 and 1 should share key/value head 0, but your head 1 got key/value head 1: "
        r"use repeat_interleave .*not repeat \(which cycles\) \(for x of shape \(2, 7, 15\), 3 key/value heads",
    ),
    (
        "heads and head_dim swapped",
        kv_mistake(split="swapped"),
        r"^you cut the width as \(head_dim, num_kv_heads\), so each key/value head takes every 3-th feature",
    ),
    ("no transpose", kv_mistake(split="straight"), r"reshaped straight to \(B, num_kv_heads, T, head_dim\)"),
    ("no repeat", kv_mistake(share="none"), r"got \(2, 3, 7, 5\) .*these are the 3 key/value heads, not yet repeated"),
    (
        "repeated num_kv_heads times",
        kv_mistake(count=lambda kv, h: kv),
        r"got \(2, 9, 7, 5\) .*repeated each key/value head num_kv_heads = 3 times; a group holds .* = 4",
    ),
    (
        "repeated num_heads times",
        kv_mistake(count=lambda kv, h: h),
        r"got \(2, 36, 7, 5\) .*repeated each key/value head num_heads = 12 times",
    ),
    ("along the tokens", kv_mistake(axis=2), r"got \(2, 3, 28, 5\) .*repeated along the tokens axis"),
    (
        "group the wrong way up",
        kv_mistake(count=lambda kv, h: kv // h),
        r"got \(2, 0, 7, 5\) .*repeated each key/value head 0 times",
    ),
    ("along head_dim", kv_mistake(axis=3), r"got \(2, 3, 7, 20\) .*repeated along head_dim"),
    ("features repeated", kv_mistake(share="features"), r"^you repeated the features, not the heads"),
    ("heads axis not moved", kv_mistake(split="no_transpose"), r"got \(2, 7, 12, 5\) .*must come before the tokens"),
    (
        "cut into num_heads",
        kv_mistake(split="num_heads"),
        r"raised RuntimeError .*is invalid for input of size.*head_dim = D_kv // num_kv_heads",
    ),
    (
        "head 0 for all",
        lambda x, kv, h: split_heads(x, kv)[:, :1].expand(-1, h, -1, -1),
        r"^query head 4 got key/value head 0, but it belongs to the group of key/value head 1 \(query heads "
        r"4 to 7\) .*: query head h reads key/value head h // \(num_heads // num_kv_heads\)$",
    ),
]


@pytest.mark.parametrize("name, wrong, words", KV_SPLIT_MISTAKES, ids=[case[0] for case in KV_SPLIT_MISTAKES])
def test_check_split_kv_heads_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_split_kv_heads(wrong)


def test_the_second_case_names_a_split_by_num_heads_that_fits():
    """Where D_kv happens to divide by num_heads, cutting x into num_heads heads runs, and is named by its shape."""

    def cut_by_num_heads_where_it_fits(x, kv, h):
        if x.shape[-1] % h == 0:
            return split_heads(x, h)
        return kv_split(x, kv, h)

    with pytest.raises(CheckFailed, match=r"you cut x into num_heads heads; x holds only the num_kv_heads"):
        check_split_kv_heads(cut_by_num_heads_where_it_fits)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda x, kv, h: kv_split(x, kv, h) * 2, r"holds other numbers than x's heads"),
        (lambda x, kv, h: x.unsqueeze(1), r"expected \(2, 12, 7, 5\), got \(2, 1, 7, 15\)"),
        (
            lambda x, kv, h: tuple(kv_split(x, kv, h).unbind(1)),
            r"^expected a torch.Tensor, got tuple of 12 .*torch.stack the heads along dim 1",
        ),
        *garbage_from(kv_split),
    ],
)
def test_check_split_kv_heads_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_split_kv_heads(wrong)


def test_check_split_kv_heads_passes_the_reference_and_its_variants(capsys):
    for solution in [kv_split, kv_by_index, kv_expanded, reference_split_kv_heads]:
        check_split_kv_heads(solution)
    check_split_kv_heads(lambda x, kv, h: kv_split(x, kv, h).double())
    assert (
        capsys.readouterr().out.count("✓ split_kv_heads matches the reference on 4 inputs (groups of 4, 2, 1, 6)") == 5
    )


def test_the_reference_split_kv_heads_is_what_torch_enable_gqa_shares():
    """torch's own grouped-query attention (enable_gqa) gives query head h the key/value head the reference gives it."""
    generator = torch.Generator().manual_seed(0)
    B, T, h, kv, hd = 2, 5, 6, 2, 4
    q = torch.randn(B, h, T, hd, generator=generator)
    k_flat, v_flat = (torch.randn(B, T, kv * hd, generator=generator) for _ in range(2))
    ours = F.scaled_dot_product_attention(
        q, reference_split_kv_heads(k_flat, kv, h), reference_split_kv_heads(v_flat, kv, h)
    )
    theirs = F.scaled_dot_product_attention(q, split_heads(k_flat, kv), split_heads(v_flat, kv), enable_gqa=True)
    torch.testing.assert_close(ours, theirs)


# --- grouped-query attention: the whole layer ---------------------------------------------


def gqa_with_torch(x, q_proj, kv_proj, proj, num_heads, num_kv_heads):
    """A correct solution through torch's own grouped-query attention."""
    B, T, D = x.shape
    q = split_heads(q_proj(x), num_heads)  # (B, heads, T, head_dim)
    k, v = (split_heads(t, num_kv_heads) for t in kv_proj(x).chunk(2, dim=-1))  # (B, kv, T, head_dim)
    return proj(merge_heads(F.scaled_dot_product_attention(q, k, v, enable_gqa=True)))


def gqa(**mistake):
    return lambda x, q_proj, kv_proj, proj, h, kv: reference_grouped_query_attention(
        x, q_proj, kv_proj, proj, h, kv, **mistake
    )


def gqa_without_sharing(x, q_proj, kv_proj, proj, num_heads, num_kv_heads):
    """Forgets to repeat the key/value heads: broadcasting makes it right for multi-query, an error elsewhere."""
    B, T, D = x.shape
    q = split_heads(q_proj(x), num_heads)
    k, v = (split_heads(t, num_kv_heads) for t in kv_proj(x).chunk(2, dim=-1))
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D // num_heads)).softmax(-1)
    return proj(merge_heads(weights @ v))


GQA_MISTAKES = [  # (name, the typical wrong grouped_query_attention, the words that name it)
    (
        "repeat, not repeat_interleave",
        gqa(share="repeat"),
        r"^your query heads read the wrong key/value heads: .*with repeat head 1 reads key/value head 1; "
        r"use repeat_interleave .* \(for x of shape \(2, 7, 60\), 12 heads and 3 key/value heads\)",
    ),
    ("key/value head 0 for all", gqa(share="first"), r"^every query head used key/value head 0"),
    ("kv read head by head", gqa(kv_split="head_major"), r"you read kv_proj\(x\) head by head"),
    ("k and v swapped", gqa(kv_order=(1, 0)), r"^k and v are swapped: kv_proj\(x\) is \[k \| v\]"),
    ("merge without transpose", gqa(merge="no_transpose"), r"merged the heads without transposing back"),
    ("q split without transpose", gqa(q_split="no_transpose"), r"you split q without a transpose"),
    ("q heads and head_dim swapped", gqa(q_split="interleaved"), r"you cut q's width as \(head_dim, heads\)"),
    ("no proj", gqa(project=False), "you forgot the output projection"),
    ("no scale", gqa(scale="none"), r"you forgot the scale: divide the scores by sqrt\(head_dim\) = sqrt\(5\)"),
    ("scaled by sqrt(D)", gqa(scale="D"), r"scaled the scores by sqrt\(D\) = sqrt\(60\)"),
    ("softmax over the queries", gqa(softmax_dim=-2), "the softmax runs over the wrong axis"),
    (
        "no sharing",
        gqa_without_sharing,
        r"raised RuntimeError .*\(q has num_heads heads but kv_proj gives only num_kv_heads .*repeat each",
    ),
]


@pytest.mark.parametrize("name, wrong, words", GQA_MISTAKES, ids=[case[0] for case in GQA_MISTAKES])
def test_check_grouped_query_attention_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_grouped_query_attention(wrong)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (gqa(project=False, scale="none"), "go through the steps in order"),
        (
            lambda x, q_proj, kv_proj, proj, h, kv: split_heads(q_proj(x), h),
            r"got \(2, 12, 7, 5\) .*these are the heads' outputs",
        ),
        (
            lambda x, q_proj, kv_proj, proj, h, kv: (gqa_with_torch(x, q_proj, kv_proj, proj, h, kv), x),
            r"^expected a torch.Tensor, got tuple of 2 .*the weights stay inside",
        ),
        (lambda x, q_proj, kv_proj, proj, h, kv: proj, r"got Linear \(a layer\) .*call it on a tensor"),
        *garbage_from(gqa_with_torch),
    ],
)
def test_check_grouped_query_attention_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_grouped_query_attention(wrong)


def test_check_grouped_query_attention_passes_correct_layers(capsys):
    check_grouped_query_attention(gqa_with_torch)
    check_grouped_query_attention(gqa())
    check_grouped_query_attention(
        lambda x, *layers: gqa_with_torch(
            x.double(), *(copy.deepcopy(layer).double() for layer in layers[:3]), *layers[3:]
        )
    )
    assert capsys.readouterr().out.count("it equals utils.MultiHeadSelfAttention") == 3


def test_the_grouped_query_reference_equals_torch_and_multi_head_attention():
    """The checker's reference against torch's enable_gqa, and with as many key/value heads as query
    heads against torch's nn.MultiheadAttention holding the same weights."""
    generator = torch.Generator().manual_seed(0)
    for D, h, kv in [(24, 6, 2), (24, 6, 1), (24, 6, 6)]:
        x = torch.randn(2, 5, D, generator=generator)
        layers = gqa_layers(D, h, kv, generator)
        with torch.no_grad():
            ours = reference_grouped_query_attention(x, *layers, h, kv)
            torch.testing.assert_close(ours, gqa_with_torch(x, *layers, h, kv), atol=1e-5, rtol=1e-5)
            if kv == h:
                q_proj, kv_proj, proj = layers
                mha = nn.MultiheadAttention(D, h, batch_first=True).eval()
                mha.in_proj_weight.copy_(torch.cat([q_proj.weight, kv_proj.weight]))
                mha.in_proj_bias.copy_(torch.cat([q_proj.bias, kv_proj.bias]))
                mha.out_proj.load_state_dict(proj.state_dict())
                torch.testing.assert_close(ours, mha(x, x, x, need_weights=False)[0], atol=1e-5, rtol=1e-5)


# --- grouped-query attention: what it costs -----------------------------------------------


def cost(T, D, h, kv):
    """A correct count written independently: the layers' own parameters, the products by formula."""
    layers = gqa_layers(D, h, kv, torch.Generator().manual_seed(0))
    parameters = sum(p.numel() for layer in layers for p in layer.parameters())
    kv_dim = kv * (D // h)
    return parameters, T * D * (D + 2 * kv_dim + D) + 2 * T * T * D


def cost_mistake(params=lambda T, D, h, kv, p: p, macs=lambda T, D, h, kv, m: m):
    def wrong(T, D, h, kv):
        p, m = cost(T, D, h, kv)
        return params(T, D, h, kv, p), macs(T, D, h, kv, m)

    return wrong


def kv_dim(D, h, kv):
    return kv * (D // h)


COST_MISTAKES = [  # (name, the typical wrong grouped_query_cost, the words that name it)
    (
        "multi-head's parameters",
        cost_mistake(params=lambda T, D, h, kv, p: 4 * D * D + 4 * D),
        r"^the parameters: that is plain multi-head attention's count: .*only num_kv_heads \* head_dim = 32 wide",
    ),
    (
        "multi-head's multiply-adds",
        cost_mistake(macs=lambda T, D, h, kv, m: 4 * T * D * D + 2 * T * T * D),
        r"^the multiply-adds: that is plain multi-head attention's count",
    ),
    (
        "no biases",
        cost_mistake(params=lambda T, D, h, kv, p: p - 2 * D - 2 * kv_dim(D, h, kv)),
        r"^the parameters: you left out the biases: .* = 256 numbers \(for T = 50, D = 96, 6 heads and 2 key",
    ),
    (
        "bias additions counted",
        cost_mistake(macs=lambda T, D, h, kv, m: m + T * (2 * D + 2 * kv_dim(D, h, kv))),
        "^the multiply-adds: you counted the bias additions too",
    ),
    ("FLOPs", cost_mistake(macs=lambda T, D, h, kv, m: 2 * m), r"^the multiply-adds: that is twice the count"),
    (
        "T x T over the key/value heads",
        cost_mistake(macs=lambda T, D, h, kv, m: m - 2 * T * T * D + 2 * T * T * kv_dim(D, h, kv)),
        r"^the multiply-adds: the T x T products run in every query head",
    ),
    (
        "one T x T product",
        cost_mistake(macs=lambda T, D, h, kv, m: m - T * T * D),
        r"^the multiply-adds: you counted only one of the two T x T products",
    ),
    (
        "T x T of one head",
        cost_mistake(macs=lambda T, D, h, kv, m: m - 2 * T * T * D + 2 * T * T * (D // h)),
        r"^the multiply-adds: you counted the T x T products of one head only",
    ),
    (
        "k only, parameters",
        cost_mistake(params=lambda T, D, h, kv, p: p - D * kv_dim(D, h, kv) - kv_dim(D, h, kv)),
        r"^the parameters: you counted kv_proj for k only",
    ),
    (
        "k only, multiply-adds",
        cost_mistake(macs=lambda T, D, h, kv, m: m - T * D * kv_dim(D, h, kv)),
        r"^the multiply-adds: you counted kv_proj for k only",
    ),
    (
        "no proj",
        cost_mistake(params=lambda T, D, h, kv, p: p - D * D - D),
        r"^the parameters: you left out the output projection proj, D² \+ D parameters",
    ),
    (
        "no proj, multiply-adds",
        cost_mistake(macs=lambda T, D, h, kv, m: m - T * D * D),
        r"^the multiply-adds: you left out the output projection proj, T D²",
    ),
    ("swapped", lambda T, D, h, kv: cost(T, D, h, kv)[::-1], r"^the pair is the wrong way round"),
]


@pytest.mark.parametrize("name, wrong, words", COST_MISTAKES, ids=[case[0] for case in COST_MISTAKES])
def test_check_grouped_query_cost_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_grouped_query_cost(wrong)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda T, D, h, kv: cost(T, D, h, kv)[0], r"^expected a pair \(parameters, multiply_adds\), got int"),
        (lambda T, D, h, kv: None, r"^expected a pair \(parameters, multiply_adds\), got None"),
        (lambda T, D, h, kv: (1.5, 2), r"^the parameters must be a whole number, got 1.5"),
        (lambda T, D, h, kv: ("1", 2), r"^the parameters must be a whole number, got str"),
        (
            lambda T, D, h, kv: (cost(T, D, h, kv)[0] + 1, cost(T, D, h, kv)[1]),
            r"^the parameters: you gave 24,833, the count is 24,832 .*add up q_proj, kv_proj and proj",
        ),
    ],
)
def test_check_grouped_query_cost_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_grouped_query_cost(wrong)


def test_check_grouped_query_cost_passes_right_counts_of_any_number_kind(capsys):
    check_grouped_query_cost(cost)
    check_grouped_query_cost(grouped_query_cost)
    check_grouped_query_cost(lambda *args: [float(n) for n in cost(*args)])
    check_grouped_query_cost(lambda *args: tuple(torch.tensor(n) for n in cost(*args)))
    out = capsys.readouterr().out
    assert out.count("✓ grouped_query_cost gives the counts of 4 layers: exact") == 4
    assert "multi-query (1 key/value head) 1,279,616 (54%) and 311.4 M (59%)" in out


@pytest.mark.parametrize("T, D, h, kv", COST_CASES)
def test_the_cost_formula_counts_the_real_layers(T, D, h, kv):
    """The checker's formula against the layers' parameters and torch's FLOP counter on the reference forward."""
    layers = gqa_layers(D, h, kv, torch.Generator().manual_seed(0))
    x = torch.randn(1, T, D)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        reference_grouped_query_attention(x, *layers, h, kv)
    parameters = sum(p.numel() for layer in layers for p in layer.parameters())
    assert grouped_query_cost(T, D, h, kv) == (parameters, counter.get_total_flops() // 2)


@pytest.mark.parametrize(
    "mistakes, checker",
    [
        (KV_SPLIT_MISTAKES, check_split_kv_heads),
        (GQA_MISTAKES, check_grouped_query_attention),
        (COST_MISTAKES, check_grouped_query_cost),
    ],
    ids=["split_kv_heads", "grouped_query_attention", "grouped_query_cost"],
)
def test_no_grouped_query_mistake_is_named_as_another(mistakes, checker):
    assert_each_named_as_itself(checker, mistakes)
