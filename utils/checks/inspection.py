"""Lesson 7's exercise checkers: the images of an insertion test (only a map's top patches kept),
the weights of a made-up local head, and, in Going further, attention rollout through all the
layers of a ViT and how far each head looks (the mean attention distance in pixels)."""

from collections.abc import Callable

import torch
import torch.nn.functional as F

from utils.checks.core import call_learner, compare, summarize
from utils.inspection import (
    attention_rollout,
    delete_patches,
    keep_patches,
    local_attention,
    mean_attention_distance,
    top_patches,
)

ATOL = 1e-5  # float32 products written another way (einsum, a reduce) differ by ~1e-7

# ---- attention rollout --------------------------------------------------------------------

ROLLOUT_CASES = [  # (depth, B, heads, T): depth, B and heads differ, so a wrong shape says which axis
    (1, 2, 3, 6),  # one layer: the heads, the identity and the renormalisation show
    (2, 1, 2, 4),
    (4, 2, 3, 7),  # four layers that do not commute: the order shows
    (3, 1, 1, 10),
    (3, 2, 2, 3),
]


def _with_residual(layers: torch.Tensor) -> torch.Tensor:
    """Add the identity and renormalise the rows: (..., T, T) -> (..., T, T)."""
    layers = layers + torch.eye(layers.shape[-1])
    return layers / layers.sum(dim=-1, keepdim=True)


def _chain(layers: torch.Tensor, later_left: bool = True) -> torch.Tensor:
    """Multiply (depth, ..., T, T) into (..., T, T), later layers on the left (or, wrongly, on the right)."""
    rollout = layers[0]
    for layer in layers[1:]:
        rollout = layer @ rollout if later_left else rollout @ layer
    return rollout


