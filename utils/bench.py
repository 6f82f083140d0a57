"""Benchmark: the course's explicit attention vs torch's fused kernel vs nn.MultiheadAttention.

Run `python -m utils.bench`, or `python -m utils.bench --quick` for a short run; docs/performance.md
holds the results. Everything is measured in one run and reported as ratios
to the explicit implementation, so that the numbers of one machine can be compared with each
other, not with another machine's.

What is measured:
- time: forward + backward of one self-attention layer (qkv projection, attention, output
  projection), the median of `repeats` runs after `warmup` runs. The implementations take
  turns, one run each per round, so that a busy machine slows them all alike.
- saved: the bytes of the activations autograd keeps for the backward pass, measured exactly
  with `torch.autograd.graph.saved_tensors_hooks` (each storage counted once, parameters
  excluded): what a training step holds from its forward to its backward, on top of the
  model, and what grows with the batch and the tokens. It is exact and deterministic, unlike a
  process's memory on a CPU; short-lived buffers (the scores before the softmax, gradients
  during backward) are not in it.
- training: images/s of the course's tiny ViT (`ViTConfig.tiny()`, batch 128, AdamW), with
  every attention layer forced onto the explicit implementation and onto the fused one.
"""

import argparse
import copy
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from utils.attention import ATTENTION_IMPLEMENTATIONS, MultiHeadSelfAttention
from utils.runtime import check_threads, release_memory, torch_threads
from utils.training import train_step
from utils.validation import check_flag
from utils.vit import VisionTransformer, ViTConfig

IMPLEMENTATIONS = {  # "implementation" in the results -> what runs
    "explicit": "the course's scaled_dot_product_attention (weights built)",
    "fused": "torch's F.scaled_dot_product_attention",
    "mha": "torch's nn.MultiheadAttention(need_weights=False)",
}

TOKENS_PER_BATCH = 2048  # small-width cases: batch = 2048 // N patches, so the linear work is equal


def attention_cases(quick: bool = False) -> list[dict]:
    """The layers timed: the course's token counts at width 64 (4 heads of 16), and ViT-B/16's.

    17 = 8x8 digits in 2 px patches + cls; 65 = 32 px in 4 px patches + cls (the tiny ViT);
    257 = 64 px in 4 px patches + cls; 1025 = 128 px in 4 px patches + cls; 197 x 768 = ViT-B/16.
    quick (lesson 6 runs it, on Binder's 1 GB): the first three alone; at 1025 tokens the explicit
    T x T matrices and their gradients hold about 100 MB at once, and ViT-B/16's three layers with
    their gradients about 55 MB.
    """
    token_counts = (17, 65, 257) if quick else (17, 65, 257, 1025)
    cases = [dict(tokens=n, dim=64, heads=4, batch=TOKENS_PER_BATCH // (n - 1)) for n in token_counts]
    return cases if quick else [*cases, dict(tokens=197, dim=768, heads=12, batch=4)]


def machine_info() -> str:
    """One line naming what ran the benchmark."""
    cpu = platform.processor() or platform.machine()
    return (
        f"torch {torch.__version__}, threads {torch.get_num_threads()} of {os.cpu_count()} CPUs, "
        f"{cpu}, Python {platform.python_version()}, float32"
    )


def set_attention_implementation(model: nn.Module, implementation: str) -> nn.Module:
    """Set `implementation` ("auto", "explicit" or "fused") on every MultiHeadSelfAttention in `model`."""
    if implementation not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(f"implementation must be one of {ATTENTION_IMPLEMENTATIONS}, got {implementation!r}")
    for module in model.modules():
        if isinstance(module, MultiHeadSelfAttention):
            module.implementation = implementation
    return model


def saved_bytes(fn: Callable[[], object], exclude: list[torch.Tensor] = ()) -> int:
    """Bytes of the tensors autograd saves for backward while fn() runs.

    Each storage is counted once (a tensor saved by two operations, or a view of it, costs its
    memory once); the storages of `exclude` (the parameters) are not counted.
    """
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in skip:
            storages[storage.data_ptr()] = storage.nbytes()
        # detached: an output packed as itself would hold its own graph, a cycle through C++ that Python's
        # garbage collector cannot see, so the graph and every tensor it saved would never be freed
        return tensor.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = fn()
    del result  # the graph (and what it saved) goes with it
    return sum(storages.values())


def time_round_robin(steps: dict, warmup: int, repeats: int) -> dict:
    """Median seconds of each step (a dict of callables); the steps take turns, one run each per
    round, so that a busy machine slows them all alike."""
    for _ in range(warmup):
        for step in steps.values():
            step()
    seconds: dict = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) for name, times in seconds.items()}


