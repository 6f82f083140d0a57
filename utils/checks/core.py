"""What every exercise checker shares: the failure type, the call guard and the match verdict.

A checker prints one line when the learner's function is right ("exact" or "approximate, max
difference ...") and raises CheckFailed with a sentence a learner understands when it is not.
A blank exercise raises NotImplementedError, which passes through untouched.
"""

from collections.abc import Callable

import torch


class CheckFailed(AssertionError):
    """The learner's answer differs from the reference; the message says how."""


def describe_match(got: torch.Tensor, expected: torch.Tensor, atol: float = 1e-6) -> str:
    """'exact', or 'approximate (max difference ...)' when within atol; raises CheckFailed otherwise."""
    if torch.equal(got, expected):
        return "exact"
    difference = (got.double() - expected.double()).abs().max().item()
    if difference <= atol:
        return f"approximate (max difference {difference:.1e})"
    raise CheckFailed(f"values differ from the reference: max difference {difference:.3g}")


def name_known_mistake(
    got: torch.Tensor, mistakes: dict[str, torch.Tensor], where: str, atol: float = 1e-5, rtol: float = 1e-5
) -> None:
    """Raise CheckFailed with the explanation of the first plausible wrong answer that `got` equals.

    Args:
        got: the learner's result.
        mistakes: wrong-but-plausible results, each keyed by the sentence that explains it.
        where: the case that showed it, e.g. "for x of shape (2, 5, 24)", added in brackets.
    """
    for reason, wrong in mistakes.items():
        if wrong.shape == got.shape and torch.allclose(
            got.double(), wrong.double(), atol=atol, rtol=rtol, equal_nan=True
        ):
            raise CheckFailed(f"{reason} ({where})") from None


def call_learner(fn: Callable, *args):
    """Run the learner's function; turn its own exception into a readable failure."""
    try:
        result = fn(*args)
    except NotImplementedError:
        raise
    except Exception as error:  # the learner's code may raise anything
        raise CheckFailed(f"your function raised {type(error).__name__}: {error}") from error
    if not isinstance(result, torch.Tensor):
        raise CheckFailed(f"expected a torch.Tensor, got {type(result).__name__}")
    return result


def summarize(verdicts: list[str]) -> str:
    """One verdict for several cases: 'exact' if all were exact, else the last approximate one."""
    inexact = [v for v in verdicts if v != "exact"]
    return inexact[-1] if inexact else "exact"
