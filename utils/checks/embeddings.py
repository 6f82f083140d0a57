"""Lesson 2's exercise checkers: resizing a position table to a new patch grid, the jigsaw test of a
whole ViT (blind to the order of the patches without positions), and the learned 2-D table of the
paper's Appendix D.4; also the token sequence z0 (eq. 1 of the ViT paper) and the fixed 2-D sin-cos
position table, which the lesson no longer asks for but instructors may still hand out."""

import itertools
import math
import re
from collections.abc import Callable

import torch
import torch.nn.functional as F

from utils.checks.core import CheckFailed, call_learner, compare, describe, real_number, summarize
from utils.embeddings import (
    grid_coordinates,
    prepend_cls_token,
    resize_pos_embed,
    sincos_pos_embed_2d,
    xy_pos_embed,
)
from utils.patches import patchify, unpatchify
from utils.vit import VisionTransformer, ViTConfig

# ---- the token sequence z0 = [x_class; x_p1 E; ...; x_pN E] + E_pos ----------------------

TOKEN_CASES = [  # (B, N, C*P*P, D): several images first, so a class token not expanded shows
    (2, 4, 12, 8),
    (3, 9, 48, 16),
    (1, 6, 27, 10),
    (4, 16, 12, 20),
]


def _token_inputs(B: int, N: int, CPP: int, D: int, generator: torch.Generator):
    """Random patches (B, N, CPP), E (CPP, D), cls_token (1, 1, D), pos_embed (1, N + 1, D)."""
    patches = torch.rand(B, N, CPP, generator=generator)
    E = torch.randn(CPP, D, generator=generator) / CPP**0.5
    cls_token = torch.randn(1, 1, D, generator=generator)
    pos_embed = torch.randn(1, N + 1, D, generator=generator)
    return patches, E, cls_token, pos_embed


def _token_variants(patches, E, cls_token, pos_embed) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible z0, each keyed by the sentence that explains it."""
    B, N, _ = patches.shape
    tokens = patches @ E  # (B, N, D)
    cls = cls_token.expand(B, -1, -1)  # (B, 1, D)
    return {
        "the class token is appended at the end; it must be prepended, at index 0 "
        "(torch.cat([cls, tokens], dim=1))": torch.cat([tokens, cls], dim=1) + pos_embed,
        "the class token is appended at the end and pos_embed is not added; prepend the class "
        "token, then add pos_embed": torch.cat([tokens, cls], dim=1),
        "pos_embed is not added: eq. 1 adds one position vector to every token, "
        "z0 = [cls; tokens] + pos_embed": torch.cat([cls, tokens], dim=1),
        "the class token got no position entry: pos_embed has N + 1 rows and row 0 belongs to "
        "the class token (add the whole table after prepending it)": torch.cat([cls, tokens + pos_embed[:, 1:]], dim=1),
        "the class token got no position entry and the patches got the wrong rows: pos_embed[:, :N] "
        "shifts every patch by one; row 0 belongs to the class token, add the whole table after "
        "prepending it": torch.cat([cls, tokens + pos_embed[:, :N]], dim=1),
        "the class token is added to every patch token too; it is a token of its own, only prepended: "
        "z0 = [cls; tokens] + pos_embed": torch.cat([cls, tokens + cls_token], dim=1) + pos_embed,
        "every token got pos_embed's first row; each token gets its own row, so add the whole (1, N + 1, D) "
        "table: z0 = [cls; tokens] + pos_embed": torch.cat([cls, tokens], dim=1) + pos_embed[:, :1],
        "the tokens are scaled by sqrt(D); eq. 1 adds no scale: z0 = [cls; patches @ E] + pos_embed": torch.cat(
            [cls, tokens * E.shape[1] ** 0.5], dim=1
        )
        + pos_embed,
    }


def _explain_build_tokens_crash(fn: Callable, patches, E, cls_token, pos_embed) -> Callable[[Exception], str | None]:
    """error -> what the classic crashes of build_tokens mean: the patches not projected, or multiplied
    with E the wrong way, a class token not expanded over the batch, torch.cat along the wrong axis or
    torch.stack, pos_embed added before the class token is in."""
    B, N, CPP = patches.shape
    D = E.shape[1]

    def explain(error: Exception) -> str | None:
        text = str(error)
        cat_sizes = re.search(r"Expected size (\d+) but got size (\d+)", text)
        if cat_sizes and {int(cat_sizes[1]), int(cat_sizes[2])} == {D, CPP} and D != CPP:
            return "the patches are not projected: tokens = patches @ E, (B, N, C*P*P) -> (B, N, D)"
        wrong_cat_axis = re.search(r"Sizes of tensors must match except in dimension (\d+)", text)
        sizes = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", text)
        if "cannot be multiplied" in text or "dimensions of batch2" in text:
            return "E is (C*P*P, D), so the projection is patches @ E, (B, N, C*P*P) @ (C*P*P, D) -> (B, N, D)"
        if wrong_cat_axis and wrong_cat_axis[1] != "1":
            return "join the class token and the patch tokens along the token axis: torch.cat([cls, tokens], dim=1)"
        if wrong_cat_axis and B > 1 and _works_for_one_image(fn, patches, E, cls_token, pos_embed):
            return (
                f"it works for one image but not for {B}: the class token (1, 1, D) is not expanded over the "
                "batch; use cls_token.expand(B, -1, -1) before torch.cat"
            )
        if "stack expects each tensor to be equal size" in text:
            return "torch.stack puts tensors on a new axis; join them along the token axis with torch.cat(..., dim=1)"
        if sizes and {int(sizes[1]), int(sizes[2])} == {N, N + 1}:
            return (
                "pos_embed has N + 1 rows, one per token with the class token first: add it after "
                "prepending the class token"
            )
        return None

    return explain


def _works_for_one_image(fn: Callable, patches, E, cls_token, pos_embed) -> bool:
    """Whether the learner's build_tokens runs on the first image alone."""
    try:
        call_learner(fn, patches[:1].clone(), E.clone(), cls_token.clone(), pos_embed.clone(), returns=object)
    except CheckFailed:
        return False
    return True


