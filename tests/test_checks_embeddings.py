"""Lesson 2's checkers pass the reference and name each typical mistake in words."""

import re

import pytest
import torch
import torch.nn.functional as F

from utils import prepend_cls_token, resize_pos_embed, sincos_pos_embed_2d
from utils.checks.core import CheckFailed
from utils.checks.embeddings import check_resize_pos_embed, check_sincos_2d, check_token_sequence
from utils.embeddings import sincos_1d

# ---- check_token_sequence -------------------------------------------------------------------


def right_tokens(patches, E, cls_token, pos_embed):
    tokens = patches @ E  # (B, N, D)
    return torch.cat([cls_token.expand(len(patches), -1, -1), tokens], dim=1) + pos_embed


def appended(patches, E, cls_token, pos_embed):
    return torch.cat([patches @ E, cls_token.expand(len(patches), -1, -1)], dim=1) + pos_embed


def pos_not_added(patches, E, cls_token, pos_embed):
    return prepend_cls_token(patches @ E, cls_token)


def pos_concatenated(patches, E, cls_token, pos_embed):
    z = prepend_cls_token(patches @ E, cls_token)
    return torch.cat([z, pos_embed.expand(len(patches), -1, -1)], dim=-1)  # (B, T, 2D)


def pos_concatenated_on_tokens(patches, E, cls_token, pos_embed):
    z = prepend_cls_token(patches @ E, cls_token)
    return torch.cat([z, pos_embed.expand(len(patches), -1, -1)], dim=1)  # (B, 2T, D)


def no_cls_position(patches, E, cls_token, pos_embed):
    tokens = patches @ E + pos_embed[:, 1:]
    return prepend_cls_token(tokens, cls_token)


def shifted_positions(patches, E, cls_token, pos_embed):
    N = patches.shape[1]
    return prepend_cls_token(patches @ E + pos_embed[:, :N], cls_token)


def cls_not_expanded(patches, E, cls_token, pos_embed):
    return torch.cat([cls_token, patches @ E], dim=1) + pos_embed


def E_transposed(patches, E, cls_token, pos_embed):
    return prepend_cls_token(patches @ E.T, cls_token) + pos_embed


def no_cls_token(patches, E, cls_token, pos_embed):
    return patches @ E + pos_embed[:, 1:]


@pytest.mark.parametrize(
    "wrong, words",
    [
        (appended, "appended at the end; it must be prepended"),
        (pos_not_added, "pos_embed is not added"),
        (pos_concatenated, "concatenated to the tokens; eq. 1 ADDS"),
        (pos_concatenated_on_tokens, "concatenated along the token axis"),
        (no_cls_position, "class token got no position entry"),
        (shifted_positions, r"pos_embed\[:, :N\] shifts every patch"),
        (cls_not_expanded, r"not expanded over the batch; use cls_token.expand\(B, -1, -1\)"),
        (E_transposed, "projection is patches @ E"),
        (no_cls_token, "class token is missing"),
        (lambda *args: right_tokens(*args) * 1.01, "max difference"),
        (lambda *args: right_tokens(*args).tolist(), "expected a torch.Tensor"),
    ],
)
def test_check_token_sequence_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_token_sequence(wrong)


def test_check_token_sequence_passes_the_reference(capsys):
    check_token_sequence(right_tokens)
    assert "✓" in capsys.readouterr().out
    check_token_sequence(lambda p, E, c, pos: prepend_cls_token(torch.einsum("bnk,kd->bnd", p, E), c) + pos)
    assert "✓" in capsys.readouterr().out


# ---- check_sincos_2d ------------------------------------------------------------------------


