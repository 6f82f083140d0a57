"""Lesson 3's checkers pass the reference, accept equivalent answers and name each typical mistake."""

import math
import warnings

import pytest
import torch
from checker_cases import assert_each_named_as_itself

from utils import scaled_dot_product_attention
from utils.checks.attention import (
    POOL_CASES,
    check_attention,
    check_attention_pool,
    check_causal_attention,
    check_local_mask,
    check_masked_softmax,
    local_mask_reference,
)
from utils.checks.core import CheckFailed


def attention_with(weights_fn, out_fn=lambda w, q, v: w @ v):
    """An attention(q, k, v) whose weights and output are computed by the given (maybe wrong) rules."""

    def attention(q, k, v):
        weights = weights_fn(q, k)
        return out_fn(weights, q, v), weights

    return attention


def right_weights(q, k):
    return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1)


def einsum_attention(q, k, v):
    weights = torch.einsum("...qd,...kd->...qk", q / math.sqrt(q.shape[-1]), k).softmax(-1)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


def test_check_attention_passes_the_reference_and_an_equivalent(capsys):
    check_attention(scaled_dot_product_attention)
    assert "✓ attention matches the reference on 4 cases" in capsys.readouterr().out
    check_attention(einsum_attention)  # scaling q first and einsum change the last bits only
    assert "✓" in capsys.readouterr().out


def scores(q, k):
    return q @ k.transpose(-2, -1)


def sqrt_d(q):
    return math.sqrt(q.shape[-1])


def manual_softmax(x, keepdim=True):
    e = x.exp()
    return e / e.sum(-1, keepdim=keepdim)


def scaled_after_softmax(q, k, v):
    weights = scores(q, k).softmax(-1)
    return weights @ v / sqrt_d(q), weights


def k_T(q, k, v):
    with warnings.catch_warnings():  # torch warns about .T on more than 2 axes, then multiplies anyway
        warnings.simplefilter("ignore")
        weights = (q @ k.T / sqrt_d(q)).softmax(-1)
    return weights @ v, weights


def scaled_by_d_v(q, k, v):
    weights = (scores(q, k) / math.sqrt(v.shape[-1])).softmax(-1)
    return weights @ v, weights


def transposed_1_2(q, k, v):
    weights = (q @ k.transpose(1, 2) / sqrt_d(q)).softmax(-1)
    return weights @ v, weights


def v_times_weights(q, k, v):
    weights = right_weights(q, k)
    return v @ weights, weights


def causal_weights(q, k):
    """Causal attention's weights, where plain attention's are wanted."""
    hidden = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1)
    return (scores(q, k) / sqrt_d(q)).masked_fill(hidden, float("-inf")).softmax(dim=-1)


