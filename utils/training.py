"""Lesson 6: training and evaluating a model on a CPU, within a number of epochs or a time budget.

`train_step` is one optimiser step (lesson 6's exercise). `fit` repeats it with AdamW, a linear
warm-up and a cosine decay, optional label smoothing and random-shift augmentation, shows a
tqdm progress bar (the notebook widget in Jupyter) and returns a `History`. With `epochs` only,
training is deterministic on the CPU given `seed`; with `time_budget` the number of steps
depends on the machine's speed.
"""

import math
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset
from tqdm.auto import tqdm

from utils.datasets import check_dataset, check_float_images, check_labels
from utils.runtime import eval_mode
from utils.validation import WrongTypeError, check_number, check_positive, check_probability, check_whole


@dataclass
class History:
    """What happened during `fit`, one entry per epoch (the last may be cut short by the budget)."""

    epoch: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)  # optimiser steps done by the end of the epoch
    seconds: list[float] = field(default_factory=list)  # wall time since the start
    lr: list[float] = field(default_factory=list)  # learning rate at the end of the epoch
    train_loss: list[float] = field(default_factory=list)
    train_accuracy: list[float] = field(default_factory=list)
    test_loss: list[float] = field(default_factory=list)
    test_accuracy: list[float] = field(default_factory=list)
    snapshots: list[tuple[int, torch.Tensor]] = field(default_factory=list)  # (step, pos_embed copy)
    done: bool = False  # True once training has ended

    @property
    def final_test_accuracy(self) -> float:
        return self.test_accuracy[-1] if self.test_accuracy else float("nan")


# ---- checks of fit's arguments, one place per idea ---------------------------------------------

ROUNDING = 1e-9  # how far outside [0, 1] warmup_cosine lets progress stray (float rounding)


def _check_budget(epochs, time_budget, epochs_name: str = "epochs") -> tuple[int | None, float | None]:
    """(epochs, time_budget) as an int and a float (or None); an error unless training has an end:
    epochs (a whole number >= 1), time_budget (seconds > 0), or both."""
    if epochs is None and time_budget is None:
        raise ValueError("give epochs, time_budget (seconds), or both")
    if epochs is not None:
        epochs = check_whole(epochs, epochs_name)
    if time_budget is not None:
        time_budget = check_positive(time_budget, "time_budget", meaning=" of seconds")
    return epochs, time_budget


def _check_model(model) -> tuple[torch.device, torch.dtype]:
    """Raise unless `model` is a torch module with parameters; return their device and dtype."""
    if isinstance(model, type) and issubclass(model, nn.Module):
        raise WrongTypeError(
            f"model must be a model object, got the class {model.__name__} itself: build one first, "
            f"{model.__name__}(...)"
        )
    if not isinstance(model, nn.Module):
        raise WrongTypeError(f"model must be a torch nn.Module (e.g. a VisionTransformer), got {type(model).__name__}")
    weights = next((p for p in model.parameters() if p.is_floating_point()), None)
    if weights is None:
        raise ValueError(f"model ({type(model).__name__}) has no floating-point parameters to train or run")
    return weights.device, weights.dtype


def _check_logits_shape(logits, batch: int) -> None:
    """Raise unless the model's output `logits` is (B, num_classes) for a batch of B images."""
    if not isinstance(logits, torch.Tensor) or logits.ndim != 2 or len(logits) != batch:
        got = f"shape {tuple(logits.shape)}" if isinstance(logits, torch.Tensor) else f"a {type(logits).__name__}"
        raise ValueError(f"the model must return logits (B, num_classes); for a batch of B = {batch} it returned {got}")


def _check_logits(logits, labels: torch.Tensor, name: str = "labels") -> None:
    """Raise unless `logits` is (B, num_classes) for the B `labels`, each of them a class index below num_classes."""
    _check_logits_shape(logits, len(labels))
    num_classes = logits.shape[1]
    check_labels(labels, name, num_classes=num_classes, why=f"the model gives {num_classes} outputs")


@torch.no_grad()
def _num_outputs(model: nn.Module, images: torch.Tensor, device: torch.device) -> int:
    """The number of classes `model` tells apart: the width of its logits for the first image (eval mode)."""
    with eval_mode(model):
        logits = model(images[:1].to(device))  # (1, num_classes)
    _check_logits_shape(logits, 1)
    return logits.shape[1]


