"""Lesson 7's checkers pass the reference, accept equivalent answers and name each typical mistake."""

import functools
import math

import pytest
import torch
from checker_cases import assert_each_named_as_itself

from utils.checks.core import CheckFailed
from utils.checks.inspection import (
    check_attention_rollout,
    check_insertion_images,
    check_local_head,
    check_mean_attention_distance,
)
from utils.inspection import (
    attention_rollout,
    delete_patches,
    keep_patches,
    local_attention,
    mean_attention_distance,
    top_patches,
)


def per_layer(attn, heads=lambda a: a.mean(dim=2), residual=True, rows=True):
    """Each layer's (depth, B, T, T) matrix, written out by hand with switches for the mistakes."""
    layers = heads(attn)
    if residual:
        layers = layers + torch.eye(attn.shape[-1])
        if rows:
            layers = layers / layers.sum(dim=-1, keepdim=True)
    return layers


def multiplied(layers, later_left=True):
    """layer_k @ ... @ layer_0 (or, wrongly, layer_0 @ ... @ layer_k)."""
    if later_left:
        return functools.reduce(lambda rollout, layer: layer @ rollout, layers)
    return functools.reduce(lambda rollout, layer: rollout @ layer, layers)


def einsum_rollout(attn):
    """A correct rollout written differently: 0.5 A + 0.5 I (rows of softmax weights sum to 1), einsum,
    and an identity to start from."""
    layers = 0.5 * torch.einsum("lbhqk->lbqk", attn) / attn.shape[2] + 0.5 * torch.eye(attn.shape[-1])
    rollout = torch.eye(attn.shape[-1]).expand_as(layers[0])
    for layer in layers:
        rollout = torch.einsum("bij,bjk->bik", layer, rollout)
    return rollout


def test_check_attention_rollout_passes_the_reference_and_equivalents(capsys):
    check_attention_rollout(attention_rollout)
    assert "✓ attention_rollout matches the reference on 5 cases: exact" in capsys.readouterr().out
    check_attention_rollout(einsum_rollout)
    check_attention_rollout(lambda attn: multiplied(per_layer(attn)))
    check_attention_rollout(lambda attn: attention_rollout(attn).requires_grad_())  # a tensor needing grad will do
    assert capsys.readouterr().out.count("✓ attention_rollout") == 3


def wrong_cases():
    def columns(attn):
        layers = attn.mean(dim=2) + torch.eye(attn.shape[-1])
        return multiplied(layers / layers.sum(dim=-2, keepdim=True))

    return [
        (lambda a: multiplied(per_layer(a, residual=False)), "residual identity is missing"),
        (lambda a: multiplied(per_layer(a, rows=False)), "added the identity but did not renormalise"),
        (columns, "renormalised the columns"),
        (lambda a: multiplied(per_layer(a), later_left=False), "multiplied in the wrong order"),
        (lambda a: per_layer(a).prod(dim=0), r"elementwise \(\*\)"),
        (lambda a: per_layer(a)[-1], "only the last layer's matrix"),
        (lambda a: per_layer(a)[0], "only the first layer's matrix"),
        (lambda a: per_layer(a).mean(dim=0), "averaged the layers' matrices"),
        (lambda a: multiplied(per_layer(a, heads=lambda a: a.sum(dim=2))), "heads are summed, not averaged"),
        (lambda a: multiplied(per_layer(a, heads=lambda a: a[:, :, 0])), "only head 0"),
        (lambda a: attention_rollout(a).transpose(-2, -1), "rollout is transposed"),
        (lambda a: attention_rollout(a) * 1.01, "max difference .* go through the steps"),
    ]