ATTENTION_MISTAKES = [  # (name, wrong attention, regex naming the mistake)
    ("not scaled", attention_with(lambda q, k: scores(q, k).softmax(-1)), r"not scaled: divide .* by sqrt\(d\)"),
    ("divided by d", attention_with(lambda q, k: (scores(q, k) / q.shape[-1]).softmax(-1)), r"divided by d; divide"),
    ("multiplied by sqrt(d)", attention_with(lambda q, k: (scores(q, k) * sqrt_d(q)).softmax(-1)), "multiplied by"),
    (
        "divided by sqrt(d_v)",
        scaled_by_d_v,
        r"sqrt\(d_v\), v's width",
    ),
    (
        "divided by sqrt(N)",
        attention_with(lambda q, k: (scores(q, k) / math.sqrt(q.shape[-2])).softmax(-1)),
        r"sqrt\(N\), the number of tokens",
    ),
    (
        "scale after the softmax, on the weights",
        attention_with(lambda q, k: scores(q, k).softmax(-1) / sqrt_d(q)),
        "scale is applied after the softmax",
    ),
    ("scale after the softmax, on the output", scaled_after_softmax, "scale is applied after the softmax"),
    (
        "softmax over the columns",
        attention_with(lambda q, k: (scores(q, k) / sqrt_d(q)).softmax(-2)),
        "wrong axis: your columns sum to 1",
    ),
    (
        "softmax without dim",  # F.softmax's implicit dim is 0 for a 3-D input
        attention_with(lambda q, k: (scores(q, k) / sqrt_d(q)).softmax(0 if q.ndim == 3 else -1)),
        "softmax runs over axis 0",
    ),
    (
        "sum without keepdim",
        attention_with(lambda q, k: manual_softmax(scores(q, k) / sqrt_d(q), keepdim=False)),
        "without keepdim=True",
    ),
    ("not normalised", attention_with(lambda q, k: (scores(q, k) / sqrt_d(q)).exp()), "not divided by their row's sum"),
    (
        "normalised by the total",
        attention_with(lambda q, k: (scores(q, k) / sqrt_d(q)).exp() / (scores(q, k) / sqrt_d(q)).exp().sum()),
        "sum of ALL",
    ),
    ("k not transposed", attention_with(lambda q, k: (q @ k / sqrt_d(q)).softmax(-1)), "k is not transposed"),
    ("k.transpose(1, 2)", transposed_1_2, "counts from the end"),
    ("k.T", k_T, "leading \\(batch, head\\) axes .* k.T"),
    (
        "q and k swapped",
        attention_with(lambda q, k: (k @ q.transpose(-2, -1) / sqrt_d(q)).softmax(-1)),
        "q and k are swapped",
    ),
    ("weights @ q", attention_with(right_weights, lambda w, q, v: w @ q), "averages the queries \\(weights @ q\\)"),
    ("weights as output", attention_with(right_weights, lambda w, q, v: w), "multiply them by v"),
    (
        "weights transposed",
        attention_with(right_weights, lambda w, q, v: w.transpose(-2, -1) @ v),
        "weights transposed",
    ),
    ("v @ weights", v_times_weights, "not v @ weights"),
    (
        "(weights, out) returned",
        lambda q, k, v: scaled_dot_product_attention(q, k, v)[::-1],
        "you returned \\(weights, out\\)",
    ),
    (
        "scores returned as the weights",
        lambda q, k, v: (right_weights(q, k) @ v, scores(q, k) / sqrt_d(q)),
        "returned the scores as the weights",
    ),
    (
        "softmax of the output",
        attention_with(right_weights, lambda w, q, v: (w @ v).softmax(-1)),
        "applied to the output",
    ),
    (
        "the output from the scores",
        lambda q, k, v: (scores(q, k) / sqrt_d(q) @ v, right_weights(q, k)),
        "the output multiplies the scaled scores by v",
    ),
    ("causal mask", attention_with(causal_weights), r"the scores are masked \(a causal mask\?\)"),
    (
        "the weights returned transposed",
        lambda q, k, v: (right_weights(q, k) @ v, right_weights(q, k).transpose(-2, -1)),
        "your weights are the transpose of the right ones",
    ),
]


@pytest.mark.parametrize("name, wrong, words", ATTENTION_MISTAKES, ids=[m[0] for m in ATTENTION_MISTAKES])
def test_check_attention_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_attention(wrong)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (attention_with(right_weights, lambda w, q, v: w @ v * 1.01), "^out: values differ .* max difference"),
        (lambda q, k, v: scaled_dot_product_attention(q, k, v)[0], "expected a pair of tensors"),
        (lambda q, k, v: (v[..., :1], torch.ones(1)[0] / 0), "expected weights of shape"),
        (attention_with(lambda q, k: right_weights(q, k) + 0.01), "^weights: values differ"),
    ],
)
def test_check_attention_is_neutral_when_it_cannot_tell(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_attention(wrong)


def test_check_attention_hints_at_the_transpose_when_the_matmul_fails():
    def untransposed_on_every_shape(q, k, v):
        if q.shape[-2] == q.shape[-1]:  # right on the first (square) case, where q @ k would run
            return scaled_dot_product_attention(q, k, v)
        weights = (q @ k / math.sqrt(q.shape[-1])).softmax(-1)  # fails: (7, 16) @ (7, 16)
        return weights @ v, weights

    with pytest.raises(CheckFailed, match="RuntimeError .* forget to transpose k"):
        check_attention(untransposed_on_every_shape)


def reference_masked_softmax(scores, mask):
    return scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)


def test_check_masked_softmax_passes_the_reference_and_equivalents(capsys):
    check_masked_softmax(reference_masked_softmax)
    assert "✓ masked_softmax matches the reference on 3 masks" in capsys.readouterr().out
    check_masked_softmax(lambda s, m: s.masked_fill(~m, -1e9).softmax(-1))  # a large finite fill
    check_masked_softmax(lambda s, m: torch.where(m, s, -torch.inf).softmax(-1))

    def renormalised_after(s, m):  # mathematically the same: mask after the softmax, then renormalise
        w = s.softmax(-1) * m
        return w / w.sum(-1, keepdim=True)

    check_masked_softmax(renormalised_after)
    assert capsys.readouterr().out.count("✓") == 3


def boolean_indexing(s, m):
    s[~m] = float("-inf")  # needs a mask of the scores' full shape
    return s.softmax(-1)


NEG_INF, INF = float("-inf"), float("inf")

