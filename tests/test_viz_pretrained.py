"""Lesson 8's plot draws each image above bars as long as the probabilities it is given."""

import numpy as np
import pytest
import torch

from utils.viz.pretrained import show_top_k


def test_top_k_bars_are_as_long_as_the_probabilities_most_probable_on_top():
    images = torch.rand(2, 3, 16, 16)
    answers = [[("cat", 0.7), ("dog", 0.2), ("fox", 0.05)], [("cup", 0.9), ("bowl", 0.06), ("pot", 0.01)]]
    figure = show_top_k(images, ["a", "b"], answers)
    photo_axes, bar_axes = figure.axes[:2], figure.axes[2:]  # row 1: the images, row 2: the bars
    assert [ax.get_title() for ax in photo_axes] == ["a", "b"]
    np.testing.assert_allclose(photo_axes[1].images[0].get_array(), images[1].permute(1, 2, 0).numpy())
    for ax, answer in zip(bar_axes, answers):
        bars = sorted(ax.patches, key=lambda bar: -bar.get_y())  # top first
        np.testing.assert_allclose([bar.get_width() for bar in bars], [p for _, p in answer])
        labels = {tick.get_text(): tick.get_position()[1] for tick in ax.get_yticklabels()}
        assert labels[answer[0][0]] > labels[answer[-1][0]]  # the most probable sits on top


def test_top_k_plot_wants_one_name_and_one_answer_list_per_image():
    with pytest.raises(ValueError, match="one name and one answer list per image"):
        show_top_k(torch.rand(2, 3, 8, 8), ["a"], [[("x", 1.0)], [("y", 1.0)]])


@pytest.mark.parametrize(
    "images, names, answers, says",
    [
        (torch.rand(0, 3, 8, 8), [], [], "something on every axis"),
        (torch.rand(1, 3, 8, 8), ["a"], [[]], "answers for 'a': expected a non-empty list"),
        (torch.rand(1, 3, 8, 8), ["a"], [["cat", "dog"]], "got the entry 'cat'"),
        (torch.rand(1, 3, 8, 8), ["a"], [[("cat", 70.0)]], "probability 70.0 for 'cat': not in"),
        (torch.rand(1, 8, 8, 3), ["a"], [[("cat", 0.7)]], r"permute\(0, 3, 1, 2\)"),
    ],
)
def test_top_k_plot_refuses_empty_or_malformed_answers(images, names, answers, says):
    with pytest.raises(ValueError, match=says):
        show_top_k(images, names, answers)
