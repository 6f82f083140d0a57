"""Lesson 6's exercise checkers: the warm-up + cosine learning-rate schedule, one training step."""

import copy
import math
from collections.abc import Callable

import torch
from torch import nn

from utils.checks.core import CheckFailed, call_learner
from utils.training import train_step, warmup_cosine


def check_warmup_cosine(fn: Callable[[float, float], float]) -> None:
    """Check a learner's warmup_cosine(progress, warmup) -> factor in [0, 1]."""

    def factor(progress: float, warmup: float) -> float:
        """The learner's factor as a float; a result that float() refuses counts as the function's error."""
        return float(fn(progress, warmup))

    for warmup in (0.1, 0.25):
        points = [0.0, warmup / 2, warmup, (1 + warmup) / 2, 0.9, 1.0]
        got = [call_learner(factor, p, warmup, returns=float) for p in points]
        expected = [warmup_cosine(p, warmup) for p in points]
        where = f"(warmup = {warmup})"
        if all(math.isclose(g, e, abs_tol=1e-6) for g, e in zip(got, expected)):
            continue
        if math.isclose(got[0], 1.0, abs_tol=1e-6):
            raise CheckFailed(
                f"the factor is {got[0]:.2f} at progress 0: warm-up must start at 0 and rise linearly to 1 {where}"
            )
        if not math.isclose(got[2], 1.0, abs_tol=1e-6):
            raise CheckFailed(f"the factor is {got[2]:.3f} at the end of warm-up; it must reach 1 there {where}")
        if math.isclose(got[3], 0.5, abs_tol=1e-3) and not math.isclose(got[4], expected[4], abs_tol=1e-3):
            raise CheckFailed(
                f"halfway through the decay you give 0.5 but at 0.9 {got[4]:.3f} instead of {expected[4]:.3f}: "
                f"a linear decay? use 0.5 * (1 + cos(pi * t)) {where}"
            )
        if not math.isclose(got[5], 0.0, abs_tol=1e-6):
            raise CheckFailed(
                f"the factor is {got[5]:.3f} at progress 1; the cosine must end at 0: "
                f"t = (progress - warmup) / (1 - warmup) {where}"
            )
        worst = max(range(len(points)), key=lambda i: abs(got[i] - expected[i]))
        raise CheckFailed(
            f"at progress {points[worst]:.3f} expected {expected[worst]:.4f}, got {got[worst]:.4f} {where}"
        )
    print("✓ warmup_cosine matches the reference schedule at warm-up, peak, decay and end")


def check_train_step(fn: Callable[[nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor], float]) -> None:
    """Check a learner's train_step(model, optimizer, images, labels) -> loss (a float), over
    three steps on a small classifier, against the reference step on an identical copy."""
    generator = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.GELU(), nn.Linear(8, 3))
    reference = copy.deepcopy(model)
    ours = torch.optim.SGD(model.parameters(), lr=0.1)
    theirs = torch.optim.SGD(reference.parameters(), lr=0.1)
    start = [p.detach().clone() for p in model.parameters()]
    for step in range(3):
        images, labels = torch.randn(6, 1, 3, 4, generator=generator), torch.randint(0, 3, (6,), generator=generator)
        loss = call_learner(fn, model, ours, images, labels, returns=object)
        expected_loss = train_step(reference, theirs, images, labels)
        if isinstance(loss, torch.Tensor):
            if loss.numel() != 1:
                raise CheckFailed(f"return the loss as one number, got a tensor of shape {tuple(loss.shape)}")
            loss = loss.item()
        if not isinstance(loss, float):
            raise CheckFailed(f"return the loss as a float (loss.item()), got {type(loss).__name__}")
        if step == 0 and all(torch.equal(p, s) for p, s in zip(model.parameters(), start)):
            raise CheckFailed(
                "the parameters did not change: did you forget optimizer.step()? (Or is optimizer.zero_grad() "
                "between backward() and step()? It wipes the gradients before the update.)"
            )
        if not math.isclose(loss, expected_loss, rel_tol=1e-5, abs_tol=1e-6):
            hint = (
                " (gradients from earlier steps were added in: optimizer.zero_grad() before backward)" if step else ""
            )
            raise CheckFailed(f"step {step + 1}: loss {loss:.5f}, expected {expected_loss:.5f}{hint}")
        for p, q in zip(model.parameters(), reference.parameters()):
            if not torch.allclose(p, q, atol=1e-6):
                raise CheckFailed(
                    f"after step {step + 1} the parameters differ from the reference: did you forget "
                    "optimizer.zero_grad()? Gradients add up across steps otherwise"
                )
    print("✓ train_step matches the reference over 3 steps: same losses, same parameters")
