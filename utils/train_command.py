"""`vit-train`: train a course ViT from the command line, on one process or many (torchrun, DDP).

    vit-train --data digits --patch-size 2 --steps 600 --out runs/digits
    torchrun --standalone --nproc_per_node=2 -m utils.train_command --data digits --patch-size 2 \\
        --steps 600 --out runs/digits-ddp

Lesson 6's recipe, for any `ViTConfig` preset or JSON file and any of the course's data sets: AdamW
on `parameter_groups` (with `--lr-multiplier pos_embed=0.1` and the like), a linear warm-up and a
cosine decay over the run's steps, label smoothing, random shifts, gradient clipping, and a fixed
global batch however many processes share it (`--accumulate` splits each process's share into
micro-batches). Under torchrun each process trains on its share of every global batch
(`utils.distributed`) and DistributedDataParallel averages the gradients: gloo on a CPU, NCCL on
GPUs. Rank 0 alone shows a progress bar and writes
files; validation metrics are summed over the processes. Budgets are in steps (or epochs), so a run
gives the same numbers on a fast machine and a slow one of the same kind.

Into `--out`: `metrics.jsonl` (one JSON object per line: training loss and accuracy every
`--log-every` steps, validation loss and accuracy every `--eval-every`), `result.json` at the end,
and the run's state every `--save-every` steps (`utils.resume`): `--resume` continues a stopped run,
which then ends exactly as an uninterrupted one would on the same machine. `--stop-after N` stops
after N steps of this launch, saving first (for a job with a time limit). The test set is looked at
once, at the end, only with `--test`.
"""

import argparse
import contextlib
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from utils.data import BUNDLED, STANDARD, load_training_set
from utils.datasets import ImageDataset, split_validation
from utils.distributed import Process, global_batches, rank_share, start, stop, sum_over_processes, this_process
from utils.files import write_text_atomically
from utils.resume import latest_step, load_training_state, save_training_state
from utils.runtime import eval_mode, get_device
from utils.training import parameter_groups, random_shift, warmup_cosine
from utils.vit import VisionTransformer, ViTConfig

PRESETS = {"tiny": ViTConfig.tiny, "vit_b16": ViTConfig.vit_b16}
DATA_FIELDS = ("image_size", "in_channels", "num_classes")  # what the data set decides


