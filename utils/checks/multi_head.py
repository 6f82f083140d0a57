"""Lesson 4's exercise checkers: split_heads, merge_heads, the whole multi-head forward, and the
paper's per-head matrices fused into one qkv weight."""

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
    other_numbers,
    raise_if_known_mistake,
    raise_if_not_like,
    raise_if_wrong_shape,
    summarize,
    varies_between_calls,
)

SPLIT_CASES = [  # (B, T, D, heads): T, heads and head_dim all different, so no mistake hides
    (2, 17, 64, 4),
    (1, 5, 12, 3),
    (3, 6, 8, 2),
    (2, 3, 8, 1),
]
FORWARD_CASES = [(2, 7, 24, 4), (1, 5, 16, 2), (3, 4, 18, 3), (1, 3, 8, 1)]  # (B, T, D, heads)
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


CALL_THE_LAYER = "call it on a tensor, e.g. proj(out), and return what it gives"


def _call(
    fn: Callable,
    *args,
    where: str,
    several: str = "",
    layer: str = CALL_THE_LAYER,
    explain: Callable[[Exception], str | None] = _explain,
) -> torch.Tensor:
    """call_learner with a hint for `.view` after a transpose (or what `explain` says of the
    learner's error), for several tensors (a tuple or a list) where one was expected (`several`
    says what to do with them), and for a layer (`layer`)."""
    result = call_learner(fn, *args, returns=object, where=where, explain=explain)
    if isinstance(result, torch.Tensor):
        return result
    came, hint = describe(result), ""
    if isinstance(result, tuple | list) and result and all(isinstance(t, torch.Tensor) for t in result):
        hint = f": {several}" if several else ""
    elif isinstance(result, nn.Module):
        came, hint = f"{came} (a layer)", f": {layer}"
    raise CheckFailed(f"expected a torch.Tensor, got {came} {where}{hint}")


def _raise_if_misshapen_mistake(
    got: torch.Tensor, expected: torch.Tensor, mistakes: dict[str, torch.Tensor], where: str
) -> None:
    """Name a known mistake that also changes the shape before the shape hints judge the shape
    (the mistakes of the right shape are tried by compare once the values differ); a tensor of
    another dtype or device is named first."""
    raise_if_not_like(got, expected, where)
    misshapen = {reason: wrong for reason, wrong in mistakes.items() if wrong.shape != expected.shape}
    raise_if_known_mistake(got.detach(), misshapen, where)


def _split_variants(x: torch.Tensor, num_heads: int) -> dict[str, torch.Tensor]:
    """Wrong split_heads results, each keyed by the sentence that explains it (those of a wrong
    shape are tried before the shape is judged)."""
    B, T, D = x.shape
    h, hd = num_heads, D // num_heads
    by_token = x.reshape(B, T, h, hd)  # (B, T, heads, head_dim)
    return {
        "you reshaped straight to (B, heads, T, head_dim) without a transpose: the shape is right "
        "but the values are scrambled (each 'head' got consecutive numbers from several tokens); "
        "reshape to (B, T, heads, head_dim) first, then transpose(1, 2)": x.reshape(B, h, T, hd),
        "each head must get one contiguous slice of head_dim features, but yours takes every "
        f"{h}-th feature: you cut the width as (head_dim, heads); cut it as (heads, head_dim)": x.reshape(
            B, T, hd, h
        ).permute(0, 3, 1, 2),
        "you transposed before cutting the width, so the values are scrambled: reshape (B, T, D) to "
        "(B, T, heads, head_dim) first, then transpose(1, 2)": x.transpose(1, 2).reshape(B, h, T, hd),
        "you cut the width as (head_dim, heads); cut it as (heads, head_dim), so that each head gets "
        "one contiguous slice of head_dim features, then transpose(1, 2)": x.reshape(B, T, hd, h).transpose(1, 2),
        "you cut the width as (head_dim, heads) and did not move the heads in front of the tokens: "
        "reshape to (B, T, heads, head_dim), then transpose(1, 2)": x.reshape(B, T, hd, h),
        "you swapped the last two axes (transpose(2, 3)); the heads axis must move in front of the "
        "tokens: transpose(1, 2)": by_token.transpose(2, 3),
        "you moved head_dim in front of the tokens; move the heads axis there: transpose(1, 2)": by_token.permute(
            0, 3, 1, 2
        ),
    }


