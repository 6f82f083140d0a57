"""Lesson 4's exercise checkers: split_heads, merge_heads and the whole multi-head forward."""

import copy
import itertools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from utils.attention import MultiHeadSelfAttention, merge_heads, split_heads
from utils.checks.core import (
    CheckFailed,
    call_learner,
    compare,
    describe,
    raise_if_known_mistake,
    raise_if_not_like,
    summarize,
    varies_between_calls,
)

SPLIT_CASES = [  # (B, N, D, heads): N, heads and head_dim all different, so no mistake hides
    (2, 17, 64, 4),
    (1, 5, 12, 3),
    (3, 6, 8, 2),
    (2, 3, 8, 1),
]
FORWARD_CASES = [(2, 7, 24, 4), (1, 5, 16, 2), (3, 4, 18, 3), (1, 3, 8, 1)]  # (B, N, D, heads)
TOL = dict(atol=1e-5, rtol=1e-4)

VIEW_HINT = (
    "`.view` cannot merge the axes of a transposed tensor, whose memory is no longer in order; "
    "use `.reshape` (or `.contiguous().view(...)`)"
)


def _explain(error: Exception) -> str | None:
    """The classic `.view` after a transpose, in words; None for any other error."""
    if "view size is not compatible" in str(error):
        return VIEW_HINT
    return None


def _call(fn: Callable, *args, where: str, several: str = "") -> torch.Tensor:
    """call_learner with a hint for `.view` after a transpose, and for several tensors (a tuple or a
    list) where one was expected: `several` says what to do with them."""
    result = call_learner(fn, *args, returns=object, where=where, explain=_explain)
    if isinstance(result, torch.Tensor):
        return result
    came, hint = describe(result), ""
    if isinstance(result, tuple | list) and result and all(isinstance(t, torch.Tensor) for t in result):
        hint = f": {several}" if several else ""
    elif isinstance(result, nn.Module):
        came, hint = f"{came} (a layer)", ": call it on a tensor, e.g. proj(out), and return what it gives"
    raise CheckFailed(f"expected a torch.Tensor, got {came} {where}{hint}")


def _raise_if_misshapen_mistake(
    got: torch.Tensor, expected: torch.Tensor, mistakes: dict[str, torch.Tensor], where: str
) -> None:
    """Name a known mistake that also changes the shape before the shape hints judge the shape
    (the mistakes of the right shape are tried by compare once the values differ); a tensor of
    another dtype or device is named first."""
    raise_if_not_like(got, expected, where, same_dtype=True)
    misshapen = {reason: wrong for reason, wrong in mistakes.items() if wrong.shape != expected.shape}
    raise_if_known_mistake(got.detach(), misshapen, where)


def _split_variants(x: torch.Tensor, num_heads: int) -> dict[str, torch.Tensor]:
    """Wrong split_heads results, each keyed by the sentence that explains it (those of a wrong
    shape are tried before the shape is judged)."""
    B, N, D = x.shape
    h, hd = num_heads, D // num_heads
    by_token = x.reshape(B, N, h, hd)  # (B, N, heads, head_dim)
    return {
        "you reshaped straight to (B, heads, N, head_dim) without a transpose: the shape is right "
        "but the values are scrambled (each 'head' got consecutive numbers from several tokens); "
        "reshape to (B, N, heads, head_dim) first, then transpose(1, 2)": x.reshape(B, h, N, hd),
        "each head must get one contiguous slice of head_dim features, but yours takes every "
        f"{h}-th feature: you cut the width as (head_dim, heads); cut it as (heads, head_dim)": x.reshape(
            B, N, hd, h
        ).permute(0, 3, 1, 2),
        "you transposed before cutting the width, so the values are scrambled: reshape (B, N, D) to "
        "(B, N, heads, head_dim) first, then transpose(1, 2)": x.transpose(1, 2).reshape(B, h, N, hd),
        "you cut the width as (head_dim, heads); cut it as (heads, head_dim), so that each head gets "
        "one contiguous slice of head_dim features, then transpose(1, 2)": x.reshape(B, N, hd, h).transpose(1, 2),
        "you cut the width as (head_dim, heads) and did not move the heads in front of the tokens: "
        "reshape to (B, N, heads, head_dim), then transpose(1, 2)": x.reshape(B, N, hd, h),
        "you swapped the last two axes (transpose(2, 3)); the heads axis must move in front of the "
        "tokens: transpose(1, 2)": by_token.transpose(2, 3),
        "you moved head_dim in front of the tokens; move the heads axis there: transpose(1, 2)": by_token.permute(
            0, 3, 1, 2
        ),
    }


