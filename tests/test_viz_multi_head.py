"""Lesson 4's pictures: the shape diagram holds the real shapes, the head split draws its slices."""

import pytest
import torch

from utils import MultiHeadSelfAttention, scaled_dot_product_attention
from utils.viz.multi_head import multi_head_shapes, show_head_split, show_multi_head_shapes


def test_multi_head_shapes_are_the_shapes_of_a_real_forward():
    B, T, D, h = 2, 5, 24, 4
    attn = MultiHeadSelfAttention(D, h)
    x = torch.randn(B, T, D)
    qkv = attn.qkv(x)
    split = qkv.reshape(B, T, 3, h, D // h)
    per_head = split.permute(2, 0, 3, 1, 4)
    q, k, v = per_head
    out, weights = scaled_dot_product_attention(q, k, v)
    back = out.transpose(1, 2)
    merged = back.reshape(B, T, D)
    real = [x, qkv, split, per_head, q, weights, out, back, merged, attn.proj(merged)]
    steps = multi_head_shapes(B, T, D, h)
    assert [step.shape for step in steps] == [tuple(t.shape) for t in real]
    assert steps[2].symbols == "(B, T, 3, heads, head_dim)"


def test_show_multi_head_shapes_writes_every_shape_and_operation():
    fig = show_multi_head_shapes(1, 197, 768, 12)
    texts = [t.get_text() for t in fig.axes[0].texts]
    for step in multi_head_shapes(1, 197, 768, 12):
        assert step.symbols in texts and str(step.shape) in texts and step.name in texts
        assert step.operation == "" or step.operation in texts
    assert "(1, 12, 197, 197)" in texts and "(B, heads, T, T)" in texts and "T x T per head" in texts
    assert "12 heads of 64" in fig.axes[0].get_title()


def test_show_head_split_draws_the_tokens_and_one_slice_per_head():
    x = torch.rand(6, 12)
    ax = show_head_split(x, 3, labels=list("abcdef")).axes[0]
    assert torch.allclose(torch.as_tensor(ax.images[0].get_array().data), x)
    assert [t.get_text() for t in ax.texts] == ["head 0", "head 1", "head 2"]
    assert sorted(line.get_xdata()[0] for line in ax.lines) == [3.5, 7.5]  # the borders between heads
    assert [t.get_text() for t in ax.get_yticklabels()] == list("abcdef")
    assert ax.get_xlabel() == "feature: 3 heads x 4 = 12"


def test_show_head_split_names_what_its_columns_are():
    ax = show_head_split(torch.rand(6, 12), 3, what="feature of q").axes[0]
    assert ax.get_xlabel() == "feature of q: 3 heads x 4 = 12"


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="not divisible"):
        multi_head_shapes(1, 197, 768, 10)
    with pytest.raises(ValueError, match=r"\(T, D\)"):
        show_head_split(torch.rand(1, 6, 12), 3)
    with pytest.raises(ValueError, match="not divisible"):
        show_head_split(torch.rand(6, 12), 5)


@pytest.mark.parametrize(
    "draw, says",
    [
        (lambda: multi_head_shapes(1, 197, 768, 0), "num_heads must be a whole number"),
        (lambda: multi_head_shapes(0, 197, 768, 12), "B must be a whole number"),
        (lambda: show_multi_head_shapes(1, 197, 768, 0), "num_heads must be a whole number"),
        (lambda: show_head_split(torch.rand(6, 12), 0), "num_heads must be a whole number"),
        (lambda: show_head_split(torch.rand(0, 12), 3), "something on every axis"),
        (lambda: show_head_split(torch.rand(6, 12), 3, labels=["a"]), "expected 6 token labels"),
        (lambda: show_head_split(torch.rand(6, 12), 3, feature_names=["a"]), "expected 12 feature names"),
    ],
)
def test_the_multi_head_plots_refuse_sizes_that_cannot_be(draw, says):
    with pytest.raises(ValueError, match=says):
        draw()
