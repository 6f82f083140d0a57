"""Lesson 1's exercise checkers: patchify, unpatchify, the attention cost of a patch size, and a
JAX/Flax patch-embedding kernel converted into a PyTorch Conv2d weight."""

import itertools
import re
from collections.abc import Callable

import torch
import torch.nn.functional as F

from utils.checks.core import (
    CheckFailed,
    call_learner,
    compare,
    describe,
    other_numbers,
    raise_if_meta,
    summarize,
    whole_number,
)
from utils.patches import patchify

PATCHIFY_CASES = [  # (B, C, H, W, P): square and not, RGB and grayscale, one and many patches
    (2, 3, 32, 32, 8),
    (1, 3, 24, 40, 8),
    (3, 1, 12, 12, 4),
    (1, 3, 16, 16, 16),
]

# the image (B, C, H, W) read as the grid (B, C, rows, P, cols, P): the names of axes 1 .. 5
IMAGE_AXES = ("C", "rows", "P_row", "cols", "P_col")
# the patches (B, N, C*P*P) read as the grid (B, rows, cols, C, P, P): the names of axes 1 .. 5
PATCH_AXES = ("rows", "cols", "C", "P_row", "P_col")


def _patch_variants(images: torch.Tensor, P: int) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible patchify results, each keyed by the sentence that explains it."""
    B, C, H, W = images.shape
    grid = images.reshape(B, C, H // P, P, W // P, P)  # (B, C, rows, P, cols, P)
    N = (H // P) * (W // P)
    variants = {
        "each patch must be flattened in (C, P, P) order (channels first); yours puts the "
        "channels last, (P, P, C)": grid.permute(0, 2, 4, 3, 5, 1).reshape(B, N, -1),
        "the patches are in column-major order (top to bottom first); they must go left to "
        "right, then top to bottom, like reading text": grid.permute(0, 4, 2, 1, 3, 5).reshape(B, N, -1),
        "the pixels inside each patch are transposed (columns before rows); keep (row, column) "
        "order inside a patch": grid.permute(0, 2, 4, 1, 5, 3).reshape(B, N, -1),
        "you sliced the image with a plain reshape, without moving the patch-grid axes next to "
        "each other first (permute before the last reshape)": images.reshape(B, N, -1),
        "the channel axis is still in front of the grid axes, (B, C, rows, cols, P, P) as Tensor.unfold "
        "gives it: permute to (B, rows, cols, C, P, P) before the last reshape": grid.permute(0, 1, 2, 4, 3, 5).reshape(
            B, N, -1
        ),
        "F.unfold gives (B, C*P*P, N) and a reshape to (B, N, C*P*P) does not swap those axes: "
        "use .transpose(1, 2)": F.unfold(images, P, stride=P).reshape(B, N, -1),
    }
    if H != W:  # only then can rows and columns be mixed up
        swapped = images.reshape(B, C, W // P, P, H // P, P).permute(0, 2, 4, 1, 3, 5)
        variants[
            "rows and columns are swapped: the grid has H // P rows and W // P columns, so reshape to "
            "(B, C, H // P, P, W // P, P) (and unpack B, C, H, W = images.shape in that order)"
        ] = swapped.reshape(B, N, -1)
    return variants


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
    if "product of kernel_size" in str(error):
        return "F.fold wants the patches as (B, C*P*P, N): transpose(1, 2) before it"
    if "number of sliding blocks" in str(error) and "stride=(1, 1)" in str(error):
        return "F.fold needs stride=P too; with stride 1 the blocks overlap"
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


def check_patchify(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Check a learner's patchify(images, patch_size) -> (B, N, C*P*P) on random images."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for B, C, H, W, P in PATCHIFY_CASES:
        images = torch.rand(B, C, H, W, generator=generator)
        expected = patchify(images, P)  # (B, N, C*P*P)
        where = f"for images of shape {(B, C, H, W)} and patch size {P}"
        got = call_learner(fn, images.clone(), P, where=where, explain=lambda e: _grid_crash(e, B, C, H, W, P))
        N, CPP = expected.shape[1:]
        shape_hints = {
            (B, CPP, N): "the two last axes are swapped, tokens must be the rows (transpose them; F.unfold "
            "gives (B, C*P*P, N))",
            (B, H // P, W // P, CPP): "you kept the patch grid; flatten rows and columns into one token axis N",
            (B, N, C, P, P): "each patch is still (C, P, P); flatten it into C*P*P numbers",
            (B * N, CPP): "the batch and token axes are merged; keep one row of patches per image, (B, N, C*P*P)",
            (B, N + 1, CPP): "one row too many: patchify returns the N patches alone; the class token joins the "
            "tokens later, after the projection (lesson 2)",
            (B, N, P * P): f"each patch keeps all C = {C} channels, C*P*P numbers: do not average or drop them",
        }
        overlapping = (H - P + 1) * (W - P + 1)  # F.unfold without stride=P: a patch at every pixel
        if overlapping != N:
            slides = "F.unfold without stride=P slides one pixel at a time, so the patches overlap; pass stride=P"
            shape_hints |= {(B, overlapping, CPP): slides, (B, CPP, overlapping): slides}

        def axis_order(got: torch.Tensor) -> str | None:
            """Names any other order of the image's axes, or other numbers than the image's."""
            order = _name_axis_order(got, images.reshape(B, C, H // P, P, W // P, P), IMAGE_AXES, PATCH_AXES)
            if order is None:
                return other_numbers(got, images, "patchify", where)
            return (
                f"the numbers are the image's, but in the axis order ({', '.join(order)}); patchify needs "
                f"(rows, cols, C, P_row, P_col): reshape to (B, C, rows, P, cols, P), then "
                f"permute(0, 2, 4, 1, 3, 5) ({where})"
            )

        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_hints=shape_hints,
                layout="(B, N, C*P*P)",
                mistakes=_patch_variants(images, P),
                diagnose=axis_order,
            )
        )
    print(f"✓ patchify matches the reference on {len(verdicts)} image batches: {summarize(verdicts)}")


def _unpatch_variants(patches: torch.Tensor, images: torch.Tensor, P: int) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible unpatchify results, each keyed by the sentence that explains it."""
    B, C, H, W = images.shape
    rows, cols = H // P, W // P
    grid = patches.reshape(B, rows, cols, C, P, P)  # (B, rows, cols, C, P, P), the right reading
    image = lambda grid: grid.reshape(B, C, H, W)  # noqa: E731
    variants = {
        "you reshaped the patches straight to the image, without permuting the grid axes back: undo "
        "patchify's steps in reverse order (reshape to the grid, permute back, reshape to the image)": image(patches),
        "each patch holds its numbers in (C, P, P) order (channels first); you read them as (P, P, C): "
        "reshape to (B, rows, cols, C, P, P)": image(patches.reshape(B, rows, cols, P, P, C).permute(0, 5, 1, 3, 2, 4)),
        "the patches are placed in column-major order (the patch of grid row r, column c lands at row c, "
        "column r); the inverse of patchify's permute is permute(0, 3, 1, 4, 2, 5)": image(
            grid.permute(0, 3, 2, 4, 1, 5)
        ),
        "the pixels inside each patch come out transposed (columns before rows); the inverse of "
        "patchify's permute is permute(0, 3, 1, 4, 2, 5)": image(grid.permute(0, 3, 1, 5, 2, 4)),
        "the grid axes and the pixel axes are not interleaved: the image is (B, C, rows, P, cols, P) before "
        "the last reshape, permute(0, 3, 1, 4, 2, 5), not (B, C, rows, cols, P, P)": image(
            grid.permute(0, 3, 1, 2, 4, 5)
        ),
        "you applied patchify's permute(0, 2, 4, 1, 3, 5) again; its inverse is permute(0, 3, 1, 4, 2, 5)": image(
            grid.permute(0, 2, 4, 1, 3, 5)
        ),
    }
    if H == W:
        variants[
            "the images come out transposed (rows and columns swapped); the inverse of patchify's permute "
            "is permute(0, 3, 1, 4, 2, 5)"
        ] = images.transpose(2, 3)
    else:
        swapped = patches.reshape(B, cols, rows, C, P, P).permute(0, 3, 1, 4, 2, 5)
        variants[
            "rows and columns are swapped: the grid has H // P rows and W // P columns, so reshape the "
            "patches to (B, H // P, W // P, C, P, P) (image_size is (H, W), in that order)"
        ] = image(swapped)
    return variants


