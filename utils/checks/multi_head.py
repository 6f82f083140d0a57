"""Lesson 4's exercise checkers: split_heads, merge_heads and the whole multi-head forward."""

import copy
import itertools
import math
from collections.abc import Callable

import torch
from torch import nn

from utils.attention import MultiHeadSelfAttention, merge_heads, split_heads
from utils.checks.core import CheckFailed, call_learner, compare, summarize

SPLIT_CASES = [  # (B, N, D, heads): N, heads and head_dim all different, so no mistake hides
    (2, 17, 64, 4),
    (1, 5, 12, 3),
    (3, 6, 8, 2),
    (2, 3, 8, 1),
]
FORWARD_CASES = [(2, 7, 24, 4), (1, 5, 16, 2), (3, 4, 18, 3), (1, 3, 8, 1)]  # (B, N, D, heads)
TOL = dict(atol=1e-5, rtol=1e-4)

VIEW_HINT = (
    ": `.view` cannot merge the axes of a transposed tensor, whose memory is no longer in order; "
    "use `.reshape` (or `.contiguous().view(...)`)"
)


def _call(fn: Callable, *args) -> torch.Tensor:
    """call_learner, plus a hint for the classic `.view` after a transpose."""
    try:
        return call_learner(fn, *args)
    except CheckFailed as failure:
        if "view size is not compatible" in str(failure):
            raise CheckFailed(f"{failure}{VIEW_HINT}") from failure.__cause__
        raise


def _split_variants(x: torch.Tensor, num_heads: int) -> dict[str, torch.Tensor]:
    """Wrong split_heads results of the right shape, each keyed by the sentence that explains it."""
    B, N, D = x.shape
    h, hd = num_heads, D // num_heads
    return {
        "you reshaped straight to (B, heads, N, head_dim) without a transpose: the shape is right "
        "but the values are scrambled (each 'head' got consecutive numbers from several tokens); "
        "reshape to (B, N, heads, head_dim) first, then transpose(1, 2)": x.reshape(B, h, N, hd),
        "each head must get one contiguous slice of head_dim features, but yours takes every "
        f"{h}-th feature: you cut the width as (head_dim, heads); cut it as (heads, head_dim)": x.reshape(
            B, N, hd, h
        ).permute(0, 3, 1, 2),
    }


def check_split_heads(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Check a learner's split_heads(x, num_heads): (B, N, D) -> (B, heads, N, head_dim)."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for B, N, D, h in SPLIT_CASES:
        x = torch.randn(B, N, D, generator=generator)
        expected = split_heads(x, h)
        got = _call(fn, x.clone(), h)
        hd = D // h
        shape_hints = {
            (B, N, h, hd): "did you transpose? The heads axis must come before the tokens: transpose(1, 2)",
            (B, hd, N, h): "heads and head_dim are swapped; cut the width D as (heads, head_dim)",
            (B, N, hd, h): "heads and head_dim are swapped, and the heads axis must then come before the tokens",
            (B * h, N, hd): "you folded the heads into the batch axis; keep them apart, (B, heads, N, head_dim)",
        }
        where = f"for x of shape {(B, N, D)} and {h} heads"
        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_wording="expected {}",
                shape_hints=shape_hints,
                layout="(B, heads, N, head_dim)",
                mistakes=_split_variants(x, h),
            )
        )
    print(f"✓ split_heads matches the reference on {len(verdicts)} inputs: {summarize(verdicts)}")


