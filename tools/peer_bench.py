"""Benchmark: the course's VisionTransformer against the model a user would pick instead,
Hugging Face transformers' ViTForImageClassification, with the same weights and inputs.

`make bench` runs it after the attention benchmark (`python tools/peer_bench.py`, `--quick` for a
short run); without transformers installed (a dev requirement) it says so and skips. Everything
is measured in one run and reported as ratios (ours / theirs: below 1 means the course's model is
faster), with the spread over the rounds and the largest difference between the two models'
logits, which shows that both compute the same function.

What is measured, for each case (the tiny config; ViT-B/16 at 224 px; ViT-B/16 at lesson 8's
384 px) and each of transformers' attention implementations ("eager": the weights written out,
"sdpa": torch's fused kernel):
- inference: a forward pass under torch.inference_mode(), the model in eval mode;
- training: a forward pass, the cross-entropy, the backward pass and one AdamW step.
The two models take turns, one run each per round; the ratio of each round is ours / theirs, and
the table gives the median over the rounds and the range of the middle half (quartiles).
"""

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

# run as a script from a checkout, the course library needs no install
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from utils.bench import report
from utils.pretrained import from_hf
from utils.vit import ViTConfig

PEER_CASES = {  # name -> (config, batch)
    "tiny, 32 px, patch 4 (65 tokens)": (ViTConfig.tiny(), 64),
    "ViT-B/16, 224 px (197 tokens)": (ViTConfig.vit_b16(), 4),
    "ViT-B/16, 384 px (577 tokens)": (ViTConfig.vit_b16(image_size=384), 1),
}
HF_ATTENTION = ("eager", "sdpa")  # transformers' attn_implementation values compared
TASKS = ("inference", "training")


def transformers_available() -> bool:
    """Whether transformers can be imported (it is a dev requirement, not a runtime one)."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def hf_twin(config: ViTConfig, attn_implementation: str) -> nn.Module:
    """A transformers ViTForImageClassification of the same shape as `config`, randomly initialised
    (seeded), without dropout: built offline from a config, never downloaded."""
    from transformers import ViTConfig as HFConfig
    from transformers import ViTForImageClassification

    hf_config = HFConfig(
        hidden_size=config.embed_dim,
        num_hidden_layers=config.depth,
        num_attention_heads=config.num_heads,
        intermediate_size=int(config.embed_dim * config.mlp_ratio),
        hidden_act="gelu",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        layer_norm_eps=config.norm_eps,
        image_size=config.image_size,
        patch_size=config.patch_size,
        num_channels=config.in_channels,
        qkv_bias=config.qkv_bias,
        num_labels=config.num_classes,
        attn_implementation=attn_implementation,
    )
    torch.manual_seed(0)
    return ViTForImageClassification(hf_config)


class HFLogits(nn.Module):
    """transformers' model as images -> logits, like ours (it returns an output object)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=images).logits


def inference_step(model: nn.Module, images: torch.Tensor) -> Callable[[], None]:
    model.eval()

    def step() -> None:
        with torch.inference_mode():
            model(images)

    return step


def training_step(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> Callable[[], None]:
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)  # tiny steps: the weights stay comparable

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(images), labels).backward()
        optimizer.step()

    return step


def time_pair(ours: Callable[[], None], theirs: Callable[[], None], warmup: int, repeats: int) -> list[float]:
    """The ratio ours / theirs of each round; the two take turns, alternating who goes first."""
    for _ in range(warmup):
        ours()
        theirs()
    ratios = []
    for round_ in range(repeats):
        seconds = {}
        order = [("ours", ours), ("theirs", theirs)]
        for name, step in order if round_ % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            step()
            seconds[name] = time.perf_counter() - start
        ratios.append(seconds["ours"] / seconds["theirs"])
    return ratios


def bench_peer(name: str, warmup: int = 2, repeats: int = 9) -> list[dict]:
    """Both models of case `name` in both of transformers' attention implementations, inference
    and a training step: one dict per (attention, task) with the median ratio and its quartiles."""
    config, batch = PEER_CASES[name]
    torch.manual_seed(1)
    images = torch.randn(batch, config.in_channels, config.image_size, config.image_size)
    labels = torch.randint(0, config.num_classes, (batch,))
    rows = []
    for attention in HF_ATTENTION:
        theirs = HFLogits(hf_twin(config, attention))
        ours = from_hf(theirs.model)  # the same weights, in the course's layout
        theirs.eval()
        ours.eval()
        with torch.inference_mode():
            difference = (ours(images) - theirs(images)).abs().max().item()
        for task in TASKS:
            if task == "inference":
                pair = inference_step(ours, images), inference_step(theirs, images)
            else:
                pair = training_step(ours, images, labels), training_step(theirs, images, labels)
            ratios = time_pair(*pair, warmup=warmup, repeats=repeats)
            low, _, high = statistics.quantiles(ratios, n=4)
            rows.append(
                dict(
                    case=name,
                    attention=attention,
                    task=task,
                    batch=batch,
                    ratio=statistics.median(ratios),
                    low=low,
                    high=high,
                    repeats=repeats,
                    max_logit_difference=difference,
                )
            )
    return rows


def run_peer_benchmark(quick: bool = False, verbose: bool = False) -> list[dict]:
    """Every case (quick: the tiny one only, 3 rounds); [] when transformers is missing."""
    if not transformers_available():
        return []
    names = list(PEER_CASES)[:1] if quick else list(PEER_CASES)
    rows = []
    for name in names:
        rows += bench_peer(name, warmup=1 if quick else 2, repeats=3 if quick else 9)
        if verbose:
            print(f"  measured {name} against transformers", flush=True)
    return rows


def format_peer_table(rows: list[dict]) -> str:
    """The ratios as a table, or a line saying why there is none."""
    if not rows:
        return "transformers is not installed (pip install -r requirements-dev.txt): no comparison with it"
    header = f"{'case':<34} {'batch':>5} {'transformers':>12} | {'inference':^21} | {'training step':^21} | logits"
    lines = [
        "the course's VisionTransformer against transformers' ViTForImageClassification (same weights):",
        header,
        "-" * len(header),
    ]
    for name in dict.fromkeys(r["case"] for r in rows):
        for attention in HF_ATTENTION:
            cells = {r["task"]: r for r in rows if r["case"] == name and r["attention"] == attention}
            if not cells:
                continue
            shown = " | ".join(
                f"{cells[t]['ratio']:>5.2f} ({cells[t]['low']:.2f}-{cells[t]['high']:.2f})  " for t in TASKS
            )
            first = next(iter(cells.values()))
            lines.append(
                f"{name:<34} {first['batch']:>5} {attention:>12} | {shown} | {first['max_logit_difference']:.1e}"
            )
    lines += [
        "time ratio ours / theirs, median over the rounds (the middle half of the rounds in brackets):",
        "below 1.00 the course's model is faster; logits = the largest difference between the two models' logits",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the tiny case only, 3 rounds (a few seconds)")
    args = parser.parse_args(argv)
    return report(
        "against transformers",
        lambda: run_peer_benchmark(quick=args.quick, verbose=True),
        format_peer_table,
        args.quick,
    )


if __name__ == "__main__":
    main()