def check_unpatchify(fn: Callable[[torch.Tensor, int, tuple[int, int]], torch.Tensor]) -> None:
    """Check a learner's unpatchify(patches, patch_size, (H, W)) -> (B, C, H, W)."""
    generator = torch.Generator().manual_seed(1)
    verdicts = []
    for B, C, H, W, P in PATCHIFY_CASES:
        images = torch.rand(B, C, H, W, generator=generator)
        patches = patchify(images, P)
        where = f"for images of shape {(B, C, H, W)} and patch size {P}"
        got = call_learner(fn, patches.clone(), P, (H, W), where=where, explain=lambda e: _grid_crash(e, B, C, H, W, P))
        rows, cols = H // P, W // P

        def axis_order(got: torch.Tensor) -> str | None:
            """Names any other order of the patch grid's axes, or other numbers than the patches'."""
            order = _name_axis_order(got, patches.reshape(B, rows, cols, C, P, P), PATCH_AXES, IMAGE_AXES)
            if order is None:
                return other_numbers(got, patches, "unpatchify", where)
            return (
                f"the numbers are the patches', but in the axis order ({', '.join(order)}); the image needs "
                f"(C, rows, P_row, cols, P_col): reshape to (B, rows, cols, C, P, P), then "
                f"permute(0, 3, 1, 4, 2, 5) ({where})"
            )

        verdicts.append(
            compare(
                got,
                images,
                where,
                shape_hints={
                    (B, H, W, C): "channels ended up last; the images must be (B, C, H, W)",
                    (B, C, rows, P, cols, P): "reshape the grid (B, C, rows, P, cols, P) to the image (B, C, H, W)",
                    (B, rows, cols, C, P, P): "permute the grid to (B, C, rows, P, cols, P), then reshape to the image",
                },
                mistakes=_unpatch_variants(patches, images, P),
                diagnose=axis_order,
                advice=": undo patchify's steps in reverse order "
                "(reshape to the grid, permute back, reshape to the image)",
            )
        )
    print(f"✓ unpatchify inverts patchify on {len(verdicts)} image batches: {summarize(verdicts)}")


