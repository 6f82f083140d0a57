"""The exercise checkers pass the reference and name each typical mistake in words."""

import pytest

from utils import patchify, unpatchify
from utils.checks.core import CheckFailed
from utils.checks.patches import check_attention_cost, check_patchify, check_unpatchify


def channels_last_patchify(images, P):
    B, C, H, W = images.shape
    grid = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)  # (B, rows, cols, P, P, C)
    return grid.reshape(B, -1, C * P * P)


def column_major_patchify(images, P):
    B, C, H, W = images.shape
    grid = images.reshape(B, C, H // P, P, W // P, P).permute(0, 4, 2, 1, 3, 5)  # (B, cols, rows, C, P, P)
    return grid.reshape(B, -1, C * P * P)


def reshape_only_patchify(images, P):
    B, C, H, W = images.shape
    return images.reshape(B, (H // P) * (W // P), C * P * P)


def grid_kept_patchify(images, P):
    B, C, H, W = images.shape
    return patchify(images, P).reshape(B, H // P, W // P, -1)


def crashing_patchify(images, P):
    return images.view(-1, P, P, 7)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (channels_last_patchify, r"\(C, P, P\) order .* channels last"),
        (column_major_patchify, "column-major"),
        (reshape_only_patchify, "plain reshape"),
        (lambda images, P: patchify(images, P).transpose(1, 2), "swapped"),
        (grid_kept_patchify, "kept the patch grid"),
        (lambda images, P: patchify(images, P) * 1.01, "max difference"),
        (crashing_patchify, "your function raised RuntimeError"),
        (lambda images, P: patchify(images, P).numpy(), "expected a torch.Tensor"),
    ],
)
def test_check_patchify_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_patchify(wrong)


def test_check_patchify_passes_the_reference(capsys):
    check_patchify(patchify)
    assert "exact" in capsys.readouterr().out


def test_check_unpatchify(capsys):
    check_unpatchify(unpatchify)
    assert "exact" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="transposed"):
        check_unpatchify(lambda p, P, size: unpatchify(p, P, size).transpose(2, 3))
    with pytest.raises(CheckFailed, match="channels ended up last"):
        check_unpatchify(lambda p, P, size: unpatchify(p, P, size).permute(0, 2, 3, 1))
    with pytest.raises(CheckFailed, match="reverse order"):
        check_unpatchify(lambda p, P, size: p.reshape(p.shape[0], -1, *size))


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda s, p: ((s // p) ** 2, (s // p) ** 4), "forgot the class token"),
        (lambda s, p: (s // p + 1, (s // p + 1) ** 2), "one side"),
        (lambda s, p: ((s // p) ** 2 + 1, 2 * ((s // p) ** 2 + 1)), "T \\* T"),
        (lambda s, p: ((s // p) ** 2 + 1, (s // p) ** 2 + 1), "expected .* pairs"),
        (lambda s, p: [(s // p) ** 2 + 1], "expected a pair"),
    ],
)
def test_check_attention_cost_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_attention_cost(wrong)


def test_check_attention_cost_passes_the_right_formula(capsys):
    check_attention_cost(lambda s, p: ((s // p) ** 2 + 1, ((s // p) ** 2 + 1) ** 2))
    assert "✓" in capsys.readouterr().out
