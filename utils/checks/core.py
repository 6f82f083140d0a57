"""What every exercise checker shares: the failure type, the call guard and the comparison with the reference.

A checker prints one line when the learner's function is right ("exact" or "approximate, max
difference ...") and raises CheckFailed with a sentence a learner understands when it is not.
A blank exercise raises NotImplementedError, which passes through untouched.
"""

from collections.abc import Callable, Mapping
from typing import Any

import torch


class CheckFailed(AssertionError):
    """The learner's answer differs from the reference; the message says how."""


Returns = type | tuple[type, ...] | Callable[[Any], bool]


def _in_words(returns: Returns) -> str:
    """'a torch.Tensor', 'an int or a float', or for a predicate 'a result that passes is_pair'."""
    if not isinstance(returns, type | tuple):
        return f"a result that passes {returns.__name__}"
    types = returns if isinstance(returns, tuple) else (returns,)
    names = [t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}" for t in types]
    return " or ".join(f"{'an' if name[0] in 'aeiou' else 'a'} {name}" for name in names)


def _returns_ok(result: Any, returns: Returns) -> bool:
    """Whether `result` is of the type(s) `returns`, or satisfies it when it is a predicate."""
    if isinstance(returns, type | tuple):
        return isinstance(result, returns)
    return bool(returns(result))


def call_learner(fn: Callable, *args, returns: Returns = torch.Tensor, expected: str | None = None, where: str = ""):
    """Run the learner's function; turn its own exception or a result of the wrong kind into a readable failure.

    Args:
        fn: the learner's function, called as fn(*args); NotImplementedError (a blank exercise) passes through.
        returns: what the result must be: a type, a tuple of types, or a predicate (result -> bool).
        expected: that in words, e.g. "a pair (out, weights)"; by default the type names ("a torch.Tensor").
        where: the case, named in the message when the function raises, e.g. "for q (2, 7, 16)".
    Returns:
        the learner's result.
    """
    try:
        result = fn(*args)
    except NotImplementedError:
        raise
    except Exception as error:  # the learner's code may raise anything
        case = f" {where}" if where else ""
        raise CheckFailed(f"your function raised {type(error).__name__}{case}: {error}") from error
    if not _returns_ok(result, returns):
        raise CheckFailed(f"expected {expected or _in_words(returns)}, got {type(result).__name__}")
    return result


def match_or_raise(got: torch.Tensor, expected: torch.Tensor, atol: float = 1e-6) -> str:
    """'exact', or 'approximate (max difference ...)' when within atol; raises CheckFailed otherwise."""
    if torch.equal(got, expected):
        return "exact"
    difference = (got.double() - expected.double()).abs().max().item()
    if difference <= atol:
        return f"approximate (max difference {difference:.1e})"
    raise CheckFailed(f"values differ from the reference: max difference {difference:.3g}")