class UsageError(ValueError):
    """A bad argument or an impossible configuration, found before any training."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vit-train",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False,
    )
    what = p.add_argument_group("what to train")
    what.add_argument("--data", default="digits", choices=[*BUNDLED, *STANDARD], help="the data set")
    what.add_argument("--download", action="store_true", help="fetch MNIST, Fashion-MNIST or CIFAR-10 once (online)")
    what.add_argument(
        "--model", default="tiny", help=f"a preset ({', '.join(PRESETS)}) or a JSON file of ViTConfig fields"
    )
    what.add_argument(
        "--patch-size", type=int, help="override the model's patch size (the digits are 8 x 8: use 2 or 4)"
    )
    what.add_argument("--val-fraction", type=float, default=0.2, help="of the training set, set aside for validation")
    how = p.add_argument_group("how long and how")
    length = how.add_mutually_exclusive_group()
    length.add_argument("--steps", type=int, help="optimiser steps (default: 10 epochs)")
    length.add_argument("--epochs", type=int, help="passes over the training set")
    how.add_argument("--batch-size", type=int, default=128, help="the global batch: all processes together")
    how.add_argument("--accumulate", type=int, default=1, help="micro-batches per process per step")
    how.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    how.add_argument("--weight-decay", type=float, default=0.05, help="AdamW's, on the weight matrices")
    how.add_argument(
        "--lr-multiplier",
        action="append",
        default=[],
        metavar="NAME=FACTOR",
        help="a parameter (or the start of names) at FACTOR x the learning rate, e.g. pos_embed=0.1; repeatable",
    )
    how.add_argument("--warmup", type=float, default=0.1, help="fraction of the steps spent warming up")
    how.add_argument("--label-smoothing", type=float, default=0.0)
    how.add_argument("--max-shift", type=int, default=0, help="random shift of each image, in pixels")
    how.add_argument("--clip-grad", type=float, help="clip the gradients' total norm to this")
    how.add_argument("--seed", type=int, default=0)
    run = p.add_argument_group("where and what to write")
    run.add_argument("--out", type=Path, required=True, help="the run's folder")
    run.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    run.add_argument("--stop-after", type=int, help="stop after this many steps of this launch (saving first)")
    run.add_argument("--save-every", type=int, help="save the run's state every N steps (default: at the end only)")
    run.add_argument("--eval-every", type=int, help="validate every N steps (default: every epoch)")
    run.add_argument("--log-every", type=int, default=10, help="write the training loss every N steps")
    run.add_argument("--test", action="store_true", help="evaluate the test set once, at the end")
    run.add_argument("--device", help="cpu, cuda or mps (default: a GPU when there is one)")
    run.add_argument("--threads", type=int, default=1, help="CPU threads per process")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def check_arguments(args: argparse.Namespace, process: Process) -> None:
    """Every argument that can be checked before data and model exist; UsageError naming the fix."""
    positive = [
        "batch_size",
        "accumulate",
        "log_every",
        "threads",
        "steps",
        "epochs",
        "stop_after",
        "save_every",
        "eval_every",
    ]
    for name in positive:
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if not 0 < args.val_fraction < 1:
        raise UsageError(f"--val-fraction must be above 0 and below 1, got {args.val_fraction}")
    for name in ["warmup", "label_smoothing"]:
        value = getattr(args, name)
        if not 0 <= value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 0 and below 1, got {value}")
    for name in ["lr", "clip_grad"]:
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UsageError(f"--{name.replace('_', '-')} must be a positive number, got {value}")
    if not (math.isfinite(args.weight_decay) and args.weight_decay >= 0):
        raise UsageError(f"--weight-decay must be 0 or more, got {args.weight_decay}")
    multipliers = {}
    for item in args.lr_multiplier:
        name, _, factor = item.partition("=")
        try:
            multipliers[name] = float(factor)
        except ValueError:
            raise UsageError(f"--lr-multiplier takes NAME=FACTOR, e.g. pos_embed=0.1; got {item!r}") from None
        if not name or not (math.isfinite(multipliers[name]) and multipliers[name] >= 0):
            raise UsageError(
                f"--lr-multiplier takes a name and a factor of 0 or more, e.g. pos_embed=0.1; got {item!r}"
            )
    args.lr_multipliers = multipliers
    if args.max_shift < 0:
        raise UsageError(f"--max-shift must be 0 or more pixels, got {args.max_shift}")
    shares = process.world_size * args.accumulate
    if args.batch_size % shares:
        raise UsageError(
            f"--batch-size {args.batch_size} does not split over {process.world_size} process(es) x "
            f"{args.accumulate} micro-batch(es): choose a multiple of {shares}"
        )
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is a file: name a folder for the run")
    try:
        saved = latest_step(args.out)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if args.resume and saved is None:
        raise UsageError(f"--resume: nothing saved in {args.out} yet (start without --resume)")
    if not args.resume and saved is not None:
        raise UsageError(f"{args.out} holds a saved run: add --resume to continue it, or choose another --out")


def model_config(args: argparse.Namespace, data: ImageDataset) -> ViTConfig:
    """The model's settings: a preset or a JSON file, with the data set's image size, channels and classes."""
    images = data.tensors[0]
    fitted = {"image_size": tuple(images.shape[-2:]), "in_channels": images.shape[1], "num_classes": len(data.classes)}
    if images.shape[-2] == images.shape[-1]:
        fitted["image_size"] = images.shape[-1]
    if args.model in PRESETS:
        fields = {**PRESETS[args.model]().__dict__, **fitted}
    else:
        path = Path(args.model)
        if not path.is_file():
            raise UsageError(f"--model {args.model!r} is neither a preset ({', '.join(PRESETS)}) nor a JSON file")
        try:
            fields = json.loads(path.read_text())
        except ValueError as error:
            raise UsageError(f"--model {path} is not valid JSON ({error})") from None
        if not isinstance(fields, dict):
            raise UsageError(f"--model {path} must hold one JSON object of ViTConfig fields")
        clash = {
            key: (fields[key], fitted[key])
            for key in DATA_FIELDS
            if key in fields and _as_json(fields[key]) != _as_json(fitted[key])
        }
        if clash:
            found = ", ".join(f"{key} {mine!r} but the data has {theirs!r}" for key, (mine, theirs) in clash.items())
            raise UsageError(f"--model {path} does not fit --data {args.data}: {found}")
        fields = {**fields, **fitted}
    if args.patch_size is not None:
        fields["patch_size"] = args.patch_size
    try:
        return ViTConfig(**fields)
    except TypeError as error:
        raise UsageError(f"--model: {error}") from None
    except ValueError as error:
        raise UsageError(f"the model does not fit the data: {error} (try --patch-size)") from None


def _as_json(value):
    return json.loads(json.dumps(value))


def settings_of(args: argparse.Namespace, config: ViTConfig, total_steps: int, world_size: int) -> dict:
    """What decides the run's numbers: a resumed run must have the same (the number of processes
    included: another split of the batch adds in another order)."""
    return {
        "model": _as_json(config.__dict__),
        "data": args.data,
        "val_fraction": args.val_fraction,
        "steps": total_steps,
        "batch_size": args.batch_size,
        "accumulate": args.accumulate,
        "world_size": world_size,
        "lr": args.lr,
        "weight_decay": args.weight_decay,
        "lr_multipliers": args.lr_multipliers,
        "warmup": args.warmup,
        "label_smoothing": args.label_smoothing,
        "max_shift": args.max_shift,
        "clip_grad": args.clip_grad,
        "seed": args.seed,
    }


def step_seed(seed: int, step: int, rank: int, micro: int) -> int:
    """The seed of one micro-batch's random draws (its shifts, the model's dropout): a function of
    the run's seed, the step, the rank and the micro-batch, so a resumed run draws the same."""
    return ((seed * 1_000_003 + step) * 1_009 + rank) * 101 + micro