MASKED_SOFTMAX_MISTAKES = [  # (name, wrong masked_softmax, regex naming the mistake)
    ("mask inverted", lambda s, m: s.masked_fill(m, NEG_INF).softmax(-1), "inverted: True means 'may attend'"),
    ("filled with 0", lambda s, m: s.masked_fill(~m, 0.0).softmax(-1), "hidden keys still get weight: a score of 0"),
    ("scores times the mask", lambda s, m: (s * m).softmax(-1), "hidden keys still get weight: a score of 0"),
    ("masked after the softmax", lambda s, m: s.softmax(-1) * m, "masked after the softmax without renormalising"),
    (
        "softmax over the queries",
        lambda s, m: s.masked_fill(~m, NEG_INF).softmax(-2),
        "the softmax runs over the wrong axis",
    ),
    ("softmax over the batch", lambda s, m: s.masked_fill(~m, NEG_INF).softmax(0), "over axis 0, a batch or head axis"),
    ("filled with +inf", lambda s, m: s.masked_fill(~m, INF).softmax(-1), r"\+inf"),
    ("mask transposed", lambda s, m: s.masked_fill(~m.transpose(-2, -1), NEG_INF).softmax(-1), "mask is transposed"),
    ("no softmax", lambda s, m: s.masked_fill(~m, NEG_INF), "returned the masked scores"),
    ("log_softmax", lambda s, m: s.masked_fill(~m, NEG_INF).log_softmax(-1), "log_softmax"),
    ("filled with -3", lambda s, m: s.masked_fill(~m, -3.0).softmax(-1), "hidden keys get weight up to"),
    ("mask ignored", lambda s, m: s.softmax(-1), "hidden keys get weight up to"),
    ("boolean indexing", boolean_indexing, r"scores\[~mask\] needs a mask of the scores' full shape"),
    ("mask returned", lambda s, m: m.expand_as(s), "expected a float32 tensor, got bool"),
]


@pytest.mark.parametrize("name, wrong, words", MASKED_SOFTMAX_MISTAKES, ids=[m[0] for m in MASKED_SOFTMAX_MISTAKES])
def test_check_masked_softmax_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_masked_softmax(wrong)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda s, m: reference_masked_softmax(s, m)[..., :1], "expected weights of shape"),
        (lambda s, m: reference_masked_softmax(s, m).tolist(), "expected a torch.Tensor"),
        (lambda s, m: reference_masked_softmax(s, m) * float("nan"), "values are NaN .* all hidden, or for \\+inf"),
    ],
)
def test_check_masked_softmax_is_neutral_when_it_cannot_tell(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_masked_softmax(wrong)


# ---- a right tensor spoiled: the dtype, NaN, autograd ------------------------------------------

SPOILED = [  # (how the right tensor is spoiled, the words for it)
    (lambda t: t.long(), "expected a float32 tensor, got int64"),
    (lambda t: t.half(), "expected a float32 tensor, got float16 .*half precision"),
    (lambda t: t > 0.5, "expected a float32 tensor, got bool"),
    (lambda t: t * float("nan"), "values are NaN"),
]
SPOILED_IDS = ["int64", "float16", "bool", "NaN"]


@pytest.mark.parametrize("spoil, words", SPOILED, ids=SPOILED_IDS)
def test_check_masked_softmax_names_a_spoiled_result(spoil, words):
    with pytest.raises(CheckFailed, match=words):
        check_masked_softmax(lambda s, m: spoil(reference_masked_softmax(s, m)))


@pytest.mark.parametrize("spoil, words", SPOILED, ids=SPOILED_IDS)
@pytest.mark.parametrize("which", ["out", "weights"])
def test_check_attention_names_a_spoiled_result(which, spoil, words):
    def spoiled(q, k, v):
        out, weights = scaled_dot_product_attention(q, k, v)
        return (spoil(out), weights) if which == "out" else (out, spoil(weights))

    with pytest.raises(CheckFailed, match=f"^{which}: .*{words}"):
        check_attention(spoiled)


def test_results_that_need_grad_pass(capsys):
    check_masked_softmax(lambda s, m: reference_masked_softmax(s.requires_grad_(), m))
    check_attention(lambda q, k, v: scaled_dot_product_attention(q.requires_grad_(), k, v))
    check_attention(lambda q, k, v: list(scaled_dot_product_attention(q, k, v)))  # a list is a pair too
    assert capsys.readouterr().out.count("✓") == 3


def test_results_in_float64_pass_as_exact(capsys):
    """The right numbers in float64 are right: the values are compared, not the dtype."""
    check_masked_softmax(lambda s, m: reference_masked_softmax(s, m).double())
    check_attention(lambda q, k, v: tuple(t.double() for t in scaled_dot_product_attention(q, k, v)))
    check_causal_attention(lambda q, k, v: tuple(t.double() for t in scaled_dot_product_attention(q, k, v, lower(q))))
    out = capsys.readouterr().out
    assert out.count("✓") == 3 and out.count(": exact") == 3, out


def test_attention_computed_in_float64_passes(capsys):
    def in_float64(q, k, v):
        q, k, v = q.double(), k.double(), v.double()
        weights = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
        return weights @ v, weights

    check_attention(in_float64)
    assert "✓ attention matches the reference on 4 cases (out and weights): approximate" in capsys.readouterr().out


# ---- causal attention: query i may attend to the keys j <= i ----------------------------------


def lower(q, diagonal=0):
    """(N, N) boolean, True where key j <= query i + diagonal."""
    N = q.shape[-2]
    return torch.ones(N, N, dtype=torch.bool).tril(diagonal)


def causal_with(weights_fn, out_fn=lambda w, q, k, v: w @ v):
    """A causal_attention(q, k, v) whose weights and output follow the given (maybe wrong) rules."""

    def causal_attention(q, k, v):
        weights = weights_fn(q, k)
        return out_fn(weights, q, k, v), weights

    return causal_attention


def scaled(q, k):
    return scores(q, k) / sqrt_d(q)


def causal_weights(q, k):
    return scaled(q, k).masked_fill(~lower(q), NEG_INF).softmax(-1)


def reference_causal_attention(q, k, v):
    return scaled_dot_product_attention(q, k, v, mask=lower(q))


def causal_from_torch(q, k, v):  # torch's kernel for the output, the weights written out
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True), causal_weights(q, k)


