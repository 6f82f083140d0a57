"""Lesson 4's exercise checkers: grouped-query attention (key/value heads shared by groups of query
heads: their split, the whole forward, the parameters and multiply-adds it saves) and the paper's
per-head matrices fused into one qkv weight. The checkers of three earlier exercises stay for
instructors who set them: split_heads, merge_heads and the whole multi-head forward."""

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
    whole_number,
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


# ---- grouped-query attention: key/value heads shared by groups of query heads -----------------

KV_CASES = [  # (B, T, heads, kv_heads, head_dim): group 4, then 2, 1 (multi-head) and 6 (multi-query)
    (2, 7, 12, 3, 5),
    (1, 5, 4, 2, 6),
    (2, 3, 3, 3, 4),
    (1, 4, 6, 1, 2),
]
REPEAT_HINT = "use repeat_interleave (neighbours share one key/value head), not repeat (which cycles)"


def _heads_got(got: torch.Tensor, x: torch.Tensor, num_kv_heads: int) -> list[int] | None:
    """Which key/value head of x each head of `got` (B, heads, T, head_dim) holds, or None if one
    of them holds none of them."""
    B, T, D_kv = x.shape
    kv = x.reshape(B, T, num_kv_heads, D_kv // num_kv_heads).transpose(1, 2).double()  # (B, kv, T, hd)
    found = []
    for head in got.detach().double().unbind(1):  # each (B, T, head_dim)
        match = [j for j in range(num_kv_heads) if head.shape == kv[:, j].shape and torch.allclose(head, kv[:, j])]
        if not match:
            return None
        found.append(match[0])
    return found


def _kv_split_variants(x: torch.Tensor, num_kv_heads: int, num_heads: int) -> dict[str, torch.Tensor]:
    """Wrong split_kv_heads results, each keyed by the sentence that explains it."""
    B, T, D_kv = x.shape
    kv, hd, group = num_kv_heads, D_kv // num_kv_heads, num_heads // num_kv_heads
    heads = x.reshape(B, T, kv, hd).transpose(1, 2)  # (B, kv, T, head_dim), right
    variants = {}
    if 1 < kv < num_heads:  # with one key/value head, or one per query head, repeat is right too
        variants[
            f"query heads 0 and 1 should share key/value head 0, but your head 1 got key/value head 1: {REPEAT_HINT}"
        ] = heads.repeat(1, group, 1, 1)
    if kv > 1:
        variants.update(
            {
                "you cut the width as (head_dim, num_kv_heads), so each key/value head takes every "
                f"{kv}-th feature: cut it as (num_kv_heads, head_dim), each head one contiguous slice": x.reshape(
                    B, T, hd, kv
                )
                .permute(0, 3, 1, 2)
                .repeat_interleave(group, dim=1),
                "you reshaped straight to (B, num_kv_heads, T, head_dim) without a transpose: the values "
                "are scrambled; reshape to (B, T, num_kv_heads, head_dim) first, then transpose(1, 2)": x.reshape(
                    B, kv, T, hd
                ).repeat_interleave(group, dim=1),
            }
        )
    if group > 1:
        variants[
            "you repeated the features, not the heads: each head must hold one key/value head's head_dim "
            "numbers as they are; split into the num_kv_heads heads first, then repeat whole heads"
        ] = x.repeat_interleave(group, dim=-1).reshape(B, T, num_heads, hd).transpose(1, 2)
    return variants


def _kv_shape_hints(B: int, T: int, num_heads: int, num_kv_heads: int, hd: int) -> dict[tuple[int, ...], str]:
    """Wrong shapes of split_kv_heads's result, each with the sentence that explains it."""
    kv, group = num_kv_heads, num_heads // num_kv_heads
    hints = {
        (B, T, num_heads, hd): "the heads axis must come before the tokens: transpose(1, 2)",
        (B, kv, T * group, hd): "you repeated along the tokens axis; repeat along the heads axis, dim=1",
        (B, kv, T, hd * group): "you repeated along head_dim; repeat along the heads axis, dim=1",
        (B * group, kv, T, hd): "you repeated along the batch axis; repeat along the heads axis, dim=1",
        (B, T, kv * hd): "x came back unsplit: cut it into num_kv_heads heads of head_dim, then repeat each",
    }
    if group > 1:
        hints[(B, 0, T, hd)] = (
            "you repeated each key/value head 0 times: a group holds num_heads // num_kv_heads query heads, "
            "not num_kv_heads // num_heads"
        )
        hints[(B, kv, T, hd)] = (
            f"these are the {kv} key/value heads, not yet repeated: each must serve its group of "
            f"num_heads // num_kv_heads = {group} query heads, (B, num_heads, T, head_dim)"
        )
    if kv > 1 and kv != group:
        hints[(B, kv * kv, T, hd)] = (
            f"you repeated each key/value head num_kv_heads = {kv} times; a group holds "
            f"num_heads // num_kv_heads = {group} query heads"
        )
    if kv > 1:
        hints[(B, kv * num_heads, T, hd)] = (
            f"you repeated each key/value head num_heads = {num_heads} times; a group holds "
            f"num_heads // num_kv_heads = {group} query heads"
        )
    if (kv * hd) % num_heads == 0 and group > 1:
        hints[(B, num_heads, T, kv * hd // num_heads)] = (
            "you cut x into num_heads heads; x holds only the num_kv_heads key/value heads, "
            "head_dim = D_kv // num_kv_heads each, and each is then repeated"
        )
    return hints


def _explain_kv(error: Exception) -> str | None:
    """A reshape that does not fit, in words; else _explain."""
    if "is invalid for input of size" in str(error):
        return (
            "x holds num_kv_heads key/value heads of head_dim = D_kv // num_kv_heads numbers each: "
            "is that the width you cut it into?"
        )
    return _explain(error)


def reference_split_kv_heads(x: torch.Tensor, num_kv_heads: int, num_heads: int) -> torch.Tensor:
    """(B, T, num_kv_heads * head_dim) -> (B, num_heads, T, head_dim): each key/value head repeated
    for its group of num_heads // num_kv_heads neighbouring query heads."""
    kv = split_heads(x, num_kv_heads)  # (B, kv_heads, T, head_dim)
    return kv.repeat_interleave(num_heads // num_kv_heads, dim=1)  # (B, heads, T, head_dim)


def check_split_kv_heads(fn: Callable[[torch.Tensor, int, int], torch.Tensor]) -> None:
    """Check a learner's split_kv_heads(x, num_kv_heads, num_heads): (B, T, D_kv) ->
    (B, num_heads, T, head_dim), query head h reading key/value head h // (num_heads // num_kv_heads)."""
    generator = torch.Generator().manual_seed(4)
    verdicts = []
    for B, T, h, kv, hd in KV_CASES:
        x = torch.randn(B, T, kv * hd, generator=generator)
        expected = reference_split_kv_heads(x, kv, h)
        where = f"for x of shape {(B, T, kv * hd)}, {kv} key/value head{'s' if kv > 1 else ''} and {h} heads"
        got = _call(
            fn,
            x.clone(),
            kv,
            h,
            where=where,
            several="return one tensor, (B, num_heads, T, head_dim): torch.stack the heads along dim 1",
            explain=_explain_kv,
        )
        mistakes = _kv_split_variants(x, kv, h)
        _raise_if_misshapen_mistake(got, expected, mistakes, where)

        def diagnose(got, x=x, kv=kv, h=h, where=where) -> str | None:
            found = _heads_got(got, x, kv)
            if found is None:
                return (
                    f"your result holds other numbers than x's heads {where}: every head must be one "
                    "key/value head of x, copied as it is (no arithmetic on the values)"
                )
            group = h // kv
            wrong = next(head for head, j in enumerate(found) if j != head // group)
            first = wrong // group * group  # the first query head of its group
            return (
                f"query head {wrong} got key/value head {found[wrong]}, but it belongs to the group of "
                f"key/value head {wrong // group} (query heads {first} to {first + group - 1}) {where}: "
                "query head h reads key/value head h // (num_heads // num_kv_heads)"
            )

        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_wording="expected {}",
                shape_hints=_kv_shape_hints(B, T, h, kv, hd),
                layout="(B, num_heads, T, head_dim)",
                mistakes=mistakes,
                diagnose=diagnose,
            )
        )
    groups = ", ".join(str(h // kv) for _, _, h, kv, _ in KV_CASES)
    print(
        f"✓ split_kv_heads matches the reference on {len(verdicts)} inputs (groups of {groups}): {summarize(verdicts)}"
    )


GQA_CASES = [  # (B, T, D, heads, kv_heads): groups of 4, 1 (multi-head), 4 (multi-query), 2
    (2, 7, 60, 12, 3),
    (2, 4, 18, 3, 3),
    (1, 5, 24, 4, 1),
    (1, 6, 32, 4, 2),
]


def gqa_layers(D: int, num_heads: int, num_kv_heads: int, generator: torch.Generator) -> tuple[nn.Linear, ...]:
    """q_proj Linear(D, D), kv_proj Linear(D, 2 * num_kv_heads * head_dim) (its output [k | v]) and
    proj Linear(D, D), holding random weights and biases."""
    kv_dim = num_kv_heads * (D // num_heads)
    layers = nn.Linear(D, D), nn.Linear(D, 2 * kv_dim), nn.Linear(D, D)
    with torch.no_grad():
        for layer in layers:
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) / math.sqrt(D))
            layer.bias.copy_(torch.randn(layer.bias.shape, generator=generator) * 0.1)
    return layers


def reference_grouped_query_attention(
    x: torch.Tensor,
    q_proj: nn.Linear,
    kv_proj: nn.Linear,
    proj: nn.Linear,
    num_heads: int,
    num_kv_heads: int,
    share: str = "interleave",
    kv_split: str = "right",
    kv_order: tuple[int, int] = (0, 1),
    q_split: str = "right",
    scale: str = "head_dim",
    softmax_dim: int = -1,
    merge: str = "right",
    project: bool = True,
) -> torch.Tensor:
    """Grouped-query self-attention written out, with a switch for each typical mistake.

    Args:
        x: (B, T, D); q_proj: Linear(D, D); kv_proj: Linear(D, 2 * num_kv_heads * head_dim), its
            output [k | v]; proj: Linear(D, D).
        share: how the key/value heads reach the query heads: "interleave" (right), "repeat"
            (cycled), "first" (key/value head 0 for every query head); kv_split: "right" or
            "head_major" (kv_proj(x) read as (num_kv_heads, 2, head_dim)); kv_order: which half of
            kv_proj(x) is used as (k, v); q_split: "right", "interleaved" (width cut as (head_dim,
            heads)) or "no_transpose"; scale: a key of SCALES; softmax_dim: the softmax's axis;
            merge: "right" or "no_transpose"; project: apply proj.
    Returns:
        (B, T, D).
    """
    B, T, D = x.shape
    h, kv, hd = num_heads, num_kv_heads, D // num_heads
    q = q_proj(x)  # (B, T, D)
    if q_split == "right":
        q = q.reshape(B, T, h, hd).transpose(1, 2)  # (B, heads, T, head_dim)
    elif q_split == "interleaved":
        q = q.reshape(B, T, hd, h).permute(0, 3, 1, 2)  # (B, heads, T, head_dim), scrambled
    elif q_split == "no_transpose":
        q = q.reshape(B, h, T, hd)  # scrambled
    else:
        raise ValueError(f"unknown q_split {q_split!r}")
    if kv_split == "right":
        parts = kv_proj(x).reshape(B, T, 2, kv, hd).permute(2, 0, 3, 1, 4)  # (2, B, kv_heads, T, head_dim)
    elif kv_split == "head_major":
        parts = kv_proj(x).reshape(B, T, kv, 2, hd).permute(3, 0, 2, 1, 4)  # (2, B, kv_heads, T, head_dim)
    else:
        raise ValueError(f"unknown kv_split {kv_split!r}")
    k, v = parts[kv_order[0]], parts[kv_order[1]]  # each (B, kv_heads, T, head_dim)
    if share == "interleave":
        k, v = (t.repeat_interleave(h // kv, dim=1) for t in (k, v))  # each (B, heads, T, head_dim)
    elif share == "repeat":
        k, v = (t.repeat(1, h // kv, 1, 1) for t in (k, v))  # cycled: head i reads kv head i % kv_heads
    elif share == "first":
        k, v = k[:, :1], v[:, :1]  # (B, 1, T, head_dim): broadcast over the query heads
    else:
        raise ValueError(f"unknown share {share!r}")
    scores = q @ k.transpose(-2, -1) / SCALES[scale](hd, D)  # (B, heads, T, T)
    out = scores.softmax(dim=softmax_dim) @ v  # (B, heads, T, head_dim)
    if merge == "right":
        out = out.transpose(1, 2).reshape(B, T, D)  # (B, T, D)
    elif merge == "no_transpose":
        out = out.reshape(B, T, D)  # scrambled
    else:
        raise ValueError(f"unknown merge {merge!r}")
    return proj(out) if project else out


def _gqa_variants(x, q_proj, kv_proj, proj, h: int, kv: int) -> dict[str, torch.Tensor]:
    """Wrong grouped-query outputs, each keyed by the sentence that explains it."""
    D = x.shape[-1]
    hd = D // h

    def wrong(**mistake) -> torch.Tensor:
        return reference_grouped_query_attention(x, q_proj, kv_proj, proj, h, kv, **mistake)

    variants = {}
    if 1 < kv < h:
        variants[
            "your query heads read the wrong key/value heads: query heads 0 and 1 should share key/value "
            f"head 0, but with repeat head 1 reads key/value head 1; {REPEAT_HINT}"
        ] = wrong(share="repeat")
    if kv > 1:
        variants[
            "every query head used key/value head 0: each key/value head serves its own group of "
            "num_heads // num_kv_heads neighbouring query heads"
        ] = wrong(share="first")
        variants[
            "you read kv_proj(x) head by head, as (B, T, num_kv_heads, 2, head_dim); it is [k | v], each "
            "num_kv_heads * head_dim wide: reshape to (B, T, 2, num_kv_heads, head_dim)"
        ] = wrong(kv_split="head_major")
    variants.update(
        {
            "k and v are swapped: kv_proj(x) is [k | v], the keys in the first half, the values in the second": wrong(
                kv_order=(1, 0)
            ),
            "you merged the heads without transposing back: transpose(1, 2) to (B, T, heads, head_dim), "
            "then reshape to (B, T, D)": wrong(merge="no_transpose"),
            "you split q without a transpose (reshaped straight to (B, heads, T, head_dim)): reshape to "
            "(B, T, heads, head_dim) first, then transpose(1, 2)": wrong(q_split="no_transpose"),
            "you forgot the output projection: apply proj to the merged heads": wrong(project=False),
            f"you forgot the scale: divide the scores by sqrt(head_dim) = sqrt({hd})": wrong(scale="none"),
            f"you scaled the scores by sqrt(D) = sqrt({D}); each head's dot products add up head_dim "
            f"numbers, so divide by sqrt(head_dim) = sqrt({hd})": wrong(scale="D"),
            "the softmax runs over the wrong axis: each query's weights over the keys must sum to 1, "
            "so take it over the last axis": wrong(softmax_dim=-2),
        }
    )
    if h > 1:
        variants[
            "you cut q's width as (head_dim, heads), so each head takes every num_heads-th feature: cut it "
            "as (heads, head_dim), each head one contiguous slice, then transpose(1, 2)"
        ] = wrong(q_split="interleaved")
    return variants


def _explain_gqa(error: Exception) -> str | None:
    """Query and key/value heads that do not line up, in words; else _explain."""
    if "must match the size of tensor" in str(error) or "is invalid for input of size" in str(error):
        return (
            "q has num_heads heads but kv_proj gives only num_kv_heads key/value heads of the same head_dim: "
            "repeat each for its group of num_heads // num_kv_heads query heads before the scores"
        )
    return _explain(error)


def check_grouped_query_attention(fn: Callable) -> None:
    """Check a learner's grouped_query_attention(x, q_proj, kv_proj, proj, num_heads, num_kv_heads)
    -> (B, T, D) against the reference written out, and, where num_kv_heads = num_heads, against
    utils.MultiHeadSelfAttention holding the same weights."""
    generator = torch.Generator().manual_seed(5)
    verdicts = []
    for B, T, D, h, kv in GQA_CASES:
        x = torch.randn(B, T, D, generator=generator)
        q_proj, kv_proj, proj = gqa_layers(D, h, kv, generator)
        with torch.no_grad():
            if kv == h:  # plain multi-head attention: the library module is the reference
                reference = MultiHeadSelfAttention(D, h)
                reference.qkv.weight.copy_(torch.cat([q_proj.weight, kv_proj.weight]))  # [W_q; W_k; W_v]
                reference.qkv.bias.copy_(torch.cat([q_proj.bias, kv_proj.bias]))
                reference.proj.load_state_dict(proj.state_dict())
                expected = reference(x)
            else:
                expected = reference_grouped_query_attention(x, q_proj, kv_proj, proj, h, kv)
            where = f"for x of shape {(B, T, D)}, {h} heads and {kv} key/value head{'s' if kv > 1 else ''}"
            layers = [copy.deepcopy(layer) for layer in (q_proj, kv_proj, proj)]
            got = _call(
                fn,
                x.clone(),
                *layers,
                h,
                kv,
                where=where,
                several="return one tensor, the output (B, T, D) (the weights stay inside)",
                explain=_explain_gqa,
            )
            verdicts.append(
                compare(
                    got,
                    expected,
                    where,
                    shape_wording="expected {}",
                    shape_hints={
                        (B, h, T, D // h): "these are the heads' outputs; merge them to (B, T, D) and apply proj"
                    },
                    atol=TOL["atol"],
                    mistakes=_gqa_variants(x, q_proj, kv_proj, proj, h, kv),
                    mistake_atol=TOL["atol"],
                    mistake_rtol=TOL["rtol"],
                    advice="; go through the steps in order: split q into heads, split kv_proj(x) into k and v "
                    "heads, repeat each key/value head for its group, attend, merge, proj",
                )
            )
    groups = ", ".join(str(h // kv) for _, _, _, h, kv in GQA_CASES)
    print(
        f"✓ grouped_query_attention matches the reference on {len(verdicts)} layers (groups of {groups}): "
        f"{summarize(verdicts)}; with num_kv_heads = num_heads it equals utils.MultiHeadSelfAttention"
    )


# ---- what a grouped-query layer costs ---------------------------------------------------------

COST_CASES = [(50, 96, 6, 2), (10, 24, 4, 1), (7, 12, 3, 3), (197, 768, 12, 4)]  # (T, D, heads, kv_heads)


def grouped_query_cost(T: int, D: int, num_heads: int, num_kv_heads: int) -> tuple[int, int]:
    """(parameters, multiply-adds) of grouped-query self-attention on one image of T tokens: q_proj
    (D, D), kv_proj (2 * num_kv_heads * head_dim, D) and proj (D, D), each with a bias; the
    multiply-adds of the matrix products (not the biases, not the softmax)."""
    kv_dim = num_kv_heads * (D // num_heads)  # the width of k, and of v
    parameters = (D * D + D) + (D * 2 * kv_dim + 2 * kv_dim) + (D * D + D)  # q_proj, kv_proj, proj
    multiply_adds = T * D * D + T * D * 2 * kv_dim + 2 * T * T * D + T * D * D  # q, k and v, q kᵀ and w v, proj
    return parameters, multiply_adds


def _cost_mistakes(T: int, D: int, h: int, kv: int) -> dict[str, dict[str, int]]:
    """Wrong counts, by part ("parameters", "multiply-adds"), each keyed by the sentence that explains it."""
    params, macs = grouped_query_cost(T, D, h, kv)
    kv_dim = kv * (D // h)  # the width of k, and of v
    full = {
        "parameters": 4 * D * D + 4 * D,
        "multiply-adds": 4 * T * D * D + 2 * T * T * D,
    }
    mistakes = {"parameters": {}, "multiply-adds": {}}
    if kv < h:
        for part, count in full.items():
            mistakes[part][
                "that is plain multi-head attention's count: here k and v are only num_kv_heads * head_dim "
                f"= {kv_dim} wide each, not D = {D}"
            ] = count
        mistakes["multiply-adds"][
            "the T x T products run in every query head, heads x T² x head_dim = T² D each for q kᵀ and "
            "for weights @ v; the key/value heads are shared, not fewer products"
        ] = macs - 2 * T * T * D + 2 * T * T * kv_dim
    mistakes["parameters"].update(
        {
            f"you left out the biases: every projection here has one, D + 2 * num_kv_heads * head_dim + D "
            f"= {2 * D + 2 * kv_dim} numbers": params - (2 * D + 2 * kv_dim),
            "you counted kv_proj for k only: it makes both k and v, 2 * num_kv_heads * head_dim outputs": params
            - (D * kv_dim + kv_dim),
            "you left out the output projection proj, D² + D parameters": params - (D * D + D),
        }
    )
    mistakes["multiply-adds"].update(
        {
            "that is twice the count: a multiply-add is one multiplication and one addition (torch's FLOP "
            "counter counts it as 2 FLOPs); count each once": 2 * macs,
            "you counted the bias additions too; count the matrix products only, as section 5 does": macs
            + T * (2 * D + 2 * kv_dim),
            "you counted only one of the two T x T products: q kᵀ and weights @ v cost T² D each": macs - T * T * D,
            "you counted the T x T products of one head only: each of the num_heads query heads computes its "
            "own, T² head_dim for q kᵀ and as many for weights @ v": macs - 2 * T * T * D + 2 * T * T * (D // h),
            "you counted kv_proj for k only: it makes both k and v, T x D x 2 * num_kv_heads * head_dim": macs
            - T * D * kv_dim,
            "you left out the output projection proj, T D²": macs - T * D * D,
        }
    )
    for part in mistakes:  # a mistake that happens to give the right count here is not one
        right = params if part == "parameters" else macs
        mistakes[part] = {reason: count for reason, count in mistakes[part].items() if count != right}
    return mistakes


def _is_pair(result) -> bool:
    return isinstance(result, tuple | list) and len(result) == 2


def check_grouped_query_cost(fn: Callable[[int, int, int, int], tuple]) -> None:
    """Check a learner's grouped_query_cost(T, D, num_heads, num_kv_heads) -> (parameters,
    multiply_adds); then print what multi-query attention saves at ViT-B's width."""
    for T, D, h, kv in COST_CASES:
        where = f"for T = {T}, D = {D}, {h} heads and {kv} key/value head{'s' if kv > 1 else ''}"
        got = call_learner(
            fn, T, D, h, kv, returns=_is_pair, expected="a pair (parameters, multiply_adds)", where=where
        )
        expected = dict(zip(("parameters", "multiply-adds"), grouped_query_cost(T, D, h, kv), strict=True))
        mistakes = _cost_mistakes(T, D, h, kv)
        counts = [whole_number(value, f"the {part}", where) for value, part in zip(got, expected, strict=True)]
        if counts == list(expected.values())[::-1] and counts[0] != counts[1]:
            raise CheckFailed(f"the pair is the wrong way round: return (parameters, multiply_adds) {where}")
        for count, (part, right) in zip(counts, expected.items(), strict=True):
            if count == right:
                continue
            reason = next((reason for reason, wrong in mistakes[part].items() if wrong == count), None)
            if reason:
                raise CheckFailed(f"the {part}: {reason} ({where}: you gave {count:,}, the count is {right:,})")
            raise CheckFailed(
                f"the {part}: you gave {count:,}, the count is {right:,} {where}; add up q_proj, kv_proj and "
                "proj (weights and biases) for the parameters, and the products q, k and v, q kᵀ, weights @ v "
                "and proj for the multiply-adds"
            )
    mha, mqa = grouped_query_cost(197, 768, 12, 12), grouped_query_cost(197, 768, 12, 1)
    print(f"✓ grouped_query_cost gives the counts of {len(COST_CASES)} layers: exact")
    print(
        f"  at ViT-B's width (T = 197, D = 768, 12 heads): multi-head {mha[0]:,} parameters and "
        f"{mha[1] / 1e6:.1f} M multiply-adds; multi-query (1 key/value head) {mqa[0]:,} ({mqa[0] / mha[0]:.0%}) "
        f"and {mqa[1] / 1e6:.1f} M ({mqa[1] / mha[1]:.0%})"
    )
