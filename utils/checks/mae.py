"""Lesson 13's exercise checkers: putting shuffled tokens back in place, MAE's loss against per-patch
normalised pixels, and a block-wise mask."""

from collections.abc import Callable

import torch

from utils.checks.core import CheckFailed, call_learner, compare, summarize
from utils.mae import block_masking, masked_loss

UNSHUFFLE_CASES = [(2, 6, 3), (3, 16, 4), (1, 9, 2)]  # (B, N, D)
LOSS_CASES = [(2, 16, 4), (3, 9, 12), (1, 4, 27)]  # (B, N, C*P*P)
BLOCK_CASES = [(4, 4, 1, 0, 2), (3, 5, 0, 2, 3), (6, 4, 2, 1, 2), (4, 4, 0, 0, 4)]  # (rows, cols, top, left, size)


def _unshuffle_variants(tokens: torch.Tensor, shuffle: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible results of unshuffle, keyed by the sentence that explains each."""
    D = tokens.shape[-1]
    by_shuffle = tokens.gather(1, shuffle.unsqueeze(-1).expand(-1, -1, D))
    first_order = tokens[:, shuffle[0].argsort()]
    return {
        "you gathered by the shuffle itself, which shuffles a second time: the tokens go back by its "
        "inverse, restore = shuffle.argsort(dim=1), so that slot j takes the token of patch j": by_shuffle,
        "every image was put back with the first image's order: each image has its own shuffle, so "
        "gather along dim 1 with one index row per image": first_order,
        "the tokens came back in the order they came in: shuffled tokens must move, token k to "
        "place shuffle[b, k]": tokens.clone(),
    }


def check_unshuffle(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Check a learner's unshuffle(tokens, shuffle) -> (B, N, D): tokens in shuffled order (token k
    of image b belongs to patch shuffle[b, k]) put back in patch order."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for B, N, D in UNSHUFFLE_CASES:
        shuffle = torch.rand(B, N, generator=generator).argsort(dim=1)  # (B, N)
        tokens = torch.randn(B, N, D, generator=generator)  # (B, N, D) in shuffled order
        expected = torch.empty_like(tokens)
        for b in range(B):
            expected[b, shuffle[b]] = tokens[b]  # token k goes to place shuffle[b, k]
        where = f"for tokens of shape {(B, N, D)}"
        got = call_learner(fn, tokens.clone(), shuffle.clone(), where=where)
        verdicts.append(
            compare(
                got,
                expected,
                where,
                any_shape_hint="unshuffle moves tokens, it keeps every one: (B, N, D) in, (B, N, D) out",
                mistakes=_unshuffle_variants(tokens, shuffle),
            )
        )
    print(f"✓ unshuffle puts every token back at its patch's place ({summarize(verdicts)})")


def _loss_variants(prediction, target, mask) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible values of the normalised-pixel loss, keyed by their explanation."""
    mean, std = target.mean(dim=-1, keepdim=True), target.std(dim=-1, keepdim=True)
    normalised = (target - mean) / (std**2 + 1e-6) ** 0.5
    whole = (target - target.mean(dim=(1, 2), keepdim=True)) / (target.var(dim=(1, 2), keepdim=True) + 1e-6) ** 0.5
    per_patch = ((prediction - normalised) ** 2).mean(dim=-1)  # (B, N)
    return {
        "the targets are the raw pixels: normalise each target patch by its own mean and standard "
        "deviation first (over its C*P*P pixels, the last axis)": masked_loss(prediction, target, mask),
        "the loss covers every patch: average it over the hidden ones only, (loss * mask).sum() / "
        "mask.sum()": per_patch.mean(),
        "the loss covers the visible patches (mask is 1.0 where a patch is HIDDEN): weight by mask, not by 1 - mask": (
            per_patch * (1 - mask)
        ).sum()
        / (1 - mask).sum(),
        "each image was normalised as a whole: MAE normalises every patch by its own mean and "
        "variance, over the last axis only": masked_loss(prediction, whole, mask),
        "the mean over the hidden patches divides by all patches: divide the masked sum by "
        "mask.sum(), the number of hidden ones": (per_patch * mask).sum() / mask.numel(),
    }


def check_norm_pix_loss(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Check a learner's norm_pix_loss(prediction, target, mask) -> a 0-d tensor: MAE's loss on the
    hidden patches against per-patch normalised targets (the variance with or without Bessel's
    correction, eps 1e-6 inside the root or added to the standard deviation: all accepted)."""
    generator = torch.Generator().manual_seed(1)
    verdicts = []
    for B, N, K in LOSS_CASES:
        prediction = torch.randn(B, N, K, generator=generator)
        target = torch.rand(B, N, K, generator=generator)  # pixels in [0, 1]
        mask = (torch.rand(B, N, generator=generator) < 0.75).float()  # (B, N), 1.0 hidden
        mask[:, 0], mask[:, 1] = 1.0, 0.0  # at least one hidden and one visible per image
        where = f"for patches of shape {(B, N, K)}"
        got = call_learner(
            fn,
            prediction.clone(),
            target.clone(),
            mask.clone(),
            returns=(torch.Tensor, float),
            expected="a 0-d tensor (or a float)",
            where=where,
        )
        got = torch.tensor(got) if isinstance(got, float) else got
        expected = masked_loss(prediction, target, mask, norm_pix=True)
        population = target.var(dim=-1, keepdim=True, unbiased=False)
        variant = (target - target.mean(dim=-1, keepdim=True)) / (population + 1e-6) ** 0.5
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            alternative = masked_loss(prediction, variant, mask)
            if abs(float(got) - float(alternative)) < 1e-4 * max(1.0, abs(float(alternative))):
                expected = alternative  # the population variance: a legitimate variant
        verdicts.append(
            compare(
                got.reshape(()) if isinstance(got, torch.Tensor) and got.numel() == 1 else got,
                expected,
                where,
                atol=1e-4,
                any_shape_hint="the loss is one number, a 0-d tensor (average over the hidden patches)",
                mistakes=_loss_variants(prediction, target, mask),
                mistake_atol=1e-4,
                mistake_rtol=1e-4,
            )
        )
    print(f"✓ norm_pix_loss matches MAE's loss with normalised targets ({summarize(verdicts)})")


def _block_variants(rows: int, cols: int, top: int, left: int, size: int) -> dict[str, torch.Tensor]:
    right = block_masking(rows, cols, top, left, size)
    variants = {
        "1.0 must mark the HIDDEN patches (MAE's convention): yours marks the visible ones": 1 - right,
    }
    if (top, left) != (left, top) and left + size <= rows and top + size <= cols:
        swapped = block_masking(rows, cols, left, top, size)
        if not torch.equal(swapped, right):
            variants[
                "the block sits at (left, top) instead of (top, left): top counts rows down, left counts "
                "columns across, and patch (r, c) is number r * cols + c"
            ] = swapped
    if size > 1:
        variants["the block is one patch short on each side: a slice top:top + size covers size rows"] = block_masking(
            rows, cols, top, left, size - 1
        )
    return variants


def check_block_mask(fn: Callable[[int, int, int, int, int], torch.Tensor]) -> None:
    """Check a learner's block_mask(rows, cols, top, left, size) -> (rows * cols,): 1.0 on the
    size x size square of patches whose top-left patch is (top, left), 0.0 elsewhere, in
    patchify's row-major order."""
    verdicts = []
    for rows, cols, top, left, size in BLOCK_CASES:
        where = f"for a {rows} x {cols} grid and a {size} x {size} block at ({top}, {left})"
        got = call_learner(fn, rows, cols, top, left, size, where=where)
        expected = block_masking(rows, cols, top, left, size)
        if isinstance(got, torch.Tensor) and got.dtype == torch.bool:
            got = got.float()  # True for hidden: the same mask
        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_hints={
                    (rows, cols): "the mask is flat, one number per patch in row-major order: .flatten() the grid"
                },
                any_shape_hint=f"expected one number per patch, shape ({rows * cols},)",
                mistakes=_block_variants(rows, cols, top, left, size),
            )
        )
    print(f"✓ block_mask hides the right square of patches ({summarize(verdicts)})")


__all__ = ["CheckFailed", "check_block_mask", "check_norm_pix_loss", "check_unshuffle"]