def check_split_heads(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Check a learner's split_heads(x, num_heads): (B, N, D) -> (B, heads, N, head_dim)."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for B, N, D, h in SPLIT_CASES:
        x = torch.randn(B, N, D, generator=generator)
        expected = split_heads(x, h)
        hd = D // h
        shape_hints = {
            (B, N, h, hd): "did you transpose? The heads axis must come before the tokens: transpose(1, 2)",
            (B, hd, N, h): "the heads and head_dim axes are swapped: (B, head_dim, N, heads) instead of "
            "(B, heads, N, head_dim)",
            (B, N, hd, h): "that is (B, N, head_dim, heads): the heads axis must come before the tokens, "
            "and head_dim last",
            (B, h, hd, N): "the last two axes are swapped: (B, heads, head_dim, N); the tokens come before head_dim",
            (B * h, N, hd): "you folded the heads into the batch axis; keep them apart, (B, heads, N, head_dim)",
        }
        where = f"for x of shape {(B, N, D)} and {h} heads"
        got = _call(
            fn,
            x.clone(),
            h,
            where=where,
            several="if these are the heads' slices, (B, N, head_dim) each, torch.stack them along dim 1",
        )
        mistakes = _split_variants(x, h)
        _raise_if_misshapen_mistake(got, expected, mistakes, where)
        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_wording="expected {}",
                shape_hints=shape_hints,
                layout="(B, heads, N, head_dim)",
                mistakes=mistakes,
                same_dtype=True,
            )
        )
    print(f"✓ split_heads matches the reference on {len(verdicts)} inputs: {summarize(verdicts)}")


