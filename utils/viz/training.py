"""Lesson 6's pictures: a batch of a dataset, live training curves, a confusion matrix, mistakes."""

import time

import matplotlib.pyplot as plt
import torch
from torch.utils.data import TensorDataset

from utils.viz.core import DPI, to_numpy_image


def show_batch(dataset: TensorDataset, count: int = 16, columns: int = 8, size: float = 1.2) -> plt.Figure:
    """The first `count` images of `dataset` with their class names (dataset.classes)."""
    images, labels = dataset.tensors
    count = min(count, len(labels))
    rows = -(-count // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(size * columns, size * rows + 0.3), dpi=DPI, squeeze=False)
    for index, ax in enumerate(axes.flat):
        ax.set_axis_off()
        if index < count:
            ax.imshow(to_numpy_image(images[index]), cmap="gray_r" if images.shape[1] == 1 else None)
            ax.set_title(dataset.classes[labels[index]], fontsize=7)
    fig.tight_layout()
    return fig


class LivePlot:
    """Loss and accuracy curves redrawn as training goes: pass `LivePlot().update` as fit's
    on_epoch. In Jupyter it redraws one figure in place, at most every `interval` seconds (an
    epoch of the digits lasts a third of a second, and drawing costs about as much) and once
    at the end; elsewhere it only keeps the figure up to date."""

    def __init__(self, title: str = "", size: float = 4.0, interval: float = 5.0):
        self.fig, (self.loss_ax, self.accuracy_ax) = plt.subplots(1, 2, figsize=(2.2 * size, 0.7 * size), dpi=DPI)
        self.fig.suptitle(title)
        self.handle = None
        self.interval = interval
        self.last_draw = -float("inf")
        plt.close(self.fig)  # drawn by update(), not again at the end of the cell

    def update(self, history) -> None:
        if not history.done and time.perf_counter() - self.last_draw < self.interval:
            return
        self.last_draw = time.perf_counter()
        for ax in (self.loss_ax, self.accuracy_ax):
            ax.clear()
            ax.set_xlabel("seconds")
            ax.grid(alpha=0.3)
        self.loss_ax.plot(history.seconds, history.train_loss, label="train")
        self.accuracy_ax.plot(history.seconds, history.train_accuracy, label="train")
        if history.test_accuracy:
            self.loss_ax.plot(history.seconds, history.test_loss, label="test")
            self.accuracy_ax.plot(history.seconds, history.test_accuracy, label="test")
        self.loss_ax.set_title("loss")
        self.accuracy_ax.set_title("accuracy")
        self.accuracy_ax.set_ylim(0, 1)
        self.loss_ax.legend()
        self.fig.tight_layout()
        try:
            from IPython import get_ipython
            from IPython.display import display
        except ImportError:
            return
        if get_ipython() is None:
            return
        if self.handle is None:
            self.handle = display(self.fig, display_id=True)
        else:
            self.handle.update(self.fig)


def show_confusion(matrix: torch.Tensor, classes: list[str], size: float = 4.0) -> plt.Figure:
    """A confusion matrix (row = true class, column = predicted), each cell's count written in."""
    fig, ax = plt.subplots(figsize=(size, size), dpi=DPI)
    ax.imshow(matrix.numpy(), cmap="Blues")
    for (i, j), count in zip(
        torch.cartesian_prod(torch.arange(len(classes)), torch.arange(len(classes))).tolist(), matrix.flatten().tolist()
    ):
        if count:
            ax.text(
                j,
                i,
                str(count),
                ha="center",
                va="center",
                fontsize=7,
                color="white" if count > matrix.max() / 2 else "black",
            )
    ax.set_xticks(range(len(classes)), classes, rotation=90 if max(map(len, classes)) > 2 else 0)
    ax.set_yticks(range(len(classes)), classes)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(f"{int(matrix.trace())} of {int(matrix.sum())} right")
    return fig


def show_mistakes(
    images: torch.Tensor, labels: torch.Tensor, predictions: torch.Tensor, classes: list[str], count: int = 12
) -> plt.Figure:
    """The first `count` misclassified images, titled "true -> predicted"."""
    wrong = (predictions != labels).nonzero().flatten()[:count]
    columns = max(1, min(len(wrong), 8))
    rows = max(1, -(-len(wrong) // columns))
    fig, axes = plt.subplots(rows, columns, figsize=(1.3 * columns, 1.4 * rows), dpi=DPI, squeeze=False)
    for ax in axes.flat:
        ax.set_axis_off()
    for ax, index in zip(axes.flat, wrong.tolist()):
        ax.imshow(to_numpy_image(images[index]), cmap="gray_r" if images.shape[1] == 1 else None)
        ax.set_title(f"{classes[labels[index]]} -> {classes[predictions[index]]}", fontsize=7)
    fig.suptitle(f"{int((predictions != labels).sum())} mistakes; the first {len(wrong)}", fontsize=9)
    fig.tight_layout()
    return fig
