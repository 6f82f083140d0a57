"""Class token, 2-D sin-cos positions (vs a NumPy re-derivation of MAE's layout, and ports of MAE's and
timm's functions), Gaussian-bump
tables (vs the bumps' own cosine similarities, computed in NumPy), resizing."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from utils.embeddings import (
    gaussian_pos_embed,
    grid_coordinates,
    grid_distance,
    neighbour_similarity,
    pos_embed_similarity,
    prepend_cls_token,
    resize_pos_embed,
    sincos_1d,
    sincos_pos_embed_2d,
    trunc_normal_,
    xy_pos_embed,
)
from utils.patches import patchify


def numpy_sincos_2d(rows: int, cols: int, D: int) -> np.ndarray:
    """MAE's layout, written independently: [sin(col w), cos(col w), sin(row w), cos(row w)],
    w_i = 1 / 10000**(i / (D/4)), patches in row-major order. Returns (rows*cols, D)."""
    quarter = D // 4
    omega = 1.0 / 10000 ** (np.arange(quarter, dtype=np.float64) / quarter)
    row, col = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    row, col = row.reshape(-1), col.reshape(-1)  # row-major: the column varies fastest
    col_angles, row_angles = np.outer(col, omega), np.outer(row, omega)
    return np.concatenate([np.sin(col_angles), np.cos(col_angles), np.sin(row_angles), np.cos(row_angles)], axis=1)


# ---- trunc_normal_ ----------------------------------------------------------------------


@pytest.mark.parametrize("std", [0.02, 1.0])
def test_trunc_normal_is_cut_at_two_std(std):
    torch.manual_seed(0)
    x = torch.empty(500_000)
    assert trunc_normal_(x, std=std) is x  # in place
    assert x.abs().max() <= 2 * std
    # a normal cut at +-2 sigma keeps sigma * 0.8796 of its standard deviation
    assert 0.86 * std < x.std() < 0.90 * std
    assert abs(x.mean()) < 0.01 * std
    assert (x.abs() > 1.5 * std).float().mean() > 0.05  # really spread out to the cut, not squeezed


# ---- sincos_pos_embed_2d ----------------------------------------------------------------


@pytest.mark.parametrize("grid, D", [(4, 16), ((3, 5), 8), (14, 64), ((2, 7), 32)])
def test_sincos_equals_numpy_reference(grid, D):
    rows, cols = (grid, grid) if isinstance(grid, int) else grid
    table = sincos_pos_embed_2d(grid, D, cls_token=False)
    assert table.shape == (1, rows * cols, D)
    assert table.dtype == torch.float32
    expected = torch.from_numpy(numpy_sincos_2d(rows, cols, D)).float().unsqueeze(0)
    torch.testing.assert_close(table, expected, atol=1e-6, rtol=0)


def test_sincos_class_token_row_is_zero_and_rest_unchanged():
    with_cls = sincos_pos_embed_2d((3, 4), 16, cls_token=True)
    without = sincos_pos_embed_2d((3, 4), 16, cls_token=False)
    assert with_cls.shape == (1, 13, 16)
    assert torch.equal(with_cls[0, 0], torch.zeros(16))
    torch.testing.assert_close(with_cls[:, 1:], without)  # sin/cos may differ in the last bit


def test_sincos_first_half_codes_column_second_half_row():
    D = 16
    table = sincos_pos_embed_2d((3, 4), D, cls_token=False)[0].reshape(3, 4, D)
    # same column, other row: the first half is identical, the second is not
    torch.testing.assert_close(table[0, 2, : D // 2], table[2, 2, : D // 2])
    assert not torch.allclose(table[0, 2, D // 2 :], table[2, 2, D // 2 :])
    # same row, other column: the other way round
    torch.testing.assert_close(table[1, 0, D // 2 :], table[1, 3, D // 2 :])
    assert not torch.allclose(table[1, 0, : D // 2], table[1, 3, : D // 2])


@pytest.mark.parametrize("grid, D", [(14, 64), (8, 32), (14, 768)])
def test_sincos_neighbours_are_more_similar_than_far_patches(grid, D):
    table = F.normalize(sincos_pos_embed_2d(grid, D, cls_token=False)[0], dim=1)
    similarity = table @ table.T  # (N, N) cosine similarity
    row = torch.arange(grid).repeat_interleave(grid)
    col = torch.arange(grid).repeat(grid)
    distance = ((row[:, None] - row[None]) ** 2 + (col[:, None] - col[None]) ** 2).float().sqrt()
    assert similarity[distance == 1].min() > similarity[distance >= 2].max()
    torch.testing.assert_close(similarity.diagonal(), torch.ones(grid * grid), atol=1e-5, rtol=0)


def mae_sincos_2d(embed_dim: int, grid_size: int) -> np.ndarray:
    """MAE's get_2d_sincos_pos_embed (facebookresearch/mae, util/pos_embed.py), line by line, without
    its class-token row: meshgrid(grid_w, grid_h), "w goes first", so its "emb_h" half codes the column."""
    grid_h = np.arange(grid_size, dtype=np.float32)
    grid_w = np.arange(grid_size, dtype=np.float32)
    grid = np.stack(np.meshgrid(grid_w, grid_h), axis=0).reshape([2, 1, grid_size, grid_size])

    def one_d(dim, pos):
        omega = np.arange(dim // 2, dtype=np.float64) / (dim / 2.0)
        omega = 1.0 / 10000**omega
        out = np.einsum("m,d->md", pos.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)

    return np.concatenate([one_d(embed_dim // 2, grid[0]), one_d(embed_dim // 2, grid[1])], axis=1)


def timm_sincos_2d(feat_shape, dim, reverse_coord=False, interleave_sin_cos=False) -> torch.Tensor:
    """timm's build_sincos2d_pos_embed (timm/layers/pos_embed_sincos.py), line by line, defaults as
    there: the grid stacked (row, col), then [sin, cos] of both, i.e. [sin row, sin col, cos row, cos col]."""
    pos_dim = dim // 4
    bands = 1.0 / (10000.0 ** (torch.arange(0, pos_dim, 1).float() / pos_dim))
    if reverse_coord:
        feat_shape = feat_shape[::-1]
    grid = torch.stack(torch.meshgrid([torch.arange(s).float() for s in feat_shape], indexing="ij"))
    grid = grid.flatten(1).transpose(0, 1)  # (N, 2)
    pos2 = grid.unsqueeze(-1) * bands.unsqueeze(0)  # (N, 2, pos_dim)
    stack_dim = 2 if interleave_sin_cos else 1
    return torch.stack([torch.sin(pos2), torch.cos(pos2)], dim=stack_dim).flatten(1)  # (N, dim)


@pytest.mark.parametrize("grid, D", [(4, 16), (14, 768)])
def test_the_library_table_is_maes(grid, D):
    ours = sincos_pos_embed_2d(grid, D, cls_token=False)[0]
    torch.testing.assert_close(ours, torch.from_numpy(mae_sincos_2d(D, grid)).float(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("grid, D", [((3, 5), 16), ((14, 14), 768)])
def test_timms_table_holds_the_same_numbers_in_another_channel_order(grid, D):
    ours = sincos_pos_embed_2d(grid, D, cls_token=False)[0]  # [sin col, cos col, sin row, cos row]
    q = D // 4
    quarters = ours.split(q, dim=1)
    reordered = torch.cat([quarters[2], quarters[0], quarters[3], quarters[1]], dim=1)  # [sin r, sin c, cos r, cos c]
    torch.testing.assert_close(timm_sincos_2d(list(grid), D), reordered, atol=1e-4, rtol=0)
    for reverse in (False, True):  # none of timm's options gives our order as it is
        for interleave in (False, True):
            assert not torch.allclose(timm_sincos_2d(list(grid), D, reverse, interleave), ours, atol=1e-3)


@pytest.mark.parametrize("D", [6, 30, 2])
def test_sincos_rejects_width_not_divisible_by_4(D):
    with pytest.raises(ValueError, match=rf"divisible by 4, got {D}"):
        sincos_pos_embed_2d(4, D)


# ---- sincos_1d: the Transformer's code, reordered; an offset is a rotation -----------------


def transformer_pe(positions: np.ndarray, d: int) -> np.ndarray:
    """ "Attention Is All You Need", sec. 3.5, as written: PE(p, 2i) = sin(p / 10000^(2i/d)),
    PE(p, 2i + 1) = cos(p / 10000^(2i/d)): sines and cosines interleaved. Returns (M, d)."""
    pe = np.zeros((len(positions), d))
    for i in range(d // 2):
        angle = positions / 10000 ** (2 * i / d)
        pe[:, 2 * i], pe[:, 2 * i + 1] = np.sin(angle), np.cos(angle)
    return pe


@pytest.mark.parametrize("d", [2, 8, 64])
def test_sincos_1d_is_the_transformer_code_with_its_channels_reordered(d):
    positions = np.arange(50)
    ours = sincos_1d(torch.from_numpy(positions), d)  # (M, d): all sines, then all cosines
    interleaved = torch.from_numpy(transformer_pe(positions, d)).float()
    order = torch.arange(d).reshape(2, d // 2).T.flatten()  # 0, d/2, 1, d/2 + 1, ...
    torch.testing.assert_close(ours[:, order], interleaved, atol=1e-6, rtol=0)
    assert not torch.allclose(ours, interleaved, atol=1e-3) or d == 2  # the order does differ (d = 2: one pair)


@pytest.mark.parametrize("k", [1, 5, 17])
def test_an_offset_is_one_rotation_for_every_position(k):
    d = 32
    codes = sincos_1d(torch.arange(80.0), d).double()  # (80, d)
    omega = 1.0 / 10000 ** (torch.arange(d // 2, dtype=torch.float64) / (d // 2))
    c, s = torch.diag((k * omega).cos()), torch.diag((k * omega).sin())
    R = torch.cat([torch.cat([c, s], 1), torch.cat([-s, c], 1)])  # (d, d)
    torch.testing.assert_close(codes[:-k] @ R.T, codes[k:], atol=1e-5, rtol=0)
    torch.testing.assert_close(R @ R.T, torch.eye(d, dtype=torch.float64))
    dots = (codes[:-k] * codes[k:]).sum(dim=1)  # depends on the offset only
    torch.testing.assert_close(dots, torch.full_like(dots, (k * omega).cos().sum().item()), atol=1e-4, rtol=0)


# ---- xy_pos_embed: the learned 2-D table of the ViT paper's Appendix D.4 -------------------


@pytest.mark.parametrize("rows, cols, half", [(3, 5, 4), (4, 2, 6), (1, 3, 2), (6, 6, 8)])
def test_xy_pos_embed_concatenates_x_then_y_in_patchify_order(rows, cols, half):
    torch.manual_seed(0)
    x_embed, y_embed = torch.randn(cols, half), torch.randn(rows, half)
    table = xy_pos_embed(x_embed, y_embed)
    assert table.shape == (rows * cols, 2 * half)
    by_loop = torch.stack([torch.cat([x_embed[c], y_embed[r]]) for r in range(rows) for c in range(cols)])
    assert torch.equal(table, by_loop)
    # patch (r, c) of an image is entry r * cols + c of patchify: the same order
    image = torch.arange(rows * cols, dtype=torch.float32).reshape(1, 1, rows, cols)  # pixel (r, c) = r * cols + c
    assert patchify(image, 1)[0, :, 0].tolist() == list(range(rows * cols))


def test_xy_pos_embed_lets_gradients_reach_both_tables():
    x_embed = torch.randn(5, 4, requires_grad=True)
    y_embed = torch.randn(3, 4, requires_grad=True)
    xy_pos_embed(x_embed, y_embed).sum().backward()
    assert torch.equal(x_embed.grad, torch.full((5, 4), 3.0))  # each column is used by 3 rows
    assert torch.equal(y_embed.grad, torch.full((3, 4), 5.0))  # each row by 5 columns


@pytest.mark.parametrize(
    "x_embed, y_embed, words",
    [
        (torch.zeros(5, 4), torch.zeros(3, 6), r"same width D/2, got \(5, 4\) and \(3, 6\)"),
        (torch.zeros(5), torch.zeros(3, 4), r"x_embed shaped \(cols, D/2\), got a 1-D tensor"),
        (torch.zeros(5, 4), torch.zeros(0, 4), r"y_embed shaped \(rows, D/2\) with something on every axis"),
    ],
)
def test_xy_pos_embed_rejects_tables_that_do_not_fit(x_embed, y_embed, words):
    with pytest.raises(ValueError, match=words):
        xy_pos_embed(x_embed, y_embed)


# ---- resize_pos_embed -------------------------------------------------------------------


def test_resize_to_the_same_grid_is_an_equal_copy():
    torch.manual_seed(0)
    table = torch.randn(1, 1 + 16, 8)
    resized = resize_pos_embed(table, 4, 4)
    assert torch.equal(resized, table)
    assert resized.data_ptr() != table.data_ptr()  # a copy, not the same storage


@pytest.mark.parametrize("old, new, prefix", [(14, 24, 1), (4, 7, 1), ((3, 5), (6, 2), 1), (6, 3, 0), (4, 8, 2)])
def test_resize_shape_and_prefix_tokens_kept_exactly(old, new, prefix):
    torch.manual_seed(0)
    old_rows, old_cols = (old, old) if isinstance(old, int) else old
    new_rows, new_cols = (new, new) if isinstance(new, int) else new
    table = torch.randn(1, prefix + old_rows * old_cols, 12)
    resized = resize_pos_embed(table, old, new, num_prefix_tokens=prefix)
    assert resized.shape == (1, prefix + new_rows * new_cols, 12)
    assert torch.equal(resized[:, :prefix], table[:, :prefix])


def test_resize_up_then_down_is_close_for_a_smooth_table():
    table = sincos_pos_embed_2d(14, 64)  # smooth over the grid
    back = resize_pos_embed(resize_pos_embed(table, 14, 24), 24, 14)
    assert back.shape == table.shape
    error = (back - table).abs()
    assert error.max() < 0.1 and error.mean() < 0.01  # values are of order 1
    torch.manual_seed(0)
    noise = torch.randn(1, 197, 64)  # not smooth: the round trip loses it (shows the bound bites)
    noise_back = resize_pos_embed(resize_pos_embed(noise, 14, 24), 24, 14)
    assert (noise_back - noise).abs().mean() > 0.1


def test_resize_keeps_the_grid_layout():
    # an entry that codes its own (row, col) still codes them after resizing: smooth and in order
    table = sincos_pos_embed_2d(8, 32)
    resized = resize_pos_embed(table, 8, 16)[0, 1:].reshape(16, 16, 32)
    assert (resized[0, 0] - resized[0, 15]).abs().sum() > 1  # corners differ
    # the column code (first half) does not change down a column; the row code not along a row
    torch.testing.assert_close(resized[0, :, :16], resized[9, :, :16], atol=1e-5, rtol=0)
    torch.testing.assert_close(resized[:, 3, 16:], resized[:, 12, 16:], atol=1e-5, rtol=0)


def test_resize_keeps_a_constant_table_constant():
    torch.manual_seed(0)
    D = 8
    cls = torch.randn(1, 1, D)
    value = torch.randn(1, 1, D)
    table = torch.cat([cls, value.expand(1, 36, D)], dim=1)  # (1, 1 + 6*6, D)
    resized = resize_pos_embed(table, 6, (9, 4))
    assert torch.equal(resized[:, :1], cls)
    torch.testing.assert_close(resized[:, 1:], value.expand(1, 36, D), atol=1e-5, rtol=0)


@pytest.mark.parametrize("shape", [(1, 16, 8), (1, 18, 8), (2, 17, 8), (17, 8)])
def test_resize_rejects_a_table_of_the_wrong_shape(shape):
    with pytest.raises(ValueError, match=r"expected a position table shaped \(1, 17, D\)"):
        resize_pos_embed(torch.zeros(shape), 4, 8)


# ---- prepend_cls_token ------------------------------------------------------------------


def test_prepend_cls_token_puts_the_same_token_first_for_every_image():
    torch.manual_seed(0)
    tokens = torch.randn(3, 5, 8)
    cls = torch.randn(1, 1, 8)
    out = prepend_cls_token(tokens, cls)
    assert out.shape == (3, 6, 8)
    for b in range(3):
        assert torch.equal(out[b, 0], cls[0, 0])
    assert torch.equal(out[:, 1:], tokens)


def test_prepend_cls_token_lets_gradients_reach_the_token():
    torch.manual_seed(0)
    cls = torch.randn(1, 1, 4, requires_grad=True)
    prepend_cls_token(torch.randn(3, 2, 4), cls)[:, 0].sum().backward()
    torch.testing.assert_close(cls.grad, torch.full((1, 1, 4), 3.0))


def test_prepend_cls_token_rejects_wrong_width():
    with pytest.raises(ValueError, match=r"\(1, 1, D=8\)"):
        prepend_cls_token(torch.zeros(2, 5, 8), torch.zeros(1, 1, 4))


def test_pos_embed_similarity_is_the_cosine_of_every_pair():
    torch.manual_seed(0)
    table = torch.randn(1, 1 + 6, 8)  # class token + a 2 x 3 grid
    similarity = pos_embed_similarity(table)
    assert similarity.shape == (6, 6)
    expected = F.cosine_similarity(table[0, 1:, None, :], table[0, None, 1:, :], dim=-1)
    torch.testing.assert_close(similarity, expected)
    torch.testing.assert_close(similarity.diagonal(), torch.ones(6))
    assert pos_embed_similarity(table[0, 1:], num_prefix_tokens=0).shape == (6, 6)


def test_sincos_similarity_falls_with_distance_on_the_grid():
    similarity = pos_embed_similarity(sincos_pos_embed_2d(8, 64))  # (64, 64)
    corner = similarity[0].reshape(8, 8)
    assert corner[0, 1] > corner[0, 4] > corner[0, 7]  # along the row
    assert corner[1, 0] > corner[4, 0] > corner[7, 0]  # down the column


def test_neighbour_similarity_of_a_hand_made_matrix():
    # 2 x 2 grid: 0-1 and 0-2 are neighbours (distance 1), 0-3 diagonal (sqrt 2); far: >= 1 apart
    similarity = torch.tensor([[1.0, 0.8, 0.6, 0.1], [0.8, 1.0, 0.1, 0.6], [0.6, 0.1, 1.0, 0.8], [0.1, 0.6, 0.8, 1.0]])
    near, far = neighbour_similarity(similarity, 2)
    assert near == pytest.approx(0.7)
    assert far == pytest.approx((8 * 0.7 + 4 * 0.1) / 12)
    assert neighbour_similarity(-1e-4 * torch.ones(4, 4), 2) == (0.0, 0.0)  # rounded, never -0.0
    assert str(neighbour_similarity(-1e-4 * torch.ones(4, 4), 2)[0]) == "0.0"
    # 1 x 4 grid, similarity = minus the distance: near pairs are 1 apart, far ones at least 2
    position = torch.arange(4.0)
    near, far = neighbour_similarity(-(position[:, None] - position[None]).abs(), (1, 4))
    assert near == pytest.approx(-1.0)
    assert far == pytest.approx(-(2 + 3 + 2) * 2 / 6, abs=1e-3)
    with pytest.raises(ValueError, match=r"N = 3 x 3 = 9"):
        neighbour_similarity(similarity, 3)


# ---- the patch grid -----------------------------------------------------------------------


@pytest.mark.parametrize("rows, cols", [(1, 1), (2, 3), (4, 1), (3, 5)])
def test_grid_coordinates_follow_patchify_order(rows, cols):
    P = 2
    row_of_pixel = torch.arange(rows * P).div(P, rounding_mode="floor")[:, None].expand(-1, cols * P)
    col_of_pixel = torch.arange(cols * P).div(P, rounding_mode="floor")[None, :].expand(rows * P, -1)
    image = torch.stack([row_of_pixel, col_of_pixel]).float()[None]  # (1, 2, H, W): each pixel's patch row, col
    patches = patchify(image, P)  # (1, N, 2*P*P), channel 0 first
    expected = torch.stack([patches[0, :, 0], patches[0, :, P * P]], dim=1).long()  # (N, 2)
    coordinates = grid_coordinates(rows, cols)
    assert coordinates.shape == (rows * cols, 2) and coordinates.dtype == torch.int64
    assert torch.equal(coordinates, expected)


def test_grid_coordinates_reject_a_grid_that_is_not_one():
    for rows, cols in [(0, 3), (2, -1), (2.0, 3), (torch.tensor(2.0), 3), (True, 3)]:
        with pytest.raises(ValueError, match=r"positive whole numbers of rows and columns, got .* x "):
            grid_coordinates(rows, cols)
    assert torch.equal(grid_coordinates(np.int64(2), torch.tensor(1)), torch.tensor([[0, 0], [1, 0]]))


def test_grid_distance_is_the_euclidean_distance_of_the_coordinates():
    rows, cols = 3, 4
    row, col = np.indices((rows, cols)).reshape(2, -1)  # an independent row-major grid
    expected = np.hypot(row[:, None] - row[None], col[:, None] - col[None])
    assert torch.equal(grid_distance(rows, cols), torch.from_numpy(expected).float())


# ---- bad arguments: a clear error that names the argument ---------------------------------


@pytest.mark.parametrize(
    "positions, dim, words",
    [
        (torch.arange(4), 0, r"dim must be a whole number, .* got 0"),
        (torch.arange(4), -2, r"dim must be .* got -2"),
        (torch.arange(4), 4.0, r"dim must be .* got 4.0 \(float\)"),
        (torch.zeros(2, 3), 4, r"expected positions shaped \(M,\), got a 2-D tensor"),
        (torch.tensor([0.0, float("nan")]), 4, r"finite real positions"),
        ([0, 1, 2], 4, r"positions as a torch.Tensor .* got list"),
    ],
)
def test_sincos_1d_rejects_bad_arguments(positions, dim, words):
    with pytest.raises(ValueError, match=words):
        sincos_1d(positions, dim)


@pytest.mark.parametrize(
    "grid, D, cls_token, words",
    [
        (0, 8, True, r"grid_size must be a whole number, .* got 0"),
        ((4, -1), 8, True, r"grid_size\[1\] must be .* got -1"),
        ("4", 8, True, r"grid_size must be .* got '4' \(str\)"),
        (4, 0, True, r"embed_dim must be a whole number, .* got 0"),
        (4, -4, True, r"embed_dim must be .* got -4"),
        (4, 8, "no", r"cls_token must be True or False, got 'no'"),
    ],
)
def test_sincos_pos_embed_2d_rejects_bad_arguments(grid, D, cls_token, words):
    with pytest.raises(ValueError, match=words):
        sincos_pos_embed_2d(grid, D, cls_token=cls_token)


@pytest.mark.parametrize(
    "args, words",
    [
        ((0, 4), r"old_grid must be a whole number, .* got 0"),
        ((4, -2), r"new_grid must be .* got -2"),
        ((4, 8, -1), r"num_prefix_tokens must be a whole number, at least 0, got -1"),
    ],
)
def test_resize_rejects_bad_grids_and_prefixes(args, words):
    with pytest.raises(ValueError, match=words):
        resize_pos_embed(torch.zeros(1, 17, 8), *args)


def test_resize_rejects_a_table_that_is_no_float_tensor():
    with pytest.raises(ValueError, match=r"floating-point position table, got torch.int64"):
        resize_pos_embed(torch.zeros(1, 17, 8, dtype=torch.long), 4, 8)
    with pytest.raises(TypeError, match=r"pos_embed as a torch.Tensor .* got list"):
        resize_pos_embed([[0.0]], 4, 8)


@pytest.mark.parametrize(
    "table, prefix, words",
    [
        (torch.randn(2, 17, 8), 1, r"shaped \(1, prefix \+ N, D\) or \(prefix \+ N, D\), got \(2, 17, 8\)"),
        (torch.randn(17, 8), -1, r"num_prefix_tokens must be .* at least 0, got -1"),
        (torch.randn(1, 17, 8), 17, r"17 entries has no patch entry after num_prefix_tokens=17"),
        (torch.zeros(17, 8, dtype=torch.long), 1, r"floating-point position table, got torch.int64"),
    ],
)
def test_pos_embed_similarity_rejects_what_is_no_position_table(table, prefix, words):
    # a batch of tables used to be flattened into one long table without a word
    with pytest.raises(ValueError, match=words):
        pos_embed_similarity(table, prefix)


def test_neighbour_similarity_refuses_a_grid_without_pairs():
    with pytest.raises(ValueError, match=r"a 1 x 1 grid has no pairs of positions"):
        neighbour_similarity(torch.ones(1, 1), 1)  # used to return (nan, nan)
    with pytest.raises(ValueError, match=r"grid_size must be .* got 0"):
        neighbour_similarity(torch.ones(1, 1), 0)


def test_trunc_normal_needs_a_float_tensor():
    with pytest.raises(ValueError, match=r"floating-point tensor to fill, got torch.int64"):
        trunc_normal_(torch.zeros(3, dtype=torch.long))


@pytest.mark.parametrize("std", [0, -1, float("nan"), "0.02"])
def test_trunc_normal_rejects_a_std_that_is_not_positive(std):
    with pytest.raises(ValueError, match=r"std must be a finite number, greater than 0"):
        trunc_normal_(torch.empty(3), std=std)


def test_prepend_cls_token_names_the_tokens_it_needs():
    with pytest.raises(ValueError, match=r"expected tokens shaped \(B, N, D\), got a 2-D tensor"):
        prepend_cls_token(torch.zeros(5, 8), torch.zeros(1, 1, 8))


# ---- trunc_normal_ with a generator -------------------------------------------------------


def test_trunc_normal_draws_from_its_generator_and_leaves_the_global_one_alone():
    state = torch.get_rng_state()
    first = trunc_normal_(torch.empty(1000), generator=torch.Generator().manual_seed(5))
    again = trunc_normal_(torch.empty(1000), generator=torch.Generator().manual_seed(5))
    other = trunc_normal_(torch.empty(1000), generator=torch.Generator().manual_seed(6))
    assert torch.equal(torch.get_rng_state(), state)  # nothing taken from torch's global numbers
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert first.abs().max() <= 0.04  # still cut at 2 std


@pytest.mark.parametrize("generator", [0, "seed", np.random.default_rng(0)])
def test_trunc_normal_rejects_what_is_no_torch_generator(generator):
    with pytest.raises(TypeError, match=r"generator must be a torch.Generator .* or None"):
        trunc_normal_(torch.empty(3), generator=generator)


# ---- gaussian_pos_embed -------------------------------------------------------------------


def numpy_bump_similarity(rows: int, cols: int, sigma: float) -> np.ndarray:
    """The cosine similarity of every two bumps exp(-d^2 / (2 sigma^2)) of a rows x cols grid,
    written independently: (N, N), N = rows * cols, row-major."""
    row, col = np.divmod(np.arange(rows * cols), cols)  # row-major: the column varies fastest
    squared = (row[:, None] - row[None]) ** 2 + (col[:, None] - col[None]) ** 2  # (N, N)
    bumps = np.exp(-squared / (2 * sigma**2))  # (N, N), row i: the bump centred on patch i
    unit = bumps / np.linalg.norm(bumps, axis=1, keepdims=True)
    return unit @ unit.T


def seeded(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize(
    "grid, D, prefix", [(4, 32, 1), (4, 16, 0), ((3, 5), 64, 1), ((2, 7), 14, 2), (8, 16, 1), ((1, 6), 3, 0)]
)
def test_gaussian_pos_embed_shape_dtype_and_std(grid, D, prefix):
    rows, cols = (grid, grid) if isinstance(grid, int) else grid
    table = gaussian_pos_embed(grid, D, std=0.02, num_prefix_tokens=prefix, generator=seeded())
    assert table.shape == (1, prefix + rows * cols, D) and table.dtype == torch.float32
    torch.testing.assert_close(table[0, prefix:].std(), torch.tensor(0.02))  # the patch entries' numbers
    assert (table[0, :prefix].abs() <= 0.04).all()  # the class token's: trunc-normal, cut at 2 std


@pytest.mark.parametrize("grid, D, sigma", [(4, 16, 1.0), (4, 64, 2.5), ((3, 5), 15, 0.7), ((2, 7), 32, 1.0)])
def test_gaussian_pos_embed_keeps_the_bumps_cosine_similarity_when_D_is_at_least_N(grid, D, sigma):
    rows, cols = (grid, grid) if isinstance(grid, int) else grid
    table = gaussian_pos_embed(grid, D, sigma=sigma, generator=seeded())
    expected = torch.from_numpy(numpy_bump_similarity(rows, cols, sigma)).float()
    torch.testing.assert_close(pos_embed_similarity(table), expected, atol=1e-5, rtol=0)


def test_gaussian_pos_embed_is_only_close_to_the_bumps_when_D_is_below_N():
    """64 positions in 32 dimensions: a random projection, no longer an isometry."""
    table = gaussian_pos_embed(8, 32, generator=seeded())
    similarity, expected = pos_embed_similarity(table), torch.from_numpy(numpy_bump_similarity(8, 8, 1.0)).float()
    error = (similarity - expected).abs()
    assert error.max() > 1e-3  # not exact any more ...
    assert error.mean() < 0.15  # ... but close on average
    assert np.corrcoef(similarity.flatten().numpy(), expected.flatten().numpy())[0, 1] > 0.8


@pytest.mark.parametrize("grid, D", [(6, 64), ((4, 7), 32), (8, 16)])
def test_gaussian_pos_embed_similarity_falls_with_grid_distance(grid, D):
    near, far = neighbour_similarity(pos_embed_similarity(gaussian_pos_embed(grid, D, generator=seeded())), grid)
    assert near > far + 0.3


def test_a_wider_bump_makes_neighbours_more_alike():
    near = [neighbour_similarity(pos_embed_similarity(gaussian_pos_embed(5, 32, sigma=s)), 5)[0] for s in (0.3, 1, 3)]
    assert near[0] < 0.01 < near[1] < near[2]  # sigma 0.3: the bumps barely overlap, nearly orthogonal entries


def test_gaussian_pos_embed_is_deterministic_given_its_generator_and_only_uses_it():
    state = torch.get_rng_state()
    first = gaussian_pos_embed((3, 4), 16, generator=seeded(1))
    assert torch.equal(torch.get_rng_state(), state)  # the global random numbers untouched
    assert torch.equal(first, gaussian_pos_embed((3, 4), 16, generator=seeded(1)))
    other = gaussian_pos_embed((3, 4), 16, generator=seeded(2))
    assert not torch.equal(first[0, 1:], other[0, 1:]) and not torch.equal(first[0, :1], other[0, :1])
    torch.manual_seed(7)
    global_first = gaussian_pos_embed((3, 4), 16)
    torch.manual_seed(7)
    assert torch.equal(global_first, gaussian_pos_embed((3, 4), 16))  # None: torch's global numbers
    assert not torch.equal(global_first, first)


def test_gaussian_pos_embed_draws_the_patch_entries_before_the_prefix():
    without = gaussian_pos_embed(4, 16, num_prefix_tokens=0, generator=seeded())
    with_cls = gaussian_pos_embed(4, 16, num_prefix_tokens=1, generator=seeded())
    assert torch.equal(with_cls[:, 1:], without)  # the same patch entries, the class token's drawn after
    generator = seeded()
    gaussian_pos_embed(4, 16, num_prefix_tokens=0, generator=generator)  # the projection's draw
    torch.testing.assert_close(with_cls[0, :1], trunc_normal_(torch.empty(1, 16), std=0.02, generator=generator))


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(grid_size=0), r"grid_size must be a whole number, .* got 0"),
        (dict(grid_size=(4, 0)), r"grid_size\[1\] must be .* got 0"),
        (dict(grid_size="4"), r"grid_size must be .* got '4' \(str\)"),
        (dict(embed_dim=0), r"embed_dim must be a whole number, at least 1, got 0"),
        (dict(embed_dim=16.0), r"embed_dim must be a whole number, .* got 16.0 \(float\)"),
        (dict(sigma=0), r"sigma must be a finite number \(the bumps' width in patches\), greater than 0, got 0"),
        (dict(sigma=float("nan")), r"sigma must be .* got nan"),
        (dict(sigma=-1.0), r"sigma must be .* got -1.0"),
        (dict(std=0.0), r"std must be a finite number, greater than 0, got 0.0"),
        (dict(std="0.02"), r"std must be .* got '0.02' \(str\)"),
        (dict(num_prefix_tokens=-1), r"num_prefix_tokens must be a whole number, at least 0, got -1"),
        (dict(num_prefix_tokens=True), r"num_prefix_tokens must be .* got True \(bool\)"),
        (dict(generator=0), r"generator must be a torch.Generator .* got 0 \(int\)"),
        (dict(grid_size=1, embed_dim=1), r"a 1 x 1 grid with embed_dim=1 has a single number"),
    ],
)
def test_gaussian_pos_embed_rejects_bad_arguments(kwargs, words):
    with pytest.raises(ValueError, match=words):
        gaussian_pos_embed(**{"grid_size": 4, "embed_dim": 16, **kwargs})
