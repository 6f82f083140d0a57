"""Lesson 14: data parallelism in real processes, started from a notebook.

`run_processes(worker, world_size, *args)` starts `world_size` processes on this machine (spawned,
so it works from Jupyter on Linux, macOS and Windows), joins them into a gloo process group on a
free local port, runs `worker(process, *args)` in each and returns what each returned, by rank. A
process that raises makes the call raise, naming its rank and its error; a process group that
does not finish within `timeout_s` is stopped.

The workers the lesson runs (each at module level, so a spawned process can import it):
`all_reduce_demo` (what all_reduce does to one number per process), `hand_made_ddp_gradients`
(each process's gradient on its share, averaged with all_reduce), `ddp_gradients` (the same
through DistributedDataParallel) and `all_reduce_seconds` (what averaging a model's gradients
costs). `vit_train(*options, processes=W)` runs the `vit-train` command, under torchrun for W > 1,
in a scratch folder, and returns its result and its final weights.
"""

import contextlib
import io
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn

from utils.distributed import Process, rank_share
from utils.resume import latest_step, step_folder
from utils.validation import check_positive, check_whole
from utils.vit import VisionTransformer, ViTConfig

TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run_one(rank: int, world_size: int, port: int, worker: Callable, args: tuple, results) -> None:
    """One spawned process: join the group, run the worker, send back (rank, ok, value)."""
    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
        try:
            value = worker(Process(rank, world_size, rank), *args)
            packed = io.BytesIO()
            torch.save(value, packed)  # bytes, not shared memory: this process may be gone when they are read
            results.put((rank, True, packed.getvalue()))
        finally:
            dist.destroy_process_group()
    except BaseException as error:
        results.put((rank, False, f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-3)}"))


def run_processes(worker: Callable, world_size: int, *args, timeout_s: float = TIMEOUT_S) -> list:
    """Run `worker(process, *args)` in `world_size` new processes joined in a gloo group.

    Args:
        worker: a function defined at the top level of a module (a spawned process imports it).
        args: what every process gets (picklable: tensors, numbers, dicts).
    Returns:
        each process's return value, in rank order (tensors, numbers, strings, and lists, tuples and
        dicts of them).
    """
    if not callable(worker):
        raise TypeError(f"worker must be a function, got {type(worker).__name__}")
    world_size = check_whole(world_size, "world_size", maximum=64)
    timeout_s = check_positive(timeout_s, "timeout_s")
    if getattr(worker, "__module__", "__main__") == "__main__" or "<locals>" in getattr(worker, "__qualname__", ""):
        raise ValueError(
            f"worker {getattr(worker, '__name__', worker)!r} is defined in the notebook (or inside a function): "
            "a spawned process cannot import it; use a function defined at the top of a module"
        )
    context = mp.get_context("spawn")
    results = context.SimpleQueue()
    port = _free_port()
    processes = [
        context.Process(target=_run_one, args=(rank, world_size, port, worker, args, results), daemon=True)
        for rank in range(world_size)
    ]
    for process in processes:
        process.start()
    found, deadline = {}, time.monotonic() + timeout_s
    try:
        while len(found) < world_size:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the {world_size} processes did not finish within {timeout_s:g} s")
            if results.empty():
                dead = [p for p in processes if p.exitcode not in (None, 0)]
                if dead and results.empty():
                    raise RuntimeError(f"a process died without a word (exit code {dead[0].exitcode})")
                time.sleep(0.05)
                continue
            rank, ok, value = results.get()
            if not ok:
                raise RuntimeError(f"process {rank} of {world_size} failed: {value}")
            found[rank] = torch.load(io.BytesIO(value), weights_only=True)
    finally:
        for process in processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join()
    return [found[rank] for rank in range(world_size)]


# ---- the workers the lesson runs -------------------------------------------------------------


def all_reduce_demo(process: Process) -> tuple[float, float]:
    """Each process holds rank + 1; all_reduce sums the numbers of every process into each.
    Returns (before, after) for this process."""
    number = torch.tensor([float(process.rank + 1)])
    before = number.item()
    dist.all_reduce(number)  # the default operation: SUM, written into `number` on every process
    return before, number.item()


def _model(config: dict) -> nn.Module:
    torch.manual_seed(0)  # the same initial weights in every process
    return VisionTransformer(ViTConfig(**config))


