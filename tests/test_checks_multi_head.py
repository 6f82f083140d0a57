"""Lesson 4's checkers pass the reference and name each typical mistake in words."""

import pytest
import torch
import torch.nn.functional as F
from references import randomize_, torch_mha_from

from utils import MultiHeadSelfAttention, merge_heads, scaled_dot_product_attention, split_heads
from utils.checks.core import CheckFailed
from utils.checks.multi_head import (
    check_merge_heads,
    check_multi_head_attention,
    check_split_heads,
    reference_multi_head,
)

# --- split_heads ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "wrong, words",
    [
        (
            lambda x, h: x.reshape(*x.shape[:2], h, -1),
            r"expected \(2, 4, 17, 16\), got \(2, 17, 4, 16\) .*did you transpose\?",
        ),
        (
            lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1),
            r"reshaped straight to \(B, heads, N, head_dim\) without a transpose",
        ),
        (lambda x, h: x.reshape(*x.shape[:2], -1, h).transpose(1, 2), "heads and head_dim are swapped"),
        (lambda x, h: x.reshape(*x.shape[:2], -1, h), "heads and head_dim are swapped"),
        (lambda x, h: x.reshape(*x.shape[:2], -1, h).permute(0, 3, 1, 2), "contiguous slice"),
        (lambda x, h: split_heads(x, h).flatten(0, 1), "folded the heads into the batch"),
        (lambda x, h: split_heads(x, h).reshape(x.shape[0], h, -1), "right numbers, but not in the shape"),
        (lambda x, h: split_heads(x, h) * 1.01, "max difference"),
        (lambda x, h: x.view(3, 7), "your function raised RuntimeError"),
    ],
)
def test_check_split_heads_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_split_heads(wrong)


def test_check_split_heads_passes_the_reference(capsys):
    check_split_heads(split_heads)
    check_split_heads(lambda x, h: x.view(x.shape[0], x.shape[1], h, -1).permute(0, 2, 1, 3))
    assert capsys.readouterr().out.count("✓ split_heads") == 2


# --- merge_heads ---------------------------------------------------------------------------


def view_after_transpose(x):
    B, h, N, hd = x.shape
    return x.transpose(1, 2).view(B, N, h * hd)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda x: x.flatten(2), "forgot to transpose back"),
        (lambda x: x.reshape(x.shape[0], x.shape[2], -1), "reshaped to \\(B, N, D\\) without transposing back"),
        (lambda x: x.permute(0, 2, 3, 1).flatten(2), "interleaved"),
        (lambda x: x.transpose(1, 2), "heads are not merged yet"),
        (lambda x: merge_heads(x).transpose(1, 2), "right numbers, but not in the shape"),
        (view_after_transpose, "use `.reshape`"),
        (lambda x: merge_heads(x) + 0.1, "max difference"),
    ],
)
def test_check_merge_heads_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_merge_heads(wrong)


def test_check_merge_heads_passes_the_reference(capsys):
    check_merge_heads(merge_heads)
    check_merge_heads(lambda x: x.permute(0, 2, 1, 3).flatten(2))
    assert capsys.readouterr().out.count("✓ merge_heads") == 2


# --- the whole forward ---------------------------------------------------------------------


def written_out(x, qkv, proj, num_heads):
    """A correct solution written independently of the checker's reference."""
    B, N, D = x.shape
    q, k, v = F.linear(x, qkv.weight, qkv.bias).chunk(3, dim=-1)  # each (B, N, D)
    q, k, v = (split_heads(t, num_heads) for t in (q, k, v))  # each (B, heads, N, head_dim)
    out, _ = scaled_dot_product_attention(q, k, v)  # (B, heads, N, head_dim)
    return proj(merge_heads(out))  # (B, N, D)


def wrong(**mistake):
    return lambda x, qkv, proj, h: reference_multi_head(x, qkv, proj, h, **mistake)


@pytest.mark.parametrize(
    "learner, words",
    [
        (wrong(project=False), "forgot the output projection"),
        (wrong(scale="none"), r"forgot the scale: divide .* sqrt\(head_dim\) = sqrt\(6\)"),
        (wrong(scale="D"), r"scaled the scores by sqrt\(D\) = sqrt\(24\)"),
        (wrong(order=(1, 0, 2)), r"wrong order \(yours are its \(k, q, v\) parts\)"),
        (wrong(order=(0, 2, 1)), r"wrong order \(yours are its \(q, v, k\) parts\)"),
        (wrong(order=(2, 1, 0)), r"wrong order \(yours are its \(v, k, q\) parts\)"),
        (wrong(split="no_transpose"), "split the heads wrongly: .* without a transpose"),
        (wrong(split="interleaved"), "split the heads wrongly: .* contiguous slice"),
        (wrong(split="heads_first"), r"split the heads wrongly: .* not \(B, N, heads, 3, head_dim\)"),
        (wrong(softmax_dim=-2), "softmax runs over the wrong axis"),
        (wrong(merge="no_transpose"), "merged the heads without transposing back"),
        (wrong(project=False, scale="none"), "go through the steps in order"),
        (lambda x, qkv, proj, h: split_heads(qkv(x)[..., : x.shape[-1]], h), "these are the heads' outputs"),
        (lambda x, qkv, proj, h: (written_out(x, qkv, proj, h), None), "expected a torch.Tensor, got tuple"),
    ],
)
def test_check_multi_head_attention_names_the_mistake(learner, words):
    with pytest.raises(CheckFailed, match=words):
        check_multi_head_attention(learner)


def test_check_multi_head_attention_passes_a_correct_forward(capsys):
    check_multi_head_attention(written_out)
    check_multi_head_attention(reference_multi_head)
    assert capsys.readouterr().out.count("✓ multi_head_attention") == 2


def test_the_mistake_switches_default_to_torch_multihead_attention():
    torch.manual_seed(0)
    ours = randomize_(MultiHeadSelfAttention(24, 4))
    x = torch.randn(2, 7, 24)
    expected, _ = torch_mha_from(ours)(x, x, x, need_weights=False)
    torch.testing.assert_close(reference_multi_head(x, ours.qkv, ours.proj, 4), expected, atol=1e-5, rtol=1e-5)
    # and each switch really changes the output
    for mistake in [dict(scale="none"), dict(split="interleaved"), dict(order=(1, 0, 2)), dict(merge="no_transpose")]:
        assert not torch.allclose(reference_multi_head(x, ours.qkv, ours.proj, 4, **mistake), expected, atol=1e-3)
