"""Where the course's code runs and how it repeats: seeding, the number of CPU threads, device
choice, and a model's mode."""

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from utils.validation import check_whole

MAX_THREADS = 4096  # more CPU threads than any machine has: a typo, not a request


def set_seed(seed: int = 0) -> int:
    """Seed Python, NumPy and torch (CPU and any GPU) so a cell gives the same numbers every run.

    Returns the seed, so a notebook can print what it used.
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return seed


def check_threads(threads) -> int | None:
    """`threads` as an int from 1 to MAX_THREADS, or None (torch's own choice)."""
    if threads is None:
        return None
    return check_whole(threads, "threads", maximum=MAX_THREADS, meaning=" of CPU threads (None: torch's own choice)")


@contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Run a `with` block on `threads` CPU threads (None: leave torch's setting), then restore the
    number torch used before, also when the block raises. Yields the number in use.

    PyTorch splits sums and matrix products over its threads, so the thread count decides the
    order of the additions and with it the last bits of every result; over hundreds of training
    steps those bits grow into different weights and a different accuracy. A fixed count (fit
    uses 1) gives the same numbers on a 1-core Binder and an 8-core laptop.
    """
    threads = check_threads(threads)
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def get_device(name: str | None = None) -> torch.device:
    """The device to run on: `name` if given, else $VIT_DEVICE, else CUDA, then MPS, then the CPU.

    Raises ValueError when the device asked for is not available on this machine.
    """
    name = name or os.environ.get("VIT_DEVICE") or None  # an empty $VIT_DEVICE means "choose"
    if name is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"unknown device {name!r}; expected 'cpu', 'cuda', 'cuda:1' or 'mps'") from None
    available = {
        "cpu": True,
        "cuda": torch.cuda.is_available(),
        "mps": torch.backends.mps.is_available(),
    }
    if not available.get(device.type, False):
        raise ValueError(
            f"device {name!r} is not available here; this machine has {[kind for kind, ok in available.items() if ok]}"
        )
    return device


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Run a `with` block with `model` in eval mode (no dropout), then restore the mode every
    submodule had before, also when the block raises.

        with eval_mode(model):
            logits = model(images)
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"eval_mode needs a torch nn.Module, got {type(model).__name__}")
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for module, training in modes:
            module.training = training
