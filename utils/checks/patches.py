"""Lesson 1's exercise checkers: patchify (square patches, and P_h x P_w patches), overlapping
patches cut with a stride smaller than the patch, and a JAX/Flax patch-embedding kernel converted
into a PyTorch Conv2d weight."""

import itertools
import re
from collections.abc import Callable

import torch
import torch.nn.functional as F

from utils.checks.core import (
    CheckFailed,
    call_learner,
    compare,
    other_numbers,
    summarize,
)

PATCHIFY_CASES = [  # (B, C, H, W, P): square and not, RGB and grayscale, one and many patches
    (2, 3, 32, 32, 8),
    (1, 3, 24, 40, 8),
    (3, 1, 12, 12, 4),
    (1, 3, 16, 16, 16),
]
RECT_CASES = [  # (B, C, H, W, (P_h, P_w)): tall and wide patches, on images square and not
    (2, 3, 24, 40, (4, 8)),  # 6 x 5 patches
    (1, 3, 16, 48, (8, 4)),  # 2 x 12
    (3, 1, 12, 12, (6, 2)),  # a square image, 2 x 6 patches
    (1, 3, 16, 16, (16, 16)),  # a square patch is a pair too
]

# the image (B, C, H, W) read as the grid (B, C, rows, P, cols, P): the names of axes 1 .. 5
IMAGE_AXES = ("C", "rows", "P_row", "cols", "P_col")
# the patches (B, N, C*P*P) read as the grid (B, rows, cols, C, P, P): the names of axes 1 .. 5
PATCH_AXES = ("rows", "cols", "C", "P_row", "P_col")
# Tensor.unfold's windows (B, C, rows, cols, P, P): the names of axes 1 .. 5
WINDOW_AXES = ("C", "rows", "cols", "P_row", "P_col")


def _sizes(size: int | tuple[int, int]) -> tuple[int, int, str, str]:
    """(P_h, P_w) and the letters a message names them by: "P", "P" for a square patch size given
    as one number, "P_h", "P_w" for a pair."""
    if isinstance(size, tuple):
        return size[0], size[1], "P_h", "P_w"
    return size, size, "P", "P"


def _patch_variants(images: torch.Tensor, size: int | tuple[int, int]) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible patchify results, each keyed by the sentence that explains it."""
    B, C, H, W = images.shape
    P_h, P_w, ph, pw = _sizes(size)
    rows, cols = H // P_h, W // P_w
    grid = images.reshape(B, C, rows, P_h, cols, P_w)  # (B, C, rows, P_h, cols, P_w)
    N = rows * cols
    variants = {
        f"each patch must be flattened in (C, {ph}, {pw}) order (channels first); yours puts the "
        f"channels last, ({ph}, {pw}, C)": grid.permute(0, 2, 4, 3, 5, 1).reshape(B, N, -1),
        "the patches are in column-major order (top to bottom first); they must go left to "
        "right, then top to bottom, like reading text": grid.permute(0, 4, 2, 1, 3, 5).reshape(B, N, -1),
        "the pixels inside each patch are transposed (columns before rows); keep (row, column) "
        "order inside a patch": grid.permute(0, 2, 4, 1, 5, 3).reshape(B, N, -1),
        "you sliced the image with a plain reshape, without moving the patch-grid axes next to "
        "each other first (permute before the last reshape)": images.reshape(B, N, -1),
        f"you split the image with reshape(B, C, rows, cols, {ph}, {pw}), but a reshape keeps the reading "
        f"order, so those last two axes are not a patch's pixels: split each side where it lies, "
        f"(B, C, rows, {ph}, cols, {pw}), then permute": images.reshape(B, C, rows, cols, P_h, P_w)
        .permute(0, 2, 3, 1, 4, 5)
        .reshape(B, N, -1),
        f"the channel axis is still in front of the grid axes, (B, C, rows, cols, {ph}, {pw}) as Tensor.unfold "
        f"gives it: permute to (B, rows, cols, C, {ph}, {pw}) before the last reshape": grid.permute(
            0, 1, 2, 4, 3, 5
        ).reshape(B, N, -1),
        f"F.unfold gives (B, C*{ph}*{pw}, N) and a reshape to (B, N, C*{ph}*{pw}) does not swap those axes: "
        "use .transpose(1, 2)": F.unfold(images, (P_h, P_w), stride=(P_h, P_w)).reshape(B, N, -1),
    }
    if H != W and W % P_h == 0 and H % P_w == 0:  # only then can rows and columns be mixed up
        swapped = images.reshape(B, C, W // P_h, P_h, H // P_w, P_w).permute(0, 2, 4, 1, 3, 5)
        variants[
            f"rows and columns are swapped: the grid has H // {ph} rows and W // {pw} columns, so reshape to "
            f"(B, C, H // {ph}, {ph}, W // {pw}, {pw}) (and unpack B, C, H, W = images.shape in that order)"
        ] = swapped.reshape(B, -1, C * P_h * P_w)
    if P_h != P_w and H % P_w == 0 and W % P_h == 0:
        turned = images.reshape(B, C, H // P_w, P_w, W // P_h, P_h).permute(0, 2, 4, 1, 3, 5)
        variants[_PATCH_TURNED] = turned.reshape(B, -1, C * P_h * P_w)
    for side in {P_h, P_w} if P_h != P_w else ():
        if H % side == 0 and W % side == 0:  # square patches, read into the right shape
            square = images.reshape(B, C, H // side, side, W // side, side).permute(0, 2, 4, 1, 3, 5)
            variants[_square_patches(side, P_h, P_w)] = square.reshape(B, N, -1)
    return variants


def _square_patches(side: int, P_h: int, P_w: int) -> str:
    return (
        f"your patches are square, {side} x {side}: a patch is P_h x P_w = {P_h} x {P_w}, so "
        "N = (H // P_h) * (W // P_w) and each patch holds C*P_h*P_w numbers"
    )


_PATCH_TURNED = (
    "the patch is turned: patch_size is (P_h, P_w), height first, like an image's (H, W): P_h splits H and P_w splits W"
)


def _name_axis_order(
    got: torch.Tensor, grid: torch.Tensor, names: tuple[str, ...], wanted: tuple[str, ...]
) -> tuple[str, ...] | None:
    """The order of `grid`'s axes 1 .. 5 (named `names`) that, flattened, gives `got`; None if none does."""
    for order in itertools.permutations(range(5)):
        candidate = grid.permute(0, *(axis + 1 for axis in order)).reshape(got.shape)
        if torch.equal(candidate, got):
            named = tuple(names[axis] for axis in order)
            return named if named != wanted else None
    return None


