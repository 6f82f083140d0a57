"""Lesson 3's checkers pass the reference, accept equivalent answers and name each typical mistake."""

import math

import pytest
import torch

from utils import scaled_dot_product_attention
from utils.checks.attention import check_attention, check_masked_softmax
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


@pytest.mark.parametrize(
    "wrong, words",
    [
        (attention_with(lambda q, k: (q @ k.transpose(-2, -1)).softmax(-1)), "not scaled: divide .* by sqrt\\(d\\)"),
        (
            attention_with(lambda q, k: (q @ k.transpose(-2, -1) / q.shape[-1]).softmax(-1)),
            "divided by d; divide by sqrt\\(d\\)",
        ),
        (
            attention_with(lambda q, k: (q @ k.transpose(-2, -1) * math.sqrt(q.shape[-1])).softmax(-1)),
            "multiplied by sqrt\\(d\\)",
        ),
        (
            attention_with(lambda q, k: (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-2)),
            "wrong axis: your columns sum to 1",
        ),
        (attention_with(lambda q, k: (q @ k / math.sqrt(q.shape[-1])).softmax(-1)), "k is not transposed"),
        (
            attention_with(lambda q, k: (k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1)),
            "q and k are swapped",
        ),
        (attention_with(right_weights, lambda w, q, v: w @ q), "averages the queries \\(weights @ q\\)"),
        (attention_with(right_weights, lambda w, q, v: w), "multiply them by v"),
        (attention_with(right_weights, lambda w, q, v: w.transpose(-2, -1) @ v), "weights transposed"),
        (attention_with(right_weights, lambda w, q, v: w @ v * 1.01), "out: values differ .* max difference"),
        (lambda q, k, v: scaled_dot_product_attention(q, k, v)[::-1], "you returned \\(weights, out\\)"),
        (lambda q, k, v: scaled_dot_product_attention(q, k, v)[0], "expected a pair of tensors"),
        (lambda q, k, v: (v[..., :1], torch.ones(1)[0] / 0), "expected weights of shape"),
    ],
)
def test_check_attention_names_the_mistake(wrong, words):
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


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda s, m: s.masked_fill(m, float("-inf")).softmax(-1), "inverted: True means 'may attend'"),
        (lambda s, m: s.masked_fill(~m, 0.0).softmax(-1), "hidden keys still get weight: a score of 0"),
        (lambda s, m: s.softmax(-1) * m, "masked after the softmax without renormalising"),
        (lambda s, m: s.masked_fill(~m, float("-inf")).softmax(-2), "wrong axis"),
        (lambda s, m: s.masked_fill(~m, -3.0).softmax(-1), "hidden keys get weight up to"),
        (lambda s, m: s.softmax(-1), "hidden keys get weight up to"),
        (lambda s, m: reference_masked_softmax(s, m)[..., :1], "expected weights of shape"),
        (lambda s, m: reference_masked_softmax(s, m).tolist(), "expected a torch.Tensor"),
    ],
)
def test_check_masked_softmax_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_masked_softmax(wrong)