def raise_if_known_mistake(
    got: torch.Tensor, mistakes: Mapping[str, torch.Tensor], where: str, atol: float = 1e-5, rtol: float = 1e-5
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


def raise_if_wrong_shape(
    got: torch.Tensor,
    expected: torch.Tensor,
    where: str,
    *,
    shape_hints: Mapping[tuple[int, ...], str] | None = None,
    layout: str | None = None,
    any_shape_hint: str | None = None,
    shape_wording: str = "expected shape {}",
) -> None:
    """Raise CheckFailed when `got` is not shaped like `expected`, with the likeliest reason: the hint
    for got's shape, else "the right numbers, but not in the shape {layout}" when only the arrangement
    is wrong, else any_shape_hint.

    Args:
        shape_hints: wrong shape (a tuple) -> the sentence that explains it.
        layout: the expected shape in letters, e.g. "(B, N, C*P*P)".
        any_shape_hint: the sentence for a wrong shape that nothing else explains.
        shape_wording: the message's start, "{}" standing for the expected shape, e.g. "expected (B, T, T) = {}".
    """
    shape = tuple(got.shape)
    if shape == tuple(expected.shape):
        return
    hint = (shape_hints or {}).get(shape)
    if hint is None and layout is not None and got.numel() == expected.numel():
        hint = f"the right numbers, but not in the shape {layout}"
    if hint is None:
        hint = any_shape_hint
    explanation = f": {hint}" if hint else ""
    raise CheckFailed(f"{shape_wording.format(tuple(expected.shape))}, got {shape} {where}{explanation}")


def compare(
    got: torch.Tensor,
    expected: torch.Tensor,
    where: str,
    *,
    shape_wording: str = "expected shape {}",
    shape_hints: Mapping[tuple[int, ...], str] | None = None,
    layout: str | None = None,
    any_shape_hint: str | None = None,
    atol: float = 1e-6,
    mistakes: Mapping[str, torch.Tensor] | None = None,
    mistake_atol: float = 1e-5,
    mistake_rtol: float = 1e-5,
    diagnose: Callable[[torch.Tensor], str | None] | None = None,
    name: str = "",
    advice: str = "",
) -> str:
    """Compare the learner's tensor with the reference: shape, then values, then the known mistakes
    (a known mistake of a wrong shape that shape_hints does not explain is named before the shape).

    Args:
        got: the learner's result, any shape.
        expected: the reference result.
        where: the case, e.g. "for x of shape (2, 5, 24)", added to every message.
        shape_wording, shape_hints, layout, any_shape_hint: for a wrong shape, see raise_if_wrong_shape.
        atol: the largest difference still graded "approximate".
        mistakes: wrong-but-plausible results keyed by the sentence that explains them, tried when the values differ.
        mistake_atol, mistake_rtol: how close to a mistake counts as making it.
        diagnose: got -> a whole message (with `where`) for a wrong result the table cannot name, or None.
        name: what `got` is, e.g. "weights", put in front of the generic message ("weights: values differ ...").
        advice: appended to the generic message, with its own separator, e.g. ": out = weights @ v".
    Returns:
        the verdict, "exact" or "approximate (max difference ...)".
    """
    got, mistakes = got.detach(), mistakes or {}
    if got.shape != expected.shape and tuple(got.shape) not in (shape_hints or {}):
        raise_if_known_mistake(got, mistakes, where, atol=mistake_atol, rtol=mistake_rtol)
    raise_if_wrong_shape(
        got,
        expected,
        where,
        shape_wording=shape_wording,
        shape_hints=shape_hints,
        layout=layout,
        any_shape_hint=any_shape_hint,
    )
    try:
        return match_or_raise(got, expected, atol=atol)
    except CheckFailed as failure:
        difference = failure
    raise_if_known_mistake(got, mistakes, where, atol=mistake_atol, rtol=mistake_rtol)
    diagnosis = diagnose(got) if diagnose else None
    if diagnosis:
        raise CheckFailed(diagnosis)
    label = f"{name}: " if name else ""
    raise CheckFailed(f"{label}{difference} {where}{advice}")


def summarize(verdicts: list[str]) -> str:
    """One verdict for several cases: 'exact' if all were exact, else the last approximate one."""
    inexact = [v for v in verdicts if v != "exact"]
    return inexact[-1] if inexact else "exact"


def claim(statement: str, holds: bool | torch.Tensor) -> None:
    """A lesson's claim, asserted and then printed as `statement: True`; when it does not hold, an
    AssertionError that names it (a learner who changed a cell above sees the break, not `False`).

    Args:
        statement: what the lesson claims, e.g. "unfold == reshape/permute".
        holds: whether it does: a bool (numpy's too) or a one-element boolean tensor.
    """
    if isinstance(holds, torch.Tensor):
        if holds.dtype != torch.bool or holds.numel() != 1:
            raise ValueError(
                f"claim {statement!r} needs one boolean, got a {holds.dtype} tensor of shape {tuple(holds.shape)}"
            )
        holds = bool(holds)
    if type(holds).__name__ not in ("bool", "bool_"):
        raise ValueError(f"claim {statement!r} needs True or False, got {type(holds).__name__}")
    if not holds:
        raise AssertionError(
            f"{statement}: False. Something in a cell above changed what the lesson relies on: "
            "run it again from the top (Kernel > Restart Kernel and Run All Cells)"
        )
    print(f"{statement}: True")
