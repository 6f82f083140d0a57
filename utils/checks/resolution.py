"""Lesson 12's exercise checkers: the block-diagonal mask of a packed sequence, RoPE's angles for a
patch of another grid with its positions scaled into the training range, and FlexiViT's resize of a
patch kernel that keeps every token."""

from collections.abc import Callable

import torch
import torch.nn.functional as F

from utils.checks.core import CheckFailed, call_learner, compare, summarize
from utils.patches import patch_resize_matrix, resize_patch_embed
from utils.rope import ROPE_TEMPERATURE

# ---- the block-diagonal mask of a packed sequence ------------------------------------------

MASK_CASES = [[3, 5, 2], [4], [1, 1, 6], [2, 7, 3, 1]]


def _reference_mask(lengths: list[int]) -> torch.Tensor:
    T = sum(lengths)
    mask = torch.zeros(T, T, dtype=torch.bool)
    start = 0
    for length in lengths:
        mask[start : start + length, start : start + length] = True
        start += length
    return mask


def _mask_variants(lengths: list[int]) -> dict[str, torch.Tensor]:
    T = sum(lengths)
    right = _reference_mask(lengths)
    from_zero = torch.zeros(T, T, dtype=torch.bool)
    for length in lengths:
        from_zero[:length, :length] = True
    return {
        "every token may attend to every token: between two images the mask must be False, so that "
        "each image's tokens see only each other": torch.ones(T, T, dtype=torch.bool),
        "True and False are swapped: True means 'may attend', which holds inside an image, "
        "False between images": ~right,
        "the attention inside an image is causal (lower-triangular): an image's tokens see every "
        "token of the same image, before and after them": right & torch.ones(T, T, dtype=torch.bool).tril(),
        "each token sees only itself: it must see every token of its own image": torch.eye(T, dtype=torch.bool),
        "every block starts at token 0: image i starts where image i - 1 ends (add up the lengths "
        "before it)": from_zero,
    }


def check_block_mask(fn: Callable[[list[int]], torch.Tensor]) -> None:
    """Check a learner's block_mask(lengths) -> (T, T) bool, T = sum(lengths), True where query
    token i may attend to key token j: both in the same image of the packed sequence."""
    verdicts = []
    for lengths in MASK_CASES:
        where = f"for lengths {lengths}"
        got = call_learner(fn, list(lengths), where=where)
        if (
            isinstance(got, torch.Tensor)
            and got.dtype != torch.bool
            and got.shape == (sum(lengths),) * 2
            and bool(((got == 0) | (got == 1)).all())
        ):
            got = got == 1  # 0 / 1 numbers are the same mask
        verdicts.append(
            compare(
                got,
                _reference_mask(lengths),
                where,
                mistakes=_mask_variants(lengths),
                shape_hints={(len(lengths), len(lengths)): "one entry per token pair, not per image pair: (T, T)"},
            )
        )
    print(f"✓ block_mask matches pack's mask for {len(verdicts)} lists of lengths: {summarize(verdicts)}")


# ---- RoPE's angles at another grid, positions scaled into the training range ----------------

ANGLE_CASES = [  # (row, col, head_dim, train grid, new grid): non-square grids, so the axes differ
    (5, 2, 16, (4, 2), (6, 4)),
    (3, 7, 8, (2, 4), (4, 8)),
    (0, 5, 32, (4, 4), (6, 6)),
    (7, 1, 16, (3, 2), (8, 3)),
]


def _angles(row: float, col: float, head_dim: int, bands_over: int | None = None) -> torch.Tensor:
    quarter = head_dim // 4
    over = bands_over or quarter
    bands = 1.0 / ROPE_TEMPERATURE ** (torch.arange(quarter, dtype=torch.float32) / over)  # (d/4,)
    return torch.cat([row * bands, col * bands])  # (d/2,)