def _check_batch_size(batch_size) -> int:
    return check_whole(batch_size, "batch_size", meaning=" of images per step")


def _check_warmup(warmup) -> None:
    check_probability(warmup, "warmup", meaning=" (the fraction of training spent warming up)")


def _check_label_smoothing(label_smoothing) -> None:
    check_probability(label_smoothing, "label_smoothing")


def _check_max_shift(max_shift, images_shape: torch.Size) -> int:
    """max_shift as an int; an error unless it is a whole number of pixels from 0 to less than the images' side."""
    max_shift = check_whole(max_shift, "max_shift", minimum=0, meaning=" of pixels")
    H, W = images_shape[-2:]
    if max_shift >= min(H, W):
        raise ValueError(f"max_shift must be smaller than the images ({H} x {W}) or it moves them out, got {max_shift}")
    return max_shift


def _check_snapshots(snapshot_every, model: nn.Module) -> int | None:
    """snapshot_every as an int (or None); an error unless it is None or a whole number >= 1 of steps,
    on a model with a position table."""
    if snapshot_every is None:
        return None
    snapshot_every = check_whole(snapshot_every, "snapshot_every", meaning=" of steps (None: no snapshots)")
    if not isinstance(getattr(model, "pos_embed", None), torch.Tensor):
        raise ValueError(
            f"snapshot_every keeps copies of model.pos_embed, but this {type(model).__name__} has no position "
            "table: leave snapshot_every out"
        )
    return snapshot_every


# ---- training --------------------------------------------------------------------------------


def warmup_cosine(progress: float, warmup: float = 0.1) -> float:
    """Learning-rate factor in [0, 1] at `progress` in [0, 1]: linear warm-up, then cosine to 0.

    `warmup` is in [0, 1). A progress up to 1e-9 outside [0, 1] (float rounding) counts as 0 or 1;
    further out is refused.
    """
    _check_warmup(warmup)
    check_number(progress, "progress", meaning=" (the fraction of training done)")
    if not -ROUNDING <= progress <= 1 + ROUNDING:
        raise ValueError(f"progress must be from 0 to 1 (the fraction of training done), got {progress!r}")
    progress = min(max(progress, 0.0), 1.0)
    if progress < warmup:
        return progress / warmup
    return 0.5 * (1 + math.cos(math.pi * min(1.0, (progress - warmup) / (1 - warmup))))


def random_shift(images: torch.Tensor, max_shift: int, generator: torch.Generator) -> torch.Tensor:
    """Move every image by a random whole number of pixels (up to max_shift each way), zero-filled.

    Args:
        images: (B, C, H, W).
    Returns:
        (B, C, H, W), each image shifted on its own.
    """
    check_float_images(images, allow_empty=True)
    max_shift = _check_max_shift(max_shift, images.shape)
    if max_shift == 0:
        return images
    B, C, H, W = images.shape
    padded = F.pad(images, (max_shift,) * 4)  # (B, C, H + 2s, W + 2s)
    offsets = torch.randint(0, 2 * max_shift + 1, (B, 2), generator=generator)  # (B, 2): top, left
    rows = offsets[:, :1] + torch.arange(H)  # (B, H)
    cols = offsets[:, 1:] + torch.arange(W)  # (B, W)
    batch = torch.arange(B)[:, None, None]
    return padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    label_smoothing: float = 0.0,
    return_logits: bool = False,
) -> float | tuple[float, torch.Tensor]:
    """One optimiser step on one batch: zero the gradients, cross-entropy, backward, step.

    Args:
        model: maps images (B, C, H, W) to logits (B, num_classes).
        optimizer: updates the model's parameters.
        images: (B, C, H, W), on the model's device.
        labels: (B,) class indices.
        label_smoothing: spread this much of each target's probability over all classes.
        return_logits: also return the logits (B, num_classes), detached, e.g. for accuracy.
    Returns:
        the batch's mean loss as a float, or (loss, logits) with return_logits=True.
    """
    _, dtype = _check_model(model)
    check_float_images(images, dtype=dtype)
    check_labels(labels)
    if len(labels) != len(images):
        raise ValueError(
            f"images and labels must be one label per image, got {len(images)} images, {len(labels)} labels"
        )
    _check_label_smoothing(label_smoothing)
    optimizer.zero_grad(set_to_none=True)
    logits = model(images)  # (B, num_classes)
    _check_logits(logits, labels)
    loss = F.cross_entropy(logits, labels, label_smoothing=label_smoothing)
    loss.backward()
    optimizer.step()
    if return_logits:
        return loss.item(), logits.detach()
    return loss.item()


