"""The maths behind looking inside a trained ViT (lesson 7): attention rollout, where the class
token looks, how far heads look, the principal components of the patch-embedding filters, and
the deletion test of a map (delete the patches it ranks highest, see what the model loses).
Lesson 9's measurements of popular claims: how one-sided attention is, how spread out, what the
model loses without a head (`prune_heads`), how steep the loss is at the vector the head reads.

Lesson 7's baselines and intervals: a map made without a model (`background_distance`), the
insertion test's images (`keep_patches`), a paired bootstrap of two accuracies, the weights of a
made-up local head, and how much a position table codes rows against columns.

The functions take tensors (a model's attention weights or parameters); `prune_heads` and
`readout_gradient_norm` take the model itself, and leave it as it came.
"""

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from utils.datasets import check_float_images, check_labels
from utils.embeddings import grid_coordinates
from utils.patches import to_2tuple
from utils.runtime import eval_mode
from utils.validation import WrongTypeError, check_flag, check_number, check_tensor, check_whole, describe
from utils.vit import VisionTransformer


def check_attention(attn: torch.Tensor, name: str = "attn") -> None:
    """Raise unless `attn` is attention weights (depth, B, heads, T, T), as returned by
    `model(images, return_attention=True)`: at least one layer and token, floating point, finite
    and non-negative (weights, not the scores before the softmax)."""
    shape = "(depth, B, heads, T, T)"
    check_tensor(attn, name, shape)
    if attn.ndim != 5 or attn.shape[-1] != attn.shape[-2]:
        raise ValueError(f"expected attention weights {shape}, got {tuple(attn.shape)}")
    if attn.shape[0] == 0 or attn.shape[-1] == 0:
        raise ValueError(f"expected at least one layer and one token in {name} {shape}, got {tuple(attn.shape)}")
    if not attn.is_floating_point():
        raise ValueError(f"expected floating-point attention weights, got {attn.dtype}")
    if attn.numel() and not (attn.isfinite().all() and attn.min() >= 0):
        raise ValueError(
            f"expected attention weights (finite, >= 0: the softmax's output), got values from "
            f"{attn.min().item():.3g} to {attn.max().item():.3g}; pass the weights, not the scores"
        )


def check_rows_sum_to_one(attn: torch.Tensor) -> None:
    """Raise unless every row of the weights `attn` (..., T, T) sums to 1 (to within 0.01): a softmax
    over the keys, not a row cut out of it or a sum of heads."""
    row_sums = attn.sum(dim=-1)  # (..., T)
    if row_sums.numel() and (row_sums - 1).abs().max() > 1e-2:
        raise ValueError(
            "expected attention weights whose rows sum to 1 (a softmax over the keys), got row sums "
            f"from {row_sums.min().item():.3g} to {row_sums.max().item():.3g}"
        )


def check_grid(num_tokens: int, grid_size: int | tuple[int, int], num_prefix_tokens: int, what: str) -> tuple[int, int]:
    """The (rows, cols) of `grid_size`; an error unless num_tokens = num_prefix_tokens + rows * cols.

    Args:
        what: the tensor the tokens were counted in, for the message ("weights of shape (...)").
    """
    rows, cols = to_2tuple(grid_size, "grid_size")
    prefix = check_whole(num_prefix_tokens, "num_prefix_tokens", minimum=0)
    if num_tokens != prefix + rows * cols:
        raise ValueError(f"expected {prefix} + {rows} x {cols} = {prefix + rows * cols} tokens, got {what}")
    return rows, cols


