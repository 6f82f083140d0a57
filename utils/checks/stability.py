"""Lesson 11's exercise checkers: the largest logit qk-norm allows, Mixup for a batch, and the first
divergence in a loss history."""

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from utils.checks.core import CheckFailed, call_learner, describe, real_number
from utils.stability import first_divergence, mixup_batch, qk_norm_bound

# ---- exercise 1: the bound ---------------------------------------------------------------------


def _bound_cases() -> list[tuple]:
    """(head_dim, gamma_q, beta_q, gamma_k, beta_k): LayerNorm's start, then learned scales with a
    negative one larger in size than every positive one, and shifts."""
    generator = torch.Generator().manual_seed(11)
    cases = [(16, torch.ones(16), torch.zeros(16), torch.ones(16), torch.zeros(16))]
    for d in (16, 8, 32):
        gq = 1 + 0.3 * torch.randn(d, generator=generator)
        gk = 1 + 0.3 * torch.randn(d, generator=generator)
        gq[1], gk[2] = -2.5, -2.2  # the largest |gamma| is negative
        bq, bk = 0.4 * torch.randn(d, generator=generator), 0.4 * torch.randn(d, generator=generator)
        cases.append((d, gq, bq, gk, bk))
    return cases


def _wrong_bounds(d, gq, bq, gk, bk) -> dict[str, float]:
    r = math.sqrt(d)

    def norm(g, b, size=r, shift=True):
        return float(g.abs().max()) * size + (float(b.norm()) if shift else 0.0)

    right = norm(gq, bq) * norm(gk, bk) / r
    return {
        "you left out the 1/sqrt(head_dim) of the logit q.k / sqrt(d): divide the product of the two "
        "largest norms by sqrt(d)": right * r,
        "a standardised vector z has |z| = sqrt(d) (its d squares average 1), not d": norm(gq, bq, d)
        * norm(gk, bk, d)
        / r,
        "beta is missing: LayerNorm returns gamma * z + beta, and the shift adds up to |beta| to the norm": norm(
            gq, bq, shift=False
        )
        * norm(gk, bk, shift=False)
        / r,
        "a scale can be negative: the largest |gamma| bounds |gamma * z|, not the largest gamma": (
            float(gq.max()) * r + float(bq.norm())
        )
        * (float(gk.max()) * r + float(bk.norm()))
        / r,
        "the mean |gamma| does not bound |gamma * z|: z can put its weight on the feature with the largest |gamma|": (
            float(gq.abs().mean()) * r + float(bq.norm())
        )
        * (float(gk.abs().mean()) * r + float(bk.norm()))
        / r,
        "that is the bound at LayerNorm's start (gamma = 1, beta = 0), sqrt(d): after training gamma "
        "and beta have moved, and the bound moves with them": r,
    }


def _largest_found(d, gq, bq, gk, bk, steps: int = 200) -> float:
    """A logit that qk-norm attention can reach: gradient ascent over standardised z_q and z_k."""
    generator = torch.Generator().manual_seed(0)
    z = torch.randn(2, 64, d, generator=generator).requires_grad_(True)
    optimizer = torch.optim.Adam([z], lr=0.05)
    for _ in range(steps):
        q = gq * F.layer_norm(z[0], (d,), eps=0.0) + bq  # (64, d)
        k = gk * F.layer_norm(z[1], (d,), eps=0.0) + bk
        logits = (q * k).sum(-1) / math.sqrt(d)  # (64,): one pair per start
        optimizer.zero_grad()
        (-logits.sum()).backward()
        optimizer.step()
    return logits.detach().max().item()


def check_logit_bound(fn: Callable) -> None:
    """Check a learner's logit_bound(head_dim, gamma_q, beta_q, gamma_k, beta_k) -> float."""
    for case in _bound_cases():
        d = case[0]
        where = f"for head_dim {d}" + (" at LayerNorm's start" if case[1].eq(1).all() else " with learned gammas")
        got = real_number(call_learner(fn, *[c.clone() if torch.is_tensor(c) else c for c in case],
                                       returns=lambda r: r is not None and not isinstance(r, str | bool),
                                       expected="one number", where=where), "the bound", where)  # fmt: skip
        expected = qk_norm_bound(*case)
        if math.isclose(got, expected, rel_tol=1e-4):
            continue
        for why, wrong in _wrong_bounds(*case).items():
            if math.isclose(got, wrong, rel_tol=1e-4):
                raise CheckFailed(f"{why} ({where}: expected {expected:.3f}, got {got:.3f})")
        reached = _largest_found(*case)
        if reached <= got <= expected:  # tighter than the derivation, and no logit found above it
            continue
        if got < reached:
            raise CheckFailed(
                f"{where} your bound {got:.3f} is too small: qk-norm attention reaches a logit of "
                f"{reached:.3f} there. Bound |LN(q)| by the largest |gamma| times |z| plus |beta|, then "
                "apply Cauchy-Schwarz"
            )
        raise CheckFailed(
            f"{where} your bound {got:.3f} holds but is looser than the derivation's {expected:.3f}: "
            "(max|gamma_q| sqrt(d) + |beta_q|) (max|gamma_k| sqrt(d) + |beta_k|) / sqrt(d)"
        )
    print("✓ logit_bound matches the derivation at LayerNorm's start and with learned scales and shifts")


