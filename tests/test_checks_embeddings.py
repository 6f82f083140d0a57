"""Lesson 2's checkers pass the reference and name each typical mistake in words."""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from checker_cases import assert_each_named_as_itself

from utils import patchify, prepend_cls_token, resize_pos_embed, sincos_pos_embed_2d, unpatchify
from utils.checks.core import CheckFailed
from utils.checks.embeddings import (
    check_jigsaw_gap,
    check_resize_pos_embed,
    check_sincos_2d,
    check_token_sequence,
    check_xy_pos_embed,
)
from utils.embeddings import sincos_1d, xy_pos_embed

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


def cat_on_width(patches, E, cls_token, pos_embed):
    cls = cls_token.expand(len(patches), -1, -1)
    return torch.cat([cls, patches @ E], dim=2) + pos_embed


def stacked(patches, E, cls_token, pos_embed):
    return torch.stack([cls_token.expand(len(patches), -1, -1), patches @ E], dim=1) + pos_embed


def pos_before_cls(patches, E, cls_token, pos_embed):
    return prepend_cls_token(patches @ E + pos_embed, cls_token)


def E_first(patches, E, cls_token, pos_embed):
    return prepend_cls_token(E @ patches, cls_token) + pos_embed


def not_projected(patches, E, cls_token, pos_embed):
    return torch.cat([cls_token.expand(len(patches), -1, -1), patches], dim=1) + pos_embed


TOKEN_MISTAKES = [  # (name, wrong build_tokens, regex naming the mistake)
    ("E not applied", not_projected, "the patches are not projected"),
    ("class token appended", appended, "appended at the end; it must be prepended"),
    ("pos_embed not added", pos_not_added, "pos_embed is not added"),
    ("pos_embed concatenated on the width", pos_concatenated, "concatenated to the tokens; eq. 1 ADDS"),
    ("pos_embed concatenated on the tokens", pos_concatenated_on_tokens, "concatenated along the token axis"),
    ("no position for the class token", no_cls_position, r"class token got no position entry: pos_embed has N \+ 1"),
    ("positions shifted", shifted_positions, r"pos_embed\[:, :N\] shifts every patch"),
    ("class token not expanded", cls_not_expanded, r"not expanded over the batch; use cls_token.expand\(B, -1, -1\)"),
    ("E transposed", E_transposed, "projection is patches @ E"),
    ("E @ patches", E_first, "projection is patches @ E"),
    ("no class token", no_cls_token, "class token is missing"),
    ("torch.cat on the width", cat_on_width, r"along the token axis: torch.cat\(\[cls, tokens\], dim=1\)"),
    ("torch.stack", stacked, "torch.stack puts tensors on a new axis"),
    ("pos_embed added before the class token", pos_before_cls, "add it after prepending the class token"),
    (
        "class token added to every token",
        lambda p, E, c, pos: prepend_cls_token(p @ E + c, c) + pos,
        "the class token is added to every patch token too",
    ),
    ("pos_embed's first row only", lambda p, E, c, pos: right_tokens(p, E, c, pos[:, :1]), "pos_embed's first row"),
    (
        "scaled by sqrt(D)",
        lambda p, E, c, pos: prepend_cls_token(p @ E * E.shape[1] ** 0.5, c) + pos,
        r"the tokens are scaled by sqrt\(D\)",
    ),
]