def _token_shape_hints(B: int, N: int, D: int) -> dict[tuple[int, ...], str]:
    """Wrong z0 shapes, each with the sentence that explains it."""
    concatenated = "pos_embed is concatenated along the token axis; eq. 1 ADDS it, one position vector to each token"
    hints = {
        (B, N + 1, 2 * D): "pos_embed is concatenated to the tokens; eq. 1 ADDS it "
        "(z0 = [cls; tokens] + pos_embed), so the width stays D",
        (B, 2 * (N + 1), D): concatenated,
        (B, 2 * N + 1, D): concatenated,
        (B, N, D): "the class token is missing; prepend it, so T = N + 1",
        (B, N + 2, D): "one token too many; prepend exactly one class token",
    }
    if B > 1:
        hints[(1, N + 1, D)] = (
            "the batch axis collapsed to 1; expand the class token to (B, 1, D) and keep one sequence per image"
        )
    return hints


def check_token_sequence(fn: Callable[..., torch.Tensor]) -> None:
    """Check a learner's build_tokens(patches, E, cls_token, pos_embed) -> z0 (B, N + 1, D).

    patches (B, N, C*P*P), E (C*P*P, D), cls_token (1, 1, D), pos_embed (1, N + 1, D).
    """
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for B, N, CPP, D in TOKEN_CASES:
        patches, E, cls_token, pos_embed = _token_inputs(B, N, CPP, D, generator)
        expected = prepend_cls_token(patches @ E, cls_token) + pos_embed  # (B, N + 1, D)
        where = f"for patches of shape {(B, N, CPP)} and D = {D}"
        explain = _explain_build_tokens_crash(fn, patches, E, cls_token, pos_embed)
        args = (patches.clone(), E.clone(), cls_token.clone(), pos_embed.clone())
        got = call_learner(fn, *args, where=where, explain=explain)

        def only_token_0_wrong(got: torch.Tensor) -> str | None:
            """Names right patch tokens with a wrong class token."""
            if torch.allclose(got[:, 1:], expected[:, 1:], atol=1e-4):
                return (
                    f"the patch tokens are right but token 0 is not: it must be the class token "
                    f"plus pos_embed[:, 0] ({where})"
                )
            return None

        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_hints=_token_shape_hints(B, N, D),
                atol=1e-5,
                mistakes=_token_variants(patches, E, cls_token, pos_embed),
                mistake_atol=1e-4,
                diagnose=only_token_0_wrong,
            )
        )
    print(
        f"✓ build_tokens matches z0 = [cls; patches @ E] + pos_embed on {len(verdicts)} batches: {summarize(verdicts)}"
    )


# ---- the fixed 2-D sin-cos table ----------------------------------------------------------

SINCOS_CASES = [(3, 5, 16), (2, 7, 32), (4, 4, 8), (14, 14, 64)]  # (rows, cols, D), non-square first

BIG_VISION = "big_vision's variant (posemb_sincos_2d of Beyer et al. 2022, also lucidrains' simple_vit)"
BIG_VISION_FREQUENCIES = (
    f"you divided by D/4 - 1 in the exponent, as {BIG_VISION} does, so that the lowest frequency is exactly "
    "1/10000; this exercise uses MAE's i/(D/4): omega_i = 1/10000^(i/(D/4)) for i = 0 .. D/4 - 1"
)

_FREQUENCIES = {  # q = D/4 frequencies per axis, i = 0 .. q - 1; the first one is right
    "right": lambda i, q: 1.0 / 10000 ** (i / q),
    "you used the full width D in the exponent (1/10000^(2i/D)); each axis has its own D/2 "
    "channels, so omega_i = 1/10000^(i/(D/4))": lambda i, q: 1.0 / 10000 ** (i / (2 * q)),
    "you used 1/10000^(i/D); the exponent runs over the D/4 frequencies of one axis: "
    "omega_i = 1/10000^(i/(D/4))": lambda i, q: 1.0 / 10000 ** (i / (4 * q)),
    BIG_VISION_FREQUENCIES: lambda i, q: 1.0 / 10000 ** (i / max(q - 1, 1)),
    "the frequencies are not inverted (10000^(i/(D/4)) grows); omega_i = 1/10000^(i/(D/4)) "
    "falls from 1 to about 1/10000": lambda i, q: 10000.0 ** (i / q),
    "the frequency index starts at 1; with i = 0 .. D/4 - 1 the first frequency is exactly 1": lambda i, q: (
        1.0 / 10000 ** ((i + 1) / q)
    ),
}


