"""Lesson 11's checkers pass the reference and its legitimate variants, name each typical mistake
in words, and turn whatever else comes back into a failure that says what came."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from checker_cases import assert_each_named_as_itself

from utils.checks.core import CheckFailed
from utils.checks.stability import check_first_divergence, check_logit_bound, check_mixup_batch
from utils.stability import first_divergence, mixup_batch, qk_norm_bound

# ---- exercise 1: the bound -------------------------------------------------------------------


def bound(size=lambda d: math.sqrt(d), scale=lambda g: g.abs().max(), shift=True, divide=True):
    """A learner's bound with switches: |z|'s size, the scale's bound, beta in or out, the 1/sqrt(d)."""

    def logit_bound(head_dim, gamma_q, beta_q, gamma_k, beta_k):
        def norm(gamma, beta):
            return float(scale(gamma)) * size(head_dim) + (float(beta.norm()) if shift else 0.0)

        product = norm(gamma_q, beta_q) * norm(gamma_k, beta_k)
        return product / math.sqrt(head_dim) if divide else product

    return logit_bound


def test_the_bound_checker_passes_the_reference_and_its_variants(capsys):
    check_logit_bound(qk_norm_bound)
    check_logit_bound(bound())
    check_logit_bound(lambda d, gq, bq, gk, bk: torch.tensor(qk_norm_bound(d, gq, bq, gk, bk)))  # a 0-d tensor
    check_logit_bound(lambda d, gq, bq, gk, bk: np.float32(qk_norm_bound(d, gq, bq, gk, bk)))
    assert capsys.readouterr().out.count("✓") == 4


def test_the_bound_checker_names_each_mistake():
    assert_each_named_as_itself(
        check_logit_bound,
        [
            ("no 1/sqrt(d)", bound(divide=False), r"1/sqrt\(head_dim\)"),
            ("|z| = d", bound(size=lambda d: d), r"\|z\| = sqrt\(d\)"),
            ("no beta", bound(shift=False), r"beta is missing"),
            ("max gamma", bound(scale=lambda g: g.max()), r"a scale can be negative"),
            ("mean gamma", bound(scale=lambda g: g.abs().mean()), r"the mean \|gamma\|"),
            ("the start's bound", lambda d, *rest: math.sqrt(d), r"bound at LayerNorm's start"),
            ("too small", lambda d, *rest: 0.1 * qk_norm_bound(d, *rest), r"too small"),
            ("looser", lambda d, *rest: 2 * qk_norm_bound(d, *rest), r"looser than the derivation"),
        ],
    )


def test_the_bound_checker_refuses_what_is_not_a_number():
    with pytest.raises(CheckFailed, match="expected one number, got None"):
        check_logit_bound(lambda *args: None)
    with pytest.raises(CheckFailed, match="expected one number, got str"):
        check_logit_bound(lambda *args: "4")
    with pytest.raises(CheckFailed):
        check_logit_bound(lambda head_dim, *rest: head_dim)  # returns its first parameter


# ---- exercise 2: Mixup -----------------------------------------------------------------------


def mix(own=lambda lam: lam, partner=lambda order: order, targets="mixed", images=True):
    def mixup(x, labels, lam, order, num_classes):
        one_hot = F.one_hot(labels, num_classes).float()
        other = partner(order)
        w = own(lam)
        mixed = w * x + (1 - w) * x[other] if images else x
        if targets == "hard":
            return mixed, labels
        if targets == "plain":
            return mixed, one_hot
        if targets == "numbers":
            return mixed, w * labels + (1 - w) * labels[other]
        if targets == "too few":
            small = F.one_hot(labels).float()
            return mixed, w * small + (1 - w) * small[other]
        if targets == "swapped":
            return mixed, (1 - w) * one_hot + w * one_hot[other]
        return mixed, w * one_hot + (1 - w) * one_hot[other]

    return mixup


def test_the_mixup_checker_passes_the_reference_and_a_list_of_two(capsys):
    check_mixup_batch(mixup_batch)
    check_mixup_batch(lambda *args: list(mixup_batch(*args)))
    check_mixup_batch(mix())
    assert capsys.readouterr().out.count("✓") == 3


def test_the_mixup_checker_names_each_mistake():
    assert_each_named_as_itself(
        check_mixup_batch,
        [
            ("swapped", mix(own=lambda lam: 1 - lam), r"the weights are swapped"),
            ("targets swapped", mix(targets="swapped"), r"the targets' weights are swapped"),
            ("inverse", mix(partner=torch.argsort), r"inverse permutation"),
            ("images unchanged", mix(images=False), r"the images are unchanged"),
            ("targets not mixed", mix(targets="plain"), r"the targets are not mixed"),
            ("hard labels", mix(targets="hard"), r"one number per image"),
            ("mixed class numbers", mix(targets="numbers"), r"one number per image"),
            ("too few classes", mix(targets="too few"), r"not num_classes"),
        ],
    )


def test_the_mixup_checker_refuses_what_is_not_a_pair():
    with pytest.raises(CheckFailed, match=r"a pair \(mixed images, targets\)"):
        check_mixup_batch(lambda images, *rest: images)  # returns its first parameter
    with pytest.raises(CheckFailed, match="got None"):
        check_mixup_batch(lambda *args: None)


# ---- exercise 3: divergence ------------------------------------------------------------------


def diverges(compare="best", finite=True, strict=True, offset=0, factor=None):
    def first(losses, f):
        f = factor or f
        best = math.inf
        for i, loss in enumerate(losses):
            if finite and not math.isfinite(loss):
                return i + offset
            ref = {"best": best, "first": losses[0], "previous": losses[i - 1] if i else math.inf}[compare]
            if (loss > f * ref) if strict else (loss >= f * ref):
                return i + offset
            best = min(best, loss)
        return None

    return first


def test_the_divergence_checker_passes_the_reference_and_a_variant(capsys):
    check_first_divergence(first_divergence)
    check_first_divergence(diverges())
    assert capsys.readouterr().out.count("✓") == 2


def test_the_divergence_checker_names_each_mistake():
    assert_each_named_as_itself(
        check_first_divergence,
        [
            ("first loss", diverges(compare="first"), r"not with the first one"),
            ("previous loss", diverges(compare="previous"), r"not with the one before it"),
            ("NaN missed", diverges(finite=False), r"NaN or inf"),
            (">=", diverges(strict=False), r"strict >"),
            ("counted from 1", diverges(offset=1), r"counted from 1"),
            ("a fixed factor", diverges(factor=2.0), r"not a fixed 2"),
            ("never", lambda losses, factor: None, r"expected 5, got None"),
        ],
    )


def test_the_divergence_checker_refuses_a_boolean_or_the_list():
    with pytest.raises(CheckFailed, match=r"an int \(the index\) or None, got bool"):
        check_first_divergence(lambda losses, factor: True)
    with pytest.raises(CheckFailed, match=r"an int \(the index\) or None, got list"):
        check_first_divergence(lambda losses, factor: losses)  # returns its first parameter