def _merge_variants(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong merge_heads results of the right shape, each keyed by the sentence that explains it."""
    B, h, N, hd = x.shape
    return {
        "you reshaped to (B, N, D) without transposing back first: the shape is right but the "
        "values are scrambled; transpose(1, 2) to (B, N, heads, head_dim), then reshape": x.reshape(B, N, h * hd),
        "the heads' features are interleaved: each head's head_dim numbers must sit side by side, "
        "head 0's slice first; transpose(1, 2), not a permute that puts head_dim before heads": x.permute(
            0, 2, 3, 1
        ).reshape(B, N, h * hd),
    }


def check_merge_heads(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Check a learner's merge_heads(x): (B, heads, N, head_dim) -> (B, N, heads * head_dim)."""
    generator = torch.Generator().manual_seed(1)
    verdicts = []
    for B, N, D, h in SPLIT_CASES:
        hd = D // h
        x = torch.randn(B, h, N, hd, generator=generator)
        expected = merge_heads(x)
        got = _call(fn, x.clone())
        shape_hints = {
            (B, h, N * hd): "you forgot to transpose back; the tokens must come before the heads: "
            "transpose(1, 2), then reshape",
            (B, N, h, hd): "the heads are not merged yet; reshape (B, N, heads, head_dim) to (B, N, heads * head_dim)",
        }
        where = f"for x of shape {(B, h, N, hd)}"
        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_wording="expected {}",
                shape_hints=shape_hints,
                layout="(B, N, heads * head_dim)",
                mistakes=_merge_variants(x) if h > 1 else {},
            )
        )
    print(f"✓ merge_heads matches the reference on {len(verdicts)} inputs: {summarize(verdicts)}")


def _random_layers(D: int, generator: torch.Generator) -> tuple[nn.Linear, nn.Linear]:
    """A fused qkv Linear(D, 3D) and a proj Linear(D, D) holding random weights and biases."""
    qkv, proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
    with torch.no_grad():
        for layer in (qkv, proj):
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) / math.sqrt(D))
            layer.bias.copy_(torch.randn(layer.bias.shape, generator=generator) * 0.1)
    return qkv, proj


def reference_multi_head(
    x: torch.Tensor,
    qkv: nn.Linear,
    proj: nn.Linear,
    num_heads: int,
    order: tuple[int, int, int] = (0, 1, 2),
    scale: str = "head_dim",
    split: str = "right",
    softmax_dim: int = -1,
    merge: str = "right",
    project: bool = True,
) -> torch.Tensor:
    """Multi-head self-attention written out, with a switch for each typical mistake.

    order: which third of qkv(x) is used as (q, k, v); scale: "head_dim", "D" or "none";
    split: "right", "no_transpose" (q, k, v reshaped straight to (B, heads, N, head_dim)),
    "interleaved" (width cut as (head_dim, heads)) or "heads_first" (qkv read as (heads, 3, head_dim));
    merge: "right" or "no_transpose"; project: apply the output projection.
    """
    B, N, D = x.shape
    h, hd = num_heads, D // num_heads
    t = qkv(x)  # (B, N, 3D)
    if split == "right":
        parts = t.reshape(B, N, 3, h, hd).permute(2, 0, 3, 1, 4)  # (3, B, heads, N, head_dim)
    elif split == "interleaved":
        parts = t.reshape(B, N, 3, hd, h).permute(2, 0, 4, 1, 3)  # (3, B, heads, N, head_dim)
    elif split == "heads_first":
        parts = t.reshape(B, N, h, 3, hd).permute(3, 0, 2, 1, 4)  # (3, B, heads, N, head_dim)
    elif split == "no_transpose":
        parts = torch.stack([p.reshape(B, h, N, hd) for p in t.chunk(3, dim=-1)])  # scrambled
    else:
        raise ValueError(f"unknown split {split!r}")
    q, k, v = parts[order[0]], parts[order[1]], parts[order[2]]  # each (B, heads, N, head_dim)
    scores = q @ k.transpose(-2, -1)  # (B, heads, N, N)
    if scale != "none":
        scores = scores / math.sqrt(hd if scale == "head_dim" else D)
    out = scores.softmax(dim=softmax_dim) @ v  # (B, heads, N, head_dim)
    if merge == "right":
        out = out.transpose(1, 2).reshape(B, N, D)  # (B, N, D)
    else:
        out = out.reshape(B, N, D)  # scrambled
    return proj(out) if project else out