def causal_hidden_future(q, k, v):  # the mask of the hidden keys instead: triu(1), filled where True
    weights = scaled(q, k).masked_fill(lower(q).logical_not(), -1e9).softmax(-1)
    return weights @ v, weights


def causal_renormalised(q, k, v):  # mathematically the same: zero the future after the softmax, renormalise
    weights = scaled(q, k).softmax(-1) * lower(q)
    weights = weights / weights.sum(-1, keepdim=True)
    return weights @ v, weights


def test_check_causal_attention_passes_the_reference_and_equivalents(capsys):
    check_causal_attention(reference_causal_attention)
    first = capsys.readouterr().out
    assert "✓ causal_attention matches the reference on 3 cases (out and weights): exact" in first
    assert "is_causal=True" in first
    for right in (causal_from_torch, causal_hidden_future, causal_renormalised):
        check_causal_attention(right)
    assert capsys.readouterr().out.count("✓") == 3


def mask_from_width(q, k, v):
    d = q.shape[-1]
    weights = scaled(q, k).masked_fill(~torch.ones(d, d, dtype=torch.bool).tril(), NEG_INF).softmax(-1)
    return weights @ v, weights


def float_mask(q, k, v):
    mask = torch.ones(q.shape[-2], q.shape[-2]).tril()  # float: masked_fill refuses it
    weights = scaled(q, k).masked_fill(mask, NEG_INF).softmax(-1)
    return weights @ v, weights


def inverted_float_mask(q, k, v):
    mask = torch.ones(q.shape[-2], q.shape[-2]).tril()
    weights = scaled(q, k).masked_fill(~mask, NEG_INF).softmax(-1)  # ~ refuses a float tensor
    return weights @ v, weights


def unmasked_out(q, k, v):
    weights = causal_weights(q, k)
    return scaled(q, k).softmax(-1) @ v, weights