class TorchMHA(nn.Module):
    """nn.MultiheadAttention as self-attention on (B, N, D) tokens, holding `ours`'s weights."""

    def __init__(self, ours: MultiHeadSelfAttention):
        super().__init__()
        self.mha = nn.MultiheadAttention(ours.dim, ours.num_heads, batch_first=True)
        with torch.no_grad():
            self.mha.in_proj_weight.copy_(ours.qkv.weight)
            self.mha.in_proj_bias.copy_(ours.qkv.bias)
            self.mha.out_proj.load_state_dict(ours.proj.state_dict())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mha(x, x, x, need_weights=False)[0]  # (B, N, D)


def attention_layers(dim: int, heads: int) -> dict[str, nn.Module]:
    """The three layers of the comparison, with the same weights, in training mode (no dropout)."""
    torch.manual_seed(0)
    explicit = set_attention_implementation(MultiHeadSelfAttention(dim, heads), "explicit")
    fused = set_attention_implementation(copy.deepcopy(explicit), "fused")
    return {"explicit": explicit, "fused": fused, "mha": TorchMHA(explicit)}


def forward_backward(layer: nn.Module, x: torch.Tensor, grad_out: torch.Tensor) -> Callable[[], None]:
    """One forward + backward of `layer` on x (gradients for the input and the parameters)."""

    def step() -> None:
        x.grad = None
        for p in layer.parameters():
            p.grad = None
        layer(x).backward(grad_out)

    return step