@torch.no_grad()
def evaluate(model: nn.Module, dataset: TensorDataset, batch_size: int = 128) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of `model` on `dataset` (eval mode, no gradients)."""
    device, dtype = _check_model(model)
    images, labels = check_dataset(dataset, "dataset", dtype=dtype)
    batch_size = _check_batch_size(batch_size)
    total_loss, correct = 0.0, 0
    with eval_mode(model):
        for start in range(0, len(labels), batch_size):
            x = images[start : start + batch_size].to(device)
            y = labels[start : start + batch_size].to(device)
            logits = model(x)  # (b, num_classes)
            _check_logits(logits, y, "dataset's labels")
            total_loss += F.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(dim=-1) == y).sum().item()
    return total_loss / len(labels), correct / len(labels)


@torch.no_grad()
def predict(model: nn.Module, images: torch.Tensor, batch_size: int = 128) -> torch.Tensor:
    """Predicted class of every image: (N, C, H, W) -> (N,)."""
    device, dtype = _check_model(model)
    check_float_images(images, dtype=dtype)
    batch_size = _check_batch_size(batch_size)
    with eval_mode(model):
        predictions = [
            model(images[start : start + batch_size].to(device)).argmax(dim=-1).cpu()
            for start in range(0, len(images), batch_size)
        ]
    return torch.cat(predictions)


class TrainingClock:
    """How far training has come: the larger of (steps done / total_steps) and (seconds since
    the start / time_budget); either limit may be None. Training is over at 1."""

    def __init__(self, total_steps: int | None, time_budget: float | None):
        self.total_steps, self.time_budget = _check_budget(total_steps, time_budget, "total_steps")
        self.steps = 0
        self.start = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self.start

    def fraction(self) -> float:
        by_steps = self.steps / self.total_steps if self.total_steps is not None else 0.0
        by_time = self.seconds() / self.time_budget if self.time_budget is not None else 0.0
        return max(by_steps, by_time)

    def finished(self) -> bool:
        return self.fraction() >= 1.0


class ProgressReport:
    """fit's tqdm bar (the notebook widget in Jupyter): steps when training for epochs, seconds
    with a time budget, and the running loss and accuracy of the epoch after each step."""

    def __init__(self, clock: TrainingClock, enabled: bool = True):
        self.clock = clock
        self.by_time = clock.time_budget is not None
        self.bar = tqdm(
            total=round(clock.time_budget) if self.by_time else clock.total_steps,
            unit="s" if self.by_time else "step",
            disable=not enabled,
            leave=True,
        )

    def step(self, epoch: int, loss: float, accuracy: float) -> None:
        """After a step: the epoch's mean loss and accuracy so far."""
        self.bar.n = min(round(self.clock.seconds()), self.bar.total) if self.by_time else self.clock.steps
        self.bar.set_postfix(epoch=epoch, loss=f"{loss:.3f}", acc=f"{accuracy:.3f}", refresh=False)
        self.bar.update(0)

    def epoch(self, epoch: int, loss: float, test_accuracy: float) -> None:
        """After an epoch's evaluation: its training loss and the test accuracy."""
        self.bar.set_postfix(epoch=epoch, loss=f"{loss:.3f}", test_acc=f"{test_accuracy:.3f}")

    def close(self) -> None:
        self.bar.close()


