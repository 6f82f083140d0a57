"""Lesson 6's pictures show the data, the curves, the confusion matrix and the mistakes given."""

import pytest
import torch

from utils.data import ImageDataset
from utils.training import History
from utils.viz.training import LivePlot, show_batch, show_confusion, show_mistakes


def test_show_batch_titles_each_image_with_its_class():
    data = ImageDataset(torch.rand(5, 1, 8, 8), torch.tensor([0, 1, 1, 0, 1]), ["no", "yes"])
    fig = show_batch(data, count=5, columns=4)
    titled = [ax.get_title() for ax in fig.axes if ax.images]
    assert titled == ["no", "yes", "yes", "no", "yes"]


def test_live_plot_draws_the_history_and_throttles():
    plot = LivePlot(interval=3600)
    history = History(
        step=[10, 20],
        train_loss=[2.0, 1.0],
        train_accuracy=[0.5, 0.7],
        val_loss=[2.1, 1.2],
        val_accuracy=[0.4, 0.6],
    )
    plot.update(history)  # the first call draws
    assert list(plot.accuracy_ax.lines[1].get_ydata()) == [0.4, 0.6]
    assert plot.accuracy_ax.lines[1].get_label() == plot.loss_ax.lines[1].get_label() == "validation"
    history.val_accuracy.append(0.9)
    history.step.append(30)
    history.train_loss.append(0.5)
    history.train_accuracy.append(0.8)
    history.val_loss.append(0.8)
    plot.update(history)  # within the interval: not redrawn
    assert len(plot.accuracy_ax.lines[1].get_ydata()) == 2
    history.done = True
    plot.update(history)  # the end is always drawn
    assert list(plot.accuracy_ax.lines[1].get_ydata()) == [0.4, 0.6, 0.9]
    assert list(plot.accuracy_ax.lines[1].get_xdata()) == [10, 20, 30]  # steps: the same on every machine
    assert plot.accuracy_ax.get_xlabel() == "optimiser steps"


def test_live_plot_draws_the_label_smoothing_floor():
    plot = LivePlot(loss_floor=0.5)
    history = History(step=[9], train_loss=[0.6], train_accuracy=[0.9], val_loss=[0.3], val_accuracy=[0.9], done=True)
    plot.update(history)
    floor = [line for line in plot.loss_ax.lines if line.get_label() == "lowest train loss possible"]
    assert len(floor) == 1 and list(floor[0].get_ydata()) == [0.5, 0.5]
    assert not any(line.get_linestyle() == "--" for line in LivePlot().loss_ax.lines)


def test_live_plot_shows_a_curve_at_100_percent():
    plot = LivePlot()
    history = History(step=[1], train_loss=[0.1], train_accuracy=[1.0], val_loss=[0.1], val_accuracy=[1.0])
    history.done = True
    plot.update(history)
    low, high = plot.accuracy_ax.get_ylim()
    assert low == 0 and 1.0 < high <= 1.05  # the line at 1.0 is inside the axes, not on their edge


def test_show_confusion_writes_the_counts():
    matrix = torch.tensor([[5, 1], [0, 4]])
    ax = show_confusion(matrix, ["a", "b"]).axes[0]
    assert sorted(t.get_text() for t in ax.texts) == ["1", "4", "5"]
    assert ax.get_title() == "9 of 10 right"


def test_show_mistakes_shows_only_the_wrong_ones():
    labels, predictions = torch.tensor([0, 1, 1, 0]), torch.tensor([0, 0, 1, 1])
    fig = show_mistakes(torch.rand(4, 1, 8, 8), labels, predictions, ["zero", "one"])
    assert [ax.get_title() for ax in fig.axes if ax.images] == ["one -> zero", "zero -> one"]


def test_the_training_plots_refuse_mismatched_input():
    data = ImageDataset(torch.rand(2, 1, 4, 4), torch.tensor([0, 1]), ["no", "yes"])
    with pytest.raises(ValueError, match="count must be a whole number"):
        show_batch(data, count=0)
    with pytest.raises(ValueError, match="expected an ImageDataset"):
        show_batch(torch.rand(2, 1, 4, 4))
    with pytest.raises(ValueError, match="expected 2 class names, one per row of the matrix, got 3"):
        show_confusion(torch.tensor([[5, 1], [0, 4]]), ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"square confusion matrix \(classes, classes\), got \(2, 3\)"):
        show_confusion(torch.ones(2, 3), ["a", "b"])
    images, classes = torch.rand(4, 1, 8, 8), ["zero", "one"]
    with pytest.raises(ValueError, match=r"labels \(B,\) with B = 4, one per image, got \(2,\)"):
        show_mistakes(images, torch.tensor([0, 1]), torch.tensor([1, 0, 1, 0]), classes)
    with pytest.raises(ValueError, match=r"predictions must be class indices 0 .. 1, got 0 .. 5"):
        show_mistakes(images, torch.tensor([0, 1, 1, 0]), torch.tensor([0, 5, 1, 0]), classes)
    with pytest.raises(ValueError, match="the History that fit passes"):
        LivePlot().update({"step": [1]})
    uneven = History(step=[1, 2], train_loss=[2.0], train_accuracy=[0.5, 0.6])
    with pytest.raises(ValueError, match="one value per epoch"):
        LivePlot().update(uneven)
    with pytest.raises(ValueError, match="one value per epoch"):
        LivePlot().update(History(step=[1], train_loss=[2.0], train_accuracy=[0.5], val_accuracy=[0.1, 0.2]))


@pytest.mark.parametrize(
    "options, error, match",
    [
        (dict(size=0), ValueError, r"size must be a number of inches, greater than 0 and at most 20, got 0"),
        (dict(size=float("nan")), ValueError, r"size .* got nan"),
        (dict(size="4"), TypeError, r"size must be a number"),
        (dict(interval=-1), ValueError, r"interval must be a finite number of seconds between redraws, at least 0"),
        (dict(title=3), TypeError, r"title must be a str, got 3 \(int\)"),
        (dict(loss_floor=-0.1), ValueError, r"loss_floor must be a finite number \(a loss, in nats\), at least 0"),
        (dict(loss_floor="0.5"), TypeError, r"loss_floor must be a finite number .* got .0\.5. \(str\)"),
    ],
)
def test_live_plot_refuses_odd_settings(options, error, match):
    with pytest.raises(error, match=match):
        LivePlot(**options)
