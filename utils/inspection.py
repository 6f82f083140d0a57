"""The maths behind looking inside a trained ViT (lesson 7): attention rollout, where the class
token looks, how far heads look, and the principal components of the patch-embedding filters.

Every function takes tensors (a model's attention weights or parameters), never a model.
"""

import torch

from utils.embeddings import grid_coordinates
from utils.patches import to_2tuple


def attention_rollout(attn: torch.Tensor, residual: bool = True) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020): how much each token's final state draws on each
    input token, following attention through all the layers.

    Each layer's weights are averaged over heads; with `residual`, the identity is added (the
    skip connection carries every token's own state on) and rows are renormalised; the layers'
    matrices are then multiplied, first layer on the right.

    Args:
        attn: (depth, B, heads, T, T) weights, as returned by `model(images, return_attention=True)`.
    Returns:
        (B, T, T), each row summing to 1.
    """
    if attn.ndim != 5 or attn.shape[-1] != attn.shape[-2]:
        raise ValueError(f"expected attention weights (depth, B, heads, T, T), got {tuple(attn.shape)}")
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
    Returns:
        (..., rows, cols): the class token's weight on each patch (the weight on itself left out).
    """
    rows, cols = to_2tuple(grid_size)
    if weights.shape[-1] != num_prefix_tokens + rows * cols:
        raise ValueError(
            f"expected {num_prefix_tokens} + {rows} x {cols} = {num_prefix_tokens + rows * cols} tokens, "
            f"got weights of shape {tuple(weights.shape)}"
        )
    row = weights[..., 0, num_prefix_tokens:]  # (..., N)
    return row.reshape(*row.shape[:-1], rows, cols)  # (..., rows, cols)


def patch_coverage(masks: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Which patches a pixel mask touches.

    Args:
        masks: (B, H, W) bool, e.g. the objects of `make_relational`.
    Returns:
        (B, H/P, W/P) bool, True for every patch holding at least one True pixel.
    """
    B, H, W = masks.shape
    P = patch_size
    return masks.reshape(B, H // P, P, W // P, P).any(dim=4).any(dim=2)  # (B, rows, cols)


def attention_share(maps: torch.Tensor, regions: torch.Tensor) -> torch.Tensor:
    """The fraction of each attention map that falls inside a region of the patch grid.

    Args:
        maps: (B, rows, cols) non-negative attention over patches.
        regions: (B, rows, cols) bool.
    Returns:
        (B,) in [0, 1]; compare with regions.float().mean((1, 2)), the share of uniform attention.
    """
    return (maps * regions).sum(dim=(1, 2)) / maps.sum(dim=(1, 2))


def mean_attention_distance(
    attn: torch.Tensor, grid_size: int | tuple[int, int], patch_size: int, num_prefix_tokens: int = 1
) -> torch.Tensor:
    """How far each head looks, in pixels (ViT paper, Fig. 7 right): for every patch query, the
    distance to each patch key weighted by the attention (the class token left out, the
    weights renormalised over the patches), averaged over queries and images.

    Args:
        attn: (depth, B, heads, T, T) weights.
    Returns:
        (depth, heads) mean distances in pixels.
    """
    rows, cols = to_2tuple(grid_size)
    positions = grid_coordinates(rows, cols).to(attn.dtype) * patch_size  # (N, 2) patch corners, pixels
    distance = torch.cdist(positions, positions)  # (N, N)
    patches = attn[..., num_prefix_tokens:, num_prefix_tokens:]  # (depth, B, heads, N, N), a view
    # weighted distances summed over the keys, then renormalised: no (depth, B, heads, N, N) copy
    weighted = torch.einsum("...qk,qk->...q", patches, distance.to(attn.device))  # (depth, B, heads, N)
    per_query = weighted / patches.sum(dim=-1)  # (depth, B, heads, N)
    return per_query.mean(dim=(1, 3))  # (depth, heads)


def patch_embedding_components(weight: torch.Tensor, count: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """Principal components of the patch-embedding filters (ViT paper, Fig. 7 left).

    Args:
        weight: (D, C, P, P), the `patch_embed.proj` weight: one filter per token feature.
    Returns:
        components (count, C, P, P), unit length, the directions of largest variance among the
        D filters, and the share of the variance each explains (count,).
    """
    D, C, P, _ = weight.shape
    filters = weight.detach().reshape(D, C * P * P).double()  # (D, C*P*P)
    centred = filters - filters.mean(dim=0)
    _, singular, directions = torch.linalg.svd(centred, full_matrices=False)  # directions (k, C*P*P)
    variance = singular**2
    share = variance[:count] / variance.sum()
    return directions[:count].reshape(-1, C, P, P).float(), share.float()
