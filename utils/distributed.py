"""Training on several processes (data parallelism): which process this is, the process group, each
process's share of a global batch, and numbers averaged over the processes.

Launched by torchrun, a process reads its place from the variables torchrun sets (RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT); launched as a plain `python`, it is a world of
one, and every function here works without a process group. The backend is gloo on a CPU (it runs
on Linux, macOS and Windows) and NCCL on CUDA GPUs.

The data order is the same on every process: epoch e of a run with seed s is the permutation drawn
from (s, e), cut into global batches of G images (an incomplete last one is dropped, so that every
step averages the same number of images), and process r of W takes the r-th of the W equal,
contiguous pieces of each. Averaging the W gradients (what DistributedDataParallel's all-reduce
does) then gives the gradient of the whole global batch: training on W processes equals training
on one with the same global batch, up to float rounding.
"""

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from utils.validation import check_tensor, check_whole

DEFAULT_TIMEOUT_S = 120  # a process waiting longer than this for the others fails instead of hanging


@dataclass(frozen=True)
class Process:
    """This process's place: its rank among world_size processes, and its rank on this machine."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that prints and writes files."""
        return self.rank == 0


def _variable(name: str, default: int) -> int:
    text = os.environ.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"${name} must be a whole number (torchrun sets it), got {text!r}") from None


def this_process() -> Process:
    """This process's place, from torchrun's variables (a world of one without them)."""
    world_size = _variable("WORLD_SIZE", 1)
    rank, local_rank = _variable("RANK", 0), _variable("LOCAL_RANK", 0)
    if world_size < 1 or not 0 <= rank < world_size or not 0 <= local_rank <= rank:
        raise ValueError(
            f"torchrun's variables do not fit together: RANK={rank}, LOCAL_RANK={local_rank}, "
            f"WORLD_SIZE={world_size} (expected 0 <= LOCAL_RANK <= RANK < WORLD_SIZE)"
        )
    return Process(rank, world_size, local_rank)


def backend_for(device: torch.device) -> str:
    """NCCL for CUDA GPUs, gloo for everything else (CPUs: Linux, macOS, Windows)."""
    return "nccl" if device.type == "cuda" else "gloo"


def start(device: torch.device, timeout_s: float = DEFAULT_TIMEOUT_S) -> Process:
    """Join the process group (when there is more than one process) and return this process's place.

    A process that waits more than `timeout_s` seconds for the others (one has died, say) raises
    instead of hanging.
    """
    process = this_process()
    if process.world_size > 1 and not dist.is_initialized():
        missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(name)]
        if missing:
            raise ValueError(
                f"WORLD_SIZE is {process.world_size} but {' and '.join(missing)} is not set: launch with "
                "torchrun --nproc_per_node=N (it sets both), not by hand"
            )
        dist.init_process_group(
            backend_for(device),
            rank=process.rank,
            world_size=process.world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
    return process


def stop() -> None:
    """Leave the process group, if this process joined one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def global_batches(num_examples: int, global_batch: int, epoch: int, seed: int) -> torch.Tensor:
    """Epoch `epoch`'s order, cut into global batches: (steps_per_epoch, global_batch) indices.

    The same on every process, and a different order every epoch (what DistributedSampler's
    set_epoch is for: without it each epoch repeats the first one's order). The incomplete last
    batch is dropped.
    """
    num_examples = check_whole(num_examples, "num_examples")
    global_batch = check_whole(global_batch, "global_batch")
    epoch = check_whole(epoch, "epoch", minimum=0)
    seed = check_whole(seed, "seed", minimum=0)
    steps = num_examples // global_batch
    if steps == 0:
        raise ValueError(
            f"a global batch of {global_batch} is larger than the {num_examples} training images: "
            "choose a smaller batch"
        )
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    order = torch.randperm(num_examples, generator=generator)  # (num_examples,)
    return order[: steps * global_batch].reshape(steps, global_batch)  # (steps, G)


def rank_share(batch: torch.Tensor, process: Process) -> torch.Tensor:
    """This process's contiguous, equal piece of one global batch: (G,) -> (G / world_size,)."""
    check_tensor(batch, "batch", "(G,)")
    if not isinstance(process, Process):
        raise TypeError(f"process must be a utils.distributed.Process (this_process() gives one), got {process!r}")
    if batch.ndim != 1:
        raise ValueError(f"batch must be one global batch of indices (G,), got shape {tuple(batch.shape)}")
    if len(batch) % process.world_size:
        raise ValueError(f"a global batch of {len(batch)} does not split evenly over {process.world_size} processes")
    size = len(batch) // process.world_size
    return batch[process.rank * size : (process.rank + 1) * size]


def sum_over_processes(values: torch.Tensor) -> torch.Tensor:
    """`values` summed element-wise over every process (itself with one process); float64 on the CPU."""
    check_tensor(values, "values")
    total = values.detach().to("cpu", torch.float64).clone()
    if dist.is_available() and dist.is_initialized():
        if dist.get_backend() == "nccl":  # NCCL reduces tensors on the GPU only
            on_gpu = total.to(f"cuda:{torch.cuda.current_device()}")
            dist.all_reduce(on_gpu)
            return on_gpu.cpu()
        dist.all_reduce(total)
    return total
