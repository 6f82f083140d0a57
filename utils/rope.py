"""Axial 2-D rotary position embeddings (RoPE) for a ViT's queries and keys: no position table, the
position is a rotation of q and k, so that a query-key score depends on the two patches' offset only.

The layout is timm's `RotaryEmbeddingCat` (timm/layers/pos_embed_sincos.py, used by its EVA models and
RoPE-ViT's "axial" variant, Heo et al. 2024, "Rotary Position Embedding for Vision Transformer") with
`in_pixels=False`: a head of width d is cut into d/4 frequencies w_i = 1/temperature^(i / (d/4)),
i = 0 .. d/4 - 1; the first d/2 channels are turned by the patch's row times w, the last d/2 by its
column times w, and each turn acts on a pair of neighbouring channels (2j, 2j + 1) (timm's `rot`,
GPT-NeoX's "interleaved" layout). The prefix tokens (class, registers) are not turned (timm's EVA).
"""

import torch

from utils.validation import check_positive, check_tensor, check_whole

ROPE_TEMPERATURE = 10000.0  # timm's RotaryEmbeddingCat default (temperature=10000)


def rope_angles(grid_size: tuple[int, int], head_dim: int, temperature: float = ROPE_TEMPERATURE) -> torch.Tensor:
    """The rotation angle of every channel pair of every patch of a rows x cols grid.

    Args:
        grid_size: (rows, cols) of patches, row-major as patchify orders them.
        head_dim: d, the width of one head; divisible by 4 (two axes, pairs of channels).
        temperature: the base of the frequencies, > 0.
    Returns:
        (rows * cols, d / 2) float32: [row * w_0, .., row * w_{d/4-1}, col * w_0, .., col * w_{d/4-1}].
    """
    rows, cols = (check_whole(side, "grid_size") for side in grid_size)
    d = check_whole(head_dim, "head_dim")
    if d % 4:
        raise ValueError(
            f"axial 2-D RoPE needs a head width divisible by 4 (half the pairs per axis), got head_dim={d}"
        )
    temperature = check_positive(temperature, "temperature")
    bands = 1.0 / temperature ** (torch.arange(d // 4, dtype=torch.float32) / (d // 4))  # (d/4,)
    row, col = torch.meshgrid(
        torch.arange(rows, dtype=torch.float32), torch.arange(cols, dtype=torch.float32), indexing="ij"
    )  # each (rows, cols)
    angles = torch.cat([row.reshape(-1, 1) * bands, col.reshape(-1, 1) * bands], dim=1)  # (N, d/2)
    return angles


def rope_sin_cos(angles: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, d/2) angles -> sin and cos, each (N, d), every angle repeated for its pair of channels."""
    check_tensor(angles, "angles", "(N, d/2)", ndim=2)
    doubled = angles.repeat_interleave(2, dim=-1)  # (N, d): a0, a0, a1, a1, ...
    return doubled.sin(), doubled.cos()


def rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (..., d): each pair (x_2j, x_2j+1) becomes (-x_2j+1, x_2j) (timm's `rot`)."""
    return torch.stack([-x[..., 1::2], x[..., ::2]], dim=-1).reshape(x.shape)


def apply_rope(x: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor, num_prefix_tokens: int = 0) -> torch.Tensor:
    """Turn every patch token's channel pairs by its angles; the first num_prefix_tokens tokens stay.

    Args:
        x: (B, heads, T, d) queries or keys, T = num_prefix_tokens + N.
        sin, cos: (N, d) from rope_sin_cos, or (B, 1, N, d) for per-image positions (packing).
    Returns:
        (B, heads, T, d): pair (a, b) of a patch becomes (a cos - b sin, b cos + a sin).
    """
    prefix, patches = x[..., :num_prefix_tokens, :], x[..., num_prefix_tokens:, :]  # (B, h, prefix, d), (B, h, N, d)
    if patches.shape[-2] != sin.shape[-2] or patches.shape[-1] != sin.shape[-1]:
        raise ValueError(
            f"RoPE angles for {sin.shape[-2]} patches of width {sin.shape[-1]} do not fit "
            f"{patches.shape[-2]} patch tokens of width {patches.shape[-1]} (after {num_prefix_tokens} prefix tokens)"
        )
    turned = patches * cos + rotate_pairs(patches) * sin  # (B, heads, N, d)
    return torch.cat([prefix, turned], dim=-2) if num_prefix_tokens else turned