def evaluate_shared(
    model: nn.Module, data: ImageDataset, process: Process, device: torch.device
) -> tuple[float, float]:
    """Mean loss and accuracy on `data`, each process evaluating its own slice, summed over all."""
    images, labels = data.tensors
    share = torch.arange(process.rank, len(labels), process.world_size)  # every world_size-th image
    totals = torch.zeros(3, dtype=torch.float64)
    with eval_mode(model), torch.no_grad():
        for start in range(0, len(share), 256):
            index = share[start : start + 256]
            logits = model(images[index].to(device))  # (b, num_classes)
            y = labels[index].to(device)
            totals += torch.tensor(
                [F.cross_entropy(logits, y, reduction="sum").item(), (logits.argmax(-1) == y).sum().item(), len(y)],
                dtype=torch.float64,
            )
    loss, correct, count = sum_over_processes(totals).tolist()
    return loss / count, correct / count


def train(args: argparse.Namespace) -> dict:
    """The run: returns (on every process) what result.json holds."""
    check_arguments(args, this_process())  # before joining the others: a bad argument stops every process
    device = get_device(args.device)
    if device.type == "mps" and this_process().world_size > 1:
        raise UsageError("several processes cannot share Apple's MPS device (no backend for it): add --device cpu")
    process = start(device)
    if device.type == "cuda" and process.world_size > 1:
        device = torch.device("cuda", process.local_rank)
        torch.cuda.set_device(device)
    try:
        torch.set_num_threads(args.threads)
        options = {"download": True} if args.download and args.data in STANDARD else {}
        train_set, test_set = load_training_set(args.data, **options)
        train_set, val_set = split_validation(train_set, args.val_fraction, seed=args.seed)
        config = model_config(args, train_set)
        steps_per_epoch = len(train_set.tensors[1]) // args.batch_size
        if steps_per_epoch == 0:
            raise UsageError(
                f"--batch-size {args.batch_size} is larger than the {len(train_set.tensors[1])} training images"
            )
        total_steps = args.steps or steps_per_epoch * (args.epochs or 10)
        settings = settings_of(args, config, total_steps, process.world_size)
        return _train(args, process, device, config, train_set, val_set, test_set, settings, steps_per_epoch)
    finally:
        stop()