CAUSAL_MISTAKES = [  # (name, wrong causal_attention, regex naming the mistake)
    (
        "mask after the softmax",
        causal_with(lambda q, k: scaled(q, k).softmax(-1) * lower(q)),
        "future keys are hidden after the softmax",
    ),
    (
        "tril of the weights",
        causal_with(lambda q, k: scaled(q, k).softmax(-1).tril()),
        "future keys are hidden after the softmax",
    ),
    (
        "mask transposed (j >= i)",
        causal_with(lambda q, k: scaled(q, k).masked_fill(~lower(q).T, NEG_INF).softmax(-1)),
        r"mask is transposed: it keeps the keys j >= i",
    ),
    (
        "masked with 0",
        causal_with(lambda q, k: scaled(q, k).masked_fill(~lower(q), 0.0).softmax(-1)),
        r"set to 0, not -inf",
    ),
    ("scores times the mask", causal_with(lambda q, k: (scaled(q, k) * lower(q)).softmax(-1)), r"set to 0, not -inf"),
    ("tril of the scores", causal_with(lambda q, k: scaled(q, k).tril().softmax(-1)), r"set to 0, not -inf"),
    (
        "not scaled",
        causal_with(lambda q, k: scores(q, k).masked_fill(~lower(q), NEG_INF).softmax(-1)),
        r"not scaled: divide q @ k\^T by sqrt\(d\)",
    ),
    (
        "scale after the softmax",
        causal_with(lambda q, k: scores(q, k).masked_fill(~lower(q), NEG_INF).softmax(-1) / sqrt_d(q)),
        "scale is applied after the softmax",
    ),
    (
        "mask inverted",
        causal_with(lambda q, k: scaled(q, k).masked_fill(lower(q), NEG_INF).softmax(-1)),
        "mask is inverted: it hides the keys j <= i",
    ),
    (
        "diagonal hidden",
        causal_with(lambda q, k: scaled(q, k).masked_fill(~lower(q, -1), NEG_INF).softmax(-1)),
        "each token hides itself too",
    ),
    ("no mask", causal_with(lambda q, k: scaled(q, k).softmax(-1)), "your weights have no causal mask"),
    (
        "softmax over the queries",
        causal_with(lambda q, k: scaled(q, k).masked_fill(~lower(q), NEG_INF).softmax(-2)),
        "softmax runs over the wrong axis",
    ),
    (
        "masked scores returned",
        causal_with(lambda q, k: scaled(q, k).masked_fill(~lower(q), NEG_INF)),
        "returned the masked scores as the weights",
    ),
    ("out ignores the mask", unmasked_out, "your out ignores the mask"),
    ("weights as output", causal_with(causal_weights, lambda w, q, k, v: w), "multiply them by v"),
    (
        "weights @ q",
        causal_with(causal_weights, lambda w, q, k, v: w @ q),
        "averages the queries \\(weights @ q\\)",
    ),
    (
        "(weights, out) returned",
        lambda q, k, v: reference_causal_attention(q, k, v)[::-1],
        "you returned \\(weights, out\\)",
    ),
    ("mask built from the width d", mask_from_width, r"build it from the number of tokens N = q.shape\[-2\]"),
    ("float mask", float_mask, "the mask must be boolean"),
    ("~ on a float mask", inverted_float_mask, "the mask must be boolean"),
]


