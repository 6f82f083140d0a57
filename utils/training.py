"""Lesson 6: training and evaluating a model on a CPU, for a number of steps or epochs.

`train_step` is one optimiser step (lesson 6's exercise). `fit` repeats it with AdamW on
`parameter_groups` (no weight decay on biases, norms and the model's `no_weight_decay()` names;
a learning-rate multiplier per group), a linear warm-up and a cosine decay, optional label
smoothing and random-shift augmentation; it evaluates a validation set after every epoch, shows a
tqdm progress bar (the notebook widget in Jupyter) and returns a `History`. Budgeted in `steps` or
`epochs` and run on one CPU thread (the default), training gives the same numbers on every CPU
machine given `seed`; a `time_budget` makes the number of steps, and so the result, depend on the
machine's speed. `label_smoothing_floor` is the lowest training loss label smoothing allows.
"""

import difflib
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset
from tqdm.auto import tqdm

from utils.datasets import check_dataset, check_float_images, check_labels
from utils.runtime import check_threads, eval_mode, release_memory, torch_threads
from utils.validation import (
    WrongTypeError,
    check_flag,
    check_number,
    check_positive,
    check_probability,
    check_whole,
    describe,
)

RENAMED = {  # History's fields before fit's second dataset became the validation set
    "test_loss": "val_loss",
    "test_accuracy": "val_accuracy",
    "final_test_accuracy": "final_val_accuracy",
}