@pytest.mark.parametrize("name, wrong, words", TOKEN_MISTAKES, ids=[m[0] for m in TOKEN_MISTAKES])
def test_check_token_sequence_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_token_sequence(wrong)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda *args: right_tokens(*args) * 1.01, "^values differ .* max difference"),
        (lambda *args: right_tokens(*args).tolist(), "expected a torch.Tensor"),
    ],
)
def test_check_token_sequence_is_neutral_when_it_cannot_tell(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_token_sequence(wrong)


def test_check_token_sequence_passes_the_reference(capsys):
    check_token_sequence(right_tokens)
    assert "✓" in capsys.readouterr().out
    check_token_sequence(lambda p, E, c, pos: prepend_cls_token(torch.einsum("bnk,kd->bnd", p, E), c) + pos)
    assert "✓" in capsys.readouterr().out


# ---- check_sincos_2d ------------------------------------------------------------------------


def sincos_by_hand(
    rows,
    cols,
    D,
    swap_axes=False,
    order="sin-cos",
    exponent=None,
    cls_row=True,
    temperature=10000,
    start=0,
    xy=False,
    dtype=torch.float32,
):
    """A 2-D table written independently of the checker, with switchable mistakes, in `dtype`."""
    q = D // 4
    exponent = exponent or (lambda i: i / q)
    omega = 1.0 / temperature ** exponent(torch.arange(q, dtype=torch.float64))
    indexing = "xy" if xy else "ij"  # "xy" lists the positions column by column
    row, col = (
        a.flatten().double() + start for a in torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing=indexing)
    )

    def code(pos):
        a = pos[:, None] * omega
        if order == "sin-cos":
            return torch.cat([a.sin(), a.cos()], 1)
        if order == "cos-sin":
            return torch.cat([a.cos(), a.sin()], 1)
        return torch.stack([a.sin(), a.cos()], 2).flatten(1)

    table = torch.cat([code(row), code(col)] if swap_axes else [code(col), code(row)], 1).to(dtype)
    if cls_row:
        table = torch.cat([torch.zeros(1, D, dtype=dtype), table])
    return table.unsqueeze(0)


