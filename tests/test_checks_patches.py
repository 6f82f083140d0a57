"""Lesson 1's checkers pass the reference and name each typical mistake in words.

Each list of typical wrong implementations below is what learners write; every one must be caught
with a message that names its mistake (the regex), and never with a message that names another one.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from checker_cases import assert_each_named_as_itself

from utils import patchify
from utils.checks.core import CheckFailed
from utils.checks.patches import (
    check_jax_kernel_to_conv,
    check_overlapping_patches,
    check_patchify,
    check_patchify_rect,
)


def patchify_by_hand(images, P, order=(0, 2, 4, 1, 3, 5), sides=None):
    """patchify written out, with a switchable permute and (rows, cols) read from `sides`."""
    B, C, H, W = images.shape
    rows, cols = sides(H, W, P) if sides else (H // P, W // P)
    grid = images.reshape(B, C, rows, P, cols, P).permute(*order)
    return grid.reshape(B, -1, C * P * P)


def tensor_unfold_no_move(images, P):
    B, C, H, W = images.shape
    return images.unfold(2, P, P).unfold(3, P, P).reshape(B, -1, C * P * P)  # (B, C, rows, cols, P, P) flattened


def swapped_sides(images, P):
    B, C, W, H = images.shape  # unpacked in the wrong order
    grid = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return grid.reshape(B, -1, C * P * P)


def with_class_row(images, P, reference=patchify):
    patches = reference(images, P)
    return torch.cat([torch.zeros_like(patches[:, :1]), patches], dim=1)


def view_after_permute(images, P):
    B, C, H, W = images.shape
    return images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5).view(B, -1, C * P * P)


def split_in_wrong_order(images, P):
    """The sides split as (B, C, rows, cols, P, P): a reshape that reads the pixels in the wrong order."""
    B, C, H, W = images.shape
    grid = images.reshape(B, C, H // P, W // P, P, P).permute(0, 2, 3, 1, 4, 5)  # shaped like (B, rows, cols, C, P, P)
    return grid.reshape(B, -1, C * P * P)


def same_side_for_n(images, P):
    B, C, H, W = images.shape
    grid = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return grid.reshape(B, (H // P) ** 2, C * P * P)


PATCHIFY_MISTAKES = [  # (name, wrong patchify, regex naming the mistake)
    ("plain reshape", lambda x, P: x.reshape(x.shape[0], -1, x.shape[1] * P * P), "plain reshape"),
    ("channels last", lambda x, P: patchify_by_hand(x, P, (0, 2, 4, 3, 5, 1)), r"\(C, P, P\) order .* channels last"),
    ("column-major", lambda x, P: patchify_by_hand(x, P, (0, 4, 2, 1, 3, 5)), "column-major"),
    ("pixels transposed", lambda x, P: patchify_by_hand(x, P, (0, 2, 4, 1, 5, 3)), "pixels inside each patch"),
    ("tokens and values swapped", lambda x, P: patchify(x, P).transpose(1, 2), "the two last axes are swapped"),
    ("F.unfold not transposed", lambda x, P: F.unfold(x, P, stride=P), "the two last axes are swapped"),
    (
        "F.unfold reshaped",
        lambda x, P: F.unfold(x, P, stride=P).reshape(x.shape[0], -1, x.shape[1] * P * P),
        "F.unfold gives .* and a reshape",
    ),
    ("Tensor.unfold, channels not moved", tensor_unfold_no_move, "channel axis is still in front"),
    ("F.unfold without stride", lambda x, P: F.unfold(x, P).transpose(1, 2), "without stride=P slides"),
    ("grid kept", lambda x, P: patchify(x, P).reshape(x.shape[0], x.shape[2] // P, x.shape[3] // P, -1), "kept"),
    ("rows and cols swapped", swapped_sides, "rows and columns are swapped"),
    (
        "H // P for both sides",
        lambda x, P: patchify_by_hand(x, P, sides=lambda H, W, P: (H // P, H // P)),
        "not square",
    ),
    ("N = (H // P) ** 2", same_side_for_n, "not square"),
    ("view after permute", view_after_permute, r"RuntimeError.*\.reshape"),
    ("batch merged", lambda x, P: patchify(x, P).reshape(-1, x.shape[1] * P * P), "batch and token axes are merged"),
    ("patch not flattened", lambda x, P: patchify(x, P).reshape(*patchify(x, P).shape[:2], -1, P, P), "flatten it"),
    ("channels last + column-major", lambda x, P: patchify_by_hand(x, P, (0, 4, 2, 3, 5, 1)), r"axis order \(cols"),
    ("(P, C, P) inside a patch", lambda x, P: patchify_by_hand(x, P, (0, 2, 4, 3, 1, 5)), r"axis order .*P_row, C"),
    ("a class token row", with_class_row, "one row too many: patchify returns the N patches alone"),
    ("channels averaged", lambda x, P: patchify(x.mean(1, keepdim=True), P), "each patch keeps all C = 3 channels"),
    ("pixels normalised", lambda x, P: patchify(2 * x - 1, P), "other numbers than the input .*patchify only moves"),
    ("split as (B, C, rows, cols, P, P)", split_in_wrong_order, r"reshape\(B, C, rows, cols, P, P\), but a reshape"),
]


@pytest.mark.parametrize("name, wrong, words", PATCHIFY_MISTAKES, ids=[m[0] for m in PATCHIFY_MISTAKES])
def test_check_patchify_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_patchify(wrong)


def test_check_patchify_passes_the_reference_and_equivalents(capsys):
    check_patchify(patchify)
    assert capsys.readouterr().out == "✓ patchify matches the reference on 4 image batches: exact\n"
    check_patchify(lambda x, P: F.unfold(x, P, stride=P).transpose(1, 2))
    check_patchify(lambda x, P: x.unfold(2, P, P).unfold(3, P, P).permute(0, 2, 3, 1, 4, 5).flatten(3).flatten(1, 2))
    assert capsys.readouterr().out.count("✓") == 2


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda x, P: patchify(x, P).flip(-1), "max difference"),  # the image's numbers, in no axis order
        (lambda x, P: patchify(x, P) * 1.01, "other numbers than the input .*: patchify only moves the numbers"),
        (lambda x, P: patchify(x, P)[:1].expand(len(x), -1, -1), "other numbers than the input"),
        (lambda x, P: x.view(-1, P, P, 7), "your function raised RuntimeError"),
        (lambda x, P: patchify(x, P).numpy(), "expected a torch.Tensor, got ndarray"),
    ],
)
def test_check_patchify_is_neutral_when_it_cannot_tell(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_patchify(wrong)


# ---- patchify_rect: P_h x P_w patches ---------------------------------------------------------


def rect_by_hand(images, size, order=(0, 2, 4, 1, 3, 5), sides=None):
    """patchify for (P_h, P_w) patches written out, with a switchable permute and (rows, cols, P_h, P_w)
    read from `sides`."""
    B, C, H, W = images.shape
    P_h, P_w = size
    rows, P_a, cols, P_b = sides(H, W, P_h, P_w) if sides else (H // P_h, P_h, W // P_w, P_w)
    grid = images.reshape(B, C, rows, P_a, cols, P_b).permute(*order)
    return grid.reshape(B, -1, C * P_h * P_w)


def rect_reference(images, size):
    return F.unfold(images, size, stride=size).transpose(1, 2)


def rect_split_in_wrong_order(images, size):
    B, C, H, W = images.shape
    P_h, P_w = size
    grid = images.reshape(B, C, H // P_h, W // P_w, P_h, P_w).permute(0, 2, 3, 1, 4, 5)
    return grid.reshape(B, -1, C * P_h * P_w)


def square_patches(side):
    """The square-only patchify of the lesson's section 2, run with one side of the pair."""
    return lambda x, size: patchify(x, size[side])