def _train(args, process, device, config, train_set, val_set, test_set, settings, steps_per_epoch) -> dict:
    torch.manual_seed(args.seed)  # the initial weights: the same on every process
    model = VisionTransformer(config).to(device)
    try:
        groups = parameter_groups(model, args.weight_decay, args.lr_multipliers)
    except ValueError as error:  # a name that covers no parameter: the library's message names the likely one
        raise UsageError(f"--lr-multiplier: {error}") from None
    optimizer = torch.optim.AdamW(groups, lr=args.lr)
    step = load_training_state(args.out, model, optimizer, settings) if args.resume else 0
    net = model
    if process.world_size > 1:
        net = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    total = settings["steps"]
    eval_every = args.eval_every or steps_per_epoch
    metrics = args.out / "metrics.jsonl"
    if process.is_main:
        args.out.mkdir(parents=True, exist_ok=True)
        kept = []
        if args.resume and metrics.is_file():  # lines past the saved step are redone: drop them
            kept = [line for line in metrics.read_text().splitlines() if json.loads(line)["step"] <= step]
        write_text_atomically(metrics, "".join(line + "\n" for line in kept))
    log = metrics.open("a") if process.is_main else None
    bar = tqdm(total=total, initial=step, unit="step", disable=args.quiet or not process.is_main)
    images, labels = train_set.tensors
    last = min(total, step + args.stop_after) if args.stop_after else total
    order, order_epoch = None, None
    window = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, images since the last log
    started = time.perf_counter()
    while step < last:
        epoch, position = divmod(step, steps_per_epoch)
        if order_epoch != epoch:
            order, order_epoch = global_batches(len(labels), args.batch_size, epoch, args.seed), epoch
        mine = rank_share(order[position], process)  # (G / world_size,)
        factor = warmup_cosine(step / total, args.warmup)
        for group in optimizer.param_groups:
            group["lr"] = args.lr * group.get("lr_multiplier", 1.0) * factor
        optimizer.zero_grad(set_to_none=True)
        net.train()
        for micro, index in enumerate(mine.chunk(args.accumulate)):
            generator = torch.Generator().manual_seed(step_seed(args.seed, step, process.rank, micro))
            torch.manual_seed(step_seed(args.seed, step, process.rank, micro))  # dropout's draws
            x = random_shift(images[index], args.max_shift, generator).to(device)
            y = labels[index].to(device)
            quiet = net.no_sync() if net is not model and micro < args.accumulate - 1 else contextlib.nullcontext()
            with quiet:
                logits = net(x)  # (b, num_classes)
                loss = F.cross_entropy(logits, y, label_smoothing=args.label_smoothing)
                (loss / args.accumulate).backward()
            window += torch.tensor(
                [loss.item() * len(y), (logits.argmax(-1) == y).sum().item(), len(y)], dtype=torch.float64
            )
        if args.clip_grad:
            nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
        optimizer.step()
        step += 1
        bar.update(1)
        lines = []
        if step % args.log_every == 0 or step == last:
            loss_sum, correct, count = sum_over_processes(window).tolist()
            window.zero_()
            lines.append(
                {
                    "step": step,
                    "epoch": step / steps_per_epoch,
                    "lr": args.lr * factor,
                    "train_loss": loss_sum / count,
                    "train_accuracy": correct / count,
                }
            )
            bar.set_postfix(loss=f"{loss_sum / count:.3f}", refresh=False)
        if step % eval_every == 0 or step == total:
            val_loss, val_accuracy = evaluate_shared(model, val_set, process, device)
            lines.append({"step": step, "val_loss": val_loss, "val_accuracy": val_accuracy})
        if log is not None and lines:
            log.write("".join(json.dumps(line) + "\n" for line in lines))
            log.flush()
        if (args.save_every and step % args.save_every == 0) or step == last:
            if process.is_main:
                save_training_state(args.out, model, optimizer, step, settings)
            if process.world_size > 1:
                torch.distributed.barrier()  # no process runs ahead of a save it may resume from
    bar.close()
    if log is not None:
        log.close()
    result = {
        "step": step,
        "finished": step == total,
        "seconds_this_launch": round(time.perf_counter() - started, 3),
        "settings": settings,
    }
    if step == total:
        result["val_loss"], result["val_accuracy"] = val_loss, val_accuracy  # the last validation: at `total`
        if args.test:
            result["test_loss"], result["test_accuracy"] = evaluate_shared(model, test_set, process, device)
    if process.is_main:
        write_text_atomically(args.out / "result.json", json.dumps(result, indent=1) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    try:
        result = train(args)
    except UsageError as error:
        print(f"vit-train: error: {error}", file=sys.stderr)
        return 2
    if this_process().is_main:
        summary = f"step {result['step']} of {result['settings']['steps']}"
        if "val_accuracy" in result:
            summary += f", validation accuracy {result['val_accuracy']:.4f}"
        if "test_accuracy" in result:
            summary += f", test accuracy {result['test_accuracy']:.4f}"
        print(f"{summary}; written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
