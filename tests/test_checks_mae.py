"""Lesson 13's checkers pass the reference and its legitimate variants, name each typical mistake
in words, and turn whatever else comes back into a failure that says what came."""

import pytest
import torch
from checker_cases import assert_each_named_as_itself

from utils.checks.core import CheckFailed
from utils.checks.mae import check_block_mask, check_norm_pix_loss, check_unshuffle
from utils.mae import block_masking, masked_loss

# ---- exercise 1: unshuffle ---------------------------------------------------------------------


def unshuffle(tokens, shuffle):
    restore = shuffle.argsort(dim=1)  # (B, N)
    return tokens.gather(1, restore.unsqueeze(-1).expand(-1, -1, tokens.shape[-1]))


def unshuffle_by_scatter(tokens, shuffle):
    out = torch.empty_like(tokens)
    return out.scatter(1, shuffle.unsqueeze(-1).expand(-1, -1, tokens.shape[-1]), tokens)


def test_the_unshuffle_checker_passes_the_reference_and_a_scatter(capsys):
    check_unshuffle(unshuffle)
    check_unshuffle(unshuffle_by_scatter)
    assert capsys.readouterr().out.count("✓") == 2


def test_the_unshuffle_checker_names_each_mistake():
    D = lambda t: t.shape[-1]  # noqa: E731
    assert_each_named_as_itself(
        check_unshuffle,
        [
            ("by the shuffle", lambda t, s: t.gather(1, s.unsqueeze(-1).expand(-1, -1, D(t))), "shuffles a second"),
            ("first image's order", lambda t, s: t[:, s[0].argsort()], "first image's order"),
            ("unchanged", lambda t, s: t, "order they came in"),
            ("a token dropped", lambda t, s: unshuffle(t, s)[:, 1:], r"\(B, N, D\) out"),
        ],
    )


# ---- exercise 2: the loss on normalised pixels --------------------------------------------------


def norm_pix_loss(prediction, target, mask):
    return masked_loss(prediction, target, mask, norm_pix=True)


def population_variance(prediction, target, mask):
    mean, var = target.mean(-1, keepdim=True), target.var(-1, keepdim=True, unbiased=False)
    target = (target - mean) / (var + 1e-6) ** 0.5
    return (((prediction - target) ** 2).mean(-1) * mask).sum() / mask.sum()


def test_the_loss_checker_passes_the_reference_and_its_variants(capsys):
    check_norm_pix_loss(norm_pix_loss)
    check_norm_pix_loss(population_variance)
    check_norm_pix_loss(lambda p, t, m: norm_pix_loss(p, t, m).item())  # a Python float
    check_norm_pix_loss(lambda p, t, m: norm_pix_loss(p, t, m).reshape(1))  # one element
    assert capsys.readouterr().out.count("✓") == 4


def test_the_loss_checker_names_each_mistake():
    def per_patch(p, t):
        t = (t - t.mean(-1, keepdim=True)) / (t.var(-1, keepdim=True) + 1e-6) ** 0.5
        return ((p - t) ** 2).mean(-1)

    def whole(p, t, m):
        t = (t - t.mean(dim=(1, 2), keepdim=True)) / (t.var(dim=(1, 2), keepdim=True) + 1e-6) ** 0.5
        return masked_loss(p, t, m)

    assert_each_named_as_itself(
        check_norm_pix_loss,
        [
            ("raw pixels", lambda p, t, m: masked_loss(p, t, m), "raw pixels"),
            ("every patch", lambda p, t, m: per_patch(p, t).mean(), "covers every patch"),
            ("visible", lambda p, t, m: (per_patch(p, t) * (1 - m)).sum() / (1 - m).sum(), "visible patches"),
            ("whole image", whole, "normalised as a whole"),
            ("wrong count", lambda p, t, m: (per_patch(p, t) * m).sum() / m.numel(), "divides by all"),
            ("per patch", lambda p, t, m: per_patch(p, t), "one number"),
            ("first argument", lambda p, t, m: p, "one number"),
        ],
    )


# ---- exercise 3: a block mask ------------------------------------------------------------------


def test_the_block_checker_passes_the_reference_and_a_boolean_mask(capsys):
    check_block_mask(block_masking)
    check_block_mask(lambda r, c, t, left, s: block_masking(r, c, t, left, s).bool())
    assert capsys.readouterr().out.count("✓") == 2


def test_the_block_checker_names_each_mistake():
    def grid(r, c, t, left, s):
        return block_masking(r, c, t, left, s).reshape(r, c)

    assert_each_named_as_itself(
        check_block_mask,
        [
            ("inverted", lambda r, c, t, left, s: 1 - block_masking(r, c, t, left, s), "HIDDEN"),
            ("swapped", lambda r, c, t, left, s: block_masking(r, c, left, t, s), r"\(left, top\)"),
            ("short", lambda r, c, t, left, s: block_masking(r, c, t, left, max(s - 1, 1)), "one patch short"),
            ("a grid", grid, "flatten"),
        ],
    )


def test_a_checker_says_what_came_instead_of_a_tensor():
    with pytest.raises(CheckFailed, match="expected a torch.Tensor, got"):
        check_block_mask(lambda r, c, t, left, s: r)
    with pytest.raises(CheckFailed, match="got None"):
        check_unshuffle(lambda t, s: None)
