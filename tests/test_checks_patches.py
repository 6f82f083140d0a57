"""Lesson 1's checkers pass the reference and name each typical mistake in words.

Each list of typical wrong implementations below is what learners write; every one must be caught
with a message that names its mistake (the regex), and never with a message that names another one.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from checker_cases import assert_each_named_as_itself

from utils import patchify, unpatchify
from utils.checks.core import CheckFailed
from utils.checks.patches import check_attention_cost, check_jax_kernel_to_conv, check_patchify, check_unpatchify


def patchify_by_hand(images, P, order=(0, 2, 4, 1, 3, 5), sides=None):
    """patchify written out, with a switchable permute and (rows, cols) read from `sides`."""
    B, C, H, W = images.shape
    rows, cols = sides(H, W, P) if sides else (H // P, W // P)
    grid = images.reshape(B, C, rows, P, cols, P).permute(*order)
    return grid.reshape(B, -1, C * P * P)


def unpatchify_by_hand(patches, P, size, order=(0, 3, 1, 4, 2, 5), read=None, sides=None, last=None):
    """unpatchify written out, with a switchable permute, grid reading, (rows, cols) and last (H, W)."""
    H, W = size
    B, N, CPP = patches.shape
    C = CPP // (P * P)
    rows, cols = sides(H, W, P) if sides else (H // P, W // P)
    grid = patches.reshape(B, rows, cols, *(read(C, P) if read else (C, P, P))).permute(*order)
    return grid.reshape(B, C, *(last(H, W) if last else (H, W)))


def tensor_unfold_no_move(images, P):
    B, C, H, W = images.shape
    return images.unfold(2, P, P).unfold(3, P, P).reshape(B, -1, C * P * P)  # (B, C, rows, cols, P, P) flattened


def swapped_sides(images, P):
    B, C, W, H = images.shape  # unpacked in the wrong order
    grid = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return grid.reshape(B, -1, C * P * P)


def with_class_row(images, P):
    patches = patchify(images, P)
    return torch.cat([torch.zeros_like(patches[:, :1]), patches], dim=1)


def view_after_permute(images, P):
    B, C, H, W = images.shape
    return images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5).view(B, -1, C * P * P)


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
]

UNPATCHIFY_MISTAKES = [  # (name, wrong unpatchify, regex naming the mistake)
    ("plain reshape", lambda p, P, size: p.reshape(p.shape[0], -1, *size), "straight to the image"),
    (
        "channels last inside a patch",
        lambda p, P, s: unpatchify_by_hand(p, P, s, (0, 5, 1, 3, 2, 4), read=lambda C, P: (P, P, C)),
        r"read them as \(P, P, C\)",
    ),
    ("column-major", lambda p, P, s: unpatchify_by_hand(p, P, s, (0, 3, 2, 4, 1, 5)), "column-major"),
    ("pixels transposed", lambda p, P, s: unpatchify_by_hand(p, P, s, (0, 3, 1, 5, 2, 4)), "pixels inside each"),
    ("image transposed", lambda p, P, s: unpatchify(p, P, s).transpose(2, 3), "images come out transposed"),
    ("not interleaved", lambda p, P, s: unpatchify_by_hand(p, P, s, (0, 3, 1, 2, 4, 5)), "not interleaved"),
    ("patchify's permute again", lambda p, P, s: unpatchify_by_hand(p, P, s, (0, 2, 4, 1, 3, 5)), "again"),
    (
        "rows and cols swapped",
        lambda p, P, s: unpatchify_by_hand(p, P, s, sides=lambda H, W, P: (W // P, H // P)),
        "rows and columns are swapped",
    ),
    (
        "H // P for both",
        lambda p, P, s: unpatchify_by_hand(p, P, s, sides=lambda H, W, P: (H // P, H // P)),
        "not square",
    ),
    ("C from // P", lambda p, P, s: p.reshape(p.shape[0], s[0] // P, s[1] // P, p.shape[2] // P, P, P), "C = "),
    ("channels last", lambda p, P, s: unpatchify(p, P, s).permute(0, 2, 3, 1), "channels ended up last"),
    (
        "no last reshape",
        lambda p, P, s: p.reshape(p.shape[0], s[0] // P, s[1] // P, -1, P, P).permute(0, 3, 1, 4, 2, 5),
        r"reshape the grid .* to the image",
    ),
    ("F.fold not transposed", lambda p, P, s: F.fold(p, s, P, stride=P), "F.fold wants"),
    ("F.fold without stride", lambda p, P, s: F.fold(p.transpose(1, 2), s, P), "F.fold needs stride=P"),
    ("H for both in the end", lambda p, P, s: unpatchify_by_hand(p, P, s, last=lambda H, W: (H, H)), "not square"),
    ("(P, C, P) order", lambda p, P, s: unpatchify_by_hand(p, P, s, (0, 4, 1, 3, 2, 5)), r"axis order \(P_row"),
    ("scaled to 0..255", lambda p, P, s: 255 * unpatchify(p, P, s), "other numbers than the input .*unpatchify only"),
]


@pytest.mark.parametrize("name, wrong, words", PATCHIFY_MISTAKES, ids=[m[0] for m in PATCHIFY_MISTAKES])
def test_check_patchify_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_patchify(wrong)


@pytest.mark.parametrize("name, wrong, words", UNPATCHIFY_MISTAKES, ids=[m[0] for m in UNPATCHIFY_MISTAKES])
def test_check_unpatchify_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_unpatchify(wrong)


def test_check_patchify_passes_the_reference_and_equivalents(capsys):
    check_patchify(patchify)
    assert capsys.readouterr().out == "✓ patchify matches the reference on 4 image batches: exact\n"
    check_patchify(lambda x, P: F.unfold(x, P, stride=P).transpose(1, 2))
    check_patchify(lambda x, P: x.unfold(2, P, P).unfold(3, P, P).permute(0, 2, 3, 1, 4, 5).flatten(3).flatten(1, 2))
    assert capsys.readouterr().out.count("✓") == 2


def test_check_unpatchify_passes_the_reference_and_fold(capsys):
    check_unpatchify(unpatchify)
    assert capsys.readouterr().out == "✓ unpatchify inverts patchify on 4 image batches: exact\n"
    check_unpatchify(lambda p, P, size: F.fold(p.transpose(1, 2), size, P, stride=P))
    assert "✓" in capsys.readouterr().out


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


# ---- attention_cost ---------------------------------------------------------------------------


def cost(tokens, pairs):
    """An attention_cost from formulas for the tokens (of side = image_size // patch_size) and the pairs."""
    return lambda s, p: (tokens(s, p), pairs(tokens(s, p)))


def T(s, p):
    return (s // p) ** 2 + 1


ATTENTION_COST_MISTAKES = [  # (name, wrong attention_cost, regex naming the mistake)
    ("no class token", cost(lambda s, p: (s // p) ** 2, lambda t: t * t), "forgot the class token"),
    ("one side", cost(lambda s, p: s // p, lambda t: t * t), "one side"),
    ("one side plus one", cost(lambda s, p: s // p + 1, lambda t: t * t), "one side"),
    ("side times 2", cost(lambda s, p: (s // p) * 2 + 1, lambda t: t * t), "not times 2"),
    ("precedence", cost(lambda s, p: s // p**2 + 1, lambda t: t * t), r"\*\* binds tighter than //"),
    ("2 T pairs", cost(T, lambda t: 2 * t), "in both directions: T \\* T"),
    ("each pair once", cost(T, lambda t: t * (t - 1) // 2), "in both directions: T \\* T"),
    ("no self pairs", cost(T, lambda t: t * (t - 1)), r"scores itself too.*not T \* \(T - 1\)"),
    ("N * N pairs", lambda s, p: (T(s, p), (s // p) ** 4), "class token attends"),
    ("one pair per token", cost(T, lambda t: t), "not one each"),
    ("swapped", lambda s, p: (T(s, p) ** 2, T(s, p)), "swapped"),
    ("pixels as tokens", cost(lambda s, p: s * s + 1, lambda t: t * t), "that counts pixels; a token is a patch"),
    ("two class tokens", cost(lambda s, p: T(s, p) + 1, lambda t: t * t), "exactly one class token"),
    ("every head of a ViT-B", cost(T, lambda t: 12 * t * t), r"that is 12 times T \* T; one attention map"),
    ("pairs squared again", cost(T, lambda t: t**4), r"that is T \*\* 4"),
]


@pytest.mark.parametrize("name, wrong, words", ATTENTION_COST_MISTAKES, ids=[m[0] for m in ATTENTION_COST_MISTAKES])
def test_check_attention_cost_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_attention_cost(wrong)


@pytest.mark.parametrize(
    "right",
    [
        cost(T, lambda t: t * t),
        lambda s, p: [T(s, p), T(s, p) ** 2],
        lambda s, p: torch.tensor([T(s, p), T(s, p) ** 2]),
        lambda s, p: np.array([T(s, p), T(s, p) ** 2]),
        lambda s, p: (np.int64(T(s, p)), np.int64(T(s, p) ** 2)),
        lambda s, p: (float(T(s, p)), float(T(s, p) ** 2)),  # whole floats, as (s / p) ** 2 + 1 gives
        lambda s, p: (torch.tensor(T(s, p)), torch.tensor(T(s, p)) ** 2),
    ],
    ids=["tuple", "list", "tensor", "numpy array", "numpy ints", "whole floats", "0-d tensors"],
)
def test_check_attention_cost_accepts_any_pair_of_whole_numbers(right, capsys):
    check_attention_cost(right)
    assert capsys.readouterr().out == "✓ attention_cost is right on 4 image and patch sizes\n"


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda s, p: (float("nan"), 1), "num_tokens must be a whole number, got nan"),
        (lambda s, p: ("a", "b"), "num_tokens must be a whole number, got str 'a'"),
        (lambda s, p: (None, None), "num_tokens must be a whole number, got None"),
        (lambda s, p: (True, True), "num_tokens must be a whole number, got bool True"),
        (lambda s, p: (T(s, p), T(s, p) ** 2 + 0.5), "num_pairs must be a whole number, got 38809.5"),
        (lambda s, p: (T(s, p) + 0.5, 1), "num_tokens must be a whole number, got 197.5"),
        (lambda s, p: (T(s, p), float("inf")), "num_pairs must be a whole number, got inf"),
        (lambda s, p: None, "expected a pair .*, got None"),
        (lambda s, p: [T(s, p)], r"expected a pair .*, got list of 1 \(int\)"),
        (lambda s, p: (1, 2, 3), r"got tuple of 3"),
        (lambda s, p: torch.tensor([[1, 2]]), r"got Tensor of dtype int64 and shape \(1, 2\)"),
        (lambda s, p: torch.tensor([True, False]), "num_tokens must be a whole number, got bool True"),
        (lambda s, p: "197, 38809", "got str"),
        (lambda s, p: s / 0, "your function raised ZeroDivisionError"),
    ],
)
def test_check_attention_cost_refuses_what_is_not_a_pair_of_whole_numbers(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_attention_cost(wrong)


# ---- a right tensor spoiled: the dtype, NaN, autograd ------------------------------------------

SPOILED = [  # (how the right tensor is spoiled, the words for it)
    (lambda t: t.long(), "expected a float32 tensor, got int64"),
    (lambda t: t.half(), "expected a float32 tensor, got float16 .*half precision"),
    (lambda t: t > 0.5, "expected a float32 tensor, got bool"),
    (lambda t: t * float("nan"), "values are NaN"),
]


@pytest.mark.parametrize("checker, reference", [(check_patchify, patchify), (check_unpatchify, unpatchify)])
@pytest.mark.parametrize("spoil, words", SPOILED, ids=["int64", "float16", "bool", "NaN"])
def test_a_spoiled_result_is_named(checker, reference, spoil, words):
    with pytest.raises(CheckFailed, match=words):
        checker(lambda *args: spoil(reference(*args)))


@pytest.mark.parametrize("checker, reference", [(check_patchify, patchify), (check_unpatchify, unpatchify)])
def test_a_float64_result_passes_as_exact(checker, reference, capsys):
    """The same numbers in float64 (images turned into NumPy and back, say) are right: the values are compared."""
    checker(lambda *args: reference(*args).double())
    assert capsys.readouterr().out.endswith("image batches: exact\n")


@pytest.mark.parametrize("checker, reference", [(check_patchify, patchify), (check_unpatchify, unpatchify)])
def test_a_result_that_needs_grad_passes(checker, reference, capsys):
    checker(lambda *args: reference(*args).requires_grad_())
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    "checker, mistakes",
    [
        (check_patchify, PATCHIFY_MISTAKES),
        (check_unpatchify, UNPATCHIFY_MISTAKES),
        (check_attention_cost, ATTENTION_COST_MISTAKES),
    ],
    ids=["patchify", "unpatchify", "attention_cost"],
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