@dataclass
class History:
    """What happened during `fit`, one entry per epoch (the last may be cut short by the budget)."""

    epoch: list[int] = field(default_factory=list)  # epochs started (the last may be partial)
    step: list[int] = field(default_factory=list)  # optimiser steps done by the end of the epoch
    seconds: list[float] = field(default_factory=list)  # wall time since the start
    lr: list[float] = field(default_factory=list)  # peak lr x schedule at the epoch's last step (before multipliers)
    train_loss: list[float] = field(default_factory=list)
    train_accuracy: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)  # on the validation set, after each epoch
    val_accuracy: list[float] = field(default_factory=list)
    snapshots: list[tuple[int, torch.Tensor]] = field(default_factory=list)  # (step, pos_embed copy)
    done: bool = False  # True once training has ended

    @property
    def final_val_accuracy(self) -> float:
        """The validation accuracy after the last epoch (nan without a validation set)."""
        return self.val_accuracy[-1] if self.val_accuracy else float("nan")

    @property
    def steps_per_second(self) -> float:
        """Optimiser steps per second of wall time, evaluations and on_epoch included (nan before
        the first epoch): how fast this machine trains, the one number here that depends on it."""
        if not self.step or not self.seconds or self.seconds[-1] <= 0:
            return float("nan")
        return self.step[-1] / self.seconds[-1]

    def __getattr__(self, name: str):
        """Only called for a missing attribute: name the new one for a field that was renamed."""
        if name in RENAMED:
            raise AttributeError(
                f"History.{name} is now History.{RENAMED[name]}: fit evaluates its second dataset as the "
                "validation set; measure the test set once, at the end, with evaluate(model, test)"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


# ---- checks of fit's arguments, one place per idea ---------------------------------------------

ROUNDING = 1e-9  # how far outside [0, 1] warmup_cosine lets progress stray (float rounding)


def _check_budget(total_steps, time_budget) -> tuple[int | None, float | None]:
    """(total_steps, time_budget) as an int and a float (or None); an error unless training has an
    end: total_steps (a whole number >= 1), time_budget (seconds > 0), or both."""
    if total_steps is None and time_budget is None:
        raise ValueError("give total_steps, time_budget (seconds), or both")
    if total_steps is not None:
        total_steps = check_whole(total_steps, "total_steps")
    if time_budget is not None:
        time_budget = check_positive(time_budget, "time_budget", meaning=" of seconds")
    return total_steps, time_budget


def _check_length(epochs, steps, time_budget) -> tuple[int | None, int | None, float | None]:
    """(epochs, steps, time_budget) as ints and a float (or None); an error unless fit has an end:
    epochs or steps (whole numbers >= 1, not both), optionally with a time_budget (seconds > 0), or a
    time_budget alone."""
    if epochs is not None and steps is not None:
        raise ValueError(
            f"give epochs or steps, not both: got epochs={describe(epochs)} and steps={describe(steps)} "
            "(epochs counts passes over train, steps counts optimiser steps)"
        )
    if epochs is None and steps is None and time_budget is None:
        raise ValueError(
            "give fit a length: epochs (passes over train) or steps (optimiser steps); "
            "a time_budget (seconds) may be added, or given alone, but makes the result depend on the machine"
        )
    if epochs is not None:
        epochs = check_whole(epochs, "epochs")
    if steps is not None:
        steps = check_whole(steps, "steps", meaning=" of optimiser steps")
    if time_budget is not None:
        time_budget = check_positive(time_budget, "time_budget", meaning=" of seconds")
    return epochs, steps, time_budget


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


# ---- parameter groups: which parameters decay, and each one's share of the learning rate --------


def _no_weight_decay_names(model: nn.Module) -> set[str]:
    """The names `model.no_weight_decay()` gives (timm's convention), or none if it has no such method."""
    method = getattr(model, "no_weight_decay", None)
    if method is None:
        return set()
    names = method() if callable(method) else method
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise WrongTypeError(
            f"{type(model).__name__}.no_weight_decay() must return a set of parameter names, e.g. "
            f"{{'pos_embed', 'cls_token'}}, got {describe(names)}"
        )
    names = list(names)
    if not all(isinstance(name, str) for name in names):
        raise WrongTypeError(f"{type(model).__name__}.no_weight_decay() must return parameter names (str), got {names}")
    return set(names)


def _covers(key: str, name: str) -> bool:
    """Whether an lr_multipliers key covers the parameter `name`: the name itself, or the start of
    names up to a dot ("blocks.0" and "blocks.0." cover "blocks.0.attn.qkv.weight", not "blocks.10...")."""
    key = key.rstrip(".")
    return name == key or name.startswith(key + ".")


def _unknown_key(key: str, model: nn.Module, names: list[str]) -> ValueError:
    """The error for an lr_multipliers key that covers no parameter: a near miss, then the names there are."""
    buffers = [name for name, _ in model.named_buffers() if _covers(key, name)]
    if buffers:
        hint = f" ({buffers[0]} is a fixed buffer, not a trained parameter)"
    else:
        prefixes = {".".join(name.split(".")[:depth]) for name in names for depth in range(1, name.count(".") + 2)}
        close = difflib.get_close_matches(key.rstrip("."), sorted(prefixes), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
    shown = ", ".join(names[:20]) + (f", ... ({len(names)} in all)" if len(names) > 20 else "")
    return ValueError(
        f"lr_multipliers has {key!r}, which names no parameter of this {type(model).__name__}{hint}; a key is a "
        f"parameter's name or the start of names up to a dot (e.g. 'blocks.0'). Its parameters: {shown}"
    )


def _check_lr_multipliers(lr_multipliers, model: nn.Module, names: list[str]) -> dict[str, float]:
    """{key: multiplier} checked: a dict of parameter names (or starts of names) to numbers >= 0,
    each key covering at least one of `names`."""
    if lr_multipliers is None:
        return {}
    if not isinstance(lr_multipliers, Mapping):
        raise WrongTypeError(
            "lr_multipliers must be a dict {parameter name or start of names: multiplier of the peak lr}, "
            f"e.g. {{'pos_embed': 0.1}}, got {describe(lr_multipliers)}"
        )
    checked = {}
    for key, multiplier in lr_multipliers.items():
        if not isinstance(key, str) or not key.strip("."):
            raise WrongTypeError(
                f"lr_multipliers' keys must be parameter names or starts of names, e.g. 'pos_embed' or "
                f"'blocks.0', got {describe(key)}"
            )
        if same := [other for other in checked if other.rstrip(".") == key.rstrip(".")]:
            raise ValueError(f"lr_multipliers has both {same[0]!r} and {key!r}, the same names: keep one")
        checked[key] = check_number(multiplier, f"lr_multipliers[{key!r}]", low=0, meaning=" (a multiple of lr)")
        if not any(_covers(key, name) for name in names):
            raise _unknown_key(key, model, names)
    return checked


def parameter_groups(
    model: nn.Module,
    weight_decay: float,
    lr_multipliers: Mapping[str, float] | None = None,
    *,
    decay_everything: bool = False,
) -> list[dict]:
    """AdamW's parameter groups by timm's convention: weight decay on the weight matrices only.

    Parameters with ndim <= 1 (norm weights, biases), names ending in ".bias" and the names that
    `model.no_weight_decay()` gives (a VisionTransformer: pos_embed, cls_token) get weight_decay 0;
    the rest get `weight_decay`. Frozen parameters (requires_grad False) are left out.

    Args:
        model: the model to train.
        weight_decay: the decay of the weight matrices, >= 0.
        lr_multipliers: {name: multiplier} of the peak lr, e.g. {"pos_embed": 0.1, "blocks.0": 0.5};
            a key is a parameter's name or the start of names up to a dot (where two keys cover a
            parameter, the longer one wins); every key must cover a parameter. Unnamed ones: 1.
        decay_everything: decay every parameter, biases, norms and positions too (the course's
            behaviour before these groups; it reproduces the shipped checkpoints).
    Returns:
        one dict per (decay, multiplier) pair, in the order the model's parameters come:
        {"params", "param_names", "weight_decay", "lr_multiplier"}, ready for torch.optim.AdamW.
    """
    _check_model(model)
    weight_decay = check_number(weight_decay, "weight_decay", low=0)
    decay_everything = check_flag(decay_everything, "decay_everything")
    named = list(model.named_parameters())
    multipliers = _check_lr_multipliers(lr_multipliers, model, [name for name, _ in named])
    no_decay = set() if decay_everything else _no_weight_decay_names(model)
    groups: dict[tuple[bool, float], dict] = {}
    for name, parameter in named:
        if not parameter.requires_grad:
            continue
        decays = decay_everything or not (parameter.ndim <= 1 or name.endswith(".bias") or name in no_decay)
        keys = [key for key in multipliers if _covers(key, name)]
        multiplier = multipliers[max(keys, key=lambda key: len(key.rstrip(".")))] if keys else 1.0
        group = groups.setdefault(
            (decays, multiplier),
            {
                "params": [],
                "param_names": [],
                "weight_decay": weight_decay if decays else 0.0,
                "lr_multiplier": multiplier,
            },
        )
        group["params"].append(parameter)
        group["param_names"].append(name)
    if not groups:
        raise ValueError(
            f"this {type(model).__name__} has no parameters to train: all have requires_grad=False "
            "(unfreeze some with parameter.requires_grad_(True))"
        )
    return list(groups.values())


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


def label_smoothing_floor(label_smoothing: float, num_classes: int) -> float:
    """The lowest training loss label smoothing allows: the entropy of the smoothed target, which
    puts 1 - s + s/K on the right class and s/K on each of the K - 1 others (nats).

    A model reaches it only by predicting exactly that target; its cross-entropy cannot go lower, so
    a train loss resting near this floor is not underfitting. 0 without smoothing.
    """
    s = check_probability(label_smoothing, "label_smoothing")
    k = check_whole(num_classes, "num_classes", minimum=2)
    right, other = 1 - s + s / k, s / k
    return -(right * math.log(right) + (k - 1) * other * math.log(other)) if s > 0 else 0.0


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
def evaluate(
    model: nn.Module, dataset: TensorDataset, batch_size: int = 128, threads: int | None = 1
) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of `model` on `dataset` (eval mode, no gradients), on
    `threads` CPU threads (as fit: the same numbers on every machine; None: torch's choice)."""
    device, dtype = _check_model(model)
    images, labels = check_dataset(dataset, "dataset", dtype=dtype)
    batch_size = _check_batch_size(batch_size)
    total_loss, correct = 0.0, 0
    with eval_mode(model), torch_threads(threads):
        for start in range(0, len(labels), batch_size):
            x = images[start : start + batch_size].to(device)
            y = labels[start : start + batch_size].to(device)
            logits = model(x)  # (b, num_classes)
            _check_logits(logits, y, "dataset's labels")
            total_loss += F.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(dim=-1) == y).sum().item()
    return total_loss / len(labels), correct / len(labels)


@torch.no_grad()
def predict(model: nn.Module, images: torch.Tensor, batch_size: int = 128, threads: int | None = 1) -> torch.Tensor:
    """Predicted class of every image: (N, C, H, W) -> (N,), on `threads` CPU threads (as evaluate)."""
    device, dtype = _check_model(model)
    check_float_images(images, dtype=dtype)
    batch_size = _check_batch_size(batch_size)
    with eval_mode(model), torch_threads(threads):
        predictions = [
            model(images[start : start + batch_size].to(device)).argmax(dim=-1).cpu()
            for start in range(0, len(images), batch_size)
        ]
    return torch.cat(predictions)


class TrainingClock:
    """How far training has come: the larger of (steps done / total_steps) and (seconds since
    the start / time_budget); either limit may be None. Training is over at 1."""

    def __init__(self, total_steps: int | None, time_budget: float | None):
        self.total_steps, self.time_budget = _check_budget(total_steps, time_budget)
        self.steps = 0
        self.lr_factor = 0.0  # warmup_cosine's factor at the last step, set by train_epoch
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

    def epoch(self, epoch: int, loss: float, val_accuracy: float) -> None:
        """After an epoch's evaluation: its training loss and the validation accuracy."""
        self.bar.set_postfix(epoch=epoch, loss=f"{loss:.3f}", val_acc=f"{val_accuracy:.3f}")

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

    Before every step each parameter group's learning rate is set to
    lr * group["lr_multiplier"] (1 if it has none) * warmup_cosine(clock.fraction(), warmup)
    (the fraction capped at 1: a time budget may run out between two looks at the clock).
    `on_step(mean loss, accuracy)` is called after every step with the epoch's running values.
    Returns:
        the epoch's mean training loss and accuracy over the images it saw.
    """
    seen, loss_sum, correct = 0, 0.0, 0
    for images, labels in batches:
        clock.lr_factor = warmup_cosine(min(clock.fraction(), 1.0), warmup)
        for group in optimizer.param_groups:
            group["lr"] = lr * group.get("lr_multiplier", 1.0) * clock.lr_factor
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
    model: nn.Module, train, val, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Raise unless `train` (and `val`, if given) hold images the model takes and labels it can
    predict (checked against the width of its logits for one image); return train's tensors."""
    images, labels = check_dataset(train, "train", dtype=dtype)
    num_classes = _num_outputs(model, images, device)
    why = f"the model gives {num_classes} outputs"
    check_labels(labels, "train's labels", num_classes=num_classes, why=why)
    if val is not None:
        val_images, val_labels = check_dataset(val, "val", dtype=dtype)
        if val_images.shape[1:] != images.shape[1:]:
            raise ValueError(
                f"val's images are {tuple(val_images.shape[1:])} but train's are {tuple(images.shape[1:])}: "
                "both must be the same (C, H, W)"
            )
        check_labels(val_labels, "val's labels", num_classes=num_classes, why=why)
    return images, labels


def fit(
    model: nn.Module,
    train: TensorDataset,
    val: TensorDataset | None = None,
    *,
    epochs: int | None = None,
    steps: int | None = None,
    time_budget: float | None = None,
    batch_size: int = 128,
    lr: float = 1e-3,
    weight_decay: float = 0.05,
    lr_multipliers: Mapping[str, float] | None = None,
    decay_everything: bool = False,
    warmup: float = 0.1,
    label_smoothing: float = 0.0,
    max_shift: int = 0,
    seed: int = 0,
    snapshot_every: int | None = None,
    on_epoch: Callable[[History], None] | None = None,
    progress: bool = True,
    threads: int | None = 1,
) -> History:
    """Train `model` with AdamW and a warm-up + cosine schedule; evaluate on `val` every epoch.

    Args:
        model: a classifier mapping (B, C, H, W) images to (B, num_classes) logits; it is trained
            on the device its parameters are on.
        train, val: datasets of (images, labels) tensors; `val` is the validation set, the one to
            choose settings on (keep the test set for one evaluate(model, test) at the very end).
        epochs: passes over `train`, or steps: optimiser steps (the last epoch may be cut short);
            one of them, not both. The schedule's progress is steps done / total steps.
        time_budget: seconds of training, alone or as an extra limit (whichever ends first; the
            schedule follows whichever is further along). It makes the result depend on the
            machine's speed: use it to explore, not to compare.
        weight_decay: AdamW's decay of the weight matrices; biases, norms and the model's
            no_weight_decay() names get none (see parameter_groups).
        lr_multipliers: {parameter name or start of names: multiplier of lr}, e.g. {"pos_embed": 0.1}.
        decay_everything: decay every parameter (fit's behaviour before the parameter groups,
            kept to reproduce the shipped checkpoints).
        warmup: the fraction of training spent warming the learning rate up from 0.
        label_smoothing: spread this much of each target's probability over all classes.
        max_shift: augment by shifting each training image up to this many pixels (0: off).
        seed: fixes the initial shuffling and augmentation (the model's init is the caller's).
        snapshot_every: keep a copy of `model.pos_embed` every this many steps (and at 0 and
            the end), for watching position embeddings learn.
        on_epoch: called with the history after every epoch, and once more when training has
            ended (history.done is then True), e.g. a live plot.
        progress: show a progress bar.
        threads: CPU threads to train on (restored afterwards). The count changes the order of
            additions and so the last bits, which training grows into a different result: a fixed
            count gives the same numbers on every machine. 1 (the default) costs little for the
            course's tiny models; None keeps torch's choice (all cores: faster for big models).
    Returns:
        the History.
    Raises:
        ValueError or TypeError, naming the argument, before the first step: a budget that never
        ends (0, negative, NaN) or both epochs and steps, something other than a dataset of float
        images (N, C, H, W) and int64 labels, labels the model's outputs cannot name, a setting
        out of its range, an lr_multipliers key that names no parameter.
    """
    epochs, steps, time_budget = _check_length(epochs, steps, time_budget)
    device, dtype = _check_model(model)
    images, labels = _check_training_sets(model, train, val, device, dtype)
    batch_size = _check_batch_size(batch_size)
    check_positive(lr, "lr", meaning=" (the peak learning rate)")
    groups = parameter_groups(model, weight_decay, lr_multipliers, decay_everything=decay_everything)
    _check_warmup(warmup)
    _check_label_smoothing(label_smoothing)
    max_shift = _check_max_shift(max_shift, images.shape)
    seed = check_whole(seed, "seed", minimum=-(2**63), maximum=2**64 - 1)
    snapshot_every = _check_snapshots(snapshot_every, model)
    if on_epoch is not None and not callable(on_epoch):
        raise WrongTypeError(f"on_epoch must be a function of the history (or None), got {type(on_epoch).__name__}")
    progress = check_flag(progress, "progress")
    threads = check_threads(threads)
    if epochs is not None:
        steps = epochs * math.ceil(len(labels) / batch_size)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(groups, lr=lr, weight_decay=weight_decay)  # its first build is slow
    clock = TrainingClock(steps, time_budget)
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
    with torch_threads(threads):
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
                history.lr.append(lr * clock.lr_factor)
                history.train_loss.append(train_loss)
                history.train_accuracy.append(train_accuracy)
                if val is not None:
                    val_loss, val_accuracy = evaluate(model, val, threads=threads)
                    history.val_loss.append(val_loss)
                    history.val_accuracy.append(val_accuracy)
                    report.epoch(epoch, train_loss, val_accuracy)
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
    del optimizer  # AdamW's moments (twice the model's size) are freed, then handed back to the system
    release_memory()
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