def _angle_variants(row, col, head_dim, old, new) -> dict[str, torch.Tensor]:
    r, c = old[0] / new[0], old[1] / new[1]
    return {
        "the positions are not scaled: at the new grid, row and column are multiplied by training grid / "
        "new grid, so that they stay inside the range the model was trained on": _angles(row, col, head_dim),
        "the scale is upside down: new grid / training grid stretches the positions further out; "
        "use training grid / new grid": _angles(row / r, col / c, head_dim),
        "both axes use the rows' scale: the columns' scale is training columns / new columns": _angles(
            row * r, col * r, head_dim
        ),
        "rows and columns are swapped: the first head_dim / 4 angles turn by the row, the last by the column": _angles(
            col * c, row * r, head_dim
        ),
        "the frequencies are spread over head_dim / 2 bands: each axis has head_dim / 4 of them, "
        "w_i = 1 / 10000 ** (i / (head_dim / 4))": _angles(row * r, col * c, head_dim, head_dim // 2),
    }


def check_scaled_angles(fn: Callable[..., torch.Tensor]) -> None:
    """Check a learner's scaled_angles(row, col, head_dim, train_grid, new_grid) -> (head_dim / 2,):
    utils.rope's angles of patch (row, col) of new_grid, its row and column first multiplied by
    train_grid / new_grid, axis by axis."""
    verdicts = []
    for row, col, head_dim, old, new in ANGLE_CASES:
        where = (
            f"for patch ({row}, {col}) of a {new[0]} x {new[1]} grid, trained at {old[0]} x {old[1]}, d = {head_dim}"
        )
        got = call_learner(fn, row, col, head_dim, old, new, where=where)
        expected = _angles(row * old[0] / new[0], col * old[1] / new[1], head_dim)
        verdicts.append(
            compare(
                got,
                expected,
                where,
                atol=1e-5,
                mistakes=_angle_variants(row, col, head_dim, old, new),
                shape_hints={
                    (head_dim,): "one angle per pair of channels: head_dim / 2 of them (rope_sin_cos doubles them)"
                },
            )
        )
    print(
        f"✓ scaled_angles matches utils.rope's angles at scaled positions on {len(verdicts)} patches: "
        f"{summarize(verdicts)}"
    )


# ---- FlexiViT's kernel resize -----------------------------------------------------------------

KERNEL_CASES = [(4, 1, 2, 4), (3, 3, 4, 6), (2, 1, 3, 5), (5, 2, 4, 8)]  # (D, C, P, Q), Q >= P


def _kernel_variants(weight: torch.Tensor, Q: int) -> dict[str, torch.Tensor]:
    D, C, P, _ = weight.shape
    w = weight.to(torch.float64).reshape(D * C, P * P)
    interpolated = F.interpolate(weight.to(torch.float64), size=(Q, Q), mode="bilinear", align_corners=False)
    nearest = torch.linalg.pinv(patch_resize_matrix(P, Q, "nearest").T)
    return {
        "the kernel is resized like an image: that changes every token, <resize(x), resize(w)> is not "
        "<x, w>; solve for the kernel that keeps the tokens (the pseudo-inverse of R^T)": interpolated,
        "the kernel is resized like an image and scaled by the area (P / Q)^2: that keeps a flat patch's "
        "token, not the others; use the pseudo-inverse of R^T": interpolated * (P / Q) ** 2,
        "R is the nearest-neighbour resize; the images are resized bilinearly (align_corners=False), so "
        "R must be that resize": (w @ nearest.T).reshape(D, C, Q, Q),
    }


def check_resize_kernel(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Check a learner's resize_kernel(weight, new_patch_size) -> (D, C, Q, Q): FlexiViT's kernel, for
    which a patch resized bilinearly from P to Q pixels gets the token the old kernel gave it."""
    generator = torch.Generator().manual_seed(12)
    verdicts, worst = [], 0.0
    for D, C, P, Q in KERNEL_CASES:
        weight = torch.randn(D, C, P, P, generator=generator)
        where = f"for a ({D}, {C}, {P}, {P}) kernel resized to {Q} px"
        got = call_learner(fn, weight.clone(), Q, where=where)
        expected = resize_patch_embed(weight, Q)  # (D, C, Q, Q)
        verdicts.append(
            compare(
                got,
                expected,
                where,
                atol=1e-4,
                mistakes=_kernel_variants(weight, Q),
                mistake_atol=1e-4,
                shape_hints={(D, C, P, P): "the kernel still has the old patch size P; return (D, C, Q, Q)"},
            )
        )
        patches = torch.rand(6, C, P, P, generator=generator)
        resized = F.interpolate(patches, size=(Q, Q), mode="bilinear", align_corners=False)
        old_tokens = patches.flatten(1) @ weight.flatten(1).T  # (6, D)
        new_tokens = resized.flatten(1) @ got.detach().to(torch.float32).flatten(1).T  # (6, D)
        difference = (old_tokens - new_tokens).abs().max().item()
        if difference > 1e-3:
            raise CheckFailed(f"the tokens change by up to {difference:.2g} {where}")
        worst = max(worst, difference)
    print(
        f"✓ resize_kernel keeps every token (largest change {worst:.0e}) on {len(verdicts)} kernels: "
        f"{summarize(verdicts)}"
    )
