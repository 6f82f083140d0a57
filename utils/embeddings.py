"""Lesson 2: the class token and the position embeddings (learned, fixed 2-D sin-cos, or none);
lesson 9: a learned table started from 2-D Gaussian bumps."""

import math
import operator

import torch
import torch.nn.functional as F
from torch import nn

from utils.patches import to_2tuple
from utils.validation import WrongTypeError, check_flag, check_positive, check_tensor, check_whole, describe

POS_EMBED_KINDS = ("learned", "sincos", "none", "rope2d")  # rope2d: no table, q and k turned (utils.rope)


def _check_generator(generator) -> torch.Generator | None:
    """`generator` if it is None (torch's global RNG) or a CPU torch.Generator; an error otherwise."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise WrongTypeError(
            f"generator must be a torch.Generator (e.g. torch.Generator().manual_seed(0)) or None for torch's "
            f"global random numbers, got {describe(generator)}"
        )
    if generator is not None and generator.device.type != "cpu":
        raise ValueError(f"expected a CPU torch.Generator, got one on {generator.device}")
    return generator


def trunc_normal_(tensor: torch.Tensor, std: float = 0.02, generator: torch.Generator | None = None) -> torch.Tensor:
    """Fill in place from a normal(0, std) cut off at two standard deviations, +-2 std. timm and DeiT
    draw their ViTs' tables with std 0.02 too, but cut at +-2 in absolute terms, which at std 0.02
    never bites (MAE's code says so); the paper's JAX code draws its kernels from Xavier-uniform. The
    numbers come from `generator`, or from torch's global random numbers when it is None."""
    check_tensor(tensor, "tensor", "(...)")
    if not tensor.is_floating_point():
        raise ValueError(f"expected a floating-point tensor to fill, got {tensor.dtype}")
    std = check_positive(std, "std")
    generator = _check_generator(generator)
    return nn.init.trunc_normal_(tensor, mean=0.0, std=std, a=-2 * std, b=2 * std, generator=generator)


def prepend_cls_token(tokens: torch.Tensor, cls_token: torch.Tensor) -> torch.Tensor:
    """Put the one learned class token in front of every sequence of the batch.

    Args:
        tokens: (B, N, D) patch tokens.
        cls_token: (1, 1, D), shared by all images.
    Returns:
        (B, N + 1, D), the class token at index 0.
    """
    check_tensor(tokens, "tokens", "(B, N, D)", ndim=3)
    check_tensor(cls_token, "cls_token", "(1, 1, D)")
    if cls_token.shape != (1, 1, tokens.shape[-1]):
        raise ValueError(f"expected a class token shaped (1, 1, D={tokens.shape[-1]}), got {tuple(cls_token.shape)}")
    B = tokens.shape[0]
    return torch.cat([cls_token.expand(B, -1, -1), tokens], dim=1)  # (B, N + 1, D)


def grid_coordinates(rows: int, cols: int) -> torch.Tensor:
    """The (row, col) of every patch of a rows x cols grid, in row-major order (patchify's order).

    Returns:
        (rows * cols, 2) int64: entry i is (i // cols, i % cols).
    """
    try:
        whole = operator.index(rows), operator.index(cols)  # Python, NumPy or torch integers
    except TypeError:
        whole = (0, 0)
    if isinstance(rows, bool) or isinstance(cols, bool):  # True is an int to Python, but no grid size
        whole = (0, 0)
    if min(whole) < 1:
        raise ValueError(f"expected a grid of positive whole numbers of rows and columns, got {rows!r} x {cols!r}")
    rows, cols = whole
    row, col = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")  # each (rows, cols)
    return torch.stack([row, col], dim=-1).reshape(rows * cols, 2)  # (N, 2)


def sincos_1d(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """Fixed sin-cos code of 1-D positions: the frequencies of "Attention Is All You Need", in the
    channel order of MAE's get_1d_sincos_pos_embed_from_grid (all the sines, then all the cosines).

    The Transformer paper interleaves them instead, PE(p, 2i) = sin(p w_i), PE(p, 2i + 1) = cos(p w_i):
    the same numbers, in another fixed order of the channels (column i here is column 2i there,
    column dim/2 + i is column 2i + 1).

    Args:
        positions: (M,) finite positions, integers or not.
        dim: even width >= 2; the first half holds sines, the second half cosines.
    Returns:
        (M, dim): [sin(p w_0), ..., sin(p w_{dim/2-1}), cos(p w_0), ..., cos(p w_{dim/2-1})], with
        w_i = 1/10000^(i/(dim/2)) falling geometrically from 1 towards 1/10000.
    """
    check_tensor(positions, "positions", "(M,)", ndim=1)
    if positions.is_complex() or (not positions.is_meta and not positions.isfinite().all()):
        raise ValueError("expected finite real positions, got NaN, infinite or complex values")
    if check_whole(dim, "dim") % 2:
        raise ValueError(f"a sin-cos code needs an even width, got {dim}")
    omega = 1.0 / 10000 ** (torch.arange(dim // 2, dtype=torch.float64) / (dim // 2))  # (dim/2,)
    angles = positions.to(torch.float64)[:, None] * omega[None, :]  # (M, dim/2)
    return torch.cat([angles.sin(), angles.cos()], dim=1).float()  # (M, dim)


def sincos_pos_embed_2d(grid_size: int | tuple[int, int], embed_dim: int, cls_token: bool = True) -> torch.Tensor:
    """Fixed 2-D sin-cos position table: half the width codes the column, half the row.

    MAE's layout (get_2d_sincos_pos_embed in its util/pos_embed.py, whose meshgrid(grid_w, grid_h)
    puts the column first), so MAE's fixed tables load as they are: [sin(col w), cos(col w),
    sin(row w), cos(row w)] with w_i = 1/10000^(i/(D/4)), i = 0 .. D/4 - 1. big_vision's
    posemb_sincos_2d ("Better plain ViT baselines", Beyer et al. 2022) has the same channel order but
    w_i = 1/10000^(i/(D/4 - 1)), and no class-token row. timm's build_sincos2d_pos_embed holds the
    same numbers as this table in another channel order, [sin(row w), sin(col w), cos(row w),
    cos(col w)]: reorder the four quarters to load one of its tables.

    Args:
        grid_size: patches per side (or (rows, cols)).
        embed_dim: D; must be divisible by 4 (sin and cos for each of the two axes).
        cls_token: prepend an all-zero entry for the class token.
    Returns:
        (1, T, D), T = rows * cols (+ 1 with a class token), in row-major patch order.
    """
    if check_whole(embed_dim, "embed_dim") % 4:
        raise ValueError(f"2-D sin-cos embeddings need embed_dim divisible by 4, got {embed_dim}")
    rows, cols = to_2tuple(grid_size, "grid_size")
    check_flag(cls_token, "cls_token")
    row_of, col_of = grid_coordinates(rows, cols).unbind(dim=1)  # each (N,): 0,0,..,1,1,.. and 0,1,..,0,1,..
    table = torch.cat([sincos_1d(col_of, embed_dim // 2), sincos_1d(row_of, embed_dim // 2)], dim=1)  # (N, D)
    if cls_token:
        table = torch.cat([torch.zeros(1, embed_dim), table], dim=0)  # (N + 1, D)
    return table.unsqueeze(0)  # (1, T, D)


def gaussian_pos_embed(
    grid_size: int | tuple[int, int],
    embed_dim: int,
    sigma: float = 1.0,
    std: float = 0.02,
    num_prefix_tokens: int = 1,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """A position table whose patch entries start out 2-D: patch i's entry is a Gaussian bump
    centred on patch i, carried into D dimensions by a random projection.

    bump_i[j] = exp(-d(i, j)^2 / (2 sigma^2)) over the N = rows * cols grid positions, d the
    distance in patches. With D >= N the projection is the transpose of Q from the QR of a
    Gaussian (D, N) matrix: orthonormal rows, so the cosine similarity of any two entries equals
    that of their bumps exactly. With D < N no N directions fit in D dimensions: a Gaussian (N, D)
    matrix / sqrt(D) keeps the similarities only approximately (closer for larger D). The patch
    entries are then scaled so that their N * D numbers have standard deviation `std` (Tensor.std
    over all of them: the course's trunc-normal(0.02) magnitude). The prefix entries (the class token's) are
    trunc_normal_(std) draws, from the same generator, after the projection.

    Args:
        grid_size: patches per side (or (rows, cols)).
        embed_dim: D, >= 1.
        sigma: the bumps' width in patches, > 0.
        std: the standard deviation of the patch entries' numbers, > 0.
        num_prefix_tokens: leading entries that belong to no patch (1 for a class token, 0 for none).
        generator: a CPU torch.Generator for the random numbers; None: torch's global ones.
    Returns:
        (1, prefix + N, D) float32, patches in row-major order.
    """
    rows, cols = to_2tuple(grid_size, "grid_size")
    D = check_whole(embed_dim, "embed_dim")
    sigma = check_positive(sigma, "sigma", meaning=" (the bumps' width in patches)")
    std = check_positive(std, "std")
    prefix = check_whole(num_prefix_tokens, "num_prefix_tokens", minimum=0)
    generator = _check_generator(generator)
    N = rows * cols
    if N * D < 2:
        raise ValueError(
            "a 1 x 1 grid with embed_dim=1 has a single number, and a single number has no standard deviation "
            "to scale to std: use embed_dim >= 2"
        )
    bumps = torch.exp(-(grid_distance(rows, cols).double() ** 2) / (2 * sigma**2))  # (N, N), row i: bump at patch i
    if D >= N:
        q, _ = torch.linalg.qr(torch.randn(D, N, generator=generator, dtype=torch.float64))  # (D, N), q.T @ q = I
        projection = q.T  # (N, D), orthonormal rows: dot products kept exactly
    else:
        projection = torch.randn(N, D, generator=generator, dtype=torch.float64) / math.sqrt(D)  # (N, D)
    table = bumps @ projection  # (N, D)
    table = (table * (std / table.std())).float()  # (N, D), its numbers of standard deviation std
    first = trunc_normal_(torch.empty(prefix, D), std=std, generator=generator)  # (prefix, D)
    return torch.cat([first, table], dim=0).unsqueeze(0)  # (1, prefix + N, D)


def xy_pos_embed(x_embed: torch.Tensor, y_embed: torch.Tensor) -> torch.Tensor:
    """The learned 2-D position table of the ViT paper's Appendix D.4: one vector per column (the
    X-embedding) and one per row (the Y-embedding), each D/2 wide, concatenated for every patch.

    Args:
        x_embed: (cols, D/2), one vector per column of patches.
        y_embed: (rows, D/2), one vector per row of patches.
    Returns:
        (rows * cols, D) in row-major patch order (patchify's): entry r * cols + c is
        [x_embed[c]; y_embed[r]]. Gradients reach both tables.
    """
    check_tensor(x_embed, "x_embed", "(cols, D/2)", ndim=2, nonempty=True)
    check_tensor(y_embed, "y_embed", "(rows, D/2)", ndim=2, nonempty=True)
    if x_embed.shape[1] != y_embed.shape[1]:
        raise ValueError(
            f"expected x_embed and y_embed of the same width D/2, got {tuple(x_embed.shape)} and {tuple(y_embed.shape)}"
        )
    rows, cols = y_embed.shape[0], x_embed.shape[0]
    row_of, col_of = grid_coordinates(rows, cols).to(x_embed.device).unbind(dim=1)  # each (N,)
    return torch.cat([x_embed[col_of], y_embed[row_of]], dim=1)  # (N, D/2) + (N, D/2) -> (N, D)


def position_table(pos_embed: torch.Tensor, num_prefix_tokens: int = 1) -> torch.Tensor:
    """The (N, D) patch entries of a (1, prefix + N, D) or (prefix + N, D) position table; an error
    for another shape, a non-float table, or no patch entry left after the prefix."""
    check_tensor(pos_embed, "pos_embed", "(1, prefix + N, D) or (prefix + N, D)")
    prefix = check_whole(num_prefix_tokens, "num_prefix_tokens", minimum=0)
    if not (pos_embed.ndim == 2 or (pos_embed.ndim == 3 and pos_embed.shape[0] == 1)) or pos_embed.shape[-1] == 0:
        raise ValueError(
            f"expected a position table shaped (1, prefix + N, D) or (prefix + N, D), got {tuple(pos_embed.shape)}"
        )
    if pos_embed.shape[-2] <= prefix:
        raise ValueError(
            f"a position table of {pos_embed.shape[-2]} entries has no patch entry after "
            f"num_prefix_tokens={prefix}; expected prefix + N entries with N >= 1"
        )
    if not pos_embed.is_floating_point():
        raise ValueError(f"expected a floating-point position table, got {pos_embed.dtype}")
    return pos_embed.reshape(-1, pos_embed.shape[-1])[prefix:]  # (N, D)


def pos_embed_similarity(pos_embed: torch.Tensor, num_prefix_tokens: int = 1) -> torch.Tensor:
    """Cosine similarity of every patch position's embedding with every other one's.

    Lay row i out on the patch grid to see what position i is "close to" (ViT paper, Fig. 7).

    Args:
        pos_embed: (1, prefix + N, D) or (prefix + N, D) position table.
        num_prefix_tokens: leading entries that are not patch positions (the class token).
    Returns:
        (N, N), entry [i, j] = cos(pos_i, pos_j), 1 on the diagonal (0 for an all-zero entry).
    """
    table = position_table(pos_embed, num_prefix_tokens)  # (N, D)
    unit = F.normalize(table.float(), dim=-1)  # (N, D), each row of length 1
    return unit @ unit.T  # (N, N)


def grid_distance(rows: int, cols: int) -> torch.Tensor:
    """(N, N) Euclidean distance, in patches, between every two positions of a row-major grid."""
    row, col = grid_coordinates(rows, cols).float().unbind(dim=1)  # each (N,)
    return ((row[:, None] - row[None]) ** 2 + (col[:, None] - col[None]) ** 2).sqrt()  # (N, N)


def neighbour_similarity(similarity: torch.Tensor, grid_size: int | tuple[int, int]) -> tuple[float, float]:
    """Mean similarity of grid neighbours and of far positions: one number for "has 2-D structure".

    Args:
        similarity: (N, N) cosine similarities of N = rows * cols positions (row-major).
        grid_size: patches per side (or (rows, cols)).
    Returns:
        (near, far): the mean over pairs 1 patch apart (up, down, left, right), and over pairs at
        least half the longer grid side apart; rounded to 3 decimals, for printing. A grid needs
        at least two positions (a 1 x 1 grid has no pairs to average).
    """
    rows, cols = to_2tuple(grid_size, "grid_size")
    check_tensor(similarity, "similarity", "(N, N)")
    if rows * cols < 2:
        raise ValueError(f"a {rows} x {cols} grid has no pairs of positions to compare; it needs at least 2 positions")
    if similarity.shape != (rows * cols, rows * cols):
        raise ValueError(
            f"expected an (N, N) similarity matrix with N = {rows} x {cols} = {rows * cols}, "
            f"got {tuple(similarity.shape)}"
        )
    distance = grid_distance(rows, cols)
    similarity = similarity.detach().cpu().float()
    near = similarity[distance == 1].mean().item()
    far = similarity[distance >= max(rows, cols) / 2].mean().item()
    return round(near, 3) + 0.0, round(far, 3) + 0.0  # + 0.0 turns -0.0 into 0.0


def resize_pos_embed(
    pos_embed: torch.Tensor,
    old_grid: int | tuple[int, int],
    new_grid: int | tuple[int, int],
    num_prefix_tokens: int = 1,
) -> torch.Tensor:
    """Resize a position table to a new patch grid, as ViTs do when fine-tuned at a new resolution.

    The patch entries are laid out on their grid and resampled bicubically; the class-token
    entry (the first `num_prefix_tokens`) belongs to no position and is kept as it is.

    Args:
        pos_embed: (1, prefix + old_rows * old_cols, D).
        old_grid, new_grid: patches per side (or (rows, cols)) before and after.
    Returns:
        (1, prefix + new_rows * new_cols, D), in the table's dtype.
    """
    old_rows, old_cols = to_2tuple(old_grid, "old_grid")
    new_rows, new_cols = to_2tuple(new_grid, "new_grid")
    num_prefix_tokens = check_whole(num_prefix_tokens, "num_prefix_tokens", minimum=0)
    expected = num_prefix_tokens + old_rows * old_cols
    check_tensor(pos_embed, "pos_embed", f"(1, {expected}, D)")
    if pos_embed.ndim != 3 or pos_embed.shape[0] != 1 or pos_embed.shape[1] != expected:
        raise ValueError(
            f"expected a position table shaped (1, {expected}, D) for a {old_rows}x{old_cols} grid "
            f"with {num_prefix_tokens} prefix token(s), got {tuple(pos_embed.shape)}"
        )
    if not pos_embed.is_floating_point():
        raise ValueError(f"expected a floating-point position table, got {pos_embed.dtype}")
    if (old_rows, old_cols) == (new_rows, new_cols):
        return pos_embed.clone()
    D = pos_embed.shape[-1]
    prefix, grid = pos_embed[:, :num_prefix_tokens], pos_embed[:, num_prefix_tokens:]
    grid = grid.reshape(1, old_rows, old_cols, D).permute(0, 3, 1, 2)  # (1, D, rows, cols)
    grid = F.interpolate(
        grid.float(), size=(new_rows, new_cols), mode="bicubic", align_corners=False, antialias=True
    ).to(pos_embed.dtype)  # (1, D, new_rows, new_cols)
    grid = grid.permute(0, 2, 3, 1).reshape(1, new_rows * new_cols, D)  # (1, N', D)
    return torch.cat([prefix, grid], dim=1)  # (1, prefix + N', D)