def sincos_by_hand(rows, cols, D, swap_axes=False, order="sin-cos", exponent=None, cls_row=True):
    """A 2-D table written independently of the checker, with switchable mistakes."""
    q = D // 4
    exponent = exponent or (lambda i: i / q)
    omega = 1.0 / 10000 ** exponent(torch.arange(q, dtype=torch.float64))
    row = torch.arange(rows).repeat_interleave(cols).double()
    col = torch.arange(cols).repeat(rows).double()

    def code(pos):
        a = pos[:, None] * omega
        if order == "sin-cos":
            return torch.cat([a.sin(), a.cos()], 1)
        if order == "cos-sin":
            return torch.cat([a.cos(), a.sin()], 1)
        return torch.stack([a.sin(), a.cos()], 2).flatten(1)

    table = torch.cat([code(row), code(col)] if swap_axes else [code(col), code(row)], 1).float()
    if cls_row:
        table = torch.cat([torch.zeros(1, D), table])
    return table.unsqueeze(0)


def test_sincos_by_hand_is_the_reference():
    torch.testing.assert_close(sincos_by_hand(3, 5, 16), sincos_pos_embed_2d((3, 5), 16), atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda r, c, D: sincos_by_hand(r, c, D, swap_axes=True), "rows and columns are swapped"),
        (lambda r, c, D: sincos_by_hand(r, c, D, order="cos-sin"), "sin and cos are swapped"),
        (lambda r, c, D: sincos_by_hand(r, c, D, order="interleaved"), "interleaved"),
        (lambda r, c, D: sincos_by_hand(r, c, D, exponent=lambda i: 2 * i / D), "full width D"),
        (lambda r, c, D: sincos_by_hand(r, c, D, exponent=lambda i: i / D), r"1/10000\^\(i/D\)"),
        (lambda r, c, D: sincos_by_hand(r, c, D, exponent=lambda i: -i / (D // 4)), "not inverted"),
        (lambda r, c, D: sincos_by_hand(r, c, D, exponent=lambda i: (i + 1) / (D // 4)), "starts at 1"),
        (lambda r, c, D: sincos_by_hand(r, c, D, exponent=lambda i: i / (D // 4 - 1)), "D/4 - 1"),
        (lambda r, c, D: sincos_by_hand(r, c, D, exponent=lambda i: i / (3 * D)), "frequencies are wrong"),
        (
            lambda r, c, D: sincos_by_hand(r, c, D, swap_axes=True, order="cos-sin"),
            "rows and columns are swapped.*sin and cos are swapped",
        ),
        (lambda r, c, D: sincos_by_hand(r, c, D, cls_row=False), "class token's row is missing"),
        (lambda r, c, D: sincos_by_hand(r, c, D)[0], "batch axis is missing"),
        (
            lambda r, c, D: torch.cat([sincos_by_hand(r, c, D, cls_row=False), torch.zeros(1, 1, D)], 1),
            "zero row must come FIRST",
        ),
        (
            lambda r, c, D: torch.cat([torch.ones(1, 1, D), sincos_by_hand(r, c, D, cls_row=False)], 1),
            r"must be all zeros .*; the patch rows are right",
        ),
        (lambda r, c, D: sincos_by_hand(r, c, D)[..., : D // 2], "only one axis is coded"),
        (lambda r, c, D: torch.rand(1, r * c + 1, D), "max difference"),
    ],
)
def test_check_sincos_2d_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_sincos_2d(wrong)


def test_check_sincos_2d_passes_the_reference(capsys):
    check_sincos_2d(lambda r, c, D: sincos_pos_embed_2d((r, c), D))
    assert re.search(r": (exact|approximate \(max difference [0-9.e+-]+\))$", capsys.readouterr().out.strip())

    def float32_version(rows, cols, D):  # computed in float32 throughout: close enough
        omega = 1.0 / 10000 ** (torch.arange(D // 4) / (D // 4))
        row = torch.arange(rows).repeat_interleave(cols)[:, None] * omega
        col = torch.arange(cols).repeat(rows)[:, None] * omega
        table = torch.cat([col.sin(), col.cos(), row.sin(), row.cos()], dim=1)
        return torch.cat([torch.zeros(1, D), table]).unsqueeze(0)

    check_sincos_2d(float32_version)
    assert "✓" in capsys.readouterr().out
    check_sincos_2d(
        lambda r, c, D: torch.cat(
            [
                torch.zeros(1, 1, D),
                torch.cat(
                    [
                        sincos_1d(torch.arange(c).repeat(r), D // 2),
                        sincos_1d(torch.arange(r).repeat_interleave(c), D // 2),
                    ],
                    1,
                )[None],
            ],
            1,
        )
    )
    assert "✓" in capsys.readouterr().out


# ---- check_resize_pos_embed -----------------------------------------------------------------


def resize_by_hand(pos_embed, old, new, reshape="right", back="right", **options):
    (r, c), (nr, nc) = old, new
    D = pos_embed.shape[-1]
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:]
    if reshape == "right":
        image = grid.reshape(1, r, c, D).permute(0, 3, 1, 2)
    elif reshape == "straight":
        image = grid.reshape(1, D, r, c)
    else:  # swapped
        image = grid.reshape(1, c, r, D).permute(0, 3, 2, 1)
    settings = dict(mode="bicubic", align_corners=False, antialias=True) | options
    image = F.interpolate(image, size=(nr, nc), **settings)
    grid = image.permute(0, 2, 3, 1).reshape(1, nr * nc, D) if back == "right" else image.reshape(1, nr * nc, D)
    return torch.cat([cls, grid], dim=1)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda p, o, n: resize_by_hand(p, o, n, reshape="straight"), "straight to \\(1, D, rows, cols\\)"),
        (lambda p, o, n: resize_by_hand(p, o, n, back="straight"), "permute\\(0, 2, 3, 1\\)"),
        (lambda p, o, n: resize_by_hand(p, o, n, reshape="swapped"), "rows and columns are swapped"),
        (lambda p, o, n: resize_by_hand(p, o, n, mode="bilinear", antialias=False), "not 'bilinear'"),
        (lambda p, o, n: resize_by_hand(p, o, n, antialias=False), "antialias=True"),
        (lambda p, o, n: resize_by_hand(p, o, n, align_corners=True), "align_corners=False"),
        (lambda p, o, n: resize_by_hand(p, o, n)[:, 1:], "class token's entry is missing"),
        (lambda p, o, n: resize_by_hand(p, o, n) * 1.5, "class token's entry changed"),
        (
            lambda p, o, n: F.interpolate(
                p[:, 1:].reshape(1, *o, -1).permute(0, 3, 1, 2), size=n, mode="bicubic", antialias=True
            ),
            "bring the grid back to a sequence",
        ),
        (
            lambda p, o, n: (
                resize_by_hand(p, o, n)
                + torch.cat([torch.zeros(1, 1, p.shape[-1]), torch.full((1, n[0] * n[1], p.shape[-1]), 0.1)], 1)
            ),
            "max difference",
        ),
    ],
)
def test_check_resize_pos_embed_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_resize_pos_embed(wrong)


def test_check_resize_pos_embed_passes_the_reference(capsys):
    check_resize_pos_embed(resize_by_hand)
    assert re.search(r": (exact|approximate \(max difference [0-9.e+-]+\))$", capsys.readouterr().out.strip())
    check_resize_pos_embed(lambda p, o, n: resize_pos_embed(p, o, n))
    assert re.search(r": (exact|approximate \(max difference [0-9.e+-]+\))$", capsys.readouterr().out.strip())


def test_a_last_bit_difference_still_counts_as_exact(capsys):
    check_resize_pos_embed(lambda p, o, n: resize_pos_embed(p, o, n) * (1 + 2**-23))
    assert re.search(r": (exact|approximate \(max difference [0-9.e+-]+\))$", capsys.readouterr().out.strip())
    check_resize_pos_embed(lambda p, o, n: resize_pos_embed(p, o, n) + 5e-6)
    assert "approximate (max difference 5.0e-06)" in capsys.readouterr().out
