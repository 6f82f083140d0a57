"""Where the course's code runs and how it repeats: seeding, the number of CPU threads, device
choice, and a model's mode."""

import ctypes
import ctypes.util
import gc
import os
import platform
import random
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from utils.validation import check_whole

MAX_THREADS = 4096  # more CPU threads than any machine has: a typo, not a request
ISA_PINS = ("MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")  # variables that choose MKL's / oneDNN's code path


def set_seed(seed: int = 0) -> int:
    """Seed Python, NumPy and torch (CPU and any GPU) so a cell gives the same numbers every run.

    Returns the seed, so a notebook can print what it used.
    """
    seed = check_whole(seed, "seed", minimum=0, maximum=2**32 - 1)  # NumPy's range; torch's is wider
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


def _processor_model() -> str:
    """The processor's model, e.g. "AMD EPYC (family 26, model 2, cache 1024 KB)"; coarser where the system hides it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:  # Linux: the first processor's fields
            fields = dict(line.split(":", 1) for line in file.read().split("\n\n")[0].splitlines() if ":" in line)
        fields = {key.strip(): value.strip() for key, value in fields.items()}
        if "model name" in fields:
            numbers = [f"family {fields['cpu family']}"] if "cpu family" in fields else []
            numbers += [f"model {fields['model']}"] if "model" in fields else []
            numbers += [f"cache {fields['cache size']}"] if "cache size" in fields else []  # sets oneDNN's blocking
            return f"{fields['model name']} ({', '.join(numbers)})" if numbers else fields["model name"]
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            found = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5, check=True
            )
            return found.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "an unknown processor"


def cpu_kind() -> str:
    """The kind of CPU the last bits of a one-thread run depend on, e.g.
    "AMD EPYC (family 26, model 2, cache 1024 KB), torch AVX512": the processor's model, the vector instructions
    torch's own kernels use ($ATEN_CPU_CAPABILITY can lower them) and any pin of MKL's or oneDNN's
    code path ($MKL_CBWR, $ONEDNN_MAX_CPU_ISA).

    With the same torch build and one thread, two machines of one kind train bit for bit alike.
    Another kind may add in another order inside its vector units, and over hundreds of steps those
    last bits grow into a different run: as different as another seed, no more.
    """
    pins = [f"{name}={os.environ[name]}" for name in ISA_PINS if os.environ.get(name)]
    return ", ".join([_processor_model(), f"torch {torch.backends.cpu.get_cpu_capability()}", *pins])


def release_memory() -> bool:
    """Collect garbage, then hand the memory that freed back to the operating system (glibc's
    malloc_trim), so that a process's resident memory, which Binder counts, falls back to what it
    still uses. True where that could be done (Linux with glibc), False elsewhere, where the
    allocator decides alone."""
    gc.collect()
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # no C library to load, or one without malloc_trim (macOS, musl)
        trim = None
    if trim is None:
        return False
    trim(0)
    return True


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
