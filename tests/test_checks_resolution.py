"""Lesson 12's checkers (utils.checks.resolution): a right answer passes with one ✓ line, legitimate
variants pass, and each typical mistake is named as itself."""

import re

import pytest
import torch
import torch.nn.functional as F
from checker_cases import assert_each_named_as_itself

from utils.checks.core import CheckFailed
from utils.checks.resolution import check_block_mask, check_resize_kernel, check_scaled_angles
from utils.packing import pack
from utils.patches import patch_resize_matrix
from utils.vit import VisionTransformer, ViTConfig


def block_mask(lengths):
    """A right answer written another way than the checker's reference: torch's block_diag."""
    return torch.block_diag(*[torch.ones(length, length) for length in lengths]).bool()


def scaled_angles(row, col, head_dim, train_grid, new_grid):
    bands = 1.0 / 10000 ** (torch.arange(head_dim // 4) / (head_dim // 4))
    return torch.cat([row * train_grid[0] / new_grid[0] * bands, col * train_grid[1] / new_grid[1] * bands])


def resize_kernel(weight, new_patch_size):
    D, C, P, _ = weight.shape
    Q = new_patch_size
    basis = torch.eye(P * P, dtype=weight.dtype).reshape(P * P, 1, P, P)
    R = F.interpolate(basis, size=(Q, Q), mode="bilinear", align_corners=False).reshape(P * P, Q * Q).T
    return (weight.reshape(D * C, P * P) @ torch.linalg.pinv(R.T).T).reshape(D, C, Q, Q)


def test_right_answers_pass_with_one_line(capsys):
    check_block_mask(block_mask)
    check_scaled_angles(scaled_angles)
    check_resize_kernel(resize_kernel)
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("✓") for line in lines)


def test_legitimate_variants_pass():
    check_block_mask(lambda lengths: block_mask(lengths).float())  # 0 / 1 numbers
    check_block_mask(lambda lengths: torch.block_diag(*[torch.ones(n, n) for n in lengths]).long())
    check_resize_kernel(lambda w, q: resize_kernel(w.double(), q).float())
    check_resize_kernel(  # the library's R, and its pseudo-inverse in float64
        lambda w, q: (
            (w.double().reshape(-1, w.shape[-1] ** 2) @ torch.linalg.pinv(patch_resize_matrix(w.shape[-1], q).T).T)
            .reshape(*w.shape[:2], q, q)
            .float()
        )
    )


def test_the_mask_is_packs_own():
    model = VisionTransformer(ViTConfig.tiny(image_size=8, in_channels=1, patch_size=2, num_classes=10))
    images = [torch.rand(1, 8, 8), torch.rand(1, 4, 6), torch.rand(1, 6, 2)]
    packed = pack(model, images)
    assert torch.equal(packed.mask, block_mask([length for _, length in packed.segments]))


def test_each_mask_mistake_is_named():
    def from_zero(lengths):
        T = sum(lengths)
        mask = torch.zeros(T, T, dtype=torch.bool)
        for n in lengths:
            mask[:n, :n] = True
        return mask

    assert_each_named_as_itself(
        check_block_mask,
        [
            ("no mask", lambda lengths: torch.ones(sum(lengths), sum(lengths), dtype=torch.bool), "every token may"),
            ("swapped", lambda lengths: ~block_mask(lengths), "True and False are swapped"),
            ("causal", lambda lengths: block_mask(lengths).tril(), "causal"),
            ("itself", lambda lengths: torch.eye(sum(lengths), dtype=torch.bool), "sees only itself"),
            ("from zero", from_zero, "starts at token 0"),
            ("per image", lambda lengths: torch.eye(len(lengths), dtype=torch.bool), "not per image pair"),
        ],
    )


def test_each_angle_mistake_is_named():
    def bands(d, over):
        return 1.0 / 10000 ** (torch.arange(d // 4) / over)

    assert_each_named_as_itself(
        check_scaled_angles,
        [
            ("as is", lambda r, c, d, o, n: scaled_angles(r, c, d, n, n), "not scaled"),
            (
                "inverted",
                lambda r, c, d, o, n: scaled_angles(r * n[0] / o[0], c * n[1] / o[1], d, (1, 1), (1, 1)),
                "upside down",
            ),
            ("rows' scale", lambda r, c, d, o, n: scaled_angles(r, c, d, o, (n[0], o[1] * n[0] / o[0])), "rows' scale"),
            (
                "swapped",
                lambda r, c, d, o, n: scaled_angles(c * o[1] / n[1], r * o[0] / n[0], d, (1, 1), (1, 1)),
                "swapped",
            ),
            (
                "bands",
                lambda r, c, d, o, n: torch.cat(
                    [r * o[0] / n[0] * bands(d, d // 2), c * o[1] / n[1] * bands(d, d // 2)]
                ),
                "head_dim / 2 bands",
            ),
            ("doubled", lambda r, c, d, o, n: scaled_angles(r, c, d, o, n).repeat_interleave(2), "one angle per pair"),
        ],
    )


def test_each_kernel_mistake_is_named():
    def interpolated(w, q):
        return F.interpolate(w, size=(q, q), mode="bilinear", align_corners=False)

    def with_R(w, q, mode="bilinear", transpose=True):
        D, C, P, _ = w.shape
        R = patch_resize_matrix(P, q, mode).float()
        inverse = torch.linalg.pinv(R.T if transpose else R)
        return (w.reshape(D * C, P * P) @ (inverse.T if transpose else inverse)).reshape(D, C, q, q)

    assert_each_named_as_itself(
        check_resize_kernel,
        [
            ("like an image", interpolated, "resized like an image: that changes"),
            ("area", lambda w, q: interpolated(w, q) * (w.shape[-1] / q) ** 2, "scaled by the area"),
            ("nearest", lambda w, q: with_R(w, q, "nearest"), "nearest-neighbour"),
            ("old size", lambda w, q: w, "still has the old patch size"),
        ],
    )


def test_returning_the_first_parameter_fails():
    for checker in (check_block_mask, check_scaled_angles, check_resize_kernel):
        with pytest.raises(CheckFailed):
            checker(lambda first, *rest: first)


def test_a_blank_exercise_raises_not_implemented():
    def blank(*args):
        raise NotImplementedError("your code here")

    with pytest.raises(NotImplementedError):
        check_block_mask(blank)
    assert re.search("✓", "✓")
