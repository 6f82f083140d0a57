"""Lesson 6: training and evaluating a model on a CPU, within a number of epochs or a time budget.

`fit` uses AdamW with a linear warm-up and a cosine decay, optional label smoothing and
random-shift augmentation, shows a tqdm progress bar (the notebook widget in Jupyter) and
returns a `History`. With `epochs` only, training is deterministic on the CPU given `seed`;
with `time_budget` the number of steps depends on the machine's speed.
"""

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset
from tqdm.auto import tqdm


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


def warmup_cosine(progress: float, warmup: float = 0.1) -> float:
    """Learning-rate factor in [0, 1] at `progress` in [0, 1]: linear warm-up, then cosine to 0."""
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
    if max_shift == 0:
        return images
    B, C, H, W = images.shape
    padded = F.pad(images, (max_shift,) * 4)  # (B, C, H + 2s, W + 2s)
    offsets = torch.randint(0, 2 * max_shift + 1, (B, 2), generator=generator)  # (B, 2): top, left
    rows = offsets[:, :1] + torch.arange(H)  # (B, H)
    cols = offsets[:, 1:] + torch.arange(W)  # (B, W)
    batch = torch.arange(B)[:, None, None]
    return padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)


@torch.no_grad()
def evaluate(model: nn.Module, dataset: TensorDataset, batch_size: int = 128) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of `model` on `dataset` (eval mode, no gradients)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    images, labels = dataset.tensors
    total_loss, correct = 0.0, 0
    for start in range(0, len(labels), batch_size):
        x = images[start : start + batch_size].to(device)
        y = labels[start : start + batch_size].to(device)
        logits = model(x)  # (b, num_classes)
        total_loss += F.cross_entropy(logits, y, reduction="sum").item()
        correct += (logits.argmax(dim=-1) == y).sum().item()
    model.train(was_training)
    return total_loss / len(labels), correct / len(labels)


@torch.no_grad()
def predict(model: nn.Module, images: torch.Tensor, batch_size: int = 128) -> torch.Tensor:
    """Predicted class of every image: (N, C, H, W) -> (N,)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    predictions = [
        model(images[start : start + batch_size].to(device)).argmax(dim=-1).cpu()
        for start in range(0, len(images), batch_size)
    ]
    model.train(was_training)
    return torch.cat(predictions)


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
    """
    if epochs is None and time_budget is None:
        raise ValueError("give epochs, time_budget (seconds), or both")
    device = next(model.parameters()).device
    images, labels = train.tensors
    steps_per_epoch = math.ceil(len(labels) / batch_size)
    total_steps = epochs * steps_per_epoch if epochs is not None else None
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    history = History()
    bar = tqdm(
        total=total_steps if time_budget is None else round(time_budget),
        unit="step" if time_budget is None else "s",
        disable=not progress,
        leave=True,
    )
    snapshot = lambda step: history.snapshots.append((step, model.pos_embed.detach().cpu().clone()))  # noqa: E731
    if snapshot_every:
        snapshot(0)

    step, epoch, start = 0, 0, time.perf_counter()

    def progress_fraction() -> float:
        by_steps = step / total_steps if total_steps else 0.0
        by_time = (time.perf_counter() - start) / time_budget if time_budget else 0.0
        return max(by_steps, by_time)

    model.train()
    while progress_fraction() < 1.0:
        epoch += 1
        order = torch.randperm(len(labels), generator=generator)
        seen, loss_sum, correct = 0, 0.0, 0
        for batch_start in range(0, len(labels), batch_size):
            index = order[batch_start : batch_start + batch_size]
            x = random_shift(images[index], max_shift, generator).to(device)  # (b, C, H, W)
            y = labels[index].to(device)  # (b,)
            for group in optimizer.param_groups:
                group["lr"] = lr * warmup_cosine(progress_fraction(), warmup)
            logits = model(x)  # (b, num_classes)
            loss = F.cross_entropy(logits, y, label_smoothing=label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            seen += len(y)
            loss_sum += loss.item() * len(y)
            correct += (logits.argmax(dim=-1) == y).sum().item()
            if snapshot_every and step % snapshot_every == 0:
                snapshot(step)
            bar.n = step if time_budget is None else min(round(time.perf_counter() - start), bar.total)
            bar.set_postfix(epoch=epoch, loss=f"{loss_sum / seen:.3f}", acc=f"{correct / seen:.3f}", refresh=False)
            bar.update(0)
            if progress_fraction() >= 1.0:
                break
        history.epoch.append(epoch)
        history.step.append(step)
        history.seconds.append(time.perf_counter() - start)
        history.lr.append(optimizer.param_groups[0]["lr"])
        history.train_loss.append(loss_sum / seen)
        history.train_accuracy.append(correct / seen)
        if test is not None:
            test_loss, test_accuracy = evaluate(model, test)
            history.test_loss.append(test_loss)
            history.test_accuracy.append(test_accuracy)
            bar.set_postfix(epoch=epoch, loss=f"{loss_sum / seen:.3f}", test_acc=f"{test_accuracy:.3f}")
        if on_epoch is not None:
            on_epoch(history)
    if snapshot_every and history.snapshots[-1][0] != step:
        snapshot(step)
    history.done = True
    if on_epoch is not None:
        on_epoch(history)
    bar.close()
    model.eval()
    return history


def confusion_matrix(predictions: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """(num_classes, num_classes) counts: row = true class, column = predicted class."""
    index = labels * num_classes + predictions  # (N,) one cell per (true, predicted) pair
    return torch.bincount(index, minlength=num_classes**2).reshape(num_classes, num_classes)


def quick_mode() -> bool:
    """True under CI (CI=true) or when VIT_QUICK=1: lessons then train for a few epochs."""
    return os.environ.get("VIT_QUICK", "") not in ("", "0") or os.environ.get("CI", "").lower() == "true"


def budget(seconds: float, quick_epochs: int) -> dict:
    """How long a lesson cell trains, as keyword arguments for `fit`: `seconds` of wall time
    normally; in quick mode a fixed number of epochs instead, so that tests get the same
    result on every machine, fast or slow."""
    return {"epochs": quick_epochs} if quick_mode() else {"time_budget": seconds}