def big_vision_port(h, w, width, temperature=10_000.0):
    """big_vision's posemb_sincos_2d (vit.py), line by line in torch: (1, h * w, width), no class-token row."""
    y, x = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")  # jnp.mgrid[:h, :w]
    omega = torch.arange(width // 4) / (width // 4 - 1)
    omega = 1.0 / (temperature**omega)
    y = torch.einsum("m,d->md", y.flatten().float(), omega)
    x = torch.einsum("m,d->md", x.flatten().float(), omega)
    pe = torch.cat([torch.sin(x), torch.cos(x), torch.sin(y), torch.cos(y)], dim=1)
    return pe.float()[None, :, :]


def lucidrains_port(h, w, dim, temperature=10000):
    """vit-pytorch's simple_vit posemb_sincos_2d: the same table as (h * w, dim), no batch axis."""
    y, x = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    omega = torch.arange(dim // 4) / (dim // 4 - 1)
    omega = 1.0 / (temperature**omega)
    y = y.flatten()[:, None] * omega[None, :]
    x = x.flatten()[:, None] * omega[None, :]
    return torch.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1).float()


BIG_VISION_WORDS = (
    r"that is big_vision's variant .*: omega_i = 1/10000\^\(i/\(D/4 - 1\)\) and no class-token row; "
    r"this exercise uses MAE's i/\(D/4\)"
)


def test_sincos_by_hand_is_the_reference():
    torch.testing.assert_close(sincos_by_hand(3, 5, 16), sincos_pos_embed_2d((3, 5), 16), atol=1e-6, rtol=0)


SINCOS_MISTAKES = [  # (name, wrong sincos_2d, regex naming the mistake)
    (
        "rows and columns swapped",
        lambda r, c, D: sincos_by_hand(r, c, D, swap_axes=True),
        "rows and columns are swapped",
    ),
    ("cos before sin", lambda r, c, D: sincos_by_hand(r, c, D, order="cos-sin"), "sin and cos are swapped"),
    (
        "interleaved",
        lambda r, c, D: sincos_by_hand(r, c, D, order="interleaved"),
        "interleaved .*original Transformer's 1-D code.*MAE's layout, used here, puts all the sines",
    ),
    ("1-D exponent 2i/D", lambda r, c, D: sincos_by_hand(r, c, D, exponent=lambda i: 2 * i / D), "full width D"),
    ("exponent i/D", lambda r, c, D: sincos_by_hand(r, c, D, exponent=lambda i: i / D), r"1/10000\^\(i/D\)"),
    ("not inverted", lambda r, c, D: sincos_by_hand(r, c, D, exponent=lambda i: -i / (D // 4)), "not inverted"),
    ("index from 1", lambda r, c, D: sincos_by_hand(r, c, D, exponent=lambda i: (i + 1) / (D // 4)), "starts at 1"),
    (
        "exponent over D/4 - 1",
        lambda r, c, D: sincos_by_hand(r, c, D, exponent=lambda i: i / (D // 4 - 1)),
        r"divided by D/4 - 1 in the exponent, as big_vision's variant .* this exercise uses MAE's i/\(D/4\)",
    ),
    ("big_vision's posemb_sincos_2d", lambda r, c, D: big_vision_port(r, c, D), BIG_VISION_WORDS),
    ("lucidrains' posemb_sincos_2d", lambda r, c, D: lucidrains_port(r, c, D), BIG_VISION_WORDS),
    (
        "temperature 1000",
        lambda r, c, D: sincos_by_hand(r, c, D, temperature=1000),
        "temperature of 1000; it must be 10000",
    ),
    ("temperature 10e4", lambda r, c, D: sincos_by_hand(r, c, D, temperature=10e4), r"temperature of 1e\+05"),
    ("positions from 1", lambda r, c, D: sincos_by_hand(r, c, D, start=1), "positions start at 1"),
    ("column-major positions", lambda r, c, D: sincos_by_hand(r, c, D, xy=True), "column-major"),
    (
        "rows and columns swapped + cos before sin",
        lambda r, c, D: sincos_by_hand(r, c, D, swap_axes=True, order="cos-sin"),
        "rows and columns are swapped.*sin and cos are swapped",
    ),
    (
        "column-major positions + interleaved",
        lambda r, c, D: sincos_by_hand(r, c, D, xy=True, order="interleaved"),
        "column-major.*interleaved",
    ),
    ("class token row missing", lambda r, c, D: sincos_by_hand(r, c, D, cls_row=False), "class token's row is missing"),
    ("batch axis missing", lambda r, c, D: sincos_by_hand(r, c, D)[0], "batch axis is missing"),
    (
        "class token row last",
        lambda r, c, D: torch.cat([sincos_by_hand(r, c, D, cls_row=False), torch.zeros(1, 1, D)], 1),
        "zero row must come FIRST",
    ),
    (
        "class token row of ones",
        lambda r, c, D: torch.cat([torch.ones(1, 1, D), sincos_by_hand(r, c, D, cls_row=False)], 1),
        r"must be all zeros .*; the patch rows are right",
    ),
    ("one axis coded", lambda r, c, D: sincos_by_hand(r, c, D)[..., : D // 2], "only one axis is coded"),
    (
        "D/2 frequencies per axis",
        lambda r, c, D: sincos_by_hand(r, c, 2 * D, exponent=lambda i: i / (D // 4)),
        "too wide: you made D/2 frequencies per axis",
    ),
]


@pytest.mark.parametrize("name, wrong, words", SINCOS_MISTAKES, ids=[m[0] for m in SINCOS_MISTAKES])
def test_check_sincos_2d_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_sincos_2d(wrong)


NAMED_SINCOS = (
    "swapped|interleaved|full width|not inverted|starts at 1|divided by D/4 - 1|temperature|positions start|column"
)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (
            lambda r, c, D: sincos_by_hand(r, c, D, exponent=lambda i: i / (3 * D)),
            r"frequencies are wrong: yours are 1/10000\^\(i/\(3 D\)\)",
        ),
        (lambda r, c, D: sincos_by_hand(r, c, D) * 0.5, "^values differ"),
        (lambda r, c, D: torch.rand(1, r * c + 1, D), "max difference"),
        (  # positions 0 .. 1 instead of 0, 1, 2, ...: the same angles as other frequencies
            lambda r, c, D: sincos_by_hand(r, c, D, exponent=lambda i: i / (D // 4) + math.log(max(r, c), 10000)),
            "frequencies are wrong.*positions are scaled",
        ),
    ],
)
def test_check_sincos_2d_is_neutral_when_it_cannot_tell(wrong, words):
    with pytest.raises(CheckFailed, match=words) as failure:
        check_sincos_2d(wrong)
    assert not re.search(NAMED_SINCOS, str(failure.value))


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


def resize_by_hand(pos_embed, old, new, reshape="right", back="right", whole=None, **options):
    """The resize exercise, with switchable mistakes; whole: a table laid out on the grid as it is,
    its class entry included (a reshape error)."""
    (r, c), (nr, nc) = old, new
    D = pos_embed.shape[-1]
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:] if whole is None else whole
    if reshape == "right":
        image = grid.reshape(1, r, c, D).permute(0, 3, 1, 2)
    elif reshape == "straight":
        image = grid.reshape(1, D, r, c)
    elif reshape == "permuted":
        image = grid.reshape(1, r, c, D).permute(0, 3, 2, 1)  # (1, D, c, r)
    else:  # swapped
        image = grid.reshape(1, c, r, D).permute(0, 3, 2, 1)
    settings = dict(mode="bicubic", align_corners=False, antialias=True) | options
    image = F.interpolate(image, size=(nr, nc), **settings)
    if back == "right":
        grid = image.permute(0, 2, 3, 1).reshape(1, nr * nc, D)
    elif back == "permuted":
        grid = image.permute(0, 3, 2, 1).reshape(1, nr * nc, D)
    else:
        grid = image.reshape(1, nr * nc, D)
    return torch.cat([cls, grid], dim=1)


RESIZE_MISTAKES = [  # (name, wrong resize, regex naming the mistake)
    (
        "reshaped straight to an image",
        lambda p, o, n: resize_by_hand(p, o, n, reshape="straight"),
        r"reshaped the \(1, N, D\) table straight to \(1, D",
    ),
    (
        "reshaped straight to an image and straight back",
        lambda p, o, n: resize_by_hand(p, o, n, reshape="straight", back="straight"),
        r"reshaped the \(N, D\) rows straight to \(1, D, rows, cols\) and back, with no permute: .*"
        r"reshape to \(1, rows, cols, D\) and permute to \(1, D, rows, cols\)",
    ),
    (
        "class entry laid out on the grid",
        lambda p, o, n: resize_by_hand(p, o, n, whole=p),
        r"pos_embed has 1 \+ rows \* cols entries, one more than the grid has places: keep the class entry apart",
    ),
    (
        "square grid assumed",
        lambda p, o, n: resize_by_hand(p, (round((p.shape[1] - 1) ** 0.5),) * 2, n),
        r"the grid is 3 x 5, not square: take its rows and columns from old_grid",
    ),
    (
        "reshaped straight back",
        lambda p, o, n: resize_by_hand(p, o, n, back="straight"),
        "after interpolating you reshaped",
    ),
    (
        "grid read as (cols, rows)",
        lambda p, o, n: resize_by_hand(p, o, n, reshape="swapped"),
        "rows and columns are swapped",
    ),
    (
        "permute(0, 3, 2, 1) in",
        lambda p, o, n: resize_by_hand(p, o, n, reshape="permuted"),
        "rows and columns are swapped",
    ),
    (
        "permute(0, 3, 2, 1) in and out",
        lambda p, o, n: resize_by_hand(p, o, n, reshape="permuted", back="permuted"),
        "rows and columns are swapped",
    ),
    ("size (cols, rows)", lambda p, o, n: resize_by_hand(p, o, n[::-1]), "rows and columns are swapped"),
    ("bilinear", lambda p, o, n: resize_by_hand(p, o, n, mode="bilinear", antialias=False), "not 'bilinear'"),
    (
        "nearest",
        lambda p, o, n: resize_by_hand(p, o, n, mode="nearest", align_corners=None, antialias=False),
        "nearest",
    ),
    ("no antialias", lambda p, o, n: resize_by_hand(p, o, n, antialias=False), "antialias=True"),
    ("align_corners=True", lambda p, o, n: resize_by_hand(p, o, n, align_corners=True), "align_corners=False"),
    ("class entry dropped", lambda p, o, n: resize_by_hand(p, o, n)[:, 1:], "class token's entry is missing"),
    ("everything scaled", lambda p, o, n: resize_by_hand(p, o, n) * 1.5, "class token's entry changed"),
    (
        "class entry last",
        lambda p, o, n: torch.cat([resize_by_hand(p, o, n)[:, 1:], p[:, :1]], 1),
        "class token's entry must come first",
    ),
    (
        "grid not back to a sequence",
        lambda p, o, n: F.interpolate(
            p[:, 1:].reshape(1, *o, -1).permute(0, 3, 1, 2), size=n, mode="bicubic", antialias=True
        ),
        "bring the grid back to a sequence",
    ),
]


@pytest.mark.parametrize("name, wrong, words", RESIZE_MISTAKES, ids=[m[0] for m in RESIZE_MISTAKES])
def test_check_resize_pos_embed_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_resize_pos_embed(wrong)


def test_check_resize_pos_embed_is_neutral_when_it_cannot_tell():
    def shifted(p, o, n):
        D = p.shape[-1]
        return resize_by_hand(p, o, n) + torch.cat([torch.zeros(1, 1, D), torch.full((1, n[0] * n[1], D), 0.1)], 1)

    with pytest.raises(CheckFailed, match="^values differ .* max difference"):
        check_resize_pos_embed(shifted)


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


# ---- check_xy_pos_embed: the learned 2-D table of the paper's Appendix D.4 -------------------


def xy_by_loop(x_embed, y_embed):
    rows, cols = len(y_embed), len(x_embed)
    return torch.stack([torch.cat([x_embed[c], y_embed[r]]) for r in range(rows) for c in range(cols)])


def xy_by_expand(x_embed, y_embed):
    rows, cols = len(y_embed), len(x_embed)
    x = x_embed[None].expand(rows, -1, -1)  # (rows, cols, D/2)
    y = y_embed[:, None].expand(-1, cols, -1)  # (rows, cols, D/2)
    return torch.cat([x, y], dim=-1).reshape(rows * cols, -1)


def xy_by_repeat(x_embed, y_embed):
    rows, cols = len(y_embed), len(x_embed)
    return torch.cat([x_embed.repeat(rows, 1), y_embed.repeat_interleave(cols, dim=0)], dim=1)


def xy_by_meshgrid(x_embed, y_embed, indexing="ij"):
    rows, cols = len(y_embed), len(x_embed)
    r, c = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing=indexing)
    return torch.cat([x_embed[c.flatten()], y_embed[r.flatten()]], dim=1)


def xy_swapped(x_embed, y_embed):
    rows, cols = len(y_embed), len(x_embed)
    return torch.cat([y_embed.repeat_interleave(cols, dim=0), x_embed.repeat(rows, 1)], dim=1)


def xy_column_major_swapped(x_embed, y_embed):
    rows, cols = len(y_embed), len(x_embed)
    r, c = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="xy")  # (cols, rows): column by column
    return torch.cat([y_embed[r.flatten()], x_embed[c.flatten()]], dim=1)


def xy_wrong_axis(x_embed, y_embed):
    rows, cols = len(y_embed), len(x_embed)
    return torch.stack([torch.cat([x_embed[r], y_embed[c]]) for r in range(rows) for c in range(cols)])


def xy_expand_wrong_axis(x_embed, y_embed):
    rows, cols = len(y_embed), len(x_embed)
    x = x_embed[:, None].expand(rows, -1, -1)  # x_embed spread along the wrong axis
    return torch.cat([x, y_embed[:, None].expand(-1, cols, -1)], dim=-1).reshape(rows * cols, -1)


def xy_one_detached(x_embed, y_embed):
    return xy_by_repeat(x_embed.detach(), y_embed)


def xy_via_list(x_embed, y_embed):
    return torch.tensor(xy_by_loop(x_embed, y_embed).tolist())


XY_MISTAKES = [  # (name, wrong xy_pos_embed, regex naming the mistake)
    (
        "added",
        lambda x, y: x.repeat(len(y), 1) + y.repeat_interleave(len(x), dim=0),
        "you added the two embeddings",
    ),
    ("torch.stack", lambda x, y: torch.stack([x.repeat(len(y), 1), y.repeat_interleave(len(x), 0)], 1), "new axis"),
    (
        "cat on the patch axis",
        lambda x, y: torch.cat([x.repeat(len(y), 1), y.repeat_interleave(len(x), 0)]),
        "patch axis",
    ),
    ("not flattened", lambda x, y: xy_by_expand(x, y).reshape(len(y), len(x), -1), "not flattened: reshape"),
    (
        "(cols, rows, D)",
        lambda x, y: xy_by_expand(x, y).reshape(len(y), len(x), -1).transpose(0, 1),
        r"the grid is \(cols, rows, D\)",
    ),
    ("batch axis", lambda x, y: xy_by_expand(x, y)[None], "no batch axis here"),
    ("Y first", xy_swapped, r"the Y \(row\) embedding comes first; the paper concatenates"),
    ("column-major", lambda x, y: xy_by_meshgrid(x, y, indexing="xy"), "listed column by column"),
    ("column-major + Y first", xy_column_major_swapped, r"column by column.*the Y \(row\) embedding comes first"),
    ("rows cycle", lambda x, y: torch.cat([x.repeat(len(y), 1), y.repeat(len(x), 1)], 1), "the rows cycle"),
    (
        "columns held",
        lambda x, y: torch.cat([x.repeat_interleave(len(y), 0), y.repeat_interleave(len(x), 0)], 1),
        "each column is held for several patches",
    ),
    ("tables indexed by the other axis", xy_wrong_axis, "each table is indexed by its own axis"),
    ("expanded along the wrong axis", xy_expand_wrong_axis, "each must be spread over the other axis"),
    ("detached", lambda x, y: xy_by_repeat(x, y).detach(), "the result carries no gradient"),
    ("through a list", xy_via_list, "the result carries no gradient"),
    ("one table detached", xy_one_detached, "x_embed gets no gradient"),
]


@pytest.mark.parametrize("name, wrong, words", XY_MISTAKES, ids=[m[0] for m in XY_MISTAKES])
def test_check_xy_pos_embed_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_xy_pos_embed(wrong)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda x, y: xy_by_repeat(x, y) * 1.01, "^values differ .* max difference"),
        (lambda x, y: torch.rand(len(x) * len(y), 2 * x.shape[1]), "^values differ .* max difference"),
        (lambda x, y: x, r"^expected shape \(15, 8\), got \(5, 4\) .*: one row per patch"),
    ],
)
def test_check_xy_pos_embed_is_neutral_when_it_cannot_tell(wrong, words):
    with pytest.raises(CheckFailed, match=words) as failure:
        check_xy_pos_embed(wrong)
    assert not re.search("column by column|comes first|rows cycle|held|own axis|gradient", str(failure.value))


@pytest.mark.parametrize(
    "right",
    [xy_by_loop, xy_by_expand, xy_by_repeat, xy_by_meshgrid, xy_pos_embed, lambda x, y: xy_by_repeat(x, y).double()],
)
def test_check_xy_pos_embed_passes_the_reference(right, capsys):
    check_xy_pos_embed(right)
    out = capsys.readouterr().out.strip()
    assert out.startswith("✓") and re.search(r": (exact|approximate \(max difference [0-9.e+-]+\))$", out)


# ---- a right tensor spoiled: the dtype, NaN, autograd ------------------------------------------

REFERENCES = [
    (check_token_sequence, right_tokens),
    (check_sincos_2d, lambda r, c, D: sincos_pos_embed_2d((r, c), D)),
    (check_resize_pos_embed, resize_pos_embed),
    (check_xy_pos_embed, xy_pos_embed),
]
REFERENCE_IDS = ["tokens", "sincos", "resize", "xy"]
SPOILED = [  # (how the right tensor is spoiled, the words for it)
    (lambda t: t.long(), "expected a float32 tensor, got int64"),
    (lambda t: t.half(), "expected a float32 tensor, got float16 .*half precision"),
    (lambda t: t > 0.5, "expected a float32 tensor, got bool"),
    (lambda t: t * float("nan"), "values are NaN"),
]


@pytest.mark.parametrize("checker, reference", REFERENCES, ids=REFERENCE_IDS)
@pytest.mark.parametrize("spoil, words", SPOILED, ids=["int64", "float16", "bool", "NaN"])
def test_a_spoiled_result_is_named(checker, reference, spoil, words):
    with pytest.raises(CheckFailed, match=words):
        checker(lambda *args: spoil(reference(*args)))


@pytest.mark.parametrize("checker, reference", REFERENCES, ids=REFERENCE_IDS)
def test_a_float64_result_passes_as_exact(checker, reference, capsys):
    """The same numbers in float64 are right: the values are compared, not the dtype."""
    checker(lambda *args: reference(*args).double())
    assert capsys.readouterr().out.endswith(": exact\n")


def test_a_sincos_table_computed_in_float64_passes(capsys):
    check_sincos_2d(lambda r, c, D: sincos_by_hand(r, c, D, dtype=torch.float64))
    out = capsys.readouterr().out
    assert out.startswith("✓ sincos_2d matches the reference table on 4 grids") and "max difference" in out


@pytest.mark.parametrize("checker, reference", REFERENCES[:3], ids=REFERENCE_IDS[:3])
def test_a_result_that_needs_grad_passes(checker, reference, capsys):  # xy_pos_embed's must come from its tables
    checker(lambda *args: reference(*args).detach().requires_grad_())
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    "checker, mistakes",
    [
        (check_token_sequence, TOKEN_MISTAKES),
        (check_sincos_2d, SINCOS_MISTAKES),
        (check_resize_pos_embed, RESIZE_MISTAKES),
        (check_xy_pos_embed, XY_MISTAKES),
    ],
    ids=["build_tokens", "sincos_2d", "resize", "xy_pos_embed"],
)
def test_no_mistake_is_named_as_another(checker, mistakes):
    assert len(assert_each_named_as_itself(checker, mistakes)) == len(mistakes)


# ---- check_jigsaw_gap: a whole ViT, its images and their shuffled patches ------------------------


def jigsaw(images, P, order):
    return unpatchify(patchify(images, P)[:, order], P, tuple(images.shape[-2:]))


def gap_by_patchify(model, images, order, how=lambda a, b: (a - b).abs().max().item(), P=None, size=None):
    """The jigsaw test, with switchable mistakes: how the gap is taken, the patch size, the image size."""
    P = P or model.config.patch_size
    moved = unpatchify(patchify(images, P)[:, order], P, size or tuple(images.shape[-2:]))
    with torch.no_grad():
        return how(model(images), model(moved))


def gap_by_reshape(model, images, order):
    """Written without the library: the grid of patches by reshape and permute, as in lesson 1."""
    B, C, H, W = images.shape
    P = model.config.patch_size
    grid = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5).reshape(B, -1, C, P, P)
    moved = grid[:, order].reshape(B, H // P, W // P, C, P, P).permute(0, 3, 1, 4, 2, 5).reshape(B, C, H, W)
    return (model(images) - model(moved)).abs().max()


def gap_inverse(model, images, order):
    P = model.config.patch_size
    patches = patchify(images, P)
    moved = torch.empty_like(patches)
    moved[:, order] = patches  # patch i goes to place order[i]
    return (model(images) - model(unpatchify(moved, P, tuple(images.shape[-2:])))).abs().max()


def gap_pixel_rows(model, images, order):
    rows = torch.arange(images.shape[-2]).flip(0)  # every row of pixels moved, the patches broken up
    return (model(images) - model(images[:, :, rows])).abs().max()


JIGSAW_MISTAKES = [  # (name, wrong jigsaw_gap, regex naming the mistake)
    ("no jigsaw made", lambda m, x, o: (m(x) - m(x)).abs().max(), "your gap is 0: the model saw the same input twice"),
    ("inverse order", gap_inverse, r"you moved patch i of the images to place order\[i\]"),
    ("mean, not max", lambda m, x, o: gap_by_patchify(m, x, o, how=lambda a, b: (a - b).abs().mean()), "averaged"),
    (
        "signed max",
        lambda m, x, o: gap_by_patchify(m, x, o, how=lambda a, b: (a - b).max()),
        "take the absolute value of the differences before the max",
    ),
    ("pixel rows shuffled", gap_pixel_rows, "without positions the gap must be 0 .*each intact"),
    (
        "patch size 4 for every model",
        lambda m, x, o: gap_by_patchify(m, x, o, P=4),
        r"this model's patches are 8 x 8, not 4 x 4: take P from model.config.patch_size",
    ),
    (
        "square images assumed",
        lambda m, x, o: gap_by_patchify(m, x, o, size=(x.shape[-2],) * 2),
        r"the images are 32 x 48, not 32 x 32: take \(H, W\) from images.shape",
    ),
    (
        "one gap per image",
        lambda m, x, o: gap_by_patchify(m, x, o, how=lambda a, b: (a - b).abs().amax(dim=1)),
        r"expected one number, got Tensor .* shape \(2,\)",
    ),
    ("the model returned", lambda m, x, o: m, "the gap must be a number, got VisionTransformer"),
    ("NaN", lambda m, x, o: float("nan"), "the gap is nan"),
]


@pytest.mark.parametrize("name, wrong, words", JIGSAW_MISTAKES, ids=[m[0] for m in JIGSAW_MISTAKES])
def test_check_jigsaw_gap_names_the_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_jigsaw_gap(wrong)


def test_check_jigsaw_gap_names_each_mistake_as_itself():
    assert len(assert_each_named_as_itself(check_jigsaw_gap, JIGSAW_MISTAKES)) == len(JIGSAW_MISTAKES)


def test_check_jigsaw_gap_is_neutral_when_it_cannot_tell():
    with pytest.raises(CheckFailed, match=r"^your gap is [0-9.e-]+, the reference's"):
        check_jigsaw_gap(lambda m, x, o: gap_by_patchify(m, x, o) * 3)


@pytest.mark.parametrize(
    "right",
    [
        gap_by_patchify,
        gap_by_reshape,
        lambda m, x, o: gap_by_patchify(m, x, o, how=lambda a, b: (a - b).abs().max()),  # a 0-d tensor
        lambda m, x, o: gap_by_patchify(m, x, o, how=lambda a, b: (b - a).abs().max().numpy()),  # NumPy
        lambda m, x, o: gap_by_patchify(m, x, o, how=lambda a, b: (a - b).norm(p=float("inf")).item()),
    ],
    ids=["patchify", "reshape", "tensor", "numpy", "inf-norm"],
)
def test_check_jigsaw_gap_passes_the_reference(right, capsys):
    check_jigsaw_gap(right)
    out = capsys.readouterr().out
    assert out.startswith("✓ jigsaw_gap matches the reference on 4 ViTs") and "changes nothing (gap 0.0000" in out


def test_check_jigsaw_gap_leaves_the_global_random_numbers_alone():
    torch.manual_seed(0)
    before = torch.random.get_rng_state()
    check_jigsaw_gap(gap_by_patchify)
    assert torch.equal(torch.random.get_rng_state(), before)