def check_split_heads(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Check a learner's split_heads(x, num_heads): (B, T, D) -> (B, heads, T, head_dim)."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for B, T, D, h in SPLIT_CASES:
        x = torch.randn(B, T, D, generator=generator)
        expected = split_heads(x, h)
        hd = D // h
        shape_hints = {
            (B, T, h, hd): "did you transpose? The heads axis must come before the tokens: transpose(1, 2)",
            (B, hd, T, h): "the heads and head_dim axes are swapped: (B, head_dim, T, heads) instead of "
            "(B, heads, T, head_dim)",
            (B, T, hd, h): "that is (B, T, head_dim, heads): the heads axis must come before the tokens, "
            "and head_dim last",
            (B, h, hd, T): "the last two axes are swapped: (B, heads, head_dim, T); the tokens come before head_dim",
            (B * h, T, hd): "you folded the heads into the batch axis; keep them apart, (B, heads, T, head_dim)",
            (B, T, D): "x came back unsplit: reshape it to (B, T, heads, head_dim), then transpose(1, 2)",
            (B, h, T, D): "each head gets its own head_dim = D // heads slice of the width, not a copy of all D "
            "features: reshape to (B, T, heads, head_dim), then transpose(1, 2)",
        }
        where = f"for x of shape {(B, T, D)} and {h} heads"
        got = _call(
            fn,
            x.clone(),
            h,
            where=where,
            several="if these are the heads' slices, (B, T, head_dim) each, torch.stack them along dim 1",
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
                layout="(B, heads, T, head_dim)",
                mistakes=mistakes,
                diagnose=lambda got: other_numbers(got, x, "split_heads", where),
            )
        )
    print(f"✓ split_heads matches the reference on {len(verdicts)} inputs: {summarize(verdicts)}")