def _merge_variants(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong merge_heads results, each keyed by the sentence that explains it (those of a wrong
    shape are tried before the shape is judged)."""
    B, h, N, hd = x.shape
    variants = {
        "you reshaped to (B, N, D) without transposing back first: the shape is right but the "
        "values are scrambled; transpose(1, 2) to (B, N, heads, head_dim), then reshape": x.reshape(B, N, h * hd),
        "the heads' features are interleaved: each head's head_dim numbers must sit side by side, "
        "head 0's slice first; transpose(1, 2), not a permute that puts head_dim before heads": x.permute(
            0, 2, 3, 1
        ).reshape(B, N, h * hd),
        "you swapped the last two axes (transpose(2, 3)) before the reshape; the tokens must move in "
        "front of the heads: transpose(1, 2), then reshape": x.transpose(2, 3).reshape(B, N, h * hd),
    }
    if h > 1:  # with one head, summing, averaging or taking head 0 is right
        variants.update(
            {
                "you added the heads up; merging puts them side by side (each head keeps its own "
                "head_dim features): transpose(1, 2), then reshape to (B, N, heads * head_dim)": x.sum(dim=1),
                "you averaged the heads; merging puts them side by side (each head keeps its own "
                "head_dim features): transpose(1, 2), then reshape to (B, N, heads * head_dim)": x.mean(dim=1),
                "you kept only head 0; merging puts all the heads side by side: transpose(1, 2), "
                "then reshape to (B, N, heads * head_dim)": x[:, 0],
            }
        )
    return variants


def check_merge_heads(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Check a learner's merge_heads(x): (B, heads, N, head_dim) -> (B, N, heads * head_dim)."""
    generator = torch.Generator().manual_seed(1)
    verdicts = []
    for B, N, D, h in SPLIT_CASES:
        hd = D // h
        x = torch.randn(B, h, N, hd, generator=generator)
        expected = merge_heads(x)
        shape_hints = {
            (B, h, N * hd): "you forgot to transpose back; the tokens must come before the heads: "
            "transpose(1, 2), then reshape",
            (B, N, h, hd): "the heads are not merged yet; reshape (B, N, heads, head_dim) to (B, N, heads * head_dim)",
            (B, N, hd): "one head_dim vector per token: the heads must sit side by side, (B, N, heads * head_dim)",
            (B, N * h * hd): "you flattened the tokens too; keep them: reshape to (B, N, heads * head_dim)",
            (B, h * N, hd): "the heads' tokens are one after the other, (B, heads * N, head_dim); put each "
            "token's heads side by side: transpose(1, 2), then reshape to (B, N, heads * head_dim)",
        }
        where = f"for x of shape {(B, h, N, hd)}"
        got = _call(fn, x.clone(), where=where)
        mistakes = _merge_variants(x)
        _raise_if_misshapen_mistake(got, expected, mistakes, where)
        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_wording="expected {}",
                shape_hints=shape_hints,
                layout="(B, N, heads * head_dim)",
                mistakes=mistakes,
                same_dtype=True,
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


SCALES = {  # scale -> what divides the scores, from head_dim and D
    "head_dim": lambda hd, D: math.sqrt(hd),
    "D": lambda hd, D: math.sqrt(D),
    "none": lambda hd, D: 1.0,
    "head_dim_unrooted": lambda hd, D: hd,
    "multiplied": lambda hd, D: 1 / math.sqrt(hd),
}


def reference_multi_head(
    x: torch.Tensor,
    qkv: nn.Linear,
    proj: nn.Linear,
    num_heads: int,
    order: tuple[int, int, int] = (0, 1, 2),
    scale: str = "head_dim",
    split: str = "right",
    softmax_dim: int | None = -1,
    merge: str = "right",
    project: bool = True,
    residual: bool = False,
    qkv_bias: bool = True,
) -> torch.Tensor:
    """Multi-head self-attention written out, with a switch for each typical mistake.

    order: which third of qkv(x) is used as (q, k, v); scale: what divides the scores, "head_dim"
    (sqrt(head_dim), right), "D" (sqrt(D)), "none", "head_dim_unrooted" (head_dim itself) or
    "multiplied" (times sqrt(head_dim)); split: "right", "no_transpose" (q, k, v reshaped straight to
    (B, heads, N, head_dim)), "interleaved" (width cut as (head_dim, heads)) or "heads_first" (qkv
    read as (heads, 3, head_dim)); softmax_dim: the softmax's axis of the (B, heads, N, N) scores,
    None for no softmax; merge: "right" or "no_transpose"; project: apply the output projection;
    residual: add x to the output; qkv_bias: use qkv's bias.
    """
    B, N, D = x.shape
    h, hd = num_heads, D // num_heads
    t = qkv(x) if qkv_bias else F.linear(x, qkv.weight)  # (B, N, 3D)
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
    products = q @ k.transpose(-2, -1) / SCALES[scale](hd, D)  # (B, heads, N, N)
    weights = products if softmax_dim is None else products.softmax(dim=softmax_dim)  # (B, heads, N, N)
    out = weights @ v  # (B, heads, N, head_dim)
    if merge == "right":
        out = out.transpose(1, 2).reshape(B, N, D)  # (B, N, D)
    else:
        out = out.reshape(B, N, D)  # scrambled
    out = proj(out) if project else out
    return x + out if residual else out


def _forward_variants(x: torch.Tensor, qkv: nn.Linear, proj: nn.Linear, h: int) -> dict[str, torch.Tensor]:
    """Wrong forward outputs, each keyed by the sentence that explains it."""
    D = x.shape[-1]
    hd = D // h

    def wrong(**mistake) -> torch.Tensor:
        return reference_multi_head(x, qkv, proj, h, **mistake)

    variants = {
        "you forgot the output projection: apply proj to the merged heads": wrong(project=False),
        f"you forgot the scale: divide the scores q kᵀ by sqrt(head_dim) = sqrt({hd}) before the softmax": wrong(
            scale="none"
        ),
        f"you scaled the scores by sqrt(D) = sqrt({D}); each head's dot products add up head_dim "
        f"numbers, so divide by sqrt(head_dim) = sqrt({hd})": wrong(scale="D"),
        f"you divided the scores by head_dim = {hd}; divide by its square root, sqrt(head_dim) = sqrt({hd})": wrong(
            scale="head_dim_unrooted"
        ),
        f"you multiplied the scores by sqrt(head_dim); divide them by it: q kᵀ / sqrt({hd})": wrong(scale="multiplied"),
    }
    variants[
        "q and k are swapped: you took them from the fused qkv in the wrong order (yours are its (k, q, v) "
        "parts), or you computed the scores as k qᵀ; qkv(x) is [q | k | v], and the scores are q kᵀ, "
        "q @ k.transpose(-2, -1)"
    ] = wrong(order=(1, 0, 2))  # the same numbers as wrong(scores="kq")
    for order in itertools.permutations(range(3)):
        if order not in ((0, 1, 2), (1, 0, 2)):
            taken = ", ".join("qkv"[i] for i in order)
            variants[
                f"you took q, k, v from the fused qkv in the wrong order (yours are its ({taken}) "
                "parts); its output is [q | k | v]: q the first D features, k the next D, v the last D"
            ] = wrong(order=order)
    variants.update(
        {
            "you split the heads wrongly: q, k and v were reshaped straight to (B, heads, N, head_dim) "
            "without a transpose; reshape to (B, N, 3, heads, head_dim), "
            "then permute(2, 0, 3, 1, 4)": wrong(split="no_transpose"),
            "you split the heads wrongly: each head must take a contiguous slice of head_dim features "
            "(the width cut as (heads, head_dim), not (head_dim, heads))": wrong(split="interleaved"),
            "you split the heads wrongly: qkv(x) is [q | k | v], each D wide, so reshape to "
            "(B, N, 3, heads, head_dim), not (B, N, heads, 3, head_dim)": wrong(split="heads_first"),
            "the softmax runs over the wrong axis: each query's weights over the keys must sum to 1, "
            "so take it over the last axis": wrong(softmax_dim=-2),
            "the softmax runs over the heads axis (dim=1); each query's weights over the keys must sum "
            "to 1, so take it over the last axis, dim=-1": wrong(softmax_dim=1),
            "you forgot the softmax: the weights are softmax(q kᵀ / sqrt(head_dim)) over the keys, dim=-1": wrong(
                softmax_dim=None
            ),
            "you merged the heads without transposing back: transpose(1, 2) to (B, N, heads, head_dim), "
            "then reshape to (B, N, D)": wrong(merge="no_transpose"),
            "you added x to the output: the residual connection belongs to the encoder block (lesson 5), "
            "not to attention; return proj(...) alone": wrong(residual=True),
            "you left out qkv's bias (x @ qkv.weight.T): call the layer, qkv(x), which adds it": wrong(qkv_bias=False),
        }
    )
    if h > 1:  # one head over the whole width is right when there is one head
        variants[
            f"you attended with one head over the whole width (scaled by sqrt(D)): num_heads = {h} was "
            "not used; cut q, k and v into heads, (B, heads, N, head_dim)"
        ] = reference_multi_head(x, qkv, proj, 1)
    return variants


def _forward(fn: Callable, x: torch.Tensor, qkv: nn.Linear, proj: nn.Linear, h: int, where: str) -> torch.Tensor:
    """The learner's forward on copies of x and of the layers (nothing it changes sticks)."""
    several = "return one tensor, the output (B, N, D) (the weights stay inside)"
    return _call(fn, x.clone(), copy.deepcopy(qkv), copy.deepcopy(proj), h, where=where, several=several)


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
            where = f"for x of shape {(B, N, D)} and {h} heads"

            got = _forward(fn, x, qkv, proj, h, where)
            shape_hints = {(B, h, N, D // h): "these are the heads' outputs; merge them to (B, N, D) and apply proj"}
            try:
                verdict = compare(
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
                    same_dtype=True,
                )
            except CheckFailed:
                if varies_between_calls(lambda: _forward(fn, x, qkv, proj, h, where), got, expected):
                    raise CheckFailed(
                        f"your attention gives another result each time on the same x {where}: is there a dropout "
                        "(or another random step) in it? F.dropout(weights, p) drops values whenever it runs "
                        "(training=True by default); this exercise has no dropout"
                    ) from None
                raise
            verdicts.append(verdict)
    print(
        f"✓ multi_head_attention matches utils.MultiHeadSelfAttention on {len(verdicts)} inputs: {summarize(verdicts)}"
    )