def shuffled_batches(
    images: torch.Tensor,
    labels: torch.Tensor,
    batch_size: int,
    max_shift: int,
    generator: torch.Generator,
    device: torch.device,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """One epoch of batches in a random order, each image randomly shifted (see random_shift).

    Args:
        images: (N, C, H, W). labels: (N,).
    Yields:
        images (b, C, H, W) and labels (b,) on `device`; b = batch_size except perhaps the last.
    """
    batch_size = _check_batch_size(batch_size)
    order = torch.randperm(len(labels), generator=generator)  # (N,)
    for batch_start in range(0, len(labels), batch_size):
        index = order[batch_start : batch_start + batch_size]
        yield random_shift(images[index], max_shift, generator).to(device), labels[index].to(device)


def train_epoch(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    clock: TrainingClock,
    *,
    lr: float,
    warmup: float,
    label_smoothing: float = 0.0,
    on_step: Callable[[float, float], None] | None = None,
) -> tuple[float, float]:
    """Train on `batches`, one train_step each, until they run out or `clock` says training is over.

    Before every step the learning rate is set to lr * warmup_cosine(clock.fraction(), warmup)
    (the fraction capped at 1: a time budget may run out between two looks at the clock).
    `on_step(mean loss, accuracy)` is called after every step with the epoch's running values.
    Returns:
        the epoch's mean training loss and accuracy over the images it saw.
    """
    seen, loss_sum, correct = 0, 0.0, 0
    for images, labels in batches:
        for group in optimizer.param_groups:
            group["lr"] = lr * warmup_cosine(min(clock.fraction(), 1.0), warmup)
        loss, logits = train_step(model, optimizer, images, labels, label_smoothing=label_smoothing, return_logits=True)
        clock.steps += 1
        seen += len(labels)
        loss_sum += loss * len(labels)
        correct += (logits.argmax(dim=-1) == labels).sum().item()
        if on_step is not None:
            on_step(loss_sum / seen, correct / seen)
        if clock.finished():
            break
    if seen == 0:
        raise ValueError("train_epoch got no batches to train on: is the training set empty?")
    return loss_sum / seen, correct / seen


def _check_training_sets(
    model: nn.Module, train, test, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Raise unless `train` (and `test`, if given) hold images the model takes and labels it can
    predict (checked against the width of its logits for one image); return train's tensors."""
    images, labels = check_dataset(train, "train", dtype=dtype)
    num_classes = _num_outputs(model, images, device)
    why = f"the model gives {num_classes} outputs"
    check_labels(labels, "train's labels", num_classes=num_classes, why=why)
    if test is not None:
        test_images, test_labels = check_dataset(test, "test", dtype=dtype)
        if test_images.shape[1:] != images.shape[1:]:
            raise ValueError(
                f"test's images are {tuple(test_images.shape[1:])} but train's are {tuple(images.shape[1:])}: "
                "both must be the same (C, H, W)"
            )
        check_labels(test_labels, "test's labels", num_classes=num_classes, why=why)
    return images, labels


def fit(
    model: nn.Module,
    train: TensorDataset,
    test: TensorDataset | None = None,
    *,
    epochs: int | None = None,
    time_budget: float | None = None,
    batch_size: int = 128,
    lr: float = 1e-3,
    weight_decay: float = 0.05,
    warmup: float = 0.1,
    label_smoothing: float = 0.0,
    max_shift: int = 0,
    seed: int = 0,
    snapshot_every: int | None = None,
    on_epoch: Callable[[History], None] | None = None,
    progress: bool = True,
) -> History:
    """Train `model` with AdamW and a warm-up + cosine schedule; evaluate on `test` every epoch.

    Args:
        model: a classifier mapping (B, C, H, W) images to (B, num_classes) logits; it is trained
            on the device its parameters are on.
        train, test: datasets of (images, labels) tensors.
        epochs: passes over `train`. time_budget: seconds of training. Give one or both: training
            stops at whichever ends first, and the schedule follows whichever is further along.
        warmup: the fraction of training spent warming the learning rate up from 0.
        label_smoothing: spread this much of each target's probability over all classes.
        max_shift: augment by shifting each training image up to this many pixels (0: off).
        seed: fixes the initial shuffling and augmentation (the model's init is the caller's).
        snapshot_every: keep a copy of `model.pos_embed` every this many steps (and at 0 and
            the end), for watching position embeddings learn.
        on_epoch: called with the history after every epoch, and once more when training has
            ended (history.done is then True), e.g. a live plot.
    Returns:
        the History.
    Raises:
        ValueError or TypeError, naming the argument, before the first step: a budget that never
        ends (0, negative, NaN), something other than a dataset of float images (N, C, H, W) and
        int64 labels, labels the model's outputs cannot name, a setting out of its range.
    """
    epochs, time_budget = _check_budget(epochs, time_budget)
    device, dtype = _check_model(model)
    images, labels = _check_training_sets(model, train, test, device, dtype)
    batch_size = _check_batch_size(batch_size)
    check_positive(lr, "lr", meaning=" (the peak learning rate)")
    check_number(weight_decay, "weight_decay", low=0)
    _check_warmup(warmup)
    _check_label_smoothing(label_smoothing)
    max_shift = _check_max_shift(max_shift, images.shape)
    seed = check_whole(seed, "seed", minimum=-(2**63), maximum=2**64 - 1)
    snapshot_every = _check_snapshots(snapshot_every, model)
    if on_epoch is not None and not callable(on_epoch):
        raise WrongTypeError(f"on_epoch must be a function of the history (or None), got {type(on_epoch).__name__}")
    steps_per_epoch = math.ceil(len(labels) / batch_size)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)  # its first build is slow
    clock = TrainingClock(epochs * steps_per_epoch if epochs is not None else None, time_budget)
    history = History()
    report = ProgressReport(clock, enabled=progress)

    def snapshot() -> None:
        history.snapshots.append((clock.steps, model.pos_embed.detach().cpu().clone()))

    if snapshot_every:
        snapshot()
    epoch = 0

    def after_step(loss: float, accuracy: float) -> None:
        if snapshot_every and clock.steps % snapshot_every == 0:
            snapshot()
        report.step(epoch, loss, accuracy)

    model.train()
    try:
        while clock.steps == 0 or not clock.finished():  # at least one step, however short the budget
            epoch += 1
            batches = shuffled_batches(images, labels, batch_size, max_shift, generator, device)
            train_loss, train_accuracy = train_epoch(
                model,
                optimizer,
                batches,
                clock,
                lr=lr,
                warmup=warmup,
                label_smoothing=label_smoothing,
                on_step=after_step,
            )
            history.epoch.append(epoch)
            history.step.append(clock.steps)
            history.seconds.append(clock.seconds())
            history.lr.append(optimizer.param_groups[0]["lr"])
            history.train_loss.append(train_loss)
            history.train_accuracy.append(train_accuracy)
            if test is not None:
                test_loss, test_accuracy = evaluate(model, test)
                history.test_loss.append(test_loss)
                history.test_accuracy.append(test_accuracy)
                report.epoch(epoch, train_loss, test_accuracy)
            if on_epoch is not None:
                on_epoch(history)
        if snapshot_every and history.snapshots[-1][0] != clock.steps:
            snapshot()
        history.done = True
        if on_epoch is not None:
            on_epoch(history)
    finally:
        report.close()  # also when a step or on_epoch raises: no bar left hanging
    model.eval()
    return history


def confusion_matrix(predictions: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """(num_classes, num_classes) counts: row = true class, column = predicted class.

    Args:
        predictions, labels: (N,) int64 class indices from 0 to num_classes - 1.
    """
    num_classes = check_whole(num_classes, "num_classes")
    why = f"num_classes is {num_classes}"
    for name, classes in [("predictions", predictions), ("labels", labels)]:
        if isinstance(classes, torch.Tensor) and classes.ndim == 2 and classes.is_floating_point():
            raise ValueError(
                f"{name} must be class indices (N,), got scores {tuple(classes.shape)}: use .argmax(dim=-1)"
            )
        check_labels(classes, name, num_classes=num_classes, why=why)
    if len(predictions) != len(labels):
        raise ValueError(f"predictions and labels must be one per image, got {len(predictions)} and {len(labels)}")
    index = labels * num_classes + predictions  # (N,) one cell per (true, predicted) pair
    return torch.bincount(index, minlength=num_classes**2).reshape(num_classes, num_classes)


def quick_mode() -> bool:
    """True under CI (CI=true) or when VIT_QUICK=1: lessons then train for a few epochs."""
    return os.environ.get("VIT_QUICK", "") not in ("", "0") or os.environ.get("CI", "").lower() == "true"


def budget(seconds: float, quick_epochs: int) -> dict:
    """How long a lesson cell trains, as keyword arguments for `fit`: `seconds` of wall time
    normally; in quick mode a fixed number of epochs instead, so that tests get the same
    result on every machine, fast or slow."""
    seconds = check_positive(seconds, "seconds")
    quick_epochs = check_whole(quick_epochs, "quick_epochs")
    return {"epochs": quick_epochs} if quick_mode() else {"time_budget": seconds}
