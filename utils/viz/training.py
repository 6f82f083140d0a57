"""Lesson 6's pictures: a batch of a dataset, live training curves, a confusion matrix, mistakes."""

import time

import matplotlib.pyplot as plt
import torch
from torch.utils.data import TensorDataset

from utils.validation import WrongTypeError, check_number, check_tensor, check_whole, describe
from utils.viz.core import DPI, check_image_batch, check_names, to_numpy_image, with_alt_text


def _check_class_indices(labels: torch.Tensor, classes: list[str], what: str) -> None:
    """A ValueError unless every entry of `labels` is an index into `classes`."""
    if labels.is_floating_point() or labels.dtype == torch.bool:
        raise ValueError(f"expected {what} as class indices (integers), got {labels.dtype}")
    if labels.numel() and not (labels.min() >= 0 and labels.max() < len(classes)):
        low, high = labels.min().item(), labels.max().item()
        raise ValueError(f"{what} must be class indices 0 .. {len(classes) - 1}, got {low} .. {high}")


def show_batch(dataset: TensorDataset, count: int = 16, columns: int = 8, size: float = 1.2) -> plt.Figure:
    """The first `count` images of `dataset` with their class names (dataset.classes)."""
    if not hasattr(dataset, "tensors") or not hasattr(dataset, "classes"):
        raise ValueError(f"expected an ImageDataset (with .tensors and .classes), got {type(dataset).__name__}")
    images, labels = dataset.tensors
    check_whole(count, "count")
    check_whole(columns, "columns")
    check_image_batch(images, "the dataset's images (N, C, H, W)")
    _check_class_indices(labels, dataset.classes, "the dataset's labels")
    count = min(count, len(labels))
    rows = -(-count // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(size * columns, size * rows + 0.3), dpi=DPI, squeeze=False)
    for index, ax in enumerate(axes.flat):
        ax.set_axis_off()
        if index < count:
            ax.imshow(to_numpy_image(images[index]), cmap="gray_r" if images.shape[1] == 1 else None)
            ax.set_title(dataset.classes[labels[index]], fontsize=7)
    fig.tight_layout()
    H, W = images.shape[-2:]
    shown = ", ".join(dataset.classes[label] for label in labels[:count].tolist())
    return with_alt_text(
        fig, f"The first {count} images of the set, {H} x {W} px each, titled with their class: {shown}."
    )


class LivePlot:
    """Loss and accuracy curves against optimiser steps, redrawn as training goes: pass
    `LivePlot().update` as fit's on_epoch. In Jupyter it redraws one figure in place, at most every
    `interval` seconds (an epoch of the digits lasts a tenth of a second, and drawing costs more)
    and once at the end; elsewhere it only keeps the figure up to date.

    loss_floor: a dashed line at the lowest training loss possible, e.g. the entropy of
    label-smoothed targets (utils.training.label_smoothing_floor); None draws none."""

    def __init__(self, title: str = "", size: float = 4.0, interval: float = 5.0, loss_floor: float | None = None):
        if not isinstance(title, str):
            raise WrongTypeError(f"title must be a str, got {describe(title)}")
        size = check_number(size, "size", low=0, low_open=True, high=20, meaning=" of inches")
        interval = check_number(interval, "interval", low=0, meaning=" of seconds between redraws")
        if loss_floor is not None:
            loss_floor = check_number(loss_floor, "loss_floor", low=0, meaning=" (a loss, in nats)")
        self.loss_floor = loss_floor
        self.fig, (self.loss_ax, self.accuracy_ax) = plt.subplots(1, 2, figsize=(2.2 * size, 0.7 * size), dpi=DPI)
        self.fig.suptitle(title)
        self.handle = None
        self.interval = interval
        self.last_draw = -float("inf")
        plt.close(self.fig)  # drawn by update(), not again at the end of the cell

    def update(self, history) -> None:
        """Redraw the curves of `history` (a training.History), unless the last drawing is recent."""
        curves = ("step", "train_loss", "train_accuracy", "val_loss", "val_accuracy", "done")
        if not all(hasattr(history, name) for name in curves):
            raise ValueError(f"expected the History that fit passes to on_epoch, got {type(history).__name__}")
        lengths = {name: len(getattr(history, name)) for name in curves[:-1]}
        validated = {lengths["val_loss"], lengths["val_accuracy"]} - {0}
        if len({lengths["step"], lengths["train_loss"], lengths["train_accuracy"], *validated}) != 1:
            raise ValueError(f"expected one value per epoch in every curve of the history, got lengths {lengths}")
        if not history.done and time.perf_counter() - self.last_draw < self.interval:
            return
        self.last_draw = time.perf_counter()
        for ax in (self.loss_ax, self.accuracy_ax):
            ax.clear()
            ax.set_xlabel("optimiser steps")
            ax.grid(alpha=0.3)
        self.loss_ax.plot(history.step, history.train_loss, label="train")
        self.accuracy_ax.plot(history.step, history.train_accuracy, label="train")
        if history.val_accuracy:
            self.loss_ax.plot(history.step, history.val_loss, label="validation")
            self.accuracy_ax.plot(history.step, history.val_accuracy, label="validation")
        if self.loss_floor is not None:
            self.loss_ax.axhline(self.loss_floor, color="grey", linestyle="--", label="lowest train loss possible")
        self.loss_ax.set_title("loss")
        self.accuracy_ax.set_title("accuracy")
        self.accuracy_ax.set_ylim(0, 1.02)  # a little above 1: a curve at 100 % stays in sight
        self.loss_ax.legend()
        self.fig.tight_layout()
        last = f"train loss {history.train_loss[-1]:.3f}, train accuracy {history.train_accuracy[-1]:.1%}"
        if history.val_accuracy:
            last += f", validation accuracy {history.val_accuracy[-1]:.1%}"
        with_alt_text(
            self.fig,
            f"Loss (left) and accuracy (right) against optimiser steps, training and validation; after "
            f"{history.step[-1]} steps: {last}.",
        )
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
    check_tensor(matrix, "a confusion matrix (classes, classes)", ndim=2, nonempty=True)
    if matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"expected a square confusion matrix (classes, classes), got {tuple(matrix.shape)}")
    classes = check_names(classes, matrix.shape[0], "class names, one per row of the matrix")
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
    off = matrix.clone()
    off.fill_diagonal_(0)
    i, j = divmod(int(off.argmax()), len(classes))
    times = "once" if int(off[i, j]) == 1 else f"{int(off[i, j])} times"
    worst = f"; the most frequent mistake: {classes[i]} taken for {classes[j]}, {times}" if off.max() else ""
    return with_alt_text(
        fig,
        f"A confusion matrix, true class by row, predicted by column, {len(classes)} classes: "
        f"{int(matrix.trace())} of {int(matrix.sum())} right, on the diagonal{worst}.",
    )


def show_mistakes(
    images: torch.Tensor, labels: torch.Tensor, predictions: torch.Tensor, classes: list[str], count: int = 12
) -> plt.Figure:
    """The first `count` misclassified images, titled "true -> predicted"."""
    B = len(check_image_batch(images))
    for tensor, what in [(labels, "labels (B,)"), (predictions, "predictions (B,)")]:
        if tuple(check_tensor(tensor, what, ndim=1, nonempty=True).shape) != (B,):
            raise ValueError(f"expected {what} with B = {B}, one per image, got {tuple(tensor.shape)}")
        _check_class_indices(tensor, classes, what.split()[0])
    check_whole(count, "count")
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
    pairs = ", ".join(f"{classes[labels[i]]} taken for {classes[predictions[i]]}" for i in wrong.tolist())
    return with_alt_text(
        fig, f"The first {len(wrong)} of {int((predictions != labels).sum())} misclassified images: {pairs or 'none'}."
    )
