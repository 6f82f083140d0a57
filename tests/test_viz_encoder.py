"""Lesson 5's plots draw what their titles say, and refuse the wrong input."""

import numpy as np
import pytest
import torch

from utils.viz.encoder import plot_activations, plot_norm_placement, show_receptive_fields


def test_plot_activations_draws_one_line_per_curve():
    x = torch.linspace(-3, 3, 61)
    ax = plot_activations(x, {"ReLU": x.relu(), "GELU": torch.nn.functional.gelu(x)}).axes[0]
    lines = {line.get_label(): line for line in ax.lines if not line.get_label().startswith("_")}
    assert set(lines) == {"ReLU", "GELU"}
    assert np.allclose(lines["ReLU"].get_ydata(), x.relu().numpy())
    with pytest.raises(ValueError, match="shape"):
        plot_activations(x, {"bad": x[:-1]})


def test_plot_norm_placement_draws_the_stream_and_one_gradient_line_per_seed():
    stream = {"pre-norm": torch.linspace(1, 5, 12), "post-norm": torch.ones(12)}
    grads = {"pre-norm": torch.rand(3, 12) + 0.5, "post-norm": torch.rand(3, 12) + 0.5}
    left, right = plot_norm_placement(stream, grads).axes
    assert [line.get_label() for line in left.lines] == ["pre-norm", "post-norm"]
    assert np.allclose(left.lines[0].get_ydata(), stream["pre-norm"].numpy())
    assert len([line for line in right.lines if len(line.get_xdata()) == 12]) == 6  # 2 x 3 seeds
    assert right.get_yscale() == "log"
    with pytest.raises(ValueError, match=r"\(seeds, depth\)"):
        plot_norm_placement(stream, {"pre-norm": torch.rand(12)})


def test_show_receptive_fields_draws_each_mask_and_marks_the_source():
    masks = torch.zeros(3, 14, 14, dtype=torch.bool)
    masks[0, :2, :2] = True
    masks[1, :4, :4] = True
    masks[2] = True
    fig = show_receptive_fields(masks, ["1 conv", "3 convs", "attention"])
    assert [ax.get_title() for ax in fig.axes] == ["1 conv", "3 convs", "attention"]
    for ax, mask in zip(fig.axes, masks):
        assert np.array_equal(ax.images[0].get_array(), mask.numpy().astype(float))
        (star,) = ax.lines
        assert (star.get_xdata()[0], star.get_ydata()[0]) == (0, 0)
    with pytest.raises(ValueError, match="boolean"):
        show_receptive_fields(masks.float(), ["a", "b", "c"])
    with pytest.raises(ValueError, match="titles"):
        show_receptive_fields(masks, ["a"])


@pytest.mark.parametrize(
    "draw, says",
    [
        (lambda: plot_activations(torch.zeros(0), {"a": torch.zeros(0)}), "something on every axis"),
        (
            lambda: plot_activations(torch.zeros(3, 2), {"a": torch.zeros(3, 2)}),
            r"x \(K,\), got a 2-D tensor of shape \(3, 2\)",
        ),
        (lambda: plot_activations(torch.zeros(3), {}), "at least one curve"),
        (lambda: plot_norm_placement({}, {"a": torch.rand(2, 3)}), "at least one stream std"),
        (
            lambda: plot_norm_placement({"a": torch.rand(2, 3)}, {"a": torch.rand(2, 3)}),
            r"\(depth,\), got a 2-D tensor of shape \(2, 3\)",
        ),
        (lambda: show_receptive_fields(torch.zeros(0, 3, 3, dtype=torch.bool), []), "something on every axis"),
        (
            lambda: show_receptive_fields(torch.zeros(1, 3, 3, dtype=torch.bool), ["a"], source=(3, 0)),
            r"source \(3, 0\) is no \(row, col\) patch of the 3 x 3 grid",
        ),
    ],
)
def test_the_encoder_plots_refuse_empty_or_mismatched_input(draw, says):
    with pytest.raises(ValueError, match=says):
        draw()


def test_draw_encoder_blocks_draws_each_order_with_its_norms_on_the_stream():
    from utils.viz.encoder import BLOCK_STEPS, draw_encoder_blocks, norms_on_the_stream

    assert norms_on_the_stream("pre-norm") == 0 and norms_on_the_stream("post-norm") == 2
    fig = draw_encoder_blocks()
    left, right = fig.axes
    assert left.get_title().startswith("pre-norm") and left.get_title().endswith("stream: 0")
    assert right.get_title().startswith("post-norm") and right.get_title().endswith("stream: 2")
    for ax, order in zip(fig.axes, ["pre-norm", "post-norm"]):
        boxes = [text.get_text() for text in ax.texts if text.get_text() not in ("", "+")]
        assert boxes == [label for kind, label in BLOCK_STEPS[order] if label]  # bottom to top, in order
        assert [text.get_text() for text in ax.texts].count("+") == 2  # two residual adds
    with pytest.raises(ValueError, match="order must be one of"):
        draw_encoder_blocks(["sandwich"])
    with pytest.raises(ValueError, match="non-empty list"):
        draw_encoder_blocks("pre-norm")
    with pytest.raises(ValueError, match="order must be one of"):
        norms_on_the_stream("sandwich")