@pytest.mark.parametrize("name, wrong, words", CAUSAL_MISTAKES, ids=[m[0] for m in CAUSAL_MISTAKES])
def test_check_causal_attention_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_causal_attention(wrong)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda q, k, v: q, "expected a pair of tensors \\(out, weights\\), got Tensor"),
        (lambda q, k, v: None, "expected a pair of tensors .* forget to `return`"),
        (causal_with(lambda q, k: causal_weights(q, k) * 1.01), "^weights: values differ"),
        (
            causal_with(lambda q, k: (scaled(q, k) + 0.3 * (~lower(q))).softmax(-1)),
            "query i gives weight up to .* to later keys j > i",
        ),
        (causal_with(causal_weights, lambda w, q, k, v: w @ v * 1.01), "^out: values differ .* max difference"),
        (lambda q, k, v: (v[..., :1], causal_weights(q, k)[..., :1]), "expected weights of shape"),
    ],
)
def test_check_causal_attention_is_neutral_when_it_cannot_tell(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_causal_attention(wrong)


@pytest.mark.parametrize("spoil, words", SPOILED, ids=SPOILED_IDS)
@pytest.mark.parametrize("which", ["out", "weights"])
def test_check_causal_attention_names_a_spoiled_result(which, spoil, words):
    def spoiled(q, k, v):
        out, weights = reference_causal_attention(q, k, v)
        return (spoil(out), weights) if which == "out" else (out, spoil(weights))

    with pytest.raises(CheckFailed, match=f"^{which}: .*{words}"):
        check_causal_attention(spoiled)


def test_a_blank_causal_attention_passes_its_hint_through():
    def blank(q, k, v):
        raise NotImplementedError("Hint: ...")

    with pytest.raises(NotImplementedError, match="Hint"):
        check_causal_attention(blank)


@pytest.mark.parametrize(
    "checker, mistakes",
    [
        (check_attention, ATTENTION_MISTAKES),
        (check_masked_softmax, MASKED_SOFTMAX_MISTAKES),
        (check_causal_attention, CAUSAL_MISTAKES),
    ],
    ids=["attention", "masked_softmax", "causal_attention"],
)
def test_no_mistake_is_named_as_another(checker, mistakes):
    assert len(assert_each_named_as_itself(checker, mistakes)) == len(mistakes)


# ---- attention pooling: one learned query attends over the tokens --------------------------------


def pool_weights(tokens, query):
    return (tokens @ query / math.sqrt(query.shape[-1])).softmax(-1)  # (B, N)


def pool_with(weights_fn, out_fn=lambda w, t, q: (w[..., None] * t).sum(1)):
    """An attention_pool(tokens, query) whose weights and pooled vector follow the given (maybe wrong) rules."""

    def attention_pool(tokens, query):
        weights = weights_fn(tokens, query)
        return out_fn(weights, tokens, query), weights

    return attention_pool


def pool_by_library(tokens, query):  # the query as a sequence of one, utils' attention
    out, weights = scaled_dot_product_attention(query.expand(tokens.shape[0], 1, -1), tokens, tokens)
    return out[:, 0], weights[:, 0]


def pool_by_torch(tokens, query):  # torch's kernel for the output, einsum for the weights
    pooled = torch.nn.functional.scaled_dot_product_attention(query[None, None], tokens, tokens)[:, 0]
    weights = torch.einsum("bnd,d->bn", tokens, query / math.sqrt(query.shape[-1])).softmax(-1)
    return pooled, weights


def test_check_attention_pool_passes_the_reference_and_equivalents(capsys):
    check_attention_pool(pool_with(pool_weights))
    first = capsys.readouterr().out
    assert "✓ attention_pool matches the reference on 3 cases" in first and "shuffling the tokens" in first
    check_attention_pool(pool_by_library)
    check_attention_pool(pool_by_torch)
    check_attention_pool(pool_with(pool_weights, lambda w, t, q: (w[:, None, :] @ t)[:, 0]))  # a batched matmul
    check_attention_pool(lambda t, q: tuple(x.double() for x in pool_by_library(t, q)))
    assert capsys.readouterr().out.count("✓") == 4


def query_among_keys(tokens, query):  # the query appended as a token: it attends to itself too
    B, N, D = tokens.shape
    keys = torch.cat([query.expand(B, 1, D), tokens], dim=1)  # (B, N + 1, D)
    out, weights = scaled_dot_product_attention(query.expand(B, 1, D), keys, keys)
    return out[:, 0], weights[:, 0]


def weights_with_query_axis(tokens, query):
    out, weights = scaled_dot_product_attention(query.expand(tokens.shape[0], 1, -1), tokens, tokens)
    return out[:, 0], weights  # (B, 1, N)


def pooled_with_query_axis(tokens, query):
    out, weights = scaled_dot_product_attention(query.expand(tokens.shape[0], 1, -1), tokens, tokens)
    return out, weights[:, 0]  # (B, 1, D)


def query_times_tokens(tokens, query):  # query @ tokens: (D,) @ (B, N, D) only runs when N == D
    weights = (query @ tokens / math.sqrt(query.shape[-1])).softmax(-1)
    return (weights[..., None] * tokens).sum(1), weights


def weighted_by_position(tokens, query):  # right, plus a bias that grows along the sequence: reads the order
    N = tokens.shape[1]
    weights = (tokens @ query / math.sqrt(query.shape[-1]) + 0.1 * torch.arange(N)).softmax(-1)
    return (weights[..., None] * tokens).sum(1), weights


def D(tokens):
    return tokens.shape[-1]


POOL_MISTAKES = [  # (name, wrong attention_pool, regex naming the mistake)
    ("not scaled", pool_with(lambda t, q: (t @ q).softmax(-1)), r"not scaled: divide each token's score"),
    ("divided by D", pool_with(lambda t, q: (t @ q / D(t)).softmax(-1)), r"divided by D; divide by sqrt\(D\)"),
    ("divided by sqrt(N)", pool_with(lambda t, q: (t @ q / math.sqrt(t.shape[1])).softmax(-1)), r"sqrt\(N\)"),
    (
        "softmax over the images",
        pool_with(lambda t, q: (t @ q / math.sqrt(D(t))).softmax(0)),
        "softmax runs over the images",
    ),
    ("scores as the weights", pool_with(lambda t, q: t @ q / math.sqrt(D(t))), "returned the scores as the weights"),
    (
        "mean pooling",
        lambda t, q: (t.mean(1), torch.full(t.shape[:2], 1 / t.shape[1])),
        r"same weight 1/N \(mean pooling\)",
    ),
    (
        "the first token as the query",
        pool_with(lambda t, q: (t @ t[:, 0, :, None] / math.sqrt(D(t)))[..., 0].softmax(-1)),
        r"the query is the first token \(tokens\[:, 0\]\)",
    ),
    ("the query among the keys", query_among_keys, "the query is among the keys"),
    ("weights (B, 1, N)", weights_with_query_axis, "drop the query axis: with one query"),
    ("pooled (B, 1, D)", pooled_with_query_axis, "drop the query axis: one pooled vector"),
    (
        "weighted tokens not summed",
        pool_with(pool_weights, lambda w, t, q: w[..., None] * t),
        "returned the weighted tokens without summing",
    ),
    ("pooled is the mean", pool_with(pool_weights, lambda w, t, q: t.mean(1)), "plain mean of the tokens"),
    ("pooled is the sum", pool_with(pool_weights, lambda w, t, q: t.sum(1)), "the sum of the tokens"),
    ("pooled is the max", pool_with(pool_weights, lambda w, t, q: t.max(1).values), r"\(max pooling\)"),
    (
        "pooled divided by sqrt(D)",
        pool_with(pool_weights, lambda w, t, q: (w[..., None] * t).sum(1) / math.sqrt(D(t))),
        r"divided by sqrt\(D\) once more",
    ),
    (
        "query added",
        pool_with(pool_weights, lambda w, t, q: (w[..., None] * t).sum(1) + q),
        "the query is added to the pooled vector",
    ),
    (
        "softmax of the pooled vector",
        pool_with(pool_weights, lambda w, t, q: (w[..., None] * t).sum(1).softmax(-1)),
        "softmax is applied to the pooled vector",
    ),
    ("(weights, pooled) returned", lambda t, q: pool_by_library(t, q)[::-1], r"you returned \(weights, pooled\)"),
    ("query @ tokens", query_times_tokens, r"RuntimeError .* tokens @ query, \(B, N, D\) @ \(D,\) -> \(B, N\)"),
    ("reads the order", weighted_by_position, "^weights: values differ"),
]


@pytest.mark.parametrize("name, wrong, words", POOL_MISTAKES, ids=[m[0] for m in POOL_MISTAKES])
def test_check_attention_pool_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_attention_pool(wrong)


def test_check_attention_pool_names_a_result_that_depends_on_the_order():
    """Right on the cases as given, but not on the shuffled tokens: the set property is checked too."""
    seen = []

    def right_until_shuffled(tokens, query):
        pooled, weights = pool_by_library(tokens, query)
        seen.append(tokens.shape)
        return (pooled + 1, weights) if len(seen) > len(POOL_CASES) else (pooled, weights)

    with pytest.raises(CheckFailed, match="shuffling the tokens changed the pooled vector"):
        check_attention_pool(right_until_shuffled)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda t, q: t, r"expected a pair of tensors \(pooled, weights\), got Tensor"),
        (lambda t, q: None, "forget to `return`"),
        (pool_with(lambda t, q: pool_weights(t, q) * 1.01), "^weights: values differ"),
        (pool_with(pool_weights, lambda w, t, q: (w[..., None] * t).sum(1) * 1.01), "^pooled: values differ"),
        (lambda t, q: (pool_by_library(t, q)[0].long(), pool_weights(t, q)), "expected a float32 tensor, got int64"),
    ],
)
def test_check_attention_pool_is_neutral_when_it_cannot_tell(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_attention_pool(wrong)


def test_no_pooling_mistake_is_named_as_another():
    assert len(assert_each_named_as_itself(check_attention_pool, POOL_MISTAKES)) == len(POOL_MISTAKES)


# ---- a local 3 x 3 mask on a grid of tokens --------------------------------------------------------


def grid(rows, cols):
    """(row, column) of each token in row-major order, and the differences between every two tokens."""
    i = torch.arange(rows * cols)
    r, c = i // cols, i % cols
    return (r[:, None] - r[None, :]).abs(), (c[:, None] - c[None, :]).abs(), (i[:, None] - i[None, :]).abs()


def local_by_loops(rows, cols):  # a learner's loops over the grid
    mask = torch.zeros(rows * cols, rows * cols, dtype=torch.bool)
    for r in range(rows):
        for c in range(cols):
            for dr in (-1, 0, 1):
                for dc in (-1, 0, 1):
                    if 0 <= r + dr < rows and 0 <= c + dc < cols:
                        mask[r * cols + c, (r + dr) * cols + (c + dc)] = True
    return mask


def local_by_cdist(rows, cols):  # the Chebyshev distance between grid positions
    positions = torch.cartesian_prod(torch.arange(rows), torch.arange(cols)).float()  # (T, 2), row-major
    return torch.cdist(positions, positions, p=float("inf")) <= 1


def local_by_conv(rows, cols):  # each token's one-hot image, spread by a 3 x 3 box filter
    T = rows * cols
    one_hot = torch.eye(T).reshape(T, 1, rows, cols)
    spread = torch.nn.functional.conv2d(one_hot, torch.ones(1, 1, 3, 3), padding=1)  # (T, 1, rows, cols)
    return spread.reshape(T, T) > 0


def test_check_local_mask_passes_the_reference_and_equivalents(capsys):
    for right in (local_mask_reference, local_by_loops, local_by_cdist, local_by_conv):
        check_local_mask(right)
    out = capsys.readouterr().out
    assert out.count("✓ local_mask matches the reference on 3 grids") == 4 and "a corner token sees 4" in out


def ring_by_loops(rows, cols):
    mask = local_by_loops(rows, cols)
    return mask & ~torch.eye(rows * cols, dtype=torch.bool)


def index_offsets(rows, cols):  # neighbours as i + offset, no edge check (offsets that fall off the ends dropped)
    T = rows * cols
    mask = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        for offset in (-cols - 1, -cols, -cols + 1, -1, 0, 1, cols - 1, cols, cols + 1):
            if 0 <= i + offset < T:
                mask[i, i + offset] = True
    return mask


def torus(rows, cols):
    mask = torch.zeros(rows * cols, rows * cols, dtype=torch.bool)
    for r in range(rows):
        for c in range(cols):
            for dr in (-1, 0, 1):
                for dc in (-1, 0, 1):
                    mask[r * cols + c, (r + dr) % rows * cols + (c + dc) % cols] = True
    return mask


def column_major(rows, cols):
    i = torch.arange(rows * cols)
    r, c = i % rows, i // rows
    return ((r[:, None] - r[None, :]).abs() <= 1) & ((c[:, None] - c[None, :]).abs() <= 1)


def rows_from_rows(rows, cols):  # i // rows and i % rows: the row length taken from the wrong side
    i = torch.arange(rows * cols)
    r, c = i // rows, i % rows
    return ((r[:, None] - r[None, :]).abs() <= 1) & ((c[:, None] - c[None, :]).abs() <= 1)


def off_the_grid(rows, cols):  # loops without the edge check: an index past the end
    mask = torch.zeros(rows * cols, rows * cols, dtype=torch.bool)
    for r in range(rows):
        for c in range(cols):
            for dr in (0, 1):
                mask[r * cols + c, (r + dr) * cols + c] = True
    return mask


LOCAL_MISTAKES = [  # (name, wrong local_mask, regex naming the mistake)
    ("5 x 5", lambda r, c: (grid(r, c)[0] <= 2) & (grid(r, c)[1] <= 2), r"the window is 5 x 5"),
    ("ring without the centre", ring_by_loops, r"each token hides itself \(a ring of 8\)"),
    ("inverted", lambda r, c: ~local_mask_reference(r, c), "the mask is inverted: True must mark"),
    ("cross of 5", lambda r, c: (grid(r, c)[0] + grid(r, c)[1]) <= 1, r"diagonal neighbours are missing"),
    ("1-D band", lambda r, c: grid(r, c)[2] <= 1, r"neighbours in the sequence \(i - 1, i, i \+ 1\)"),
    ("index offsets, wrapping the row ends", index_offsets, "the mask wraps around the edges"),
    ("torus", torus, "the window wraps around the grid"),
    ("rows and columns mixed up (column-major)", column_major, "rows and columns are mixed up"),
    ("rows and columns mixed up (i // rows)", rows_from_rows, "rows and columns are mixed up"),
    ("off the grid", off_the_grid, "an index ran off the grid"),
    (
        "(rows, cols, rows, cols)",
        lambda r, c: local_mask_reference(r, c).reshape(r, c, r, c),
        "flatten the grid: the mask is \\(T, T\\)",
    ),
    ("float mask", lambda r, c: local_mask_reference(r, c).float(), "expected a boolean mask .* got float32"),
    ("0/1 integers", lambda r, c: local_mask_reference(r, c).long(), "expected a boolean mask .* got int64"),
    (
        "only the token itself",
        lambda r, c: torch.eye(r * c, dtype=torch.bool),
        r"the top-left corner token \(0, 0\) may attend to 1 tokens",
    ),
]


@pytest.mark.parametrize("name, wrong, words", LOCAL_MISTAKES, ids=[m[0] for m in LOCAL_MISTAKES])
def test_check_local_mask_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_local_mask(wrong)


def test_check_local_mask_names_the_token_whose_window_is_wrong():
    def without_the_bottom_right(rows, cols):  # right except that no token sees the one below and right
        i = torch.arange(rows * cols)
        below_right = (i[None, :] - i[:, None]) == cols + 1
        return local_mask_reference(rows, cols) & ~below_right

    with pytest.raises(CheckFailed, match=r"top-left corner token \(0, 0\) may attend to 3 tokens .* it sees 4"):
        check_local_mask(without_the_bottom_right)


def test_no_local_mask_mistake_is_named_as_another():
    assert len(assert_each_named_as_itself(check_local_mask, LOCAL_MISTAKES)) == len(LOCAL_MISTAKES)