# ---- exercise 2: Mixup -------------------------------------------------------------------------


def _mixup_cases() -> list[tuple]:
    generator = torch.Generator().manual_seed(3)
    cases = []
    for shape, lam, K in (((6, 1, 8, 8), 0.7, 10), ((5, 3, 4, 4), 0.25, 7)):
        images = torch.rand(shape, generator=generator)
        labels = torch.randint(0, K - 1, (shape[0],), generator=generator)  # the top class never appears
        labels[0], labels[1] = 0, 1  # at least two classes
        order = torch.randperm(shape[0], generator=generator)
        while (order == torch.arange(shape[0])).any():  # every image gets another as its partner
            order = torch.randperm(shape[0], generator=generator)
        cases.append((images, labels, lam, order, K))
    return cases


def _mixup_mistakes(images, labels, lam, order, K) -> dict[str, tuple]:
    one_hot = F.one_hot(labels, K).float()
    back = torch.argsort(order)
    right_x = lam * images + (1 - lam) * images[order]
    right_y = lam * one_hot + (1 - lam) * one_hot[order]
    return {
        "the weights are swapped: lam weighs each image's own half, lam * x + (1 - lam) * x[order]": (
            (1 - lam) * images + lam * images[order],
            (1 - lam) * one_hot + lam * one_hot[order],
        ),
        "the targets' weights are swapped: the label of each image's own half gets lam, like the image": (
            right_x,
            (1 - lam) * one_hot + lam * one_hot[order],
        ),
        "the partner of image i is images[order[i]], i.e. images[order]; you used the inverse permutation": (
            lam * images + (1 - lam) * images[back],
            lam * one_hot + (1 - lam) * one_hot[back],
        ),
        "the images are unchanged: blend each with its partner, lam * x + (1 - lam) * x[order]": (images, right_y),
        "the targets are not mixed: a blend of two digits needs a blend of their one-hot labels": (right_x, one_hot),
    }


def _as_pair(result) -> bool:
    return isinstance(result, tuple | list) and len(result) == 2 and all(torch.is_tensor(r) for r in result)


def check_mixup_batch(fn: Callable) -> None:
    """Check a learner's mixup_batch(images, labels, lam, order, num_classes) -> (images, targets)."""
    for images, labels, lam, order, K in _mixup_cases():
        where = f"for images {tuple(images.shape)}, lam {lam}, {K} classes"
        got = call_learner(
            fn, images.clone(), labels.clone(), lam, order.clone(), K, returns=_as_pair,
            expected="a pair (mixed images, targets) of tensors", where=where,
        )  # fmt: skip
        x, y = (t.detach() for t in got)
        right_x, right_y = mixup_batch(images, labels, lam, order, K)
        if y.shape == labels.shape:
            raise CheckFailed(
                f"the targets are one number per image, shape {tuple(y.shape)} ({where}); they are a distribution "
                f"over the {K} classes, (B, K): lam * one_hot(labels) + (1 - lam) * one_hot(labels[order])"
            )
        if y.ndim == 2 and y.shape[0] == len(labels) and y.shape[1] != K:
            raise CheckFailed(
                f"the targets have {y.shape[1]} columns, not num_classes = {K} ({where}): a batch need not "
                "hold every class, so one_hot(labels, num_classes)"
            )
        if x.shape != images.shape or y.shape != right_y.shape:
            raise CheckFailed(
                f"expected images {tuple(images.shape)} and targets {tuple(right_y.shape)} {where}, got "
                f"{describe(x)} and {describe(y)}"
            )
        if torch.allclose(x.float(), right_x, atol=1e-6) and torch.allclose(y.float(), right_y, atol=1e-6):
            continue
        for why, (wrong_x, wrong_y) in _mixup_mistakes(images, labels, lam, order, K).items():
            if torch.allclose(x.float(), wrong_x, atol=1e-6) and torch.allclose(y.float(), wrong_y, atol=1e-6):
                raise CheckFailed(f"{why} ({where})")
        which = "images" if not torch.allclose(x.float(), right_x, atol=1e-6) else "targets"
        raise CheckFailed(
            f"the mixed {which} differ from lam * a + (1 - lam) * a[order] {where}"
            + (": each row of the targets sums to 1" if which == "targets" else "")
        )
    print("✓ mixup_batch blends the images and their one-hot labels with the same weights")