def _rollout_variants(attn: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible rollouts, each keyed by the sentence that explains it."""
    mean = attn.mean(dim=2)  # (depth, B, T, T)
    fixed = _with_residual(mean)  # the right per-layer matrices
    plus_eye = mean + torch.eye(attn.shape[-1])
    return {
        "the residual identity is missing: add torch.eye(T) to each layer's head-averaged weights "
        "(the skip connection carries every token's own state on), then renormalise the rows": _chain(mean),
        "you added the identity but did not renormalise: each row of (A + I) sums to 2; divide "
        "every row by its sum (dim=-1) so that it sums to 1 again": _chain(plus_eye),
        "you renormalised the columns: divide each row by its own sum, .sum(dim=-1, keepdim=True)": _chain(
            plus_eye / plus_eye.sum(dim=-2, keepdim=True)
        ),
        "the layers are multiplied in the wrong order: the first layer acts first, so it sits on "
        "the right (rollout = layer @ rollout, not rollout @ layer)": _chain(fixed, later_left=False),
        "you multiplied the layers elementwise (*); chain them with the matrix product @": fixed.prod(dim=0),
        "you returned only the last layer's matrix: multiply all the layers together": fixed[-1],
        "you returned only the first layer's matrix: the loop must update it (rollout = layer @ rollout)": fixed[0],
        "you averaged the layers' matrices; rollout multiplies them (rollout = layer @ rollout)": fixed.mean(dim=0),
        "the heads are summed, not averaged: use .mean(dim=2)": _chain(_with_residual(attn.sum(dim=2))),
        "you used only head 0: average all the heads, .mean(dim=2)": _chain(_with_residual(attn[:, :, 0])),
        "you took the largest weight over the heads (.max); average the heads instead, .mean(dim=2)": _chain(
            _with_residual(attn.amax(dim=2))
        ),
        "you rolled out every head on its own and averaged the heads at the end; average the heads first, "
        "then add the identity, renormalise and multiply the layers": _chain(_with_residual(attn)).mean(dim=1),
        "your rollout is transposed: row i must hold how much token i draws on each token, and sum to 1": _chain(
            fixed
        ).transpose(-2, -1),
        "your rollout is the identity matrix: no layer was multiplied in (a loop over an empty range?); "
        "multiply in every layer, rollout = layer @ rollout": torch.eye(attn.shape[-1]).expand_as(fixed[0]),
    }


def check_attention_rollout(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Check a learner's attention_rollout(attn): (depth, B, heads, T, T) -> (B, T, T)."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for depth, B, heads, T in ROLLOUT_CASES:
        scores = 2 * torch.randn(depth, B, heads, T, T, generator=generator)  # peaked rows, like a trained ViT
        attn = scores.softmax(dim=-1)  # (depth, B, heads, T, T), each row sums to 1
        expected = attention_rollout(attn)  # (B, T, T)
        where = f"for attn of shape {(depth, B, heads, T, T)}"
        got = call_learner(fn, attn.clone(), where=where)
        shape_hints = {
            (heads, T, T): "you averaged over the images (dim=1); average the heads, dim=2, and keep one "
            "rollout per image",
            (depth, B, T, T): "you kept one matrix per layer; multiply the layers into one",
            (B, heads, T, T): "the heads are still there; average them (dim=2) before multiplying the layers",
            (B, T): "return the whole rollout, not only the class token's row",
            (T, T): "you averaged over the images; keep one rollout per image, (B, T, T)",
        }
        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_wording="expected (B, T, T) = {}",
                shape_hints=shape_hints,
                atol=ATOL,
                mistakes=_rollout_variants(attn),
                advice="; go through the steps: average the heads, add the identity, "
                "renormalise the rows, multiply the layers with later ones on the left",
            )
        )
    print(f"✓ attention_rollout matches the reference on {len(verdicts)} cases: {summarize(verdicts)}")


# ---- the mean attention distance ----------------------------------------------------------

DISTANCE_ATOL = 1e-4  # distances reach ~100 px; float32 sums written another way differ by ~1e-5

DISTANCE_CASES = [  # (depth, B, heads, grid side, patch_size): depth, B and heads differ in the first
    (2, 3, 4, 3, 4),  # case, so a wrong shape says which axis; N = side**2 never equals patch_size
    (1, 2, 3, 2, 16),  # or B, so dividing by the one or the other shows
    (3, 1, 2, 4, 2),
    (2, 2, 3, 5, 16),
    (1, 3, 2, 5, 4),
]


def _weighted_distance(weights: torch.Tensor, distance: torch.Tensor) -> torch.Tensor:
    """Each query's attention-weighted distance, averaged over images and queries:
    (depth, B, heads, Q, K) with (Q, K) or (K,) distances -> (depth, heads)."""
    return (weights * distance).sum(dim=-1).mean(dim=(1, 3))


def _distance_variants(attn: torch.Tensor, side: int, patch_size: int) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible mean distances, each keyed by the sentence that explains it."""
    B, N = attn.shape[1], side * side
    index = torch.arange(N)
    cell = torch.stack([index // side, index % side], dim=-1).to(attn.dtype)  # (N, 2): row, column in patches
    offset = cell[:, None] - cell[None]  # (N, N, 2) in patches
    apart = offset.norm(dim=-1)  # (N, N) Euclidean, in patches
    pixels = apart * patch_size  # (N, N), the right distances
    patches = attn[..., 1:, 1:]  # (depth, B, heads, N, N), the class token's row and column dropped
    weights = patches / patches.sum(dim=-1, keepdim=True)  # the right weights
    right = _weighted_distance(weights, pixels)  # (depth, heads)
    token = torch.arange(1, N + 1)  # the patches' token indices
    shifted = torch.stack([token // side, token % side], dim=-1).to(attn.dtype)  # (N, 2), off by one
    return {
        "your distances are in patches, not pixels: patch (r, c) sits at (r * patch_size, "
        "c * patch_size) pixels, so multiply the positions by patch_size": _weighted_distance(weights, apart),
        "the weights are not renormalised: once the class token's column is dropped, a row sums to "
        "less than 1; divide each row by its sum over the patches (dim=-1, keepdim=True)": _weighted_distance(
            patches, pixels
        ),
        "the class token is counted as a query: drop its row as well as its column "
        "(attn[..., 1:, 1:]) and average over the N patch queries only": right * N / (N + 1),
        "the class token is not left out: it has no place on the grid, so drop its row and column "
        "(attn[..., 1:, 1:]), renormalise the rows and average over the N patch queries": _weighted_distance(
            attn, F.pad(pixels, (1, 0, 1, 0))
        ),
        "your distances are squared: take the square root, sqrt(dr**2 + dc**2) (or torch.cdist)": _weighted_distance(
            weights, pixels**2
        ),
        "you used the Manhattan distance |dr| + |dc|; use the straight-line (Euclidean) distance "
        "sqrt(dr**2 + dc**2)": _weighted_distance(weights, offset.abs().sum(dim=-1) * patch_size),
        "you measured distances along the flattened sequence, |i - j|; on the grid patch i sits at "
        "row i // side, column i % side": _weighted_distance(
            weights, (index[:, None] - index[None]).abs() * patch_size
        ),
        "the positions are off by one: patch i is token i + 1, but its place on the grid is "
        "row i // side, column i % side (count the patches from 0)": _weighted_distance(
            weights, torch.cdist(shifted, shifted) * patch_size
        ),
        "you measured each key's distance from the top-left corner; measure it from the query's "
        "own patch": _weighted_distance(weights, cell.norm(dim=-1) * patch_size),
        "you renormalised the columns: each query's row must sum to 1, .sum(dim=-1, keepdim=True)": _weighted_distance(
            patches / patches.sum(dim=-2, keepdim=True), pixels
        ),
        "you averaged weight * distance over the keys; the weights already sum to 1, so sum over "
        "the keys (dim=-1) and average over the queries": right / N,
        "you summed over the queries; average them (.mean)": right * N,
        "you summed over the images; average them (.mean(dim=1))": right * B,
    }


def _distance_shape_hints(depth: int, B: int, heads: int, T: int) -> dict[tuple[int, ...], str]:
    """Wrong shapes of the mean distances, each with the sentence that explains it (the later entry
    wins where two coincide)."""
    per_token = "one value per token; drop the class token and average over the patch queries"
    per_query = "you kept one distance per query; average over the queries too"
    return {
        (depth, heads, T): per_token,
        (depth, B, heads, T): per_token,
        (heads, depth): "depth and heads are swapped; return (depth, heads)",
        (depth, heads, T - 1): per_query,
        (depth, B, heads, T - 1): per_query,
        (depth, B, heads): "you kept one distance per image; average over the images too (dim=1)",
        (depth,): "the heads are averaged away; keep one distance per head, average only over images and queries",
        (): "one number for the whole model; keep one distance per layer and head",
    }


def check_mean_attention_distance(fn: Callable[[torch.Tensor, int, int], torch.Tensor]) -> None:
    """Check a learner's mean_attention_distance(attn, grid_size, patch_size):
    (depth, B, heads, T, T) with T = 1 + grid_size**2 -> (depth, heads) distances in pixels."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for depth, B, heads, side, patch_size in DISTANCE_CASES:
        T = 1 + side * side
        scores = 2 * torch.randn(depth, B, heads, T, T, generator=generator)  # peaked rows, like a trained ViT
        attn = scores.softmax(dim=-1)  # (depth, B, heads, T, T), each row sums to 1
        expected = mean_attention_distance(attn, side, patch_size)  # (depth, heads)
        where = f"for attn of shape {(depth, B, heads, T, T)}, grid_size = {side}, patch_size = {patch_size}"
        got = call_learner(fn, attn.clone(), side, patch_size, where=where)
        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_wording="expected (depth, heads) = {}",
                shape_hints=_distance_shape_hints(depth, B, heads, T),
                atol=DISTANCE_ATOL,
                mistakes=_distance_variants(attn, side, patch_size),
                mistake_atol=DISTANCE_ATOL,
                advice="; go through the steps: drop the class token's row and column, "
                "renormalise each row over the patches, weight each key's distance in pixels from the "
                "query, sum over the keys, average over the queries and the images",
            )
        )
    print(f"✓ mean_attention_distance matches the reference on {len(verdicts)} cases: {summarize(verdicts)}")


# ---- the insertion test's images ------------------------------------------------------------

INSERTION_CASES = [  # (B, C, side of the grid, patch size, k): k = 0 and k = N are included
    (2, 3, 4, 2, 3),
    (3, 1, 3, 3, 1),
    (1, 3, 2, 4, 4),
    (2, 3, 4, 2, 0),
    (2, 3, 4, 2, 10),
]


def _insertion_variants(images, scores, k, fill) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible insertion images, each keyed by the sentence that explains it."""
    N = scores.shape[1] * scores.shape[2]
    top = top_patches(scores, k)  # (B, rows, cols)
    variants = {
        "you painted over the k top patches and kept the rest: that is the deletion test; keep the "
        "k top patches and paint over every other one": delete_patches(images, top, fill),
        "you kept the k patches with the lowest scores: keep the k highest, top_patches(scores, k)": keep_patches(
            images, top_patches(-scores, k), fill
        ),
        "you painted with 0 (black), not with fill: pass the fill colour on": keep_patches(images, top, 0.0),
        "your patch mask has rows and columns swapped (a transpose or a wrong permute): top_patches "
        "already returns (B, rows, cols)": keep_patches(images, top.transpose(1, 2).contiguous(), fill),
        "you returned the images unchanged: paint over every patch except the k top ones "
        "(delete_patches with the other patches)": images,
    }
    if 0 < k < N:
        variants["you kept N - k patches, not k: top_patches(scores, k) picks the ones to keep"] = keep_patches(
            images, top_patches(scores, N - k), fill
        )
    return variants


def check_insertion_images(fn: Callable) -> None:
    """Check a learner's insertion_images(images, scores, k, fill): (B, C, H, W) with only each
    image's k top-scoring patches kept, every other patch painted `fill` (C,)."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for B, C, side, P, k in INSERTION_CASES:
        images = torch.rand(B, C, side * P, side * P, generator=generator)  # (B, C, H, W)
        scores = torch.randn(B, side, side, generator=generator)  # no ties
        fill = torch.linspace(0.2, 0.6, C)  # (C,), a different value per channel
        expected = keep_patches(images, top_patches(scores, k), fill)
        where = f"for images {(B, C, side * P, side * P)}, scores {(B, side, side)}, k = {k}"
        got = call_learner(fn, images.clone(), scores.clone(), k, fill.clone(), where=where)
        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_wording="expected the images' shape (B, C, H, W) = {}",
                atol=1e-6,
                mistakes=_insertion_variants(images, scores, k, fill),
                advice="; pick the k top patches with top_patches(scores, k), then paint over all the "
                "others (delete_patches with the opposite mask, ~mask)",
            )
        )
    print(f"✓ insertion_images matches the reference on {len(verdicts)} cases: {summarize(verdicts)}")


# ---- a made-up local head ------------------------------------------------------------------

LOCAL_SIDES = (4, 3, 5, 2)  # 4 first: on a 3 x 3 grid a wrap-around 3 x 3 and a 5 x 5 both cover it all


def _local_variants(side: int) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible local heads (T, T), each keyed by the sentence that explains it."""
    N, T = side * side, side * side + 1
    index = torch.arange(N)
    row, col = index // side, index % side
    dr, dc = (row[:, None] - row[None]).abs(), (col[:, None] - col[None]).abs()  # (N, N)

    def head(near: torch.Tensor, normalise: bool = True, cls_row=None) -> torch.Tensor:
        near = near.float()
        weights = torch.zeros(T, T)
        weights[0, 0] = 1.0
        if cls_row is not None:
            weights[0] = cls_row
        weights[1:, 1:] = near / near.sum(dim=-1, keepdim=True) if normalise else near / 9
        return weights

    square = (dr <= 1) & (dc <= 1)  # (N, N), the right neighbourhood
    wrap_r = torch.minimum(dr, side - dr)
    wrap_c = torch.minimum(dc, side - dc)
    with_cls = torch.zeros(T, T)
    with_cls[0, 0] = 1.0
    with_cls[1:, 1:] = square.float()
    with_cls[1:, 0] = 1.0
    with_cls[1:] /= with_cls[1:].sum(dim=-1, keepdim=True)
    return {
        "only up, down, left and right (and itself): a 3 x 3 neighbourhood has the diagonal patches "
        "too, at most one row and one column away": head(dr + dc <= 1),
        "each patch leaves itself out: its own patch is the centre of its 3 x 3 neighbourhood": head(
            square & (dr + dc > 0)
        ),
        "the rows are not renormalised at the edges: a corner patch has 4 neighbours (itself "
        "included), not 9; divide each row by its own count": head(square, normalise=False),
        "your patches also attend to the class token: the head reads patches only, so their weight "
        "on token 0 is 0": with_cls,
        "the class token's row is uniform: in this made-up head the class token attends only to "
        "itself, row 0 = [1, 0, ..., 0]": head(square, cls_row=torch.full((T,), 1 / T)),
        "the class token's row is all zeros: every row of attention weights sums to 1, so give it "
        "weight 1 on itself": head(square, cls_row=torch.zeros(T)),
        "your neighbourhood wraps around the edges (a modulo?): the grid ends at its border, a "
        "corner patch has only 3 neighbours": head((wrap_r <= 1) & (wrap_c <= 1)),
        "you took neighbours along the flattened sequence (|i - j| <= 1); on the grid patch i "
        "sits at row i // side, column i % side": head((index[:, None] - index[None]).abs() <= 1),
        "your neighbourhood is 5 x 5 (two steps away): a 3 x 3 one reaches one row and one column": head(
            (dr <= 2) & (dc <= 2)
        ),
        "your weights are transposed (columns sum to 1): each query's row must sum to 1": head(square).T.contiguous(),
    }


def check_local_head(fn: Callable[[int], torch.Tensor]) -> None:
    """Check a learner's local_head(grid_size): (T, T) weights, T = 1 + grid_size**2, of a head
    where each patch attends evenly to its 3 x 3 neighbourhood and the class token to itself."""
    verdicts = []
    for side in LOCAL_SIDES:
        expected = local_attention(side)  # (T, T)
        T = side * side + 1
        where = f"for grid_size = {side} (T = {T})"
        got = call_learner(fn, side, where=where)
        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_wording="expected (T, T) = {}",
                shape_hints={
                    (T - 1, T - 1): "you returned the patches only; put the class token in front, "
                    "as token 0 (T = 1 + grid_size**2)",
                    (1, 1, 1, T, T): "return the (T, T) matrix itself; the lesson adds the "
                    "(depth, B, heads) axes when it measures",
                },
                atol=1e-6,
                mistakes=_local_variants(side),
                advice="; for each patch, mark the patches at most one row and one column away "
                "(itself included), divide by their count; the class token's row is [1, 0, ..., 0]",
            )
        )
    print(f"✓ local_head matches the reference on {len(verdicts)} cases: {summarize(verdicts)}")
