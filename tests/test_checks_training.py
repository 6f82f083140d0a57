"""Lesson 6's checkers pass the reference and name each typical mistake."""

import math

import pytest
import torch.nn.functional as F

from utils.checks.core import CheckFailed
from utils.checks.training import check_train_step, check_warmup_cosine
from utils.training import warmup_cosine


def test_check_warmup_cosine_passes_the_reference(capsys):
    check_warmup_cosine(warmup_cosine)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda p, w: 0.5 * (1 + math.cos(math.pi * p)), "must start at 0"),
        (lambda p, w: p / w if p < w else 1.0 - (p - w) / (1 - w), "linear decay"),
        (lambda p, w: p / w if p < w else 0.5 * (1 + math.cos(math.pi * (p - w))), "must end at 0"),
        (lambda p, w: min(1.0, p / w) * 0.9, "must reach 1"),
    ],
)
def test_check_warmup_cosine_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_warmup_cosine(wrong)


def reference_step(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss.item()


def test_check_train_step_passes_the_reference(capsys):
    check_train_step(reference_step)
    assert "✓" in capsys.readouterr().out


def no_zero_grad(model, optimizer, images, labels):
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss.item()


def no_step(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    return loss.item()


def zero_grad_after_backward(model, optimizer, images, labels):
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.zero_grad()  # wipes what backward just computed
    optimizer.step()
    return loss.item()


def returns_tensor_of_batch(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels, reduction="none")
    loss.mean().backward()
    optimizer.step()
    return loss


@pytest.mark.parametrize(
    "wrong, words",
    [
        (no_zero_grad, "zero_grad"),
        (no_step, r"optimizer\.step"),
        (zero_grad_after_backward, r"between backward\(\) and step\(\)\? It wipes the gradients"),
        (returns_tensor_of_batch, "one number"),
    ],
)
def test_check_train_step_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_train_step(wrong)