def _merge_variants(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong merge_heads results, each keyed by the sentence that explains it (those of a wrong
    shape are tried before the shape is judged)."""
    B, h, T, hd = x.shape
    variants = {
        "you reshaped to (B, T, D) without transposing back first: the shape is right but the "
        "values are scrambled; transpose(1, 2) to (B, T, heads, head_dim), then reshape": x.reshape(B, T, h * hd),
        "the heads' features are interleaved: each head's head_dim numbers must sit side by side, "
        "head 0's slice first; transpose(1, 2), not a permute that puts head_dim before heads": x.permute(
            0, 2, 3, 1
        ).reshape(B, T, h * hd),
        "you swapped the last two axes (transpose(2, 3)) before the reshape; the tokens must move in "
        "front of the heads: transpose(1, 2), then reshape": x.transpose(2, 3).reshape(B, T, h * hd),
    }
    if h > 1:  # with one head, summing, averaging or taking head 0 is right
        variants.update(
            {
                "you added the heads up; merging puts them side by side (each head keeps its own "
                "head_dim features): transpose(1, 2), then reshape to (B, T, heads * head_dim)": x.sum(dim=1),
                "you averaged the heads; merging puts them side by side (each head keeps its own "
                "head_dim features): transpose(1, 2), then reshape to (B, T, heads * head_dim)": x.mean(dim=1),
                "you kept only head 0; merging puts all the heads side by side: transpose(1, 2), "
                "then reshape to (B, T, heads * head_dim)": x[:, 0],
            }
        )
    return variants


def check_merge_heads(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Check a learner's merge_heads(x): (B, heads, T, head_dim) -> (B, T, heads * head_dim)."""
    generator = torch.Generator().manual_seed(1)
    verdicts = []
    for B, T, D, h in SPLIT_CASES:
        hd = D // h
        x = torch.randn(B, h, T, hd, generator=generator)
        expected = merge_heads(x)
        shape_hints = {
            (B, h, T * hd): "you forgot to transpose back; the tokens must come before the heads: "
            "transpose(1, 2), then reshape",
            (B, T, h, hd): "the heads are not merged yet; reshape (B, T, heads, head_dim) to (B, T, heads * head_dim)",
            (B, T, hd): "one head_dim vector per token: the heads must sit side by side, (B, T, heads * head_dim)",
            (B, T * h * hd): "you flattened the tokens too; keep them: reshape to (B, T, heads * head_dim)",
            (B, h * T, hd): "the heads' tokens are one after the other, (B, heads * T, head_dim); put each "
            "token's heads side by side: transpose(1, 2), then reshape to (B, T, heads * head_dim)",
            (B, h, T, hd): "x came back unmerged: transpose(1, 2) to (B, T, heads, head_dim), then reshape to "
            "(B, T, heads * head_dim)",
        }
        where = f"for x of shape {(B, h, T, hd)}"
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
                layout="(B, T, heads * head_dim)",
                mistakes=mistakes,
                diagnose=lambda got: other_numbers(got, x, "merge_heads", where),
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
    "heads": lambda hd, D: math.sqrt(D // hd),
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
    (B, heads, T, head_dim)), "interleaved" (width cut as (head_dim, heads)) or "heads_first" (qkv
    read as (heads, 3, head_dim)); softmax_dim: the softmax's axis of the (B, heads, T, T) scores,
    None for no softmax; merge: "right" or "no_transpose"; project: apply the output projection;
    residual: add x to the output; qkv_bias: use qkv's bias.
    """
    B, T, D = x.shape
    h, hd = num_heads, D // num_heads
    t = qkv(x) if qkv_bias else F.linear(x, qkv.weight)  # (B, T, 3D)
    if split == "right":
        parts = t.reshape(B, T, 3, h, hd).permute(2, 0, 3, 1, 4)  # (3, B, heads, T, head_dim)
    elif split == "interleaved":
        parts = t.reshape(B, T, 3, hd, h).permute(2, 0, 4, 1, 3)  # (3, B, heads, T, head_dim)
    elif split == "heads_first":
        parts = t.reshape(B, T, h, 3, hd).permute(3, 0, 2, 1, 4)  # (3, B, heads, T, head_dim)
    elif split == "no_transpose":
        parts = torch.stack([p.reshape(B, h, T, hd) for p in t.chunk(3, dim=-1)])  # scrambled
    else:
        raise ValueError(f"unknown split {split!r}")
    q, k, v = parts[order[0]], parts[order[1]], parts[order[2]]  # each (B, heads, T, head_dim)
    products = q @ k.transpose(-2, -1) / SCALES[scale](hd, D)  # (B, heads, T, T)
    weights = products if softmax_dim is None else products.softmax(dim=softmax_dim)  # (B, heads, T, T)
    out = weights @ v  # (B, heads, T, head_dim)
    if merge == "right":
        out = out.transpose(1, 2).reshape(B, T, D)  # (B, T, D)
    else:
        out = out.reshape(B, T, D)  # scrambled
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
        "you applied proj twice; it runs once, on the merged heads": proj(wrong()),
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
            "you split the heads wrongly: q, k and v were reshaped straight to (B, heads, T, head_dim) "
            "without a transpose; reshape to (B, T, 3, heads, head_dim), "
            "then permute(2, 0, 3, 1, 4)": wrong(split="no_transpose"),
            "you split the heads wrongly: each head must take a contiguous slice of head_dim features "
            "(the width cut as (heads, head_dim), not (head_dim, heads))": wrong(split="interleaved"),
            "you split the heads wrongly: qkv(x) is [q | k | v], each D wide, so reshape to "
            "(B, T, 3, heads, head_dim), not (B, T, heads, 3, head_dim)": wrong(split="heads_first"),
            "the softmax runs over the wrong axis: each query's weights over the keys must sum to 1, "
            "so take it over the last axis": wrong(softmax_dim=-2),
            "the softmax runs over the heads axis (dim=1); each query's weights over the keys must sum "
            "to 1, so take it over the last axis, dim=-1": wrong(softmax_dim=1),
            "you forgot the softmax: the weights are softmax(q kᵀ / sqrt(head_dim)) over the keys, dim=-1": wrong(
                softmax_dim=None
            ),
            "you merged the heads without transposing back: transpose(1, 2) to (B, T, heads, head_dim), "
            "then reshape to (B, T, D)": wrong(merge="no_transpose"),
            "you added x to the output: the residual connection belongs to the encoder block (lesson 5), "
            "not to attention; return proj(...) alone": wrong(residual=True),
            "you left out qkv's bias (x @ qkv.weight.T): call the layer, qkv(x), which adds it": wrong(qkv_bias=False),
        }
    )
    if h > 1:  # one head over the whole width is right when there is one head
        variants[
            f"you divided the scores by sqrt(num_heads) = sqrt({h}); each head's dot products add up head_dim "
            f"numbers, so divide by sqrt(head_dim) = sqrt({hd})"
        ] = wrong(scale="heads")
        variants[
            f"you attended with one head over the whole width (scaled by sqrt(D)): num_heads = {h} was "
            "not used; cut q, k and v into heads, (B, heads, T, head_dim)"
        ] = reference_multi_head(x, qkv, proj, 1)
    return variants


def _forward(fn: Callable, x: torch.Tensor, qkv: nn.Linear, proj: nn.Linear, h: int, where: str) -> torch.Tensor:
    """The learner's forward on copies of x and of the layers (nothing it changes sticks)."""
    several = "return one tensor, the output (B, T, D) (the weights stay inside)"
    return _call(fn, x.clone(), copy.deepcopy(qkv), copy.deepcopy(proj), h, where=where, several=several)


def check_multi_head_attention(fn: Callable[[torch.Tensor, nn.Linear, nn.Linear, int], torch.Tensor]) -> None:
    """Check a learner's multi_head_attention(x, qkv, proj, num_heads) -> (B, T, D) against
    utils.MultiHeadSelfAttention holding the same weights."""
    generator = torch.Generator().manual_seed(2)
    verdicts = []
    for B, T, D, h in FORWARD_CASES:
        x = torch.randn(B, T, D, generator=generator)
        qkv, proj = _random_layers(D, generator)
        reference = MultiHeadSelfAttention(D, h)
        reference.qkv.load_state_dict(qkv.state_dict())
        reference.proj.load_state_dict(proj.state_dict())
        with torch.no_grad():
            expected = reference(x)
            where = f"for x of shape {(B, T, D)} and {h} heads"

            got = _forward(fn, x, qkv, proj, h, where)
            shape_hints = {(B, h, T, D // h): "these are the heads' outputs; merge them to (B, T, D) and apply proj"}
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
                    advice="; go through the steps in order: qkv, reshape to (B, T, 3, heads, head_dim), permute, "
                    "softmax(q kᵀ / sqrt(head_dim)) v per head, transpose back, reshape to (B, T, D), proj",
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


# ---- the paper's per-head matrices, fused into one qkv weight ----------------------------------

FUSE_CASES = [(12, 3), (20, 4), (12, 2), (8, 1)]  # (D, heads): head_dim 4, 5, 6, 8, never equal to heads
FUSE_TOKENS = (2, 5)  # (B, T): the tokens each fused layer is run on
PARTS = ("W_Q", "W_K", "W_V")  # the learner's three arguments
ROLES = ("query", "key", "value")
FUSE_ATOL = 1e-5  # the fused layer and the per-head formula add in another order: ~1e-7 apart


def paper_head_matrices(D: int, num_heads: int, generator: torch.Generator) -> list[list[torch.Tensor]]:
    """[W_Q, W_K, W_V], each a list of `num_heads` random (D, head_dim) matrices: the paper's
    W_i^Q, W_i^K, W_i^V, in its layout (q_i = x @ W_Q[i])."""
    hd = D // num_heads
    return [[torch.randn(D, hd, generator=generator) / math.sqrt(D) for _ in range(num_heads)] for _ in PARTS]


def paper_multi_head(
    x: torch.Tensor,
    W_Q: list[torch.Tensor],
    W_K: list[torch.Tensor],
    W_V: list[torch.Tensor],
    W_O: torch.Tensor,
    b_O: torch.Tensor,
) -> torch.Tensor:
    """Vaswani et al.'s MultiHead = Concat(head_1, ..., head_h) W^O (+ the bias b^O of a Linear),
    head_i = softmax((x W_Q[i]) (x W_K[i])ᵀ / sqrt(head_dim)) (x W_V[i]), one head at a time.

    Args:
        x: (B, T, D) tokens; W_Q, W_K, W_V: lists of (D, head_dim); W_O: (D, D); b_O: (D,).
    Returns:
        (B, T, D).
    """
    heads = []
    for Wq, Wk, Wv in zip(W_Q, W_K, W_V, strict=True):
        q, k, v = x @ Wq, x @ Wk, x @ Wv  # each (B, T, head_dim)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1)  # (B, T, T)
        heads.append(weights @ v)  # head_i: (B, T, head_dim)
    return torch.cat(heads, dim=-1) @ W_O + b_O  # Concat(head_1, ..., head_h) W^O: (B, T, D)


def _fuse_variants(
    W_Q: list[torch.Tensor], W_K: list[torch.Tensor], W_V: list[torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Wrong fused weights, each keyed by the sentence that explains it (those of another shape
    than (3D, D) are named before the shape is judged)."""
    given = dict(zip("qkv", (W_Q, W_K, W_V), strict=True))
    blocks = {part: [W.T for W in Ws] for part, Ws in given.items()}  # (head_dim, D) each: nn.Linear's rows
    h, D = len(W_Q), W_Q[0].shape[0]
    variants = {}
    if h > 1:  # with one head, grouping by head or interleaving rows changes nothing
        variants[
            "you grouped the rows by head, [q1; k1; v1; q2; k2; v2; ...]: MultiHeadSelfAttention reads "
            "qkv(x) as (B, T, 3, heads, head_dim), so all the heads' queries come first, then all their "
            "keys, then all their values: [q1; q2; ...; k1; k2; ...; v1; v2; ...]"
        ] = torch.cat([blocks[part][i] for i in range(h) for part in "qkv"])
        variants[
            "the heads' rows are interleaved (row 0 of every head, then row 1, ...), as torch.stack(..., "
            "dim=1) and a reshape give them: each head's head_dim rows must sit together, head 0's first"
        ] = torch.cat([torch.stack(blocks[part], dim=1).reshape(D, D) for part in "qkv"])
    for order in itertools.permutations("qkv"):
        if order == ("q", "k", "v"):
            continue
        fused = torch.cat([block for part in order for block in blocks[part]])
        if order == ("k", "q", "v"):
            reason = (
                "q and k are swapped: your rows are [keys; queries; values]; MultiHeadSelfAttention reads "
                "the first D rows of qkv.weight as the queries, the next D as the keys, the last D as the values"
            )
        else:
            taken = "; ".join({"q": "queries", "k": "keys", "v": "values"}[part] for part in order)
            reason = (
                f"q, k and v are in the wrong order: your rows are [{taken}]; MultiHeadSelfAttention reads "
                "the first D rows of qkv.weight as the queries, the next D as the keys, the last D as the values"
            )
        variants[reason] = fused
    variants[
        "you kept the paper's (D, head_dim) matrices as they are: nn.Linear stores its weight as (out, in) "
        "and computes x @ weight.T, so head i's block of rows is W_Q[i].T, (head_dim, D)"
    ] = torch.cat([W for part in "qkv" for W in given[part]])
    variants[
        "your weight is (D, 3D), the paper's (in, out) layout: nn.Linear stores its weight as (out, in), "
        "(3D, D); transpose it"
    ] = torch.cat([W for part in "qkv" for W in given[part]], dim=1)
    return variants


def _fuse_shape_hints(D: int, h: int) -> dict[tuple[int, ...], str]:
    """Wrong shapes of the fused weight, each with the sentence that explains it."""
    hd = D // h
    stacked = "nn.Linear's weight is 2-D: concatenate the blocks one under the other (torch.cat), do not stack them"
    transposed = (
        "nn.Linear's weight is 2-D and (out, in): transpose each matrix to (head_dim, D) and concatenate them "
        "one under the other (torch.cat)"
    )
    hints = {
        (3, h, hd, D): f"you stacked the blocks into (3, heads, head_dim, D); {stacked}",
        (3 * h, hd, D): f"you stacked the blocks into (3 * heads, head_dim, D); {stacked}",
        (3, D, D): f"you stacked q, k and v into (3, D, D); {stacked}",
        (3, h, D, hd): f"you stacked the paper's (D, head_dim) matrices as they are; {transposed}",
        (3 * h, D, hd): f"you stacked the paper's (D, head_dim) matrices as they are; {transposed}",
        (D, 3 * D): "that is (D, 3D), the paper's (in, out) layout: nn.Linear stores its weight as (out, in), (3D, D)",
        (hd, 3 * h * D): "you put the transposed blocks side by side (dim=1); put them one under the other, "
        "torch.cat(..., dim=0)",
        (D, D): "that is one projection, (D, D): qkv.weight holds the queries, keys and values of every head, (3D, D)",
    }
    if h > 1:  # with one head, (3 * heads * D, head_dim) is (3D, D) itself
        hints[(3 * h * D, hd)] = (
            "the blocks are (D, head_dim), the paper's layout: nn.Linear wants (out, in), so transpose each "
            "one to (head_dim, D)"
        )
    return hints


def _fused_layer(weight: torch.Tensor, W_O: torch.Tensor, b_O: torch.Tensor, num_heads: int) -> MultiHeadSelfAttention:
    """MultiHeadSelfAttention (no qkv bias) holding `weight` as qkv.weight and W_O, b_O as proj."""
    D = W_O.shape[0]
    layer = MultiHeadSelfAttention(D, num_heads, qkv_bias=False).eval()
    with torch.no_grad():
        layer.qkv.weight.copy_(weight)
        layer.proj.weight.copy_(W_O.T)  # Linear's (out, in) = (W^O)ᵀ
        layer.proj.bias.copy_(b_O)
    return layer


def _misplaced_rows(
    weight: torch.Tensor, W_Q: list[torch.Tensor], W_K: list[torch.Tensor], W_V: list[torch.Tensor], where: str
) -> str | None:
    """The first block of head_dim rows of `weight` that is not the one MultiHeadSelfAttention reads
    there, with what it holds instead (a given matrix, transposed or not, or none); None if every
    block is right."""
    h, (D, hd) = len(W_Q), W_Q[0].shape
    given = dict(zip(PARTS, (W_Q, W_K, W_V), strict=True))
    sources = {}
    for part, Ws in given.items():
        for i, W in enumerate(Ws):
            sources[f"{part}[{i}].T"] = W.T
            if hd == D:  # a square block may also be the matrix itself
                sources[f"{part}[{i}] (not transposed)"] = W
    weight = weight.detach().double()
    for block in range(3 * h):
        rows = weight[block * hd : (block + 1) * hd]  # (head_dim, D)
        role, i = block // h, block % h
        wanted = f"{PARTS[role]}[{i}].T"
        if torch.allclose(rows, sources[wanted].double(), atol=1e-6):
            continue
        found = next((name for name, W in sources.items() if torch.allclose(rows, W.double(), atol=1e-6)), None)
        span = f"rows {block * hd}:{(block + 1) * hd}"
        holds = f"hold {found}" if found else "match none of the given matrices (transposed or not)"
        return (
            f"{span} of your weight {holds}, but MultiHeadSelfAttention reads {span} as head {i}'s "
            f"{ROLES[role]} projection, {wanted} ({where})"
        )
    return None


def _explain_lists(error: Exception) -> str | None:
    """A list used as a tensor, in words (the per-head matrices come as lists); else _explain."""
    if "'list' object has no attribute" in str(error):
        return "W_Q, W_K and W_V are Python lists of (D, head_dim) tensors, one per head: use their items, W_Q[i]"
    return _explain(error)


def check_fuse_head_weights(
    fn: Callable[[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]], torch.Tensor],
) -> None:
    """Check a learner's fuse_head_weights(W_Q, W_K, W_V): the paper's per-head matrices, lists of
    (D, head_dim), -> the (3D, D) qkv.weight with which MultiHeadSelfAttention (qkv_bias=False)
    computes the paper's Concat(head_1, ..., head_h) W^O, one head at a time."""
    generator = torch.Generator().manual_seed(3)
    verdicts = []
    for D, h in FUSE_CASES:
        hd = D // h
        W_Q, W_K, W_V = paper_head_matrices(D, h, generator)
        W_O = torch.randn(D, D, generator=generator) / math.sqrt(D)  # (h * head_dim, D)
        b_O = torch.randn(D, generator=generator) * 0.1
        x = torch.randn(*FUSE_TOKENS, D, generator=generator)  # (B, T, D)
        where = f"for {h} head{'s' if h > 1 else ''} of head_dim {hd}, D = {D}"
        got = _call(
            fn,
            *([W.clone() for W in Ws] for Ws in (W_Q, W_K, W_V)),
            where=where,
            several="return one tensor, qkv.weight of shape (3D, D), that holds every head's three projections",
            layer="return the weight itself, a (3D, D) tensor",
            explain=_explain_lists,
        )
        right = torch.cat([W.T for Ws in (W_Q, W_K, W_V) for W in Ws])  # (3D, D): a weight of the right kind
        variants = _fuse_variants(W_Q, W_K, W_V)
        raise_if_not_like(got, right, where)  # float64 will do: copying into the layer casts it
        shape_hints = _fuse_shape_hints(D, h)
        misshapen = {reason: wrong for reason, wrong in variants.items() if wrong.shape != right.shape}
        raise_if_known_mistake(got.detach(), misshapen, where)
        raise_if_wrong_shape(
            got,
            right,
            where,
            shape_hints=shape_hints,
            layout="(3D, D)",
            any_shape_hint=f"MultiHeadSelfAttention({D}, {h}).qkv.weight is (3D, D), nn.Linear's (out, in)",
            shape_wording="expected qkv.weight of shape {}",
        )
        with torch.no_grad():
            expected = paper_multi_head(x, W_Q, W_K, W_V, W_O, b_O)  # (B, T, D)
            output = _fused_layer(got, W_O, b_O, h)(x)  # (B, T, D)
            wrong_outputs = {
                reason: _fused_layer(wrong, W_O, b_O, h)(x)
                for reason, wrong in variants.items()
                if wrong.shape == right.shape
            }
        wrong_outputs = {
            reason: out for reason, out in wrong_outputs.items() if not torch.allclose(out, expected, atol=FUSE_ATOL)
        }
        verdicts.append(
            compare(
                output,
                expected,
                where,
                atol=FUSE_ATOL,
                mistakes=wrong_outputs,
                mistake_atol=FUSE_ATOL,
                mistake_rtol=TOL["rtol"],
                diagnose=lambda _: _misplaced_rows(got, W_Q, W_K, W_V, where),
                name="the layer's output",
                advice="; head i's query projection must be rows i * head_dim ... (i + 1) * head_dim - 1 of "
                "qkv.weight, the keys' blocks start at row D, the values' at row 2D",
                nan_hint="your weight holds NaN or infinite values",
            )
        )
    print(
        "✓ fuse_head_weights: MultiHeadSelfAttention holding your qkv.weight equals the paper's "
        f"Concat(head_1, ..., head_h) W^O on {len(verdicts)} layers: {summarize(verdicts)}"
    )