# ---- exercise 3: divergence --------------------------------------------------------------------

DIVERGENCE_CASES = (  # (losses, factor); each mistake answers at least one of them differently
    ([2.3, 1.5, 1.0, 0.8, 0.9, 2.1, 2.3], 2.0),  # a spike well above the best so far: 5
    ([2.0, 1.0, 0.5, 0.9, 1.1, 1.3], 2.0),  # a slow climb past twice the best: 4
    ([2.3, 0.5, 0.6, 1.2, 1.3], 2.0),  # never twice the first loss, but twice the best: 3
    ([2.3, 1.0, float("nan"), 0.5], 2.0),  # NaN: 2
    ([2.3, 1.2, float("inf")], 2.0),  # inf: 2
    ([1.0, 0.5, 1.0, 0.9], 2.0),  # exactly twice the best is not more than twice: None
    ([2.3, 1.0, 0.4, 1.0, 1.1], 3.0),  # factor 3: None (1.1 < 1.2)
    ([2.3, 1.0, 0.4, 1.3], 3.0),  # factor 3: 3
    ([2.3, 2.2, 2.1], 2.0),  # a run that learns slowly never diverged: None
    ([], 2.0),  # no losses: None
)


def _divergence_mistakes() -> dict[str, Callable]:
    def first_loss(losses, factor):
        for i, loss in enumerate(losses):
            if not math.isfinite(loss) or loss > factor * losses[0]:
                return i
        return None

    def previous(losses, factor):
        for i, loss in enumerate(losses):
            if not math.isfinite(loss) or (i > 0 and loss > factor * losses[i - 1]):
                return i
        return None

    def no_nan(losses, factor):
        best = math.inf
        for i, loss in enumerate(losses):
            if loss > factor * best:
                return i
            best = min(best, loss)
        return None

    def at_least(losses, factor):
        best = math.inf
        for i, loss in enumerate(losses):
            if not math.isfinite(loss) or loss >= factor * best:
                return i
            best = min(best, loss)
        return None

    def plus_one(losses, factor):
        found = first_divergence(losses, factor)
        return None if found is None else found + 1

    def fixed_two(losses, factor):
        return first_divergence(losses, 2.0)

    return {
        "compare each loss with the best loss so far, not with the first one: a run can fall a long "
        "way and then climb back": first_loss,
        "compare each loss with the best loss so far, not with the one before it: a slow climb is a "
        "divergence too": previous,
        "a NaN or inf loss is a divergence: NaN > anything is False, so test math.isfinite(loss) first": no_nan,
        "'more than factor times the best' is a strict >: a loss of exactly twice the best is not counted": at_least,
        "return the loss's index in the list (0 for the first), not its position counted from 1": plus_one,
        "use the factor you are given, not a fixed 2": fixed_two,
    }


def _answers(fn: Callable) -> list:
    answers = []
    for losses, factor in DIVERGENCE_CASES:
        where = f"for losses {losses} and factor {factor}"
        result = call_learner(
            fn, list(losses), factor, returns=lambda r: r is None or (isinstance(r, int) and not isinstance(r, bool)),
            expected="an int (the index) or None", where=where,
        )  # fmt: skip
        answers.append(result)
    return answers


def check_first_divergence(fn: Callable) -> None:
    """Check a learner's first_divergence(losses, factor) -> int or None."""
    got = _answers(fn)
    expected = [first_divergence(losses, factor) for losses, factor in DIVERGENCE_CASES]
    if got == expected:
        print("✓ first_divergence finds NaN, inf and climbs above factor x the best loss so far")
        return
    for why, wrong in _divergence_mistakes().items():
        if got == [wrong(losses, factor) for losses, factor in DIVERGENCE_CASES]:
            raise CheckFailed(why)
    index = next(i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b)
    losses, factor = DIVERGENCE_CASES[index]
    raise CheckFailed(f"for losses {losses} and factor {factor} expected {expected[index]}, got {got[index]}")