def _grid_crash(error: Exception, B: int, C: int, H: int, W: int, P: int) -> str | None:
    """Names a reshape that failed because one side of a non-square image was used for both, or because
    C was computed wrongly; None when the error is something else."""
    shape = re.search(r"shape '\[([-\d, ]+)\]' is invalid", str(error))
    if not shape:
        return None
    dims = [int(size) for size in shape[1].split(",")]
    rows, cols = H // P, W // P
    sides = {rows, cols}
    one_side_twice = (
        (len(dims) == 6 and dims[2] == dims[4] in sides and dims[3] == dims[5] == P)  # (B, C, rows, P, rows, P)
        or (len(dims) == 6 and dims[1] == dims[2] in sides and dims[4] == dims[5] == P)  # (B, rows, rows, C, P, P)
        or (len(dims) == 4 and dims[2] == dims[3] in {H, W})  # (B, C, H, H)
        or (len(dims) == 3 and dims[1] in {rows * rows, cols * cols})  # N = rows ** 2
    )
    if H != W and one_side_twice:
        return (
            f"the image is not square: it has H // P = {rows} rows of patches but W // P = {cols} columns, "
            f"and one side is used for both; N = (H // P) * (W // P) = {rows * cols}"
        )
    if C * P in dims and C not in dims:
        return f"C = (C*P*P) // (P * P) = {C}, not (C*P*P) // P"
    return None


_DILATION = (
    "F.unfold's third argument is the dilation, not the stride (F.unfold(input, kernel_size, dilation, "
    "padding, stride)): pass stride=... by name"
)
_UNFOLD_DIMS = (
    "Tensor.unfold's first argument counts the batch axis too: in (B, C, H, W) images, H is dim 2 "
    "and W is dim 3 (section 3 had one image, (C, H, W))"
)


def _unfold_crash(error: Exception) -> str | None:
    """Names a crash of F.unfold given the stride where the dilation goes, or of Tensor.unfold on the
    channel axis; None when the error is something else."""
    text = str(error)
    if re.search(r"dilation=\((?!1, 1\))", text):
        return _DILATION
    if "maximum size for tensor at dimension" in text:
        return _UNFOLD_DIMS
    return None