def forward_only(layer: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    """One forward of `layer` on x without autograd (inference)."""

    def step() -> None:
        with torch.no_grad():
            layer(x)

    return step


def bench_attention(case: dict, warmup: int, repeats: int) -> list[dict]:
    """One result per implementation for one (tokens, dim, heads, batch) case."""
    N, D, heads, B = case["tokens"], case["dim"], case["heads"], case["batch"]
    layers = attention_layers(D, heads)
    torch.manual_seed(1)
    x = torch.randn(B, N, D, requires_grad=True)  # (B, N, D)
    grad_out = torch.randn(B, N, D)
    steps = {(name, "train"): forward_backward(layer, x, grad_out) for name, layer in layers.items()}
    steps |= {(name, "infer"): forward_only(layer, x.detach()) for name, layer in layers.items()}
    seconds = time_round_robin(steps, warmup, repeats)
    saved = {
        name: saved_bytes(lambda layer=layer: layer(x), exclude=list(layer.parameters()))
        for name, layer in layers.items()
    }
    return [
        dict(
            benchmark="attention",
            implementation=name,
            **case,
            ms=1e3 * seconds[name, "train"],
            speedup=seconds["explicit", "train"] / seconds[name, "train"],
            infer_ms=1e3 * seconds[name, "infer"],
            infer_speedup=seconds["explicit", "infer"] / seconds[name, "infer"],
            saved_bytes=saved[name],
            saved_mb=saved[name] / 2**20,
            memory_ratio=saved[name] / saved["explicit"],
        )
        for name in layers
    ]


def bench_training(batch: int, warmup: int, repeats: int) -> list[dict]:
    """Training images/s of the tiny ViT with every attention layer explicit / fused."""
    config = ViTConfig.tiny()
    torch.manual_seed(0)
    explicit = set_attention_implementation(VisionTransformer(config), "explicit")
    fused = set_attention_implementation(copy.deepcopy(explicit), "fused")
    models = {"explicit": explicit, "fused": fused}
    torch.manual_seed(1)
    images = torch.randn(batch, config.in_channels, 32, 32)  # (B, C, H, W)
    labels = torch.randint(0, config.num_classes, (batch,))

    def one_step(model: nn.Module) -> Callable[[], None]:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        return lambda: train_step(model, optimizer, images, labels)

    seconds = time_round_robin({name: one_step(m.train()) for name, m in models.items()}, warmup, repeats)
    saved = {name: saved_bytes(lambda m=m: m(images), exclude=list(m.parameters())) for name, m in models.items()}
    return [
        dict(
            benchmark="training",
            implementation=name,
            tokens=config.num_tokens,
            dim=config.embed_dim,
            heads=config.num_heads,
            batch=batch,
            ms=1e3 * seconds[name],
            images_per_s=batch / seconds[name],
            speedup=seconds["explicit"] / seconds[name],
            saved_bytes=saved[name],
            saved_mb=saved[name] / 2**20,
            memory_ratio=saved[name] / saved["explicit"],
        )
        for name in models
    ]


def run_benchmark(quick: bool = False, threads: int | None = None, verbose: bool = False) -> list[dict]:
    """Run every measurement once; one dict per (case, implementation).

    Args:
        quick: a short run (a few seconds): fewer repeats, the width-64 cases up to 257 tokens alone, a
            smaller training batch.
        threads: torch threads for the run (restored afterwards); None keeps torch's setting.
        verbose: print a line as each case is done.
    Returns:
        dicts with keys benchmark ("attention" or "training"), implementation ("explicit", "fused", "mha"),
        tokens, dim, heads, batch, ms (median forward + backward, or training step), speedup
        (explicit's time / this time: above 1 is faster than explicit), saved_bytes and saved_mb
        (activations kept for backward), memory_ratio (saved / explicit's saved). Attention rows
        also have infer_ms and infer_speedup (a forward under torch.no_grad()); training rows
        have images_per_s.
    """
    quick, verbose = check_flag(quick, "quick"), check_flag(verbose, "verbose")
    warmup, repeats = (1, 3) if quick else (3, 21)
    with torch_threads(threads):  # an error for 0 or 1.5, before anything runs
        results = []
        release_memory()  # each case starts from what the process still uses, not from what it freed
        for case in attention_cases(quick):
            big = case["dim"] >= 768
            results += bench_attention(case, warmup, max(3, repeats // 3) if big else repeats)
            release_memory()
            if verbose:
                print(f"  measured {case['tokens']} tokens x {case['dim']}", flush=True)
        results += bench_training(batch=32 if quick else 128, warmup=1 if quick else 2, repeats=2 if quick else 10)
    return results


def format_table(results: list[dict]) -> str:
    """The results as a small aligned table: one line per case, the implementations side by side."""
    attention = [r for r in results if r["benchmark"] == "attention"]
    training = [r for r in results if r["benchmark"] == "training"]
    header = (
        f"{'tokens':>6} {'width':>5} {'heads':>5} {'batch':>5} | {'explicit':>8} {'fused':>17} "
        f"{'nn.MHA':>17} | {'explicit':>8} {'fused':>17} | {'explicit':>8} {'fused':>7} {'nn.MHA':>7}"
    )
    lines = [
        f"{'one self-attention layer':<25}|{'forward + backward, ms':^46}|{'no-grad forward, ms':^28}"
        f"|{'saved for backward, MB':^25}",
        header,
        "-" * len(header),
    ]
    cases = sorted({(r["dim"], r["tokens"], r["heads"], r["batch"]) for r in attention})
    for dim, tokens, heads, batch in cases:
        row = {r["implementation"]: r for r in attention if (r["dim"], r["tokens"]) == (dim, tokens)}
        e, f, m = row["explicit"], row["fused"], row["mha"]
        lines.append(
            f"{tokens:>6} {dim:>5} {heads:>5} {batch:>5} | {e['ms']:>8.2f} "
            f"{f['ms']:>8.2f} ({f['speedup']:>5.2f}x) {m['ms']:>8.2f} ({m['speedup']:>5.2f}x) | "
            f"{e['infer_ms']:>8.2f} {f['infer_ms']:>8.2f} ({f['infer_speedup']:>5.2f}x) | "
            f"{e['saved_mb']:>8.2f} {f['saved_mb']:>7.2f} {m['saved_mb']:>7.2f}"
        )
    lines += [
        "(x) = speed-up over explicit, above 1 is faster; saved = activations autograd keeps for",
        "backward (exact, parameters excluded); small width: batch = 2048 // (tokens - 1)",
    ]
    if training:
        e, f = (next(r for r in training if r["implementation"] == p) for p in ("explicit", "fused"))
        lines += [
            "",
            f"training the tiny ViT (ViTConfig.tiny(), {e['tokens']} tokens, batch {e['batch']}, AdamW):",
            f"  explicit {e['images_per_s']:>7.0f} images/s, saved {e['saved_mb']:6.1f} MB",
            f"  fused    {f['images_per_s']:>7.0f} images/s, saved {f['saved_mb']:6.1f} MB "
            f"({f['speedup']:.2f}x the speed, {f['memory_ratio']:.2f}x the memory)",
        ]
    lines += [
        "",
        "MultiHeadSelfAttention (implementation='auto') runs the fused kernel whenever no weights are",
        "requested, in training and inference; return_attention=True runs the explicit one.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (a few seconds), as in the tests")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads (default: torch's choice); 1 gives steadier numbers on a busy machine",
    )
    args = parser.parse_args(argv)
    try:
        check_threads(args.threads)
    except ValueError as error:
        parser.error(str(error))
    with torch_threads(args.threads):  # the report names the count it ran on
        return report(
            "attention benchmark", lambda: run_benchmark(quick=args.quick, verbose=True), format_table, args.quick
        )


def report(title: str, run: Callable[[], list[dict]], table: Callable[[list[dict]], str], quick: bool) -> list[dict]:
    """Print what ran the benchmark, run it, print its table and how long it took; return its rows
    (the command lines of this benchmark and of tools/peer_bench.py)."""
    print(f"ViT from Scratch {title}: {machine_info()}")
    start = time.perf_counter()
    results = run()
    print()
    print(table(results))
    print(f"\n({'quick' if quick else 'full'} run, {time.perf_counter() - start:.0f} s)")
    return results


if __name__ == "__main__":
    main()