_POSITIONS = {  # how the N patches get their (row, col) positions; the first one is right
    "row-major": None,
    "from 1": "the positions start at 1; the first row and column of patches are position 0 "
    "(torch.arange(rows), torch.arange(cols))",
    "column-major": "the positions run in column-major order (top to bottom first); the table follows the "
    "patches left to right, then top to bottom: col = arange(cols).repeat(rows), "
    "row = arange(rows).repeat_interleave(cols) (meshgrid needs indexing='ij')",
}


def _positions(rows: int, cols: int, positions: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(row, col) of the N patches, each (N,), laid out as `positions` says (a key of _POSITIONS)."""
    row, col = grid_coordinates(rows, cols).double().unbind(dim=1)  # each (N,): 0, 0, .., 1, .. and 0, 1, .., 0, ..
    if positions == "from 1":
        return row + 1, col + 1
    if positions == "column-major":  # top to bottom first
        col_major = torch.arange(rows * cols, dtype=torch.float64)  # (N,)
        return col_major % rows, col_major // rows
    return row, col


def _sincos_variant(
    rows: int, cols: int, D: int, axes_swapped: bool, order: str, frequency, positions: str = "row-major"
) -> torch.Tensor:
    """A 2-D sin-cos table (N, D) built with the given layout choices (no class-token row)."""
    q = D // 4
    omega = frequency(torch.arange(q, dtype=torch.float64), q)  # (q,)
    row, col = _positions(rows, cols, positions)  # each (N,)

    def code(positions):  # (N,) -> (N, D/2)
        angles = positions[:, None] * omega[None]  # (N, q)
        if order == "sin-cos":
            return torch.cat([angles.sin(), angles.cos()], dim=1)
        if order == "cos-sin":
            return torch.cat([angles.cos(), angles.sin()], dim=1)
        return torch.stack([angles.sin(), angles.cos()], dim=2).reshape(len(positions), 2 * q)  # interleaved

    first, second = (row, col) if axes_swapped else (col, row)
    return torch.cat([code(first), code(second)], dim=1).float()  # (N, D)


def _name_sincos_mistake(table: torch.Tensor, rows: int, cols: int, D: int) -> str | None:
    """Recognise a wrong (N, D) table as a combination of known layout mistakes."""
    orders = {
        "sin-cos": None,
        "cos-sin": "sin and cos are swapped: each half is [sin(all frequencies), cos(all frequencies)], sines first",
        "interleaved": "sin and cos are interleaved (sin, cos, sin, cos, ...: the channel order of the original "
        "Transformer's 1-D code); MAE's layout, used here, puts all the sines of a half first, then all its cosines "
        "(the same numbers, in another order)",
    }
    choices = itertools.product(_POSITIONS, _FREQUENCIES.items(), (False, True), orders)
    for positions, (name, frequency), axes_swapped, order in choices:
        variant = _sincos_variant(rows, cols, D, axes_swapped, order, frequency, positions)
        if torch.allclose(table, variant, atol=1e-4):
            reasons = [_POSITIONS[positions]] if _POSITIONS[positions] else []
            if axes_swapped:
                reasons.append(
                    "rows and columns are swapped: the FIRST half of the channels codes the column "
                    "(x), the second half the row (y)"
                )
            if orders[order]:
                reasons.append(orders[order])
            if name != "right":
                reasons.append(f"wrong frequencies: {name}")
            return "; ".join(reasons) if reasons else None
    return None


def _layout_is_right_but_not_the_frequencies(table: torch.Tensor, rows: int, cols: int, D: int) -> bool:
    """True when the channels pair up as sin/cos of one angle, the first half depends on the column
    only and the second on the row only, and the first row and column have angle 0: then only the
    frequencies (or the spacing of the positions) can be wrong."""
    q = D // 4
    grid = table.reshape(rows, cols, D).double()
    one = torch.ones(1, dtype=torch.float64)
    pairs_ok = all(  # sin^2 + cos^2 = 1 for each frequency, in both halves
        torch.allclose(grid[..., s : s + q] ** 2 + grid[..., s + q : s + 2 * q] ** 2, one, atol=1e-3)
        for s in (0, 2 * q)
    )
    column_half_ok = torch.allclose(grid[:, :, : 2 * q], grid[:1, :, : 2 * q].expand(rows, -1, -1), atol=1e-4)
    row_half_ok = torch.allclose(grid[:, :, 2 * q :], grid[:, :1, 2 * q :].expand(-1, cols, -1), atol=1e-4)
    at_zero = torch.cat([torch.zeros(q), torch.ones(q)]).double().repeat(2)  # sin 0 = 0, cos 0 = 1
    starts_at_zero = torch.allclose(grid[0, 0], at_zero, atol=1e-4)
    return pairs_ok and column_half_ok and row_half_ok and starts_at_zero


def _temperature(table: torch.Tensor, cols: int, D: int) -> float | None:
    """The T of omega_i = 1/T^(i/(D/4)) that a table of the right layout was built with, or None when its
    frequencies follow no such rule (the angles are read off the patch in row 0, column 1)."""
    q = D // 4
    if cols < 2 or q < 2:
        return None
    sin, cos = table[1, :q].double(), table[1, q : 2 * q].double()
    omega = torch.atan2(sin, cos)  # (q,): the angle 1 * omega_i, right while omega_i < pi
    if not (omega.min() > 0 and abs(omega[0].item() - 1) < 1e-3):
        return None
    T = omega[1].item() ** -q
    fits = torch.allclose(omega, T ** -(torch.arange(q, dtype=torch.float64) / q), rtol=1e-3, atol=1e-6)
    return T if fits and math.isfinite(T) else None


def _name_sincos_table_mistake(
    got: torch.Tensor, expected: torch.Tensor, rows: int, cols: int, D: int, where: str
) -> str | None:
    """The message for a wrong (1, 1 + N, D) table: its class token's row, its layout or its frequencies."""
    N = rows * cols
    if got[0, 0].abs().max() > 1e-6:
        hint = "the class token's row must be all zeros (it belongs to no patch)"
        if torch.allclose(got[0, 1:], expected[0, 1:], atol=1e-5):
            return f"{hint}; the patch rows are right ({where})"
        if torch.allclose(got[0, :N], expected[0, 1:], atol=1e-5):
            return f"the class token's zero row must come FIRST, before the patch rows ({where})"
    patch_rows = got[0, 1:].float()  # (N, D)
    reason = _name_sincos_mistake(patch_rows, rows, cols, D)
    if reason:
        return f"{reason} ({where})"
    if not _layout_is_right_but_not_the_frequencies(patch_rows, rows, cols, D):
        return None
    T = _temperature(patch_rows, cols, D)
    wrong = "the layout is right but the frequencies are wrong"
    if T is not None and abs(math.log10(T) - round(math.log10(T))) < 1e-3:  # a power of ten: a typo'd 10000
        return (
            f"{wrong}: they fall with a temperature of {T:.4g}; it must be 10000 (1e4 or 10_000; 10e4 is "
            f"100000): omega_i = 1/10000^(i/(D/4)) ({where})"
        )
    if T is not None:  # the same table as another denominator in the exponent
        width = math.log(10000) / math.log(T) / 4
        return f"{wrong}: yours are 1/10000^(i/({width:.3g} D)); omega_i = 1/10000^(i/(D/4)) ({where})"
    return (
        f"{wrong}: omega_i = 1/10000^(i/(D/4)) for i = 0 .. D/4 - 1 (or the positions are scaled: they "
        f"must be 0, 1, 2, ...) ({where})"
    )


def _is_big_vision_table(got, rows: int, cols: int, D: int) -> bool:
    """Whether `got` is big_vision's posemb_sincos_2d for this grid, (1, N, D) or (N, D): MAE's layout
    with omega_i = 1/10000^(i/(D/4 - 1)) and no class-token row."""
    N = rows * cols
    if not isinstance(got, torch.Tensor) or got.is_nested or got.layout != torch.strided:
        return False
    if not got.is_floating_point() or tuple(got.shape) not in ((1, N, D), (N, D)):
        return False
    table = _sincos_variant(rows, cols, D, False, "sin-cos", _FREQUENCIES[BIG_VISION_FREQUENCIES])  # (N, D)
    return torch.allclose(got.detach().cpu().double().reshape(N, D), table.double(), atol=1e-4)


def check_sincos_2d(fn: Callable[[int, int, int], torch.Tensor]) -> None:
    """Check a learner's sincos_2d(rows, cols, embed_dim) -> (1, 1 + rows * cols, D), the class
    token's all-zero row first, then the patches in row-major order."""
    verdicts = []
    for rows, cols, D in SINCOS_CASES:
        expected = sincos_pos_embed_2d((rows, cols), D, cls_token=True)  # (1, 1 + N, D)
        N = rows * cols
        where = f"for a {rows} x {cols} grid and D = {D}"
        got = call_learner(fn, rows, cols, D, where=where)
        missing_class_row = "the class token's row is missing; prepend one all-zero row (it belongs to no patch)"
        one_axis = "only one axis is coded; concatenate the column code and the row code, D/2 channels each"
        too_many, per_axis = (
            "the table is too wide: you made",
            "each axis has D/4 frequencies, each with a sin and a cos",
        )
        shape_hints = {
            (1, N, D): missing_class_row,
            (N, D): missing_class_row,
            (1 + N, D): "the batch axis is missing; return table.unsqueeze(0)",
            (1, 1 + N, D // 2): one_axis,
            (1, N, D // 2): one_axis,
            (1, 1 + N, 2 * D): f"{too_many} D/2 frequencies per axis (arange(D // 2)); {per_axis}",
            (1, 1 + N, 4 * D): f"{too_many} D frequencies per axis (arange(D)); {per_axis}",
        }
        if _is_big_vision_table(got, rows, cols, D):
            raise CheckFailed(
                f"that is {BIG_VISION}: omega_i = 1/10000^(i/(D/4 - 1)) and no class-token row; this exercise uses "
                f"MAE's i/(D/4), omega_i = 1/10000^(i/(D/4)), with an all-zero class-token row first ({where})"
            )
        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_hints=shape_hints,
                atol=1e-5,
                diagnose=lambda got: _name_sincos_table_mistake(got, expected, rows, cols, D, where),
            )
        )
    print(f"✓ sincos_2d matches the reference table on {len(verdicts)} grids: {summarize(verdicts)}")


# ---- resizing a position table --------------------------------------------------------------

RESIZE_CASES = [  # (old (rows, cols), new (rows, cols), D)
    ((3, 5), (6, 4), 8),
    ((4, 4), (7, 7), 6),
    ((14, 14), (24, 24), 16),
    ((8, 6), (4, 3), 4),
]


RESIZE_NO_PERMUTE = (
    "you reshaped the (N, D) rows straight to (1, D, rows, cols) and back, with no permute: the channels "
    "are the LAST axis, so reshape to (1, rows, cols, D) and permute to (1, D, rows, cols), and permute "
    "back before flattening (a reshape alone mixes channels and positions, lesson 1's bug)"
)
RESIZE_CLASS_ENTRY_ON_GRID = (
    "pos_embed has 1 + rows * cols entries, one more than the grid has places: keep the class entry "
    "apart (pos_embed[:, :1]) and lay out only the patch entries, pos_embed[:, 1:]"
)


def _explain_resize_crash(old: tuple[int, int], D: int) -> Callable[[Exception], str | None]:
    """error -> what a failed reshape onto the grid means: the class entry laid out with the patch
    entries, or a square grid assumed for a rows x cols one."""
    rows, cols = old
    N = rows * cols

    def explain(error: Exception) -> str | None:
        bad = re.search(r"shape '\[([-\d, ]+)\]' is invalid for input of size (\d+)", str(error))
        if not bad:
            return None
        shape, size = [int(n) for n in bad[1].split(",")], int(bad[2])
        if size == (1 + N) * D:
            return RESIZE_CLASS_ENTRY_ON_GRID
        if size == N * D and rows != cols and any(shape.count(n) >= 2 and n not in (1, D) for n in shape):
            return f"the grid is {rows} x {cols}, not square: take its rows and columns from old_grid"
        return None

    return explain


def _resize_variants(pos_embed, old, new) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible resized tables, each keyed by the sentence that explains it."""
    (r, c), (nr, nc) = old, new
    D = pos_embed.shape[-1]
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:]  # (1, 1, D), (1, N, D)

    def resample(image, size=(nr, nc), **options):  # (1, D, r, c) -> (1, D, *size)
        settings = dict(mode="bicubic", align_corners=False, antialias=True) | options
        return F.interpolate(image, size=size, **settings)

    right_image = grid.reshape(1, r, c, D).permute(0, 3, 1, 2)  # (1, D, r, c)
    back = lambda image: image.permute(0, 2, 3, 1).reshape(1, nr * nc, D)  # noqa: E731
    swapped = "rows and columns are swapped: the table is row-major, (rows, cols), and so is the new size"
    permuted = (
        "rows and columns are swapped: permute(0, 3, 1, 2) makes (1, D, rows, cols), permute(0, 3, 2, 1) makes "
        "(1, D, cols, rows)"
    )
    variants = {
        RESIZE_NO_PERMUTE: resample(grid.reshape(1, D, r, c)).reshape(1, nr * nc, D),
        "you reshaped the (1, N, D) table straight to (1, D, rows, cols); the channels are the LAST "
        "axis: reshape to (1, rows, cols, D) and permute(0, 3, 1, 2)": back(resample(grid.reshape(1, D, r, c))),
        "after interpolating you reshaped (1, D, rows', cols') straight to (1, N', D); permute(0, 2, 3, 1) "
        "first to bring the channels last": resample(right_image).reshape(1, nr * nc, D),
        swapped: back(resample(grid.reshape(1, c, r, D).permute(0, 3, 2, 1))),
        f"{swapped} (size=(new_rows, new_cols))": back(resample(right_image, size=(nc, nr))),
        f"{permuted}, going in": back(resample(grid.reshape(1, r, c, D).permute(0, 3, 2, 1))),
        f"{permuted}, going in and out": resample(grid.reshape(1, r, c, D).permute(0, 3, 2, 1))
        .permute(0, 3, 2, 1)
        .reshape(1, nr * nc, D),
        "use mode='bicubic', not 'bilinear'": back(resample(right_image, mode="bilinear", antialias=False)),
        "use mode='bicubic', not 'bilinear' (and antialias=True)": back(resample(right_image, mode="bilinear")),
        "use mode='bicubic', not 'nearest'": back(F.interpolate(right_image, size=(nr, nc), mode="nearest")),
        "use antialias=True (it changes the bicubic kernel, and smooths when shrinking)": back(
            resample(right_image, antialias=False)
        ),
        "use align_corners=False (the default): patch centres, not grid corners, are matched": back(
            resample(right_image, align_corners=True)
        ),
        "use align_corners=False (the default) and antialias=True": back(
            resample(right_image, align_corners=True, antialias=False)
        ),
    }
    tables = {reason: torch.cat([cls, table], dim=1) for reason, table in variants.items()}
    tables["the class token's entry must come first, in front of the resized grid, not after it"] = torch.cat(
        [back(resample(right_image)), cls], dim=1
    )
    return tables


def check_resize_pos_embed(fn: Callable[..., torch.Tensor]) -> None:
    """Check a learner's resize(pos_embed, old_grid, new_grid) -> (1, 1 + new_rows * new_cols, D);
    pos_embed is (1, 1 + old_rows * old_cols, D) with the class token's entry first."""
    generator = torch.Generator().manual_seed(2)
    verdicts = []
    for old, new, D in RESIZE_CASES:
        pos_embed = torch.randn(1, 1 + old[0] * old[1], D, generator=generator)
        expected = resize_pos_embed(pos_embed, old, new)  # (1, 1 + N', D)
        where = f"for a {old[0]} x {old[1]} -> {new[0]} x {new[1]} grid, D = {D}"
        got = call_learner(fn, pos_embed.clone(), old, new, where=where, explain=_explain_resize_crash(old, D))
        new_N = new[0] * new[1]
        shape_hints = {
            (1, new_N, D): "the class token's entry is missing; keep it apart and put it back in front",
            (1, D, *new): "bring the grid back to a sequence: permute(0, 2, 3, 1), then reshape to (1, N', D)",
        }

        def class_entry_changed(got: torch.Tensor) -> str | None:
            """Names a class-token entry that did not come through unchanged."""
            if not torch.allclose(got[:, :1], pos_embed[:, :1], atol=1e-6):
                return (
                    f"the class token's entry changed; it belongs to no grid position, so keep it "
                    f"exactly as it is, in front ({where})"
                )
            return None

        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_hints=shape_hints,
                atol=1e-5,
                mistakes=_resize_variants(pos_embed, old, new),
                mistake_atol=1e-4,
                diagnose=class_entry_changed,
            )
        )
    print(f"✓ resize matches the reference on {len(verdicts)} grids: {summarize(verdicts)}")