@pytest.mark.parametrize("wrong, words", wrong_cases())
def test_check_attention_rollout_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_attention_rollout(wrong)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda a: per_layer(a), r"expected \(B, T, T\) = \(2, 6, 6\), got \(1, 2, 6, 6\) .* one matrix per layer"),
        (lambda a: multiplied(per_layer(a, heads=lambda a: a)), r"got \(2, 3, 6, 6\) .* heads are still there"),
        (lambda a: attention_rollout(a)[:, 0], r"got \(2, 6\) .* not only the class token's row"),
        (lambda a: attention_rollout(a)[0], r"expected \(B, T, T\) = \(2, 6, 6\), got \(6, 6\) for attn"),
    ],
)
def test_check_attention_rollout_names_a_wrong_shape(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_attention_rollout(wrong)


def test_check_attention_rollout_turns_errors_into_failures():
    with pytest.raises(CheckFailed, match="your function raised RuntimeError"):
        check_attention_rollout(lambda a: a.view(3, 7))
    with pytest.raises(CheckFailed, match="expected a torch.Tensor"):
        check_attention_rollout(lambda a: attention_rollout(a).tolist())


# ---- the mean attention distance ----------------------------------------------------------


def looped_distance(attn, grid_size, patch_size):
    """A correct mean distance written differently: positions by divmod at patch centres, each
    (query, key) pair in a loop, the renormalisation applied to the per-query sum."""
    depth, B, heads, T, _ = attn.shape
    weights = attn.double()
    total = torch.zeros(depth, heads, dtype=torch.float64)
    for q in range(1, T):
        qr, qc = divmod(q - 1, grid_size)
        row_sum = weights[:, :, :, q, 1:].sum(dim=-1)  # (depth, B, heads)
        weighted = torch.zeros(depth, B, heads, dtype=torch.float64)
        for k in range(1, T):
            kr, kc = divmod(k - 1, grid_size)
            pixels = math.hypot((qr + 0.5 - kr - 0.5) * patch_size, (qc + 0.5 - kc - 0.5) * patch_size)
            weighted += weights[:, :, :, q, k] * pixels
        total += (weighted / row_sum).mean(dim=1)
    return (total / (T - 1)).float()


def einsum_distance(attn, grid_size, patch_size):
    """A correct mean distance with torch.cdist on (x, y) pixel positions and one einsum."""
    y, x = torch.meshgrid(torch.arange(grid_size), torch.arange(grid_size), indexing="ij")
    positions = torch.stack([x.flatten(), y.flatten()], dim=-1).float() * patch_size  # (N, 2)
    patches = attn[..., 1:, 1:]
    patches = patches / patches.sum(dim=-1, keepdim=True)
    B, N = attn.shape[1], patches.shape[-1]
    return torch.einsum("lbhqk,qk->lh", patches, torch.cdist(positions, positions)) / (B * N)


def by_hand(
    attn,
    grid_size,
    patch_size,
    metric="euclidean",
    scale=True,
    renormalise=True,
    keep_cls=False,
    first=0,
    reduce=lambda weighted: weighted.sum(dim=-1).mean(dim=(1, 3)),
):
    """The mean distance written out by hand, with switches for the mistakes; `reduce` turns the
    (depth, B, heads, queries, keys) products weight * distance into the answer."""
    N = grid_size * grid_size
    i = torch.arange(first, first + N)  # the patches' numbers (first=1: wrongly, their token indices)
    step = patch_size if scale else 1  # pixels per patch (scale=False: wrongly, distances in patches)
    rows, cols = (i // grid_size).float() * step, (i % grid_size).float() * step
    dr, dc = rows[:, None] - rows[None], cols[:, None] - cols[None]  # (N, N)
    distance = {
        "euclidean": (dr**2 + dc**2).sqrt(),
        "squared": dr**2 + dc**2,
        "manhattan": dr.abs() + dc.abs(),
        "flat": (i[:, None] - i[None]).abs().float() * step,
        "corner": (rows**2 + cols**2).sqrt(),  # (N,), each key's distance from patch (0, 0)
    }[metric]
    if keep_cls:  # the class token kept as a query and a key, at distance 0 from everything
        weights, distance = attn, torch.nn.functional.pad(distance, (1, 0, 1, 0))
    else:
        weights = attn[..., 1:, 1:]
        if renormalise:
            weights = weights / weights.sum(dim=-1, keepdim=True)
    return reduce(weights * distance)


def test_check_mean_attention_distance_passes_the_reference_and_equivalents(capsys):
    check_mean_attention_distance(mean_attention_distance)
    assert "✓ mean_attention_distance matches the reference on 5 cases: exact" in capsys.readouterr().out
    check_mean_attention_distance(looped_distance)
    check_mean_attention_distance(einsum_distance)
    check_mean_attention_distance(by_hand)
    out = capsys.readouterr().out
    assert out.count("✓ mean_attention_distance matches the reference on 5 cases: ") == 3
    assert "approximate (max difference" in out  # the loop in float64 differs in the last digits


def wrong_distance_cases():
    def cls_query(attn, grid_size, patch_size):
        """The class token's column dropped, its row kept as a query at distance 0 from every patch."""
        weights = attn[..., :, 1:]
        weights = weights / weights.sum(dim=-1, keepdim=True)  # (depth, B, heads, T, N)
        i = torch.arange(grid_size * grid_size)
        xy = torch.stack([i // grid_size, i % grid_size], dim=-1).float() * patch_size  # (N, 2)
        distance = torch.cat([torch.zeros(1, len(i)), torch.cdist(xy, xy)])  # (T, N)
        return (weights * distance).sum(dim=-1).mean(dim=(1, 3))

    def columns(attn, grid_size, patch_size):
        weights = attn[..., 1:, 1:]
        weights = weights / weights.sum(dim=-2, keepdim=True)
        i = torch.arange(grid_size * grid_size)
        xy = torch.stack([i // grid_size, i % grid_size], dim=-1).float() * patch_size
        return (weights * torch.cdist(xy, xy)).sum(dim=-1).mean(dim=(1, 3))

    return [
        (lambda a, g, p: by_hand(a, g, p, scale=False), "in patches, not pixels"),
        (lambda a, g, p: by_hand(a, g, p, renormalise=False), "the weights are not renormalised"),
        (cls_query, "class token is counted as a query"),
        (lambda a, g, p: by_hand(a, g, p, keep_cls=True), "class token is not left out"),
        (lambda a, g, p: by_hand(a, g, p, metric="squared"), "distances are squared"),
        (lambda a, g, p: by_hand(a, g, p, metric="manhattan"), "Manhattan distance"),
        (lambda a, g, p: by_hand(a, g, p, metric="flat"), "along the flattened sequence"),
        (lambda a, g, p: by_hand(a, g, p, first=1), "off by one"),
        (lambda a, g, p: by_hand(a, g, p, metric="corner"), "from the top-left corner"),
        (columns, "renormalised the columns"),
        (
            lambda a, g, p: by_hand(a, g, p, reduce=lambda w: w.mean(dim=-1).mean(dim=(1, 3))),
            r"averaged weight \* distance over the keys",
        ),
        (
            lambda a, g, p: by_hand(a, g, p, reduce=lambda w: w.sum(dim=-1).sum(dim=3).mean(dim=1)),
            "summed over the queries",
        ),
        (
            lambda a, g, p: by_hand(a, g, p, reduce=lambda w: w.sum(dim=-1).sum(dim=1).mean(dim=2)),
            "summed over the images",
        ),
        (lambda a, g, p: mean_attention_distance(a, g, p) * 1.01, "max difference .* go through the steps"),
    ]


@pytest.mark.parametrize("wrong, words", wrong_distance_cases())
def test_check_mean_attention_distance_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_mean_attention_distance(wrong)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (
            lambda a, g, p: by_hand(a, g, p, reduce=lambda w: w.sum(dim=-1).mean(dim=(1, 2, 3))),
            r"expected \(depth, heads\) = \(2, 4\), got \(2,\) .* heads are averaged away",
        ),
        (
            lambda a, g, p: by_hand(a, g, p, reduce=lambda w: w.sum(dim=-1).mean(dim=3)),
            r"got \(2, 3, 4\) .* one distance per image; average over the images too",
        ),
        (
            lambda a, g, p: by_hand(a, g, p, reduce=lambda w: w.sum(dim=-1).mean(dim=1)),
            r"got \(2, 4, 9\) .* one distance per query",
        ),
        (
            lambda a, g, p: by_hand(a, g, p, reduce=lambda w: w.sum(dim=-1)),
            r"got \(2, 3, 4, 9\) .* one distance per query",
        ),
        (lambda a, g, p: mean_attention_distance(a, g, p).T, r"got \(4, 2\) .* depth and heads are swapped"),
        (
            lambda a, g, p: by_hand(a, g, p, keep_cls=True, reduce=lambda w: w.sum(dim=-1).mean(dim=1)),
            r"got \(2, 4, 10\) .* one value per token",
        ),
        (lambda a, g, p: mean_attention_distance(a, g, p).mean(), r"got \(\) .* one number for the whole model"),
        (
            lambda a, g, p: mean_attention_distance(a, g, p)[0],
            r"expected \(depth, heads\) = \(2, 4\), got \(4,\) for attn of shape \(2, 3, 4, 10, 10\), "
            r"grid_size = 3, patch_size = 4$",
        ),
    ],
)
def test_check_mean_attention_distance_names_a_wrong_shape(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_mean_attention_distance(wrong)


def test_check_mean_attention_distance_turns_errors_into_failures():
    with pytest.raises(CheckFailed, match="your function raised RuntimeError"):
        check_mean_attention_distance(lambda a, g, p: a.view(3, 7))
    with pytest.raises(CheckFailed, match="expected a torch.Tensor"):
        check_mean_attention_distance(lambda a, g, p: mean_attention_distance(a, g, p).tolist())


# ---- more mistakes, what came back, and no mistake named as another -----------------------


def per_head_rollouts_averaged(attn):
    """Each head rolled out on its own, the heads averaged at the end."""
    layers = attn + torch.eye(attn.shape[-1])
    return multiplied(layers / layers.sum(dim=-1, keepdim=True)).mean(dim=1)


ROLLOUT_MISTAKES = [
    *wrong_cases()[:-1],
    (lambda a: multiplied(per_layer(a, heads=lambda a: a.amax(dim=2))), r"largest weight over the heads \(.max\)"),
    (per_head_rollouts_averaged, "you rolled out every head on its own and averaged the heads at the end"),
    (
        lambda a: multiplied(per_layer(a, heads=lambda a: a.mean(dim=1))),
        r"got \(3, 6, 6\) .*you averaged over the images \(dim=1\); average the heads, dim=2",
    ),
    (
        lambda a: multiplied([torch.eye(a.shape[-1]).expand(*a.shape[1:2], -1, -1), *per_layer(a)[1:]]),
        "identity matrix",
    ),
    (lambda a: attention_rollout(a).mean(dim=0), r"got \(6, 6\) .*you averaged over the images; keep one rollout"),
]


def test_no_rollout_mistake_is_named_as_another():
    assert_each_named_as_itself(check_attention_rollout, ROLLOUT_MISTAKES)


def test_no_distance_mistake_is_named_as_another():
    assert_each_named_as_itself(check_mean_attention_distance, wrong_distance_cases()[:-1])


GARBAGE = [  # the reference's answer turned into what a learner's function may return instead
    (lambda t: None, "^expected a torch.Tensor, got None"),
    (lambda t: 0.5, "^expected a torch.Tensor, got float"),
    (lambda t: "rollout", "^expected a torch.Tensor, got str"),
    (lambda t: t.numpy(), "^expected a torch.Tensor, got ndarray"),
    (lambda t: torch.nn.Linear(2, 2), "^expected a torch.Tensor, got Linear"),
    (lambda t: t.long(), r"^expected a float32 tensor, got int64 for attn"),
    (lambda t: t > 0.1, r"^expected a float32 tensor, got bool for attn"),
    (lambda t: t.half(), r"^expected a float32 tensor, got float16 for attn"),
    (lambda t: t * float("nan"), r"values are NaN for attn"),
    (lambda t: t / 0, r"values are (NaN|infinite) for attn"),
    (lambda t: t.to("meta"), r"is a tensor on the meta device .*keeps shapes but no values"),
]


def test_float64_results_pass_as_exact(capsys):
    """The right numbers in float64 are right: the values are compared, not the dtype."""
    check_attention_rollout(lambda attn: attention_rollout(attn).double())
    check_mean_attention_distance(lambda attn, g, p: mean_attention_distance(attn, g, p).double())
    out = capsys.readouterr().out
    assert out.count("✓") == 2 and out.count(": exact") == 2, out


@pytest.mark.parametrize("turn, words", GARBAGE)
def test_check_attention_rollout_says_what_came(turn, words):
    with pytest.raises(CheckFailed, match=words):
        check_attention_rollout(lambda attn: turn(attention_rollout(attn)))


@pytest.mark.parametrize("turn, words", GARBAGE)
def test_check_mean_attention_distance_says_what_came(turn, words):
    with pytest.raises(CheckFailed, match=words):
        check_mean_attention_distance(lambda attn, g, p: turn(mean_attention_distance(attn, g, p)))


# ---- the insertion test's images and the made-up local head ------------------------------------


def test_check_insertion_images_passes_the_reference_and_equivalents(capsys):
    check_insertion_images(lambda images, scores, k, fill: keep_patches(images, top_patches(scores, k), fill))
    check_insertion_images(lambda images, scores, k, fill: delete_patches(images, ~top_patches(scores, k), fill))

    def by_hand(images, scores, k, fill):  # a mask blown up to pixels, torch.where
        B, C, H, W = images.shape
        keep = top_patches(scores, k)
        pixels = keep.repeat_interleave(H // keep.shape[1], 1).repeat_interleave(W // keep.shape[2], 2)
        return torch.where(pixels[:, None], images, fill.reshape(1, C, 1, 1))

    check_insertion_images(by_hand)
    assert capsys.readouterr().out.count("✓ insertion_images matches the reference on 5 cases: exact") == 3


def test_check_insertion_images_names_each_mistake():
    assert_each_named_as_itself(
        check_insertion_images,
        [
            ("deletion", lambda i, s, k, f: delete_patches(i, top_patches(s, k), f), "that is the deletion test"),
            ("lowest", lambda i, s, k, f: keep_patches(i, top_patches(-s, k), f), "lowest scores"),
            ("black", lambda i, s, k, f: keep_patches(i, top_patches(s, k), 0.0), r"painted with 0 \(black\)"),
            (
                "swapped",
                lambda i, s, k, f: keep_patches(i, top_patches(s, k).transpose(1, 2).contiguous(), f),
                "rows and columns swapped",
            ),
            ("unchanged", lambda i, s, k, f: i, "returned the images unchanged"),
            (
                "n minus k",
                lambda i, s, k, f: keep_patches(i, top_patches(s, s.shape[1] * s.shape[2] - k), f),
                "kept N - k patches",
            ),
            ("slightly off", lambda i, s, k, f: keep_patches(i, top_patches(s, k), f) * 1.01, "max difference"),
        ],
    )


def plus_head(side):
    weights = local_attention(side)
    index = torch.arange(side * side)
    row, col = index // side, index % side
    near = ((row[:, None] - row[None]).abs() + (col[:, None] - col[None]).abs() <= 1).float()
    weights[1:, 1:] = near / near.sum(dim=-1, keepdim=True)
    return weights


def unnormalised_head(side):
    weights = local_attention(side)
    weights[1:, 1:] = (weights[1:, 1:] > 0).float() / 9
    return weights


def test_check_local_head_passes_the_reference_and_a_version_written_with_cdist(capsys):
    def with_cdist(side):
        cells = torch.cartesian_prod(torch.arange(side), torch.arange(side)).float()  # (N, 2) row-major
        near = (torch.cdist(cells, cells) < 1.5).float()  # 1 or sqrt(2) apart, or itself
        weights = torch.zeros(side * side + 1, side * side + 1)
        weights[0, 0] = 1
        weights[1:, 1:] = near / near.sum(dim=-1, keepdim=True)
        return weights

    check_local_head(local_attention)
    check_local_head(with_cdist)
    assert capsys.readouterr().out.count("✓ local_head matches the reference on 4 cases: exact") == 2


def _head_from(side, near):
    weights = local_attention(side)
    weights[1:, 1:] = near.float() / near.float().sum(dim=-1, keepdim=True)
    return weights


def _steps(side):
    index = torch.arange(side * side)
    row, col = index // side, index % side
    return (row[:, None] - row[None]).abs(), (col[:, None] - col[None]).abs(), index


def without_itself(side):
    rows, cols, _ = _steps(side)
    return _head_from(side, (rows <= 1) & (cols <= 1) & (rows + cols > 0))


def wrapping(side):
    rows, cols, _ = _steps(side)
    return _head_from(side, (torch.minimum(rows, side - rows) <= 1) & (torch.minimum(cols, side - cols) <= 1))


def flattened(side):
    _, _, index = _steps(side)
    return _head_from(side, (index[:, None] - index[None]).abs() <= 1)


def reads_class_token(side):
    weights = local_attention(side)
    weights[1:, 0] = 1.0  # the class token counted as one more neighbour
    weights[1:, 1:] = (weights[1:, 1:] > 0).float()
    return weights / weights.sum(dim=-1, keepdim=True)


def test_check_local_head_names_each_mistake():
    def uniform_cls(side):
        weights = local_attention(side)
        weights[0] = 1 / weights.shape[0]
        return weights

    def zero_cls(side):
        weights = local_attention(side)
        weights[0] = 0
        return weights

    assert_each_named_as_itself(
        check_local_head,
        [
            ("plus", plus_head, "only up, down, left and right"),
            ("edges", unnormalised_head, "not renormalised at the edges"),
            ("uniform class token", uniform_cls, "class token's row is uniform"),
            ("zero class token", zero_cls, "class token's row is all zeros"),
            ("transposed", lambda side: local_attention(side).T.contiguous(), "transposed"),
            ("patches only", lambda side: local_attention(side)[1:, 1:], "returned the patches only"),
            ("5 x 5", lambda side: local_attention(side, radius=2), "5 x 5"),
            ("itself left out", without_itself, "leaves itself out"),
            ("wraps", wrapping, "wraps around the edges"),
            ("flattened", flattened, "along the flattened sequence"),
            ("reads the class token", reads_class_token, "also attend to the class token"),
            ("scaled", lambda side: local_attention(side) * 1.01, "max difference"),
        ],
    )
