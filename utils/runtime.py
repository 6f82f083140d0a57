"""Where the course's code runs and how it repeats: seeding and device choice."""

import os
import random

import numpy as np
import torch


def set_seed(seed: int = 0) -> int:
    """Seed Python, NumPy and torch (CPU and any GPU) so a cell gives the same numbers every run.

    Returns the seed, so a notebook can print what it used.
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return seed


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
            f"device {name!r} is not available here; this machine has "
            f"{[kind for kind, ok in available.items() if ok]}"
        )
    return device