def hand_made_ddp_gradients(
    process: Process, config: dict, images: torch.Tensor, labels: torch.Tensor
) -> dict[str, torch.Tensor]:
    """This process's gradient on its share of the batch (images (G, C, H, W), labels (G,)),
    averaged over the processes with all_reduce: what DistributedDataParallel does, by hand."""
    model = _model(config)
    mine = rank_share(torch.arange(len(labels)), process)  # (G / world_size,)
    F.cross_entropy(model(images[mine]), labels[mine]).backward()
    gradients = {}
    for name, parameter in model.named_parameters():
        dist.all_reduce(parameter.grad)  # the sum over the processes...
        gradients[name] = parameter.grad / process.world_size  # ...divided: the mean
    return gradients


def ddp_gradients(
    process: Process, config: dict, images: torch.Tensor, labels: torch.Tensor
) -> dict[str, torch.Tensor]:
    """The same through DistributedDataParallel, which averages the gradients during backward."""
    model = _model(config)
    ddp = nn.parallel.DistributedDataParallel(model)
    mine = rank_share(torch.arange(len(labels)), process)
    F.cross_entropy(ddp(images[mine]), labels[mine]).backward()
    return {name: parameter.grad.clone() for name, parameter in model.named_parameters()}


def all_reduce_seconds(process: Process, numbers: int, repeats: int = 20) -> float:
    """The median time, in seconds, of one all_reduce of `numbers` float32 values."""
    values = torch.ones(numbers)
    dist.all_reduce(values)  # the first call sets the connection up: not timed
    times = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(values)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def full_batch_gradients(config: dict, images: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """The gradient of the whole batch in this process: what the processes' average must equal."""
    model = _model(config)
    F.cross_entropy(model(images), labels).backward()
    return {name: parameter.grad for name, parameter in model.named_parameters()}


def largest_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """The largest difference between two sets of gradients (or weights) of the same names."""
    if a.keys() != b.keys():
        raise ValueError(f"the two sets name different tensors: {sorted(set(a) ^ set(b))[:5]}")
    return max((a[name] - b[name]).abs().max().item() for name in a)


def vit_train(*options: str, processes: int = 1, timeout_s: float = 600) -> dict:
    """Run `vit-train` with `options` (its command-line words, without --out) on `processes`
    processes, in a scratch folder that is removed afterwards.

    With more than one, it starts the processes itself and gives each the variables torchrun would
    (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): torchrun's own launcher would be one
    more Python with torch in memory (about 200 MB), which Binder's 1 GB cannot spare. If one
    process fails, the others are stopped.

    Returns:
        {"result": its result.json, "weights": {name: tensor} as the run ended}.
    """
    processes = check_whole(processes, "processes", maximum=64)
    if any(str(option).startswith("--out") for option in options):
        raise ValueError("vit_train chooses the run's folder itself: leave --out out of the options")
    root = Path(__file__).resolve().parents[1]  # the course library, importable in the new processes
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    env["OMP_NUM_THREADS"] = "1"
    if processes > 1:
        env.update(WORLD_SIZE=str(processes), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    with tempfile.TemporaryDirectory(prefix="vit-train-") as folder:
        command = [sys.executable, "-m", "utils.train_command", *map(str, options), "--quiet", "--out", folder]
        logs = [Path(folder) / f"stderr-{rank}.txt" for rank in range(processes)]
        with contextlib.ExitStack() as files:
            ranks = [
                subprocess.Popen(
                    command,
                    env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)} if processes > 1 else env,
                    stdout=subprocess.DEVNULL,
                    stderr=files.enter_context(log.open("w")),
                )
                for rank, log in enumerate(logs)
            ]
            failed = _wait_for_all(ranks, timeout_s)
        if failed is not None:
            rank, problem = failed
            raise RuntimeError(f"vit-train failed (process {rank}, {problem}):\n{logs[rank].read_text()[-2000:]}")
        result = json.loads((Path(folder) / "result.json").read_text())
        weights = load_file(step_folder(Path(folder), latest_step(folder)) / "model.safetensors")
    return {"result": result, "weights": weights}


def _wait_for_all(ranks: list[subprocess.Popen], timeout_s: float) -> tuple[int, str] | None:
    """Wait for every process; on the first failure (or the timeout) stop the rest.
    Returns None when all succeeded, else (rank, what went wrong)."""
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            codes = [rank.poll() for rank in ranks]
            bad = next((i for i, code in enumerate(codes) if code not in (None, 0)), None)
            if bad is not None:
                return bad, f"exit code {codes[bad]}"
            if all(code == 0 for code in codes):
                return None
            if time.monotonic() > deadline:
                return 0, f"not finished within {timeout_s:g} s"
            time.sleep(0.05)
    finally:
        for rank in ranks:
            if rank.poll() is None:
                rank.terminate()
            rank.wait()