def _forward_variants(x: torch.Tensor, qkv: nn.Linear, proj: nn.Linear, h: int) -> dict[str, torch.Tensor]:
    """Wrong forward outputs, each keyed by the sentence that explains it."""
    D = x.shape[-1]
    hd = D // h
    variants = {
        "you forgot the output projection: apply proj to the merged heads": reference_multi_head(
            x, qkv, proj, h, project=False
        ),
        f"you forgot the scale: divide the scores q kᵀ by sqrt(head_dim) = sqrt({hd}) "
        "before the softmax": reference_multi_head(x, qkv, proj, h, scale="none"),
        f"you scaled the scores by sqrt(D) = sqrt({D}); each head's dot products add up head_dim "
        f"numbers, so divide by sqrt(head_dim) = sqrt({hd})": reference_multi_head(x, qkv, proj, h, scale="D"),
    }
    for order in itertools.permutations(range(3)):
        if order != (0, 1, 2):
            taken = ", ".join("qkv"[i] for i in order)
            variants[
                f"you took q, k, v from the fused qkv in the wrong order (yours are its ({taken}) "
                "parts); its output is [q | k | v]: q the first D features, k the next D, v the last D"
            ] = reference_multi_head(x, qkv, proj, h, order=order)
    variants.update(
        {
            "you split the heads wrongly: q, k and v were reshaped straight to (B, heads, N, head_dim) "
            "without a transpose; reshape to (B, N, 3, heads, head_dim), "
            "then permute(2, 0, 3, 1, 4)": reference_multi_head(x, qkv, proj, h, split="no_transpose"),
            "you split the heads wrongly: each head must take a contiguous slice of head_dim features "
            "(the width cut as (heads, head_dim), not (head_dim, heads))": reference_multi_head(
                x, qkv, proj, h, split="interleaved"
            ),
            "you split the heads wrongly: qkv(x) is [q | k | v], each D wide, so reshape to "
            "(B, N, 3, heads, head_dim), not (B, N, heads, 3, head_dim)": reference_multi_head(
                x, qkv, proj, h, split="heads_first"
            ),
            "the softmax runs over the wrong axis: each query's weights over the keys must sum to 1, "
            "so take it over the last axis": reference_multi_head(x, qkv, proj, h, softmax_dim=-2),
            "you merged the heads without transposing back: transpose(1, 2) to (B, N, heads, head_dim), "
            "then reshape to (B, N, D)": reference_multi_head(x, qkv, proj, h, merge="no_transpose"),
        }
    )
    return variants


def check_multi_head_attention(fn: Callable[[torch.Tensor, nn.Linear, nn.Linear, int], torch.Tensor]) -> None:
    """Check a learner's multi_head_attention(x, qkv, proj, num_heads) -> (B, N, D) against
    utils.MultiHeadSelfAttention holding the same weights."""
    generator = torch.Generator().manual_seed(2)
    verdicts = []
    for B, N, D, h in FORWARD_CASES:
        x = torch.randn(B, N, D, generator=generator)
        qkv, proj = _random_layers(D, generator)
        reference = MultiHeadSelfAttention(D, h)
        reference.qkv.load_state_dict(qkv.state_dict())
        reference.proj.load_state_dict(proj.state_dict())
        with torch.no_grad():
            expected = reference(x)
            got = _call(fn, x.clone(), copy.deepcopy(qkv), copy.deepcopy(proj), h)
            where = f"for x of shape {(B, N, D)} and {h} heads"
            shape_hints = {(B, h, N, D // h): "these are the heads' outputs; merge them to (B, N, D) and apply proj"}
            verdicts.append(
                compare(
                    got,
                    expected,
                    where,
                    shape_wording="expected {}",
                    shape_hints=shape_hints,
                    atol=TOL["atol"],
                    mistakes=_forward_variants(x, qkv, proj, h),
                    mistake_atol=TOL["atol"],
                    mistake_rtol=TOL["rtol"],
                    advice="; go through the steps in order: qkv, reshape to (B, N, 3, heads, head_dim), permute, "
                    "softmax(q kᵀ / sqrt(head_dim)) v per head, transpose back, reshape to (B, N, D), proj",
                )
            )
    print(
        f"✓ multi_head_attention matches utils.MultiHeadSelfAttention on {len(verdicts)} inputs: {summarize(verdicts)}"
    )