def _counts(got, where: str) -> tuple[int, int]:
    """(num_tokens, num_pairs) from the learner's pair-like result: a tuple, a list, a tensor or a NumPy
    array of two whole numbers; CheckFailed naming what came otherwise."""
    raise_if_meta(got, "your pair", where, "return the numbers themselves (len(...) and int(...) give Python ints)")
    array = isinstance(got, torch.Tensor) or type(got).__module__ == "numpy"
    if array and tuple(getattr(got, "shape", ())) == (2,):
        got = got.tolist()
    if not (isinstance(got, tuple | list) and len(got) == 2):
        raise CheckFailed(f"expected a pair (num_tokens, num_pairs), got {describe(got)} {where}")
    return whole_number(got[0], "num_tokens", where), whole_number(got[1], "num_pairs", where)


def _token_mistake(tokens: int, image_size: int, patch_size: int, where: str) -> str | None:
    """The sentence for a wrong number of tokens, or None when it is right."""
    side = image_size // patch_size
    T = side**2 + 1
    if tokens == T:
        return None
    if tokens == side**2:
        return f"{tokens} tokens {where}: you forgot the class token (T = N + 1)"
    if tokens in (side, side + 1):
        return (
            f"{tokens} tokens {where}: that is patches along one side; the grid is square, "
            "so N = (image_size // patch_size) ** 2"
        )
    if tokens in (2 * side, 2 * side + 1):
        return f"{tokens} tokens {where}: N = (image_size // patch_size) ** 2, the side squared, not times 2"
    if tokens in (image_size // patch_size**2, image_size // patch_size**2 + 1):
        return (
            f"{tokens} tokens {where}: ** binds tighter than //, so image_size // patch_size ** 2 divides by "
            "patch_size squared; write (image_size // patch_size) ** 2"
        )
    if tokens in (image_size**2, image_size**2 + 1):
        return f"{tokens} tokens {where}: that counts pixels; a token is a patch, N = (image_size // patch_size) ** 2"
    if tokens == T + 1:
        return f"{tokens} tokens {where}: T = N + 1, the N patches and exactly one class token"
    return f"expected {T} tokens {where}, got {tokens}"


def _pair_mistake(pairs: int, T: int, where: str) -> str | None:
    """The sentence for a wrong number of query-key pairs among T tokens, or None when it is right."""
    if pairs == T * T:
        return None
    if pairs in (2 * T, T * (T - 1) // 2):
        return f"{pairs} pairs {where}: every token scores every token, itself included, in both directions: T * T"
    if pairs == T * (T - 1):
        return f"{pairs} pairs {where}: a token scores itself too, so the pairs are T * T, not T * (T - 1)"
    if pairs == (T - 1) ** 2:
        return f"{pairs} pairs {where}: the class token attends and is attended to as well: T * T with T = N + 1"
    if pairs == T:
        return f"{pairs} pairs {where}: every token scores every token, not one each: T * T"
    if pairs == T**4:
        return f"{pairs} pairs {where}: that is T ** 4, the pairs squared once more; the pairs are T * T"
    if pairs > T * T and pairs % (T * T) == 0:
        return (
            f"{pairs} pairs {where}: that is {pairs // (T * T)} times T * T; one attention map (one head of one "
            "layer) scores T * T pairs"
        )
    return f"expected {T * T} query-key pairs {where}, got {pairs}"


def check_attention_cost(fn: Callable[[int, int], tuple[int, int]]) -> None:
    """Check a learner's attention_cost(image_size, patch_size) -> (num_tokens, num_pairs),
    for a square image with one class token added to the patch tokens."""
    cases = [(224, 16), (224, 32), (32, 4), (96, 8)]
    for image_size, patch_size in cases:
        where = f"for a {image_size} px image and {patch_size} px patches"
        got = call_learner(fn, image_size, patch_size, returns=object, where=where)
        tokens, pairs = _counts(got, where)
        T = (image_size // patch_size) ** 2 + 1
        if (tokens, pairs) == (T * T, T):
            raise CheckFailed(f"got ({tokens}, {pairs}) {where}: the two are swapped; return (num_tokens, num_pairs)")
        mistake = _token_mistake(tokens, image_size, patch_size, where) or _pair_mistake(pairs, T, where)
        if mistake:
            raise CheckFailed(mistake)
    print(f"✓ attention_cost is right on {len(cases)} image and patch sizes")


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