def attention_rollout(attn: torch.Tensor, residual: bool = True) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020): how much each token's final state draws on each
    input token, following attention through all the layers.

    Each layer's weights are averaged over heads; with `residual`, the identity is added (the
    skip connection carries every token's own state on) and rows are renormalised; the layers'
    matrices are then multiplied, first layer on the right.

    Args:
        attn: (depth, B, heads, T, T) weights, as returned by `model(images, return_attention=True)`;
            each row sums to 1.
    Returns:
        (B, T, T), each row summing to 1.
    """
    check_attention(attn)
    residual = check_flag(residual, "residual")
    check_rows_sum_to_one(attn)
    layers = attn.mean(dim=2)  # (depth, B, T, T): heads averaged
    if residual:
        layers = layers + torch.eye(layers.shape[-1], dtype=layers.dtype, device=layers.device)
        layers = layers / layers.sum(dim=-1, keepdim=True)  # rows sum to 1 again
    rollout = layers[0]  # (B, T, T)
    for layer in layers[1:]:
        rollout = layer @ rollout  # later layers mix what the earlier ones gathered
    return rollout


def cls_attention_map(
    weights: torch.Tensor, grid_size: int | tuple[int, int], num_prefix_tokens: int = 1
) -> torch.Tensor:
    """The class token's attention over the patches, laid out on the patch grid.

    Args:
        weights: (..., T, T) weights (one layer and head, a mean, or a rollout); row 0 is the
            class token's.
        grid_size: patches per side (or (rows, cols)); T = num_prefix_tokens + rows * cols.
        num_prefix_tokens: leading tokens that are not patches, >= 1 (token 0, the class token).
    Returns:
        (..., rows, cols): the class token's weight on each patch (the weight on itself left out),
        a new tensor: a view would keep all of `weights` alive as long as the map.
    """
    check_tensor(weights, "weights", "(..., T, T)")
    if weights.ndim < 2 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"expected square weights (..., T, T), got {tuple(weights.shape)}")
    if check_whole(num_prefix_tokens, "num_prefix_tokens", minimum=0) == 0:
        raise ValueError(
            "num_prefix_tokens=0 means there is no class token (a mean-pool model): row 0 would be "
            "a patch's attention; expected num_prefix_tokens >= 1"
        )
    rows, cols = check_grid(weights.shape[-1], grid_size, num_prefix_tokens, f"weights of shape {tuple(weights.shape)}")
    row = weights[..., 0, num_prefix_tokens:]  # (..., N)
    return row.reshape(*row.shape[:-1], rows, cols).clone()  # (..., rows, cols)


def patch_coverage(masks: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Which patches a pixel mask touches.

    Args:
        masks: (B, H, W) bool, e.g. the objects of `make_relational`; H and W multiples of patch_size.
    Returns:
        (B, H/P, W/P) bool, True for every patch holding at least one True pixel.
    """
    P = check_whole(patch_size, "patch_size")
    check_tensor(masks, "masks", "(B, H, W)", ndim=3)
    if masks.dtype != torch.bool:
        raise ValueError(f"expected boolean masks, got {masks.dtype}; from pixel values make one, e.g. `masks > 0.5`")
    B, H, W = masks.shape
    if H % P or W % P:
        raise ValueError(f"mask size {H}x{W} is not divisible by the patch size {P}")
    return masks.reshape(B, H // P, P, W // P, P).any(dim=4).any(dim=2)  # (B, rows, cols)


def attention_share(maps: torch.Tensor, regions: torch.Tensor) -> torch.Tensor:
    """The fraction of each attention map that falls inside a region of the patch grid.

    An empty region holds a share of 0. A map with no attention at all (all zeros) has no share
    to give: it raises a ValueError rather than return 0/0 = NaN.

    Args:
        maps: (B, rows, cols) non-negative attention over patches, each with a positive sum.
        regions: (B, rows, cols) bool, the same shape.
    Returns:
        (B,) in [0, 1]; compare with regions.float().mean((1, 2)), the share of uniform attention.
    """
    check_tensor(maps, "maps", "(B, rows, cols)", ndim=3)
    check_tensor(regions, "regions", "(B, rows, cols)")
    if regions.shape != maps.shape:
        raise ValueError(f"expected regions of the maps' shape {tuple(maps.shape)}, got {tuple(regions.shape)}")
    if regions.dtype != torch.bool:
        raise ValueError(f"expected boolean regions (True inside), got {regions.dtype}")
    if not maps.is_floating_point():
        raise ValueError(f"expected floating-point attention maps, got {maps.dtype}")
    if maps.numel() and not (maps.isfinite().all() and maps.min() >= 0):
        raise ValueError("expected attention maps that are finite and >= 0, got NaN, infinite or negative values")
    totals = maps.sum(dim=(1, 2))  # (B,)
    if not (totals > 0).all():
        empty = (totals <= 0).nonzero().flatten().tolist()
        raise ValueError(f"the maps of images {empty} are all zero: no attention to share out")
    return (maps * regions).sum(dim=(1, 2)) / totals


def mean_attention_distance(
    attn: torch.Tensor, grid_size: int | tuple[int, int], patch_size: int, num_prefix_tokens: int = 1
) -> torch.Tensor:
    """How far each head looks, in pixels (ViT paper, Fig. 7 right): for every patch query, the
    distance to each patch key weighted by the attention (the class token left out, the
    weights renormalised over the patches), averaged over queries and images.

    Args:
        attn: (depth, B, heads, T, T) weights, T = num_prefix_tokens + rows * cols; every patch
            query must put some weight on the patches.
        grid_size: patches per side (or (rows, cols)).
        patch_size: side P of a patch, in pixels.
    Returns:
        (depth, heads) mean distances in pixels.
    """
    check_attention(attn)
    rows, cols = check_grid(attn.shape[-1], grid_size, num_prefix_tokens, f"attn of shape {tuple(attn.shape)}")
    patch_size = check_whole(patch_size, "patch_size")
    positions = grid_coordinates(rows, cols).to(attn.dtype) * patch_size  # (N, 2) patch corners, pixels
    distance = torch.cdist(positions, positions)  # (N, N)
    patches = attn[..., num_prefix_tokens:, num_prefix_tokens:]  # (depth, B, heads, N, N), a view
    # weighted distances summed over the keys, then renormalised: no (depth, B, heads, N, N) copy
    weighted = torch.einsum("...qk,qk->...q", patches, distance.to(attn.device))  # (depth, B, heads, N)
    on_patches = patches.sum(dim=-1)  # (depth, B, heads, N)
    if not (on_patches > 0).all():
        raise ValueError(
            "a patch query puts all its weight on the class token: its distance to the patches is undefined (0/0)"
        )
    per_query = weighted / on_patches  # (depth, B, heads, N)
    return per_query.mean(dim=(1, 3))  # (depth, heads)


def patch_embedding_components(weight: torch.Tensor, count: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """Principal components of the patch-embedding filters (ViT paper, Fig. 7 left).

    Args:
        weight: (D, C, P, P), the `patch_embed.proj` weight: one filter per token feature; at
            least two filters that are not all the same.
        count: how many components, 1 .. min(D, C*P*P).
    Returns:
        components (count, C, P, P), unit length, the directions of largest variance among the
        D filters, and the share of the variance each explains (count,).
    """
    check_tensor(weight, "weight", "(D, C, P, P)", ndim=4)
    D, C, P, P2 = weight.shape
    if P != P2 or min(D, C, P) == 0 or not weight.is_floating_point():
        raise ValueError(f"expected float filters shaped (D, C, P, P), got {weight.dtype} {tuple(weight.shape)}")
    if D < 2:
        raise ValueError(f"expected at least 2 filters (D >= 2) to find directions of variance, got {D}")
    count = check_whole(count, "count")
    if count > min(D, C * P * P):
        raise ValueError(f"count must be at most min(D, C*P*P) = {min(D, C * P * P)} for {D} filters, got {count}")
    filters = weight.detach().reshape(D, C * P * P).double()  # (D, C*P*P)
    centred = filters - filters.mean(dim=0)
    _, singular, directions = torch.linalg.svd(centred, full_matrices=False)  # directions (k, C*P*P)
    variance = singular**2
    if not variance.sum() > 0:  # also False for NaN
        raise ValueError(f"the {D} filters are all the same (or not finite): they have no variance to split")
    share = variance[:count] / variance.sum()
    return directions[:count].reshape(-1, C, P, P).float(), share.float()


def top_patches(scores: torch.Tensor, k: int) -> torch.Tensor:
    """The `k` patches of each map with the highest scores, as a mask (the start of a deletion test).

    Args:
        scores: (B, rows, cols) finite scores over the patch grid: a map (a rollout, one layer's
            attention) or random numbers; ties go to the first patches in row-major order.
        k: patches to pick per map, 0 .. rows * cols.
    Returns:
        (B, rows, cols) bool, exactly k True per map.
    """
    check_tensor(scores, "scores", "(B, rows, cols)", ndim=3)
    B, rows, cols = scores.shape
    k = check_whole(k, "k", minimum=0, maximum=rows * cols, meaning=" of patches per map")
    if not scores.is_floating_point():
        raise ValueError(f"expected floating-point scores, got {scores.dtype}")
    if scores.numel() and not scores.isfinite().all():
        raise ValueError("expected finite scores, got NaN or infinite values")
    flat = scores.reshape(B, rows * cols)  # (B, N)
    # a stable sort, so that equal scores are taken in row-major order (topk's order among ties is unspecified)
    order = flat.argsort(dim=1, descending=True, stable=True)[:, :k]  # (B, k)
    mask = torch.zeros_like(flat, dtype=torch.bool).scatter_(1, order, True)  # (B, N)
    return mask.reshape(B, rows, cols)


def delete_patches(images: torch.Tensor, patches: torch.Tensor, fill: float | torch.Tensor = 0.0) -> torch.Tensor:
    """`images` with the chosen patches painted over in one colour (e.g. the background's), the
    others untouched: what a model sees when the patches a map ranks highest are deleted.

    Args:
        images: (B, C, H, W).
        patches: (B, rows, cols) bool, True for the patches to delete (e.g. `top_patches`); H and
            W must be multiples of rows and cols (the patch is H/rows x W/cols pixels).
        fill: the value they get: a number, or one per channel (C,).
    Returns:
        (B, C, H, W), a new tensor.
    """
    check_tensor(images, "images", "(B, C, H, W)", ndim=4)
    check_tensor(patches, "patches", "(B, rows, cols)", ndim=3)
    B, C, H, W = images.shape
    if patches.dtype != torch.bool:
        raise ValueError(f"expected boolean patches (True: delete), got {patches.dtype}; e.g. top_patches(scores, k)")
    if patches.shape[0] != B:
        raise ValueError(f"expected one patch mask per image, {B}, got {patches.shape[0]}")
    rows, cols = patches.shape[1:]
    if rows == 0 or cols == 0 or H % rows or W % cols:
        raise ValueError(f"an image of {H}x{W} pixels does not split into a {rows} x {cols} grid of equal patches")
    if not images.is_floating_point():
        raise ValueError(f"expected floating-point images, got {images.dtype}")
    if isinstance(fill, torch.Tensor):
        if fill.shape not in ((), (C,)):
            raise ValueError(f"expected fill as a number or one value per channel ({C},), got {tuple(fill.shape)}")
        fill = fill.to(images.dtype).reshape(-1, 1, 1)  # (C or 1, 1, 1)
    else:
        fill = torch.tensor(check_number(fill, "fill"), dtype=images.dtype)
    pixels = patches.repeat_interleave(H // rows, dim=1).repeat_interleave(W // cols, dim=2)  # (B, H, W)
    return torch.where(pixels[:, None], fill.to(images.device), images)  # (B, C, H, W)


# ---- lesson 9: claims about attention heads, measured ----------------------------------------


def attention_asymmetry(attn: torch.Tensor) -> torch.Tensor:
    """How one-sided each head's attention is: ||A - A^T||_F / ||A + A^T||_F of every (T, T)
    matrix A of weights, averaged over the images.

    The range is [0, 1]. For A >= 0, ||A +- A^T||^2 = 2 ||A||^2 +- 2 <A, A^T>, and
    <A, A^T> = sum_ij A_ij A_ji >= 0, so the numerator never exceeds the denominator. It is 0
    exactly when A = A^T (i attends to j as much as j to i; uniform attention, say), and 1 exactly
    when <A, A^T> = 0: no pair of tokens attends both ways and no token attends to itself (a
    strictly triangular A). Softmax weights are all positive, so a real head lies strictly inside.

    Args:
        attn: (depth, B, heads, T, T) weights, as returned by `model(images, return_attention=True)`;
            no matrix all zeros (rows need not sum to 1).
    Returns:
        (depth, heads), each in [0, 1].
    """
    check_attention(attn)
    different = torch.linalg.matrix_norm(attn - attn.mT)  # (depth, B, heads), Frobenius
    total = torch.linalg.matrix_norm(attn + attn.mT)  # (depth, B, heads); 0 only for an all-zero matrix
    if not (total > 0).all():
        empty = (total <= 0).nonzero()[0].tolist()
        raise ValueError(
            f"the weights of layer {empty[0]}, image {empty[1]}, head {empty[2]} are all zero: "
            "a matrix with no attention has no direction (0/0)"
        )
    return (different / total).mean(dim=1)  # (depth, heads)


def attention_entropy(attn: torch.Tensor) -> torch.Tensor:
    """How spread out each head's attention is: the entropy, in nats, of each query's weights over
    the keys, -sum_j a_j log a_j (0 log 0 = 0), averaged over the images and the queries.

    A query that looks at one token has entropy 0; one that looks at all T evenly has log(T), the
    largest possible.

    Args:
        attn: (depth, B, heads, T, T) weights, each row summing to 1.
    Returns:
        (depth, heads), each from 0 to log(T).
    """
    check_attention(attn)
    check_rows_sum_to_one(attn)
    per_query = torch.special.entr(attn).sum(dim=-1)  # (depth, B, heads, T); entr(0) = 0
    return per_query.mean(dim=(1, 3))  # (depth, heads)


def _check_vit(model, what: str) -> VisionTransformer:
    """`model` if it is a VisionTransformer; WrongTypeError naming `what` needs it otherwise."""
    if not isinstance(model, VisionTransformer):
        raise WrongTypeError(f"{what} needs a VisionTransformer, got {describe(model)}")
    return model


def _check_heads(model: VisionTransformer, heads) -> dict[int, list[int]]:
    """`heads` as {block index: [head indices]}; an error naming the model's depth or num_heads
    for an index out of range, or for anything that is no (block, head) pair."""
    expected = "heads must be (block, head) pairs, e.g. [(0, 1), (3, 2)]"
    if isinstance(heads, str | bytes | dict) or not isinstance(heads, Iterable):
        raise WrongTypeError(f"{expected}, got {describe(heads)}")
    depth, num_heads = len(model.blocks), model.config.num_heads
    chosen: dict[int, list[int]] = {}
    for i, pair in enumerate(heads):
        if isinstance(pair, torch.Tensor) and pair.shape == (2,):
            pair = pair.tolist()
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            one_pair = not isinstance(pair, tuple | list)  # (3, 0) itself: its items are numbers
            hint = ": for one head pass a list of one pair, [(block, head)]" if one_pair else ""
            raise WrongTypeError(f"{expected}, got heads[{i}] = {describe(pair)}{hint}")
        block = check_whole(pair[0], f"heads[{i}]'s block", minimum=0, maximum=depth - 1, meaning=f" (depth {depth})")
        head = check_whole(
            pair[1], f"heads[{i}]'s head", minimum=0, maximum=num_heads - 1, meaning=f" (num_heads {num_heads})"
        )
        chosen.setdefault(block, [])
        if head not in chosen[block]:
            chosen[block].append(head)
    return chosen


@contextmanager
def prune_heads(model: VisionTransformer, heads: Iterable[tuple[int, int]]) -> Iterator[VisionTransformer]:
    """Run a `with` block with the given attention heads switched off: their output is zero, so the
    block's attention branch adds only what the other heads say (and proj's bias).

        with prune_heads(model, [(3, 0), (3, 1)]):   # heads 0 and 1 of block 3
            logits = model(images)

    A forward pre-hook on `blocks[b].attn.proj` zeros its input channels h*head_dim .. (h+1)*head_dim,
    where merge_heads put head h; it works for both attention paths (explicit and fused), with
    return_attention too (the weights a pruned head returns are still its softmax weights: pruning
    silences what it passes on, not where it looks). The hooks are removed when the block ends,
    also when it raises.

    Args:
        model: a VisionTransformer, left unchanged.
        heads: (block index, head index) pairs, blocks from 0 to depth - 1, heads from 0 to
            num_heads - 1; none: nothing changes.
    Yields:
        the model.
    """
    model = _check_vit(model, "prune_heads")
    chosen = _check_heads(model, heads)
    handles = []
    try:
        for block, silenced in chosen.items():
            attn = model.blocks[block].attn
            keep = torch.ones(attn.dim, dtype=torch.bool, device=attn.proj.weight.device)  # (D,)
            for head in silenced:
                keep[head * attn.head_dim : (head + 1) * attn.head_dim] = False  # head h's slice after merge_heads

            def zero_heads(module: nn.Module, args: tuple, keep: torch.Tensor = keep) -> tuple:
                return (args[0].masked_fill(~keep, 0.0), *args[1:])  # (B, T, D), the pruned heads' channels 0

            handles.append(attn.proj.register_forward_pre_hook(zero_heads))
        yield model
    finally:
        for handle in handles:
            handle.remove()


def readout_gradient_norm(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """How steep each image's loss is at the vector the classification head reads (the readout):
    the norm of d(loss_b) / d(r_b), averaged over the images.

    r_b is model.head's input for image b: the class token's output with pool="cls", the mean of
    the patch tokens with pool="mean" (after fc_norm when config.fc_norm); loss_b is image b's own
    cross-entropy. For a Linear head W that gradient is (softmax(logits_b) - onehot(label_b)) @ W.
    Measured in eval mode (no dropout; the model's mode is restored), without touching any
    parameter or its .grad: the readout is captured by a hook on model.head and the head run again
    on a detached copy, so autograd follows only the head.

    Args:
        model: a classifier whose last layer is `head` (a VisionTransformer with num_classes > 0).
        images: (B, C, H, W) in the model's dtype.
        labels: (B,) int64 class indices.
    Returns:
        the mean over the B images of ||d(loss_b) / d(r_b)||, a float (the same for a batch as the
        mean of the values of its images one by one).
    """
    if not isinstance(model, nn.Module):
        raise WrongTypeError(f"readout_gradient_norm needs a model (a VisionTransformer), got {describe(model)}")
    head = getattr(model, "head", None)
    if not isinstance(head, nn.Module) or isinstance(head, nn.Identity):
        raise ValueError(
            f"readout_gradient_norm needs a model whose classifier is `head` ({type(model).__name__} has "
            f"{'an Identity head: num_classes=0, no classifier' if isinstance(head, nn.Identity) else 'none'})"
        )
    weight = next((p for p in model.parameters() if p.is_floating_point()), None)
    if weight is None:
        raise ValueError(f"model ({type(model).__name__}) has no floating-point parameters")
    check_float_images(images, dtype=weight.dtype)
    check_labels(labels)
    if len(labels) != len(images):
        raise ValueError(f"expected one label per image, got {len(images)} images and {len(labels)} labels")
    images, labels = images.to(weight.device), labels.to(weight.device)
    readouts = []
    handle = head.register_forward_pre_hook(lambda module, args: readouts.append(args[0]))
    try:
        with eval_mode(model):
            with torch.no_grad():
                model(images)  # runs the hook: readouts holds the head's input
            handle.remove()
            if len(readouts) != 1:
                raise ValueError(f"model.head ran {len(readouts)} times in one forward pass; expected once")
            readout = readouts[0]
            if not isinstance(readout, torch.Tensor) or readout.shape[:1] != images.shape[:1] or readout.ndim != 2:
                got = tuple(readout.shape) if isinstance(readout, torch.Tensor) else describe(readout)
                raise ValueError(f"expected the head to read one vector per image, (B, D), got {got}")
            readout = readout.detach().requires_grad_(True)  # (B, D), a leaf: the graph starts here
            with torch.enable_grad():  # also inside a caller's torch.no_grad()
                logits = head(readout)  # (B, num_classes)
                num_classes = logits.shape[-1]
                check_labels(labels, num_classes=num_classes, why=f"the model gives {num_classes} outputs")
                loss = F.cross_entropy(logits, labels, reduction="sum")  # sum_b loss_b
    finally:
        handle.remove()
    (gradient,) = torch.autograd.grad(loss, readout)  # (B, D), row b = d(loss_b)/d(r_b); no .grad written
    return gradient.norm(dim=1).mean().item()


# ---- lesson 7: baselines and intervals for the deletion test, and the shapes of a table ---------


def background_distance(images: torch.Tensor, background: torch.Tensor, patch_size: int) -> torch.Tensor:
    """A map made without any model: how far each patch's pixels are from the background colour
    (the mean over the patch of each pixel's Euclidean distance from `background`). Ranking patches
    by it finds whatever stands out from the background, which is the baseline a map's deletion test
    must beat before it says anything about the model.

    Args:
        images: (B, C, H, W) float; H and W multiples of patch_size.
        background: (C,) the background colour (or a number for every channel).
        patch_size: side P of a patch, in pixels.
    Returns:
        (B, H/P, W/P) scores, >= 0.
    """
    check_float_images(images, "images")
    B, C, H, W = images.shape
    P = check_whole(patch_size, "patch_size")
    if H % P or W % P:
        raise ValueError(f"images of {H}x{W} pixels do not split into patches of {P}x{P}")
    if not isinstance(background, torch.Tensor):
        background = torch.tensor(check_number(background, "background"), dtype=images.dtype)
    if background.shape not in ((), (C,)):
        raise ValueError(
            f"expected background as a number or one value per channel ({C},), got {tuple(background.shape)}"
        )
    distance = (images - background.to(images.dtype).reshape(-1, 1, 1)).norm(dim=1)  # (B, H, W)
    return distance.reshape(B, H // P, P, W // P, P).mean(dim=(2, 4))  # (B, rows, cols)


def keep_patches(images: torch.Tensor, patches: torch.Tensor, fill: float | torch.Tensor = 0.0) -> torch.Tensor:
    """The other half of the deletion test, the insertion test: `images` with only the chosen
    patches kept and every other patch painted over with `fill` (delete_patches of the rest).

    Args:
        images: (B, C, H, W).
        patches: (B, rows, cols) bool, True for the patches to keep (e.g. `top_patches`).
        fill: the colour of everything else: a number, or one per channel (C,).
    Returns:
        (B, C, H, W), a new tensor.
    """
    check_tensor(patches, "patches", "(B, rows, cols)", ndim=3)
    if patches.dtype != torch.bool:
        raise ValueError(f"expected boolean patches (True: keep), got {patches.dtype}; e.g. top_patches(scores, k)")
    return delete_patches(images, ~patches, fill)


def paired_bootstrap(
    correct_a: torch.Tensor, correct_b: torch.Tensor, samples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """The difference of two accuracies measured on the same images, with a 95 % interval from a
    paired bootstrap: resample the images (with replacement), keep each image's pair of answers.

    Args:
        correct_a, correct_b: (B,) bool, whether each image was answered right under A and under B.
        samples: bootstrap resamples.
        seed: the resampling's seed (the same seed, the same interval).
    Returns:
        (difference, low, high) in accuracy points (fractions: 0.05 is 5 points), A minus B.
    """
    check_tensor(correct_a, "correct_a", "(B,)", ndim=1)
    check_tensor(correct_b, "correct_b", "(B,)", ndim=1)
    if correct_a.shape != correct_b.shape or len(correct_a) == 0:
        raise ValueError(
            f"expected two answers per image, on the same images, got {tuple(correct_a.shape)} and "
            f"{tuple(correct_b.shape)}"
        )
    samples = check_whole(samples, "samples", minimum=100)
    seed = check_whole(seed, "seed", minimum=0)
    gap = correct_a.float() - correct_b.float()  # (B,) each image's -1, 0 or +1
    generator = torch.Generator().manual_seed(seed)
    resampled = torch.randint(len(gap), (samples, len(gap)), generator=generator)  # (samples, B)
    means = gap[resampled].mean(dim=1)  # (samples,)
    low, high = torch.quantile(means, torch.tensor([0.025, 0.975])).tolist()
    return gap.mean().item(), low, high


def local_attention(grid_size: int, radius: int = 1, num_prefix_tokens: int = 1) -> torch.Tensor:
    """The weights of a made-up local head: each patch attends evenly to the patches at most
    `radius` rows and columns away (itself included: a 3 x 3 neighbourhood for radius 1, fewer at
    the edges), nothing to the class token; the class token attends to itself. Measure it with
    mean_attention_distance(weights[None, None, None], grid_size, patch_size) to see what a local
    head reads.

    Returns:
        (T, T), T = num_prefix_tokens + grid_size ** 2, each row summing to 1.
    """
    side = check_whole(grid_size, "grid_size")
    radius = check_whole(radius, "radius", minimum=0)
    prefix = check_whole(num_prefix_tokens, "num_prefix_tokens", minimum=0)
    cells = grid_coordinates(side, side)  # (N, 2)
    steps = (cells[:, None] - cells[None]).abs().amax(dim=-1)  # (N, N) rows or columns apart, the larger
    near = (steps <= radius).float()  # (N, N)
    T = prefix + side * side
    weights = torch.zeros(T, T)
    weights[:prefix, :prefix] = torch.eye(prefix)  # prefix tokens attend to themselves
    weights[prefix:, prefix:] = near / near.sum(dim=-1, keepdim=True)  # (N, N), rows sum to 1
    return weights


def row_column_similarity(similarity: torch.Tensor, grid_size: int | tuple[int, int]) -> tuple[float, float]:
    """Does a position table encode the row, the column, or both? The mean similarity of pairs of
    positions in the same row (different columns) and of pairs in the same column (different rows).
    On a square grid the two sets of pairs are equally far apart, so a gap between them is a
    preference for one direction: a table that codes only the row has "same row" high and "same
    column" at or below zero.

    Args:
        similarity: (N, N) cosine similarities of N = rows * cols positions (row-major), e.g.
            pos_embed_similarity(table).
        grid_size: patches per side (or (rows, cols)); at least 2 of each.
    Returns:
        (same row, same column), rounded to 3 decimals, for printing.
    """
    rows, cols = to_2tuple(grid_size, "grid_size")
    check_tensor(similarity, "similarity", "(N, N)", ndim=2)
    if min(rows, cols) < 2:
        raise ValueError(f"a {rows} x {cols} grid has no pairs in the same row and the same column; it needs 2 x 2")
    if similarity.shape != (rows * cols, rows * cols):
        raise ValueError(
            f"expected ({rows * cols}, {rows * cols}) similarities for a {rows} x {cols} grid, "
            f"got {tuple(similarity.shape)}"
        )
    cells = grid_coordinates(rows, cols)  # (N, 2)
    same_row = (cells[:, None, 0] == cells[None, :, 0]) & (cells[:, None, 1] != cells[None, :, 1])  # (N, N)
    same_col = (cells[:, None, 1] == cells[None, :, 1]) & (cells[:, None, 0] != cells[None, :, 0])  # (N, N)
    return round(similarity[same_row].mean().item(), 3), round(similarity[same_col].mean().item(), 3)