# ---- the learned 2-D table of the ViT paper's Appendix D.4 ----------------------------------

XY_CASES = [(3, 5, 8), (4, 2, 12), (2, 7, 6), (6, 6, 16)]  # (rows, cols, D), non-square grids first

XY_SWAPPED = (
    "the Y (row) embedding comes first; the paper concatenates 'the X and Y embedding', X first: "
    "the first D/2 channels code the column, as in the sin-cos table"
)
XY_COLUMN_MAJOR = (
    "the patches are listed column by column (top to bottom first); patchify lists them row by row, "
    "so entry r * cols + c is patch (row r, column c)"
)

XY_ROWS_CYCLE = (
    "the rows cycle like the columns (as y_embed.repeat(cols, 1) makes them): in row-major order the row "
    "stays the same for cols patches in a block, and only the column changes from one patch to the next"
)
XY_COLUMNS_HELD = (
    "each column is held for several patches in a block (as x_embed.repeat_interleave(rows, 0) makes it): "
    "in row-major order the column changes from one patch to the next, and the row stays the same for cols patches"
)


def _xy_variants(x_embed: torch.Tensor, y_embed: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible (N, D) tables, each keyed by the sentence that explains it."""
    rows, cols = len(y_embed), len(x_embed)
    i = torch.arange(rows * cols)  # (N,) entry numbers

    def table(col_of: torch.Tensor, row_of: torch.Tensor, x_first: bool = True) -> torch.Tensor:
        x, y = x_embed[col_of], y_embed[row_of]  # (N, D/2) each
        return torch.cat([x, y] if x_first else [y, x], dim=1)  # (N, D)

    column_major = (i // rows, i % rows)  # (column, row) of entry i, top to bottom first
    return {
        XY_SWAPPED: table(i % cols, i // cols, x_first=False),
        XY_COLUMN_MAJOR: table(*column_major),
        f"{XY_COLUMN_MAJOR}; and {XY_SWAPPED}": table(*column_major, x_first=False),
        XY_ROWS_CYCLE: table(i % cols, i % rows),
        XY_COLUMNS_HELD: table(i // rows, i // cols),
    }


def _explain_xy_crash(rows: int, cols: int) -> Callable[[Exception], str | None]:
    """error -> what the classic crashes of xy_pos_embed mean: a table indexed by the other axis."""

    def explain(error: Exception) -> str | None:
        text = str(error)
        out_of_bounds = re.search(r"index (\d+) is out of bounds for dimension 0 with size (\d+)", text)
        if out_of_bounds and int(out_of_bounds[2]) in (rows, cols):
            return (
                "each table is indexed by its own axis: x_embed has one entry per column (cols of them), "
                "y_embed one per row (rows of them)"
            )
        if "expanded size" in text or "Sizes of tensors must match" in text or "must match the size" in text:
            return (
                "x_embed is (cols, D/2), one entry per column; y_embed is (rows, D/2), one entry per row; each "
                "must be spread over the other axis before the two are joined"
            )
        return None

    return explain


def check_xy_pos_embed(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Check a learner's xy_pos_embed(x_embed (cols, D/2), y_embed (rows, D/2)) -> (rows * cols, D):
    entry r * cols + c is [x_embed[c]; y_embed[r]], and gradients reach both tables."""
    generator = torch.Generator().manual_seed(3)
    verdicts = []
    for rows, cols, D in XY_CASES:
        x_embed = torch.randn(cols, D // 2, generator=generator)  # one learned vector per column
        y_embed = torch.randn(rows, D // 2, generator=generator)  # one per row
        expected = xy_pos_embed(x_embed, y_embed)  # (N, D)
        N = rows * cols
        where = f"for a {rows} x {cols} grid (x_embed {(cols, D // 2)}, y_embed {(rows, D // 2)})"
        x_in, y_in = x_embed.clone().requires_grad_(), y_embed.clone().requires_grad_()  # learned: they need gradients
        got = call_learner(fn, x_in, y_in, where=where, explain=_explain_xy_crash(rows, cols))
        shape_hints = {
            (N, D // 2): "you added the two embeddings; the paper concatenates them: X (D/2) and Y (D/2) "
            "side by side make one D-wide position",
            (N, 2, D // 2): "torch.stack puts the two halves on a new axis; torch.cat(..., dim=-1) joins them "
            "into one D-wide row",
            (2 * N, D // 2): "the halves are joined along the patch axis; join them along the channels: "
            "torch.cat(..., dim=-1)",
            (rows, cols, D): "the grid is not flattened: reshape(rows * cols, D), row by row",
            (cols, rows, D): "the grid is (cols, rows, D), not flattened and column by column; the table is "
            "(rows * cols, D), row by row",
            (1, N, D): "no batch axis here: return the (rows * cols, D) table",
        }
        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_hints=shape_hints,
                layout="(rows * cols, D)",
                any_shape_hint="one row per patch, rows * cols of them, each D = 2 x D/2 wide",
                mistakes=_xy_variants(x_embed, y_embed),
            )
        )
        _raise_if_no_gradient(got, x_in, y_in, where)
    print(
        f"✓ xy_pos_embed matches [x_embed[c]; y_embed[r]] in row-major order on {len(verdicts)} grids, "
        f"gradients reach both tables: {summarize(verdicts)}"
    )


def _raise_if_no_gradient(got: torch.Tensor, x_in: torch.Tensor, y_in: torch.Tensor, where: str) -> None:
    """CheckFailed when a right table does not carry the gradients back to x_embed and y_embed."""
    cut = "(a .detach(), .data, .tolist(), torch.tensor(...) or NumPy on the way)"
    learned = "both tables are learned, so the table must be built from them with torch operations"
    if not got.requires_grad:
        raise CheckFailed(f"the values are right, but the result carries no gradient {cut}: {learned} ({where})")
    grads = torch.autograd.grad(got.sum(), (x_in, y_in), allow_unused=True)
    missing = [name for name, grad in zip(("x_embed", "y_embed"), grads, strict=True) if grad is None]
    if missing:
        raise CheckFailed(
            f"the values are right, but {' and '.join(missing)} gets no gradient from the result {cut}: "
            f"{learned} ({where})"
        )


# ---- the jigsaw test: a whole ViT, the images and their patches shuffled -----------------------

JIGSAW_CASES = [  # (pos_embed, pool, (H, W), P): no positions first, then with them; square and not
    ("none", "cls", (32, 32), 4),
    ("none", "mean", (32, 48), 8),
    ("learned", "cls", (32, 32), 4),
    ("sincos", "mean", (32, 48), 8),
]
JIGSAW_ATOL, JIGSAW_RTOL = 1e-5, 1e-3  # float rounding: running a batch in another order moves the last bits
JIGSAW_WHOLE_PATCHES = (
    "without positions the gap must be 0 (up to rounding, below 1e-5): the jigsaw must hold the images' own "
    "patches, each intact, only in another order (cut with patchify and the model's patch size, reorder the "
    "patch axis, put back with unpatchify)"
)
JIGSAW_SAME_INPUTS = (
    "the model has positions, so the jigsaw should change its logits, but your gap is 0: the model saw the "
    "same input twice (were the patches moved? is it run once on the images and once on the jigsaw?)"
)


def _jigsaw_model(pos_embed: str, pool: str, image_size: tuple[int, int], P: int, seed: int) -> VisionTransformer:
    """A small ViT with fresh weights drawn from `seed`, leaving torch's global random numbers alone."""
    config = ViTConfig.tiny(pos_embed=pos_embed, pool=pool, image_size=image_size, patch_size=P, depth=2)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return VisionTransformer(config).eval()


def _jigsaw_of(images: torch.Tensor, P: int, order: torch.Tensor) -> torch.Tensor:
    """The images with their P x P patches in the order `order`: patch i is the images' patch order[i]."""
    return unpatchify(patchify(images, P)[:, order], P, tuple(images.shape[-2:]))  # (B, C, H, W)


def _jigsaw_variants(model, images, P: int, order: torch.Tensor) -> dict[str, float]:
    """Wrong-but-plausible gaps, each keyed by the sentence that explains it."""
    with torch.no_grad():
        logits = model(images)  # (B, classes)
        moved = model(_jigsaw_of(images, P, order))  # (B, classes)
        inverse = model(_jigsaw_of(images, P, torch.argsort(order)))  # (B, classes)
    return {
        "you moved patch i of the images to place order[i]; it is the other way round: patch i of the "
        "jigsaw is patch order[i] of the images, patches[:, order]": (logits - inverse).abs().max().item(),
        "you averaged the differences; the gap is the largest one, (a - b).abs().max()": (logits - moved)
        .abs()
        .mean()
        .item(),
        "take the absolute value of the differences before the max: (a - b).abs().max(); a plain max "
        "misses the negative ones": (logits - moved).max().item(),
        "take the absolute value of the differences before the max: (a - b).abs().max(); a plain max "
        "misses the negative ones (here (b - a).max())": (moved - logits).max().item(),
    }


def _gap_number(value, where: str) -> float:
    """The learner's gap as a float; CheckFailed for several numbers, or what is no number."""
    if isinstance(value, torch.Tensor) and value.numel() > 1:
        raise CheckFailed(
            f"expected one number, got {describe(value)} {where}: the gap is the largest absolute difference "
            "over all images and all classes, (a - b).abs().max()"
        )
    gap = real_number(value, "the gap", where)
    if not math.isfinite(gap):
        raise CheckFailed(f"the gap is {gap} {where}: the logits should be finite numbers")
    return gap


def _explain_jigsaw_crash(H: int, W: int, P: int, N: int) -> Callable[[Exception], str | None]:
    """error -> a likely cause: patches cut with another size than the model's, or a square image assumed."""

    def explain(error: Exception) -> str | None:
        text = str(error)
        patch = re.search(r"C\*(\d+)\*(\d+)", text)
        image = re.search(r"for (\d+)x(\d+) images", text)
        if patch and int(patch[1]) != P:
            return (
                f"this model's patches are {P} x {P}, not {patch[1]} x {patch[1]}: take P from "
                f"model.config.patch_size (order has one entry per patch, {N} here)"
            )
        if image and (int(image[1]), int(image[2])) != (H, W):
            return f"the images are {H} x {W}, not {image[1]} x {image[2]}: take (H, W) from images.shape"
        if not re.search(r"shape|size|index|divisible|expected", text, flags=re.IGNORECASE):
            return None
        return (
            f"this model cuts {H} x {W} images into {P} x {P} patches, {N} of them, one entry of order each: "
            "take P from model.config.patch_size and (H, W) from images.shape"
        )

    return explain


def check_jigsaw_gap(fn: Callable[..., float]) -> None:
    """Check a learner's jigsaw_gap(model, images, order) -> the largest |logit difference| between
    the images and their jigsaw (patch i of the jigsaw is patch order[i] of the images), on ViTs with
    and without positions, pooling by the class token and by the mean."""
    generator = torch.Generator().manual_seed(5)
    verdicts, gaps, sizes = [], [], []
    for seed, (pos_embed, pool, (H, W), P) in enumerate(JIGSAW_CASES):
        model = _jigsaw_model(pos_embed, pool, (H, W), P, seed)
        N = (H // P) * (W // P)
        images = torch.rand(2, 3, H, W, generator=generator)  # (B, C, H, W)
        order = torch.randperm(N, generator=generator)  # (N,)
        with torch.no_grad():
            logits = model(images)  # (B, classes)
            expected = (logits - model(_jigsaw_of(images, P, order))).abs().max().item()
        sizes.append(logits.abs().mean().item())
        where = f"for a ViT with pos_embed={pos_embed!r}, pool={pool!r}, {H} x {W} images, {P} px patches"
        got = call_learner(
            fn,
            model,
            images.clone(),
            order.clone(),
            returns=object,
            where=where,
            explain=_explain_jigsaw_crash(H, W, P, N),
        )
        got = _gap_number(got, where)
        difference = abs(got - expected)
        if difference <= JIGSAW_ATOL + JIGSAW_RTOL * expected:
            verdicts.append("exact" if difference == 0 else f"approximate (max difference {difference:.1e})")
            gaps.append(expected)
            continue
        for reason, wrong in _jigsaw_variants(model, images, P, order).items():
            if abs(got - wrong) <= JIGSAW_ATOL + JIGSAW_RTOL * abs(wrong):
                raise CheckFailed(f"{reason} ({where})")
        if pos_embed == "none":
            raise CheckFailed(f"your gap is {got:.3g}; {JIGSAW_WHOLE_PATCHES} ({where})")
        if abs(got) <= JIGSAW_ATOL:
            raise CheckFailed(f"{JIGSAW_SAME_INPUTS} ({where})")
        raise CheckFailed(f"your gap is {got:.4g}, the reference's {expected:.4g} ({where})")
    no_positions, learned, sincos = max(gaps[:2]), gaps[2], gaps[3]
    print(
        f"✓ jigsaw_gap matches the reference on {len(verdicts)} ViTs: {summarize(verdicts)}. Without positions "
        f"the jigsaw changes nothing (gap {no_positions:.4f}, class token and mean pooling); with learned "
        f"positions the gap is {learned:.2g}, with sin-cos positions {sincos:.2g}, for logits about "
        f"{sum(sizes) / len(sizes):.1f} in size"
    )