def _pair_crash(error: Exception, P_h: int, P_w: int) -> str | None:
    """Names the crash of a patchify that treats the pair (P_h, P_w) as one number, or whose reshape
    does not fit the pair; None when the error is something else."""
    if _unfold_crash(error):
        return _unfold_crash(error)
    if isinstance(error, TypeError) and "tuple" in str(error):
        return "patch_size is a pair: unpack it first, P_h, P_w = patch_size"
    if re.search(r"shape '\[([-\d, ]+)\]' is invalid", str(error)):
        return f"H splits into (H // P_h, P_h) and W into (W // P_w, P_w), with (P_h, P_w) = {(P_h, P_w)}"
    return None


def _check_patchify_cases(fn: Callable, cases: list, name: str, seed: int) -> list[str]:
    """Run fn(images, size) on each case of `cases` and compare it with the reference; the verdicts."""
    generator = torch.Generator().manual_seed(seed)
    verdicts = []
    for B, C, H, W, size in cases:
        P_h, P_w, ph, pw = _sizes(size)
        rows, cols = H // P_h, W // P_w
        images = torch.rand(B, C, H, W, generator=generator)
        expected = F.unfold(images, (P_h, P_w), stride=(P_h, P_w)).transpose(1, 2)  # (B, N, C*P_h*P_w)
        where = f"for images of shape {(B, C, H, W)} and patch size {size}"
        if isinstance(size, tuple):
            explain = lambda e: _pair_crash(e, P_h, P_w)  # noqa: E731
        else:
            explain = lambda e: _grid_crash(e, B, C, H, W, P_h)  # noqa: E731
        got = call_learner(fn, images.clone(), size, where=where, explain=explain)
        N, CPP = expected.shape[1:]
        shape_hints = {
            (B, CPP, N): f"the two last axes are swapped, tokens must be the rows (transpose them; F.unfold "
            f"gives (B, C*{ph}*{pw}, N))",
            (B, rows, cols, CPP): "you kept the patch grid; flatten rows and columns into one token axis N",
            (B, N, C, P_h, P_w): f"each patch is still (C, {ph}, {pw}); flatten it into C*{ph}*{pw} numbers",
            (
                B * N,
                CPP,
            ): f"the batch and token axes are merged; keep one row of patches per image, (B, N, C*{ph}*{pw})",
            (B, N + 1, CPP): "one row too many: patchify returns the N patches alone; the class token joins the "
            "tokens later, after the projection (lesson 2)",
            (
                B,
                N,
                P_h * P_w,
            ): f"each patch keeps all C = {C} channels, C*{ph}*{pw} numbers: do not average or drop them",
        }
        overlapping = (H - P_h + 1) * (W - P_w + 1)  # F.unfold without stride: a patch at every pixel
        if overlapping != N:
            stride = "P" if ph == "P" else "(P_h, P_w)"
            slides = f"F.unfold without stride={stride} slides one pixel at a time, so the patches overlap; pass it"
            shape_hints |= {(B, overlapping, CPP): slides, (B, CPP, overlapping): slides}
        if P_h != P_w:
            for side in (P_h, P_w):
                if H % side == 0 and W % side == 0:
                    shape_hints[(B, (H // side) * (W // side), C * side * side)] = _square_patches(side, P_h, P_w)
            if H % P_w == 0 and W % P_h == 0 and (H // P_w) * (W // P_h) != N:
                shape_hints[(B, (H // P_w) * (W // P_h), CPP)] = _PATCH_TURNED

        def axis_order(got: torch.Tensor) -> str | None:
            """Names any other order of the image's axes, or other numbers than the image's."""
            grid = images.reshape(B, C, rows, P_h, cols, P_w)
            order = _name_axis_order(got, grid, IMAGE_AXES, PATCH_AXES)
            if order is None:
                return other_numbers(got, images, name, where)
            return (
                f"the numbers are the image's, but in the axis order ({', '.join(order)}); {name} needs "
                f"(rows, cols, C, P_row, P_col): reshape to (B, C, rows, {ph}, cols, {pw}), then "
                f"permute(0, 2, 4, 1, 3, 5) ({where})"
            )

        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_hints=shape_hints,
                layout=f"(B, N, C*{ph}*{pw})",
                mistakes=_patch_variants(images, size),
                diagnose=axis_order,
            )
        )
    return verdicts


def check_patchify(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Check a learner's patchify(images, patch_size) -> (B, N, C*P*P) on random images."""
    verdicts = _check_patchify_cases(fn, PATCHIFY_CASES, "patchify", seed=0)
    print(f"✓ patchify matches the reference on {len(verdicts)} image batches: {summarize(verdicts)}")


def check_patchify_rect(fn: Callable[[torch.Tensor, tuple[int, int]], torch.Tensor]) -> None:
    """Check a learner's patchify_rect(images, (P_h, P_w)) -> (B, N, C*P_h*P_w) on random images:
    P_h x P_w patches, row-major, each flattened in (C, P_h, P_w) order."""
    verdicts = _check_patchify_cases(fn, RECT_CASES, "patchify_rect", seed=3)
    print(
        f"✓ patchify_rect matches the reference on {len(verdicts)} image batches (tall, wide and square "
        f"patches): {summarize(verdicts)}"
    )


# ---- overlapping patches: a window of P x P pixels, stepping by stride < P ----------------------

OVERLAP_CASES = [  # (B, C, H, W, P, stride)
    (2, 3, 16, 24, 8, 4),  # 3 x 5 windows
    (1, 3, 12, 12, 4, 2),  # 5 x 5
    (1, 1, 10, 14, 4, 3),  # 3 x 4: the last column of pixels is in no window
    (2, 3, 8, 8, 4, 4),  # stride = P: the patches of section 2
    (1, 3, 224, 224, 16, 8),  # the lesson's image size: 27 x 27
]


def check_overlapping_patches(fn: Callable[[torch.Tensor, int, int], torch.Tensor]) -> None:
    """Check a learner's overlapping_patches(images, patch_size, stride) -> (B, N, C*P*P): every
    P x P window that lies wholly inside the image, the windows `stride` pixels apart, row-major,
    each flattened in (C, P, P) order."""
    generator = torch.Generator().manual_seed(4)
    verdicts = []
    for B, C, H, W, P, S in OVERLAP_CASES:
        images = torch.rand(B, C, H, W, generator=generator)
        windows = images.unfold(2, P, S).unfold(3, P, S)  # (B, C, rows, cols, P, P)
        _, _, rows, cols, _, _ = windows.shape
        N, CPP = rows * cols, C * P * P
        expected = windows.permute(0, 2, 3, 1, 4, 5).reshape(B, N, CPP)  # (B, N, C*P*P)
        where = f"for images of shape {(B, C, H, W)}, P = {P} and stride {S}"
        got = call_learner(fn, images.clone(), P, S, where=where, explain=_unfold_crash)
        shape_hints = {
            (B, CPP, N): "the two last axes are swapped, the windows must be the rows (F.unfold gives "
            "(B, C*P*P, N): transpose(1, 2))",
            (B, rows, cols, CPP): "you kept the grid of windows; flatten rows and columns into one axis N",
            (B, N, C, P, P): "each window is still (C, P, P); flatten it into C*P*P numbers",
            (B * N, CPP): "the batch and window axes are merged; keep one row of windows per image, (B, N, C*P*P)",
            (B, (H // S) * (W // S), CPP): "only windows that lie wholly inside the image count: along H there "
            "are (H - P) // stride + 1 of them, not H // stride",
            (B, ((H - P) // S) * ((W - P) // S), CPP): "one window too few along each side: the first window "
            "starts at pixel 0, so there are (H - P) // stride + 1 along H",
            (B, (H - P + 1) * (W - P + 1), CPP): "the window slid one pixel at a time: step by stride "
            "(F.unfold's stride is 1 unless you pass it)",
            (B, ((H - S) // P + 1) * ((W - S) // P + 1), C * S * S): "size and step are swapped: "
            "Tensor.unfold(dim, size, step) takes the window size P first, then the stride",
        }
        if S != P:
            shape_hints[(B, (H // P) * (W // P), CPP)] = (
                "those are the non-overlapping patches: the window must step by stride, not by P "
                "(Tensor.unfold(dim, P, stride))"
            )
        mistakes = {
            "the channel axis is still in front of the grid axes, (B, C, rows, cols, P, P) as Tensor.unfold "
            "gives it: permute to (B, rows, cols, C, P, P) before the last reshape": windows.reshape(B, N, -1),
            "F.unfold gives (B, C*P*P, N) and a reshape to (B, N, C*P*P) does not swap those axes: "
            "use .transpose(1, 2)": F.unfold(images, P, stride=S).reshape(B, N, -1),
            "the windows are in column-major order (top to bottom first); they must go left to right, then "
            "top to bottom, like reading text": windows.permute(0, 3, 2, 1, 4, 5).reshape(B, N, -1),
            "each window must be flattened in (C, P, P) order (channels first); yours puts the channels "
            "last, (P, P, C)": windows.permute(0, 2, 3, 4, 5, 1).reshape(B, N, -1),
            "the pixels inside each window are transposed (columns before rows); keep (row, column) order "
            "inside a window": windows.permute(0, 2, 3, 1, 5, 4).reshape(B, N, -1),
        }

        def axis_order(got: torch.Tensor) -> str | None:
            """Names any other order of the windows' axes, or numbers that are not the windows'."""
            order = _name_axis_order(got, windows, WINDOW_AXES, PATCH_AXES)
            if order is not None:
                return (
                    f"the numbers are the windows', but in the axis order ({', '.join(order)}); the patches "
                    "need (rows, cols, C, P_row, P_col): permute Tensor.unfold's (B, C, rows, cols, P, P) "
                    f"to (B, rows, cols, C, P, P) before the last reshape ({where})"
                )
            values = got.detach().flatten().double().sort().values
            if torch.equal(values, expected.flatten().double().sort().values):
                return None
            return (
                f"your patches hold other numbers than the image's windows {where}: cutting only copies "
                "pixels into place, with no arithmetic on them"
            )

        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_hints=shape_hints,
                layout="(B, N, C*P*P)",
                mistakes=mistakes,
                diagnose=axis_order,
            )
        )
    print(
        f"✓ overlapping_patches matches the reference on {len(verdicts)} image batches: {summarize(verdicts)}; "
        f"a 224 px image with P = 16 and stride 8 gives {rows} x {cols} = {N} patches (196 without overlap)"
    )


# ---- a JAX/Flax patch-embedding kernel -> a PyTorch Conv2d weight ------------------------------

JAX_KERNEL_CASES = [  # (P, C, D): every size different, so that no two axes can be mixed up unseen
    (4, 3, 8),
    (2, 5, 6),
    (16, 3, 24),
    (3, 1, 4),  # grayscale last: with C = 1 some orders give the same numbers
]
JAX_AXES = ("P_row", "P_col", "C", "D")  # Flax's Conv kernel: (height, width, in, out)
CONV_AXES = ("D", "C", "P_row", "P_col")  # torch's Conv2d weight: (out, in, height, width)

_PLAIN_RESHAPE = (
    "a plain reshape re-reads the numbers in JAX's memory order (P, P, C, D); it moves no axis, "
    "so every kernel gets scrambled: move the axes with permute"
)
_H_W_SWAPPED = (
    "height and width are swapped: JAX's kernel is (height, width, in, out), so P_row stays before P_col; "
    "reversing every axis (.T, or permute(3, 2, 1, 0)) swaps them too"
)
_C_D_SWAPPED = (
    "C and D are swapped: a Conv2d weight is (out_channels, in_channels, P, P) = (D, C, P, P), "
    "the output channels first"
)
_PIXELS_READ_AS_CHANNELS = (
    "each kernel is still in JAX's (P, P, C) order, only re-read as (C, P, P) (flattening to (P*P*C, D) "
    "and transposing moves D but not C): move the C axis in front of the two pixel axes"
)
_FLIPPED = (
    "the kernel is flipped in space: JAX's conv and torch's Conv2d both compute a cross-correlation, "
    "so no flip is needed; the pixels keep their places"
)
KERNEL_ORDER_MISTAKES = {  # an order of the JAX axes, flattened into the (D, C, P, P) shape -> its sentence
    JAX_AXES: _PLAIN_RESHAPE,
    ("D", "C", "P_col", "P_row"): _H_W_SWAPPED,
    ("C", "D", "P_row", "P_col"): _C_D_SWAPPED,
    ("D", "P_row", "P_col", "C"): _PIXELS_READ_AS_CHANNELS,
}


def _jax_patch_tokens(images_nhwc: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """What JAX's patch embedding computes, written out: (B, H, W, C) channels-last images and a
    (P, P, C, D) kernel -> (B, rows, cols, D) tokens, each the sum over one patch's pixels and
    channels of pixel times kernel (a cross-correlation with stride P, no bias)."""
    B, H, W, C = images_nhwc.shape
    P = kernel.shape[0]
    grid = images_nhwc.reshape(B, H // P, P, W // P, P, C)  # (B, rows, P_row, cols, P_col, C)
    return torch.einsum("bricjk,ijkd->brcd", grid, kernel)  # (B, rows, cols, D)


def _kernel_axis_order(got: torch.Tensor, kernel: torch.Tensor) -> tuple[str, ...] | None:
    """The order of the JAX kernel's axes (named JAX_AXES) that, flattened into got's shape, gives
    `got`; None if none does or if it is the right one."""
    for order in itertools.permutations(range(4)):
        candidate = kernel.permute(*order)
        if candidate.numel() == got.numel() and torch.equal(candidate.reshape(got.shape), got):
            named = tuple(JAX_AXES[axis] for axis in order)
            return named if named != CONV_AXES else None
    return None


def check_jax_kernel_to_conv(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Check a learner's jax_kernel_to_conv(kernel) on random kernels: a JAX/Flax patch-embedding
    kernel (P, P, C, D) must come back as the PyTorch Conv2d weight (D, C, P, P) that computes the
    same tokens; a view (not contiguous) is as right as a copy."""
    generator = torch.Generator().manual_seed(2)
    verdicts = []
    for P, C, D in JAX_KERNEL_CASES:
        kernel = torch.randn(P, P, C, D, generator=generator)  # (P, P, C, D), as a Flax checkpoint stores it
        expected = kernel.permute(3, 2, 0, 1)  # (D, C, P, P)
        where = f"for a JAX kernel of shape {(P, P, C, D)} (P={P}, C={C}, D={D})"
        got = call_learner(fn, kernel.clone(), where=where)
        shape_hints = {
            (P, P, C, D): "that is the JAX layout unchanged, (P, P, C, D) = (height, width, in, out); "
            "PyTorch wants (out, in, height, width)",
            (C, D, P, P): _C_D_SWAPPED,
            (D, P, P, C): "the channels ended up last, (D, P, P, C); PyTorch's Conv2d is channels-first: (D, C, P, P)",
            (D, C * P * P): "that is a Linear weight (D, C*P*P); keep the kernel 4-D, (D, C, P, P)",
            (P * P * C, D): "that is the kernel flattened to the paper's E, (P*P*C, D); a Conv2d weight "
            "is 4-D, (D, C, P, P)",
        }

        def axis_order(got: torch.Tensor) -> str | None:
            """Names any order of the kernel's axes that is not Conv2d's."""
            order = _kernel_axis_order(got, kernel)
            if order is None:
                return None
            if order in KERNEL_ORDER_MISTAKES:
                return f"{KERNEL_ORDER_MISTAKES[order]} ({where})"
            return (
                f"the numbers are the kernel's, but in the axis order ({', '.join(order)}); a Conv2d weight "
                f"is (D, C, P_row, P_col) = (out, in, height, width) ({where})"
            )

        if isinstance(got, torch.Tensor) and got.shape != expected.shape and tuple(got.shape) not in shape_hints:
            named = axis_order(got.detach())  # a permute of the wrong axes: name their order, not only the shape
            if named:
                raise CheckFailed(named)
        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_wording="expected a Conv2d weight (D, C, P, P) = {}",
                shape_hints=shape_hints,
                layout="(D, C, P, P)",
                mistakes={_FLIPPED: expected.flip(2, 3)},
                diagnose=axis_order,
                advice=": JAX's kernel is (height, width, in, out), a Conv2d weight (out, in, height, width)",
            )
        )
        # what the weight is for: a Conv2d with it gives the tokens JAX's convolution gives
        images = torch.rand(2, C, 2 * P, 3 * P, generator=generator)  # (B, C, H, W), rows != cols
        tokens = F.conv2d(images, got.detach().to(images.dtype), stride=P)  # (B, D, rows, cols)
        jax_tokens = _jax_patch_tokens(images.permute(0, 2, 3, 1), kernel)  # (B, rows, cols, D)
        if not torch.allclose(tokens.permute(0, 2, 3, 1), jax_tokens, atol=1e-4, rtol=1e-4):
            raise CheckFailed(f"a Conv2d with your weight does not give the JAX tokens {where}")
    print(
        f"✓ jax_kernel_to_conv matches the reference on {len(verdicts)} kernels: {summarize(verdicts)}; "
        "a Conv2d with your weight gives the tokens of JAX's convolution"
    )