def square_read_as_pairs(images, size):
    """Square P_h x P_h patches, flattened into the shape the pair asks for: no crash, wrong numbers."""
    B, C, H, W = images.shape
    P = size[0]
    grid = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return grid.reshape(B, -1, C * size[0] * size[1])


def tensor_unfold_without_batch(images, size, stride=None):
    """Section 3's unfold(1, ...).unfold(2, ...), for one (C, H, W) image, run on a batch."""
    P_h, P_w = size if isinstance(size, tuple) else (size, size)
    step_h, step_w = (stride, stride) if stride else (P_h, P_w)
    windows = images.unfold(1, P_h, step_h).unfold(2, P_w, step_w)
    return windows.permute(0, 2, 3, 1, 4, 5).reshape(images.shape[0], -1, images.shape[1] * P_h * P_w)


def unpacks_one_number(images, size):
    P = size
    B, C, H, W = images.shape
    return images.reshape(B, C, H // P, P, W // P, P)


RECT_MISTAKES = [  # (name, wrong patchify_rect, regex naming the mistake)
    ("split as (B, C, rows, cols, P_h, P_w)", rect_split_in_wrong_order, r"reshape\(B, C, rows, cols, P_h, P_w\)"),
    ("patch turned", lambda x, s: rect_by_hand(x, s, sides=lambda H, W, a, b: (H // b, b, W // a, a)), "turned"),
    ("square, side P_h", square_patches(0), r"your patches are square, 4 x 4"),
    ("square, side P_w", square_patches(1), r"your patches are square, 8 x 8"),
    ("channels last", lambda x, s: rect_by_hand(x, s, (0, 2, 4, 3, 5, 1)), r"\(C, P_h, P_w\) order .* channels last"),
    ("column-major", lambda x, s: rect_by_hand(x, s, (0, 4, 2, 1, 3, 5)), "column-major"),
    ("pixels transposed", lambda x, s: rect_by_hand(x, s, (0, 2, 4, 1, 5, 3)), "pixels inside each patch"),
    ("plain reshape", lambda x, s: x.reshape(x.shape[0], -1, x.shape[1] * s[0] * s[1]), "plain reshape"),
    ("Tensor.unfold, channels not moved", lambda x, s: rect_by_hand(x, s, (0, 1, 2, 4, 3, 5)), "channel axis"),
    ("F.unfold not transposed", lambda x, s: F.unfold(x, s, stride=s), "the two last axes are swapped"),
    ("F.unfold without stride", lambda x, s: F.unfold(x, s).transpose(1, 2), "without stride=.* slides"),
    (
        "rows and cols swapped",
        lambda x, s: rect_by_hand(x, s, sides=lambda H, W, a, b: (W // a, a, H // b, b)),
        "rows and columns are swapped",
    ),
    ("patch_size used as one number", unpacks_one_number, r"patch_size is a pair: unpack it"),
    ("a class token row", lambda x, s: with_class_row(x, s, rect_reference), "one row too many"),
    ("pixels normalised", lambda x, s: rect_reference(2 * x - 1, s), "other numbers than the input"),
    ("square, read into the right shape", square_read_as_pairs, r"your patches are square, 4 x 4"),
    (
        "F.unfold, stride passed as dilation",
        lambda x, s: F.unfold(x, s, s).transpose(1, 2),
        "third argument is the dilation",
    ),
    ("Tensor.unfold on dims 1 and 2", tensor_unfold_without_batch, "counts the batch axis too"),
]


@pytest.mark.parametrize("name, wrong, words", RECT_MISTAKES, ids=[m[0] for m in RECT_MISTAKES])
def test_check_patchify_rect_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_patchify_rect(wrong)


@pytest.mark.parametrize(
    "right",
    [
        rect_reference,
        rect_by_hand,
        lambda x, s: x.unfold(2, s[0], s[0]).unfold(3, s[1], s[1]).permute(0, 2, 3, 1, 4, 5).flatten(3).flatten(1, 2),
        lambda x, s: rect_by_hand(x, s).contiguous().double(),
    ],
    ids=["F.unfold", "reshape and permute", "Tensor.unfold", "float64"],
)
def test_check_patchify_rect_passes_any_right_patchify(right, capsys):
    check_patchify_rect(right)
    assert capsys.readouterr().out == (
        "✓ patchify_rect matches the reference on 4 image batches (tall, wide and square patches): exact\n"
    )


def test_a_square_only_patchify_fails_the_rect_check():
    """Section 2's patchify, for one P, cannot pass: the first case has 4 x 8 patches."""
    with pytest.raises(CheckFailed, match="patch_size is a pair"):
        check_patchify_rect(patchify)


# ---- overlapping patches ----------------------------------------------------------------------


def windows_by_hand(images, P, S, order=(0, 2, 3, 1, 4, 5)):
    """Tensor.unfold's (B, C, rows, cols, P, P) windows, permuted by `order`, flattened."""
    B, C = images.shape[:2]
    return images.unfold(2, P, S).unfold(3, P, S).permute(*order).reshape(B, -1, C * P * P)


def windows_in_a_loop(images, P, S):
    """Every window cut out with slicing, one by one: slow, but right."""
    B, C, H, W = images.shape
    rows = [
        images[:, :, r : r + P, c : c + P].reshape(B, -1)
        for r in range(0, H - P + 1, S)
        for c in range(0, W - P + 1, S)
    ]
    return torch.stack(rows, dim=1)  # (B, N, C*P*P)


def windows_padded(images, P, S):
    """Windows that run off the edge, into zero padding: H // S of them along H."""
    B, C, H, W = images.shape
    padded = F.pad(images, (0, P - S, 0, P - S))
    return windows_by_hand(padded, P, S)


def windows_one_too_few(images, P, S):
    B, C, H, W = images.shape
    return windows_by_hand(images, P, S)[:, : ((H - P) // S) * ((W - P) // S)]


OVERLAP_MISTAKES = [  # (name, wrong overlapping_patches, regex naming the mistake)
    ("stride ignored", lambda x, P, S: patchify(x, P), "non-overlapping patches: the window must step by stride"),
    ("F.unfold without stride", lambda x, P, S: F.unfold(x, P).transpose(1, 2), "slid one pixel at a time"),
    ("size and step swapped", lambda x, P, S: windows_by_hand(x, S, P), "size and step are swapped"),
    ("padded past the edge", windows_padded, r"wholly inside the image .* not H // stride"),
    ("one window too few", windows_one_too_few, r"one window too few .* \(H - P\) // stride \+ 1"),
    ("Tensor.unfold, channels not moved", lambda x, P, S: windows_by_hand(x, P, S, (0, 1, 2, 3, 4, 5)), "channel axis"),
    ("F.unfold not transposed", lambda x, P, S: F.unfold(x, P, stride=S), "the two last axes are swapped"),
    (
        "F.unfold reshaped",
        lambda x, P, S: F.unfold(x, P, stride=S).reshape(x.shape[0], -1, x.shape[1] * P * P),
        "F.unfold gives .* and a reshape",
    ),
    ("column-major", lambda x, P, S: windows_by_hand(x, P, S, (0, 3, 2, 1, 4, 5)), "column-major"),
    ("channels last", lambda x, P, S: windows_by_hand(x, P, S, (0, 2, 3, 4, 5, 1)), r"\(C, P, P\) order .* last"),
    ("pixels transposed", lambda x, P, S: windows_by_hand(x, P, S, (0, 2, 3, 1, 5, 4)), "pixels inside each window"),
    (
        "(P, C, P) order",
        lambda x, P, S: windows_by_hand(x, P, S, (0, 2, 3, 4, 1, 5)),
        r"axis order \(rows, cols, P_row, C",
    ),
    (
        "grid kept",
        lambda x, P, S: (
            F.unfold(x, P, stride=S)
            .reshape(x.shape[0], -1, (x.shape[2] - P) // S + 1, (x.shape[3] - P) // S + 1)
            .permute(0, 2, 3, 1)
        ),
        "kept the grid of windows",
    ),
    ("pixels normalised", lambda x, P, S: windows_by_hand(2 * x - 1, P, S), "other numbers than the image's windows"),
    ("F.unfold, stride passed as dilation", lambda x, P, S: F.unfold(x, P, S).transpose(1, 2), "the dilation, not"),
    ("Tensor.unfold on dims 1 and 2", tensor_unfold_without_batch, "counts the batch axis too"),
]


@pytest.mark.parametrize("name, wrong, words", OVERLAP_MISTAKES, ids=[m[0] for m in OVERLAP_MISTAKES])
def test_check_overlapping_patches_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_overlapping_patches(wrong)


@pytest.mark.parametrize(
    "right",
    [
        windows_by_hand,
        lambda x, P, S: F.unfold(x, P, stride=S).transpose(1, 2),
        windows_in_a_loop,
        lambda x, P, S: (
            F.conv2d(x, torch.eye(x.shape[1] * P * P).reshape(-1, x.shape[1], P, P), stride=S)
            .flatten(2)
            .transpose(1, 2)
        ),  # section 4's pick-a-pixel kernels, with stride S
    ],
    ids=["Tensor.unfold", "F.unfold", "a loop of slices", "one-hot conv"],
)
def test_check_overlapping_patches_passes_any_right_cut(right, capsys):
    check_overlapping_patches(right)
    assert capsys.readouterr().out == (
        "✓ overlapping_patches matches the reference on 5 image batches: exact; "
        "a 224 px image with P = 16 and stride 8 gives 27 x 27 = 729 patches (196 without overlap)\n"
    )


def test_the_overlap_reference_is_every_window_inside_the_image():
    """Independent of the checker: windows 2 px apart on a 1 x 1 x 4 x 6 image, read off by hand."""
    image = torch.arange(24.0).reshape(1, 1, 4, 6)
    patches = windows_by_hand(image, 2, 2)  # 2 x 3 windows of 2 x 2
    assert patches.shape == (1, 6, 4)
    assert patches[0, 0].tolist() == [0, 1, 6, 7] and patches[0, 5].tolist() == [16, 17, 22, 23]
    overlapping = windows_by_hand(image, 2, 1)  # 3 x 5 windows
    assert overlapping.shape == (1, 15, 4) and overlapping[0, 1].tolist() == [1, 2, 7, 8]


# ---- a right tensor spoiled: the dtype, NaN, autograd ------------------------------------------

SPOILED = [  # (how the right tensor is spoiled, the words for it)
    (lambda t: t.long(), "expected a float32 tensor, got int64"),
    (lambda t: t.half(), "expected a float32 tensor, got float16 .*half precision"),
    (lambda t: t > 0.5, "expected a float32 tensor, got bool"),
    (lambda t: t * float("nan"), "values are NaN"),
]


@pytest.mark.parametrize(
    "checker, reference",
    [(check_patchify, patchify), (check_patchify_rect, rect_reference), (check_overlapping_patches, windows_by_hand)],
)
@pytest.mark.parametrize("spoil, words", SPOILED, ids=["int64", "float16", "bool", "NaN"])
def test_a_spoiled_result_is_named(checker, reference, spoil, words):
    with pytest.raises(CheckFailed, match=words):
        checker(lambda *args: spoil(reference(*args)))


@pytest.mark.parametrize(
    "checker, reference",
    [(check_patchify, patchify), (check_patchify_rect, rect_reference), (check_overlapping_patches, windows_by_hand)],
)
def test_a_float64_result_passes_as_exact(checker, reference, capsys):
    """The same numbers in float64 (images turned into NumPy and back, say) are right: the values are compared."""
    checker(lambda *args: reference(*args).double())
    assert "image batches" in (out := capsys.readouterr().out) and ": exact" in out and "approximate" not in out


@pytest.mark.parametrize(
    "checker, reference",
    [(check_patchify, patchify), (check_patchify_rect, rect_reference), (check_overlapping_patches, windows_by_hand)],
)
def test_a_result_that_needs_grad_passes(checker, reference, capsys):
    checker(lambda *args: reference(*args).requires_grad_())
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    "checker, mistakes",
    [
        (check_patchify, PATCHIFY_MISTAKES),
        (check_patchify_rect, RECT_MISTAKES),
        (check_overlapping_patches, OVERLAP_MISTAKES),
    ],
    ids=["patchify", "patchify_rect", "overlapping_patches"],
)
def test_no_mistake_is_named_as_another(checker, mistakes):
    assert len(assert_each_named_as_itself(checker, mistakes)) == len(mistakes)


# ---- jax_kernel_to_conv -------------------------------------------------------------------------


def reference_conversion(kernel):
    """(P, P, C, D) = (height, width, in, out) -> (D, C, P, P) = (out, in, height, width)."""
    return kernel.permute(3, 2, 0, 1)


def kernel_reshaped(kernel, order):
    """The kernel's axes put in `order`, then read into the Conv2d shape (D, C, P, P)."""
    P, _, C, D = kernel.shape
    return kernel.permute(*order).reshape(D, C, P, P)


JAX_KERNEL_MISTAKES = [  # (name, wrong jax_kernel_to_conv, regex naming the mistake)
    ("unchanged", lambda k: k, r"JAX layout unchanged, \(P, P, C, D\)"),
    ("plain reshape", lambda k: kernel_reshaped(k, (0, 1, 2, 3)), "plain reshape re-reads"),
    ("H and W swapped", lambda k: k.permute(3, 2, 1, 0), "height and width are swapped"),
    ("all axes reversed, copied", lambda k: k.permute(3, 2, 1, 0).contiguous(), "height and width are swapped"),
    ("C and D swapped", lambda k: k.permute(2, 3, 0, 1), "C and D are swapped"),
    (
        "flattened, transposed, reshaped",
        lambda k: k.reshape(-1, k.shape[3]).T.reshape(k.shape[3], k.shape[2], k.shape[0], k.shape[1]),
        r"still in JAX's \(P, P, C\) order",
    ),
    ("flipped in space", lambda k: reference_conversion(k).flip(2, 3), "flipped in space"),
    ("channels last", lambda k: k.permute(3, 0, 1, 2), r"channels ended up last, \(D, P, P, C\)"),
    ("a Linear weight", lambda k: reference_conversion(k).reshape(k.shape[3], -1), r"Linear weight \(D, C\*P\*P\)"),
    ("the paper's E", lambda k: k.reshape(-1, k.shape[3]), r"flattened to the paper's E"),
    ("another axis order", lambda k: k.permute(3, 1, 2, 0), r"axis order \(D, P_col, C, P_row\)"),
    ("another order, reshaped", lambda k: kernel_reshaped(k, (3, 1, 0, 2)), r"axis order \(D, P_col, P_row, C\)"),
]


def test_the_reference_conversion_computes_what_jax_computes():
    """Independent of the checker: a channels-last image and a (P, P, C, D) kernel, convolved the
    way Flax's nn.Conv does (each output the sum over a patch of pixel times kernel), give the
    tokens of torch's Conv2d with the converted weight."""
    torch.manual_seed(0)
    P, C, D = 4, 3, 5
    kernel = torch.randn(P, P, C, D)
    images = torch.rand(2, C, 8, 12)  # (B, C, H, W)
    nhwc = images.permute(0, 2, 3, 1)  # (B, H, W, C), JAX's layout
    expected = torch.zeros(2, 2, 3, D)  # (B, rows, cols, D)
    for r in range(2):
        for c in range(3):
            window = nhwc[:, r * P : (r + 1) * P, c * P : (c + 1) * P, :]  # (B, P, P, C)
            expected[:, r, c] = (window[..., None] * kernel).sum(dim=(1, 2, 3))  # (B, D)
    tokens = F.conv2d(images, reference_conversion(kernel), stride=P).permute(0, 2, 3, 1)  # (B, rows, cols, D)
    torch.testing.assert_close(tokens, expected)


@pytest.mark.parametrize("name, wrong, words", JAX_KERNEL_MISTAKES, ids=[m[0] for m in JAX_KERNEL_MISTAKES])
def test_check_jax_kernel_to_conv_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_jax_kernel_to_conv(wrong)


def test_no_jax_kernel_mistake_is_named_as_another():
    assert len(assert_each_named_as_itself(check_jax_kernel_to_conv, JAX_KERNEL_MISTAKES)) == len(JAX_KERNEL_MISTAKES)


@pytest.mark.parametrize(
    "right",
    [
        reference_conversion,  # a view, not contiguous: as right as a copy
        lambda k: reference_conversion(k).contiguous(),
        lambda k: k.movedim((3, 2), (0, 1)),
        lambda k: torch.from_numpy(np.transpose(k.numpy(), (3, 2, 0, 1))),
        lambda k: torch.einsum("hwcd->dchw", k),
        lambda k: k.transpose(0, 3).transpose(1, 2).transpose(2, 3),
    ],
    ids=["permute", "contiguous", "movedim", "numpy transpose", "einsum", "three transposes"],
)
def test_check_jax_kernel_to_conv_passes_any_right_conversion(right, capsys):
    check_jax_kernel_to_conv(right)
    assert capsys.readouterr().out == (
        "✓ jax_kernel_to_conv matches the reference on 4 kernels: exact; "
        "a Conv2d with your weight gives the tokens of JAX's convolution\n"
    )


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda k: reference_conversion(k) * 2, "values differ from the reference: max difference"),
        (lambda k: None, "expected a torch.Tensor, got None"),
        (lambda k: k.numpy().transpose(3, 2, 0, 1), "expected a torch.Tensor, got ndarray"),
        (lambda k: reference_conversion(k).long(), "expected a float32 tensor, got int64"),
        (lambda k: reference_conversion(k) > 0, "expected a float32 tensor, got bool"),
        (lambda k: reference_conversion(k) * float("nan"), "values are NaN"),
        (lambda k: k.permute(3, 2, 0), "your function raised RuntimeError"),
        (lambda k: torch.zeros(7), r"got \(7,\)"),
    ],
)
def test_check_jax_kernel_to_conv_refuses_garbage(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_jax_kernel_to_conv(wrong)


def test_a_blank_jax_kernel_exercise_raises_its_hint():
    def blank(kernel):
        raise NotImplementedError("Hint: ...")

    with pytest.raises(NotImplementedError, match="Hint"):
        check_jax_kernel_to_conv(blank)
