"""What every exercise checker shares: the failure type, the call guard and the comparison with the reference.

A checker prints one line when the learner's function is right ("exact" or "approximate, max
difference ...") and raises CheckFailed with a sentence a learner understands when it is not.
A blank exercise raises NotImplementedError, which passes through untouched; anything else the
learner's function raises or returns (None, a string, a tensor of the wrong dtype, NaN) becomes a
CheckFailed that names what came, and so does a function that runs for more than TIME_LIMIT seconds
(an endless loop): it is stopped. A right answer of another kind passes: a float64 tensor where the
reference is float32, a 0-d tensor, a NumPy number or a 0-d array where a Python number is expected.
"""

import contextlib
import dis
import math
import os
import re
import signal
import sysconfig
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
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


def describe(value: Any) -> str:
    """What came back, in words: 'None (...)', 'float 1.5', 'tuple of 2 (Tensor, NoneType)',
    'Tensor of dtype float64 and shape (2, 3)'.

    Starts with the type's name (a message reads "expected ..., got tuple of 2 (...)").
    """
    kind = type(value).__name__
    if value is None:
        return "None (did your function forget to `return` its result?)"
    if isinstance(value, torch.Tensor):
        device = " on the meta device" if value.is_meta else ""
        return f"{kind} of dtype {str(value.dtype).removeprefix('torch.')} and shape {tuple(value.shape)}{device}"
    if isinstance(value, tuple | list):
        names = ", ".join(type(item).__name__ for item in value[:4]) + (", ..." if len(value) > 4 else "")
        return f"{kind} of {len(value)} ({names})"
    if isinstance(value, bool | int | float | complex | str) and len(repr(value)) <= 40:
        return f"{kind} {value!r}"
    return kind


_LIBRARIES = tuple(
    str(Path(path).resolve()) + os.sep
    for path in {*sysconfig.get_paths().values(), Path(torch.__file__).parent, Path(__file__).parents[1]}
)


def is_blank_exercise(error: NotImplementedError) -> bool:
    """Whether `error` is a blank exercise: a `raise NotImplementedError(...)` statement in the
    learner's own code, not one that torch (or another library) raised for an operation it lacks."""
    traceback = error.__traceback__
    if traceback is None:
        return True
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    code = traceback.tb_frame.f_code
    if str(Path(code.co_filename).resolve()).startswith(_LIBRARIES):
        return False
    raised_here = 0 <= traceback.tb_lasti < len(code.co_code)  # a C function raising leaves tb_lasti on the call
    return raised_here and dis.opname[code.co_code[traceback.tb_lasti]] in ("RAISE_VARARGS", "RERAISE")


def _explain_torch_error(error: Exception) -> str:
    """A sentence for a torch error whose own words puzzle a learner, or ''."""
    text = str(error)
    dtype = re.search(r"not implemented for '(\w+)'", text)
    if isinstance(error, NotImplementedError) and dtype:
        return f"torch has no such operation for a {dtype[1]} tensor; was a mask or an integer tensor used as values?"
    if isinstance(error, NotImplementedError):
        return "this NotImplementedError came from inside torch, not from a blank exercise"
    return ""


MAX_QUOTED = 300  # characters of the learner's error message quoted in a failure (torch's can fill a screen)
TIME_LIMIT = 60.0  # seconds a learner's function may run before it is stopped; a right answer takes a few at most


class _Overtime(BaseException):
    """Raised inside the learner's function when its time is up; a BaseException, so that an
    `except Exception` in the learner's code does not swallow it."""


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise _Overtime in the block once it has run `seconds`: a SIGALRM timer (ITIMER_REAL),
    whose previous handler and timer are restored afterwards. Only in the main thread of a system
    with setitimer (Linux, macOS); elsewhere (another thread, Windows) the block runs without a limit.
    A Ctrl-C is left alone: it still raises KeyboardInterrupt."""
    if not seconds or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def overtime(signum, frame):
        raise _Overtime

    previous = signal.signal(signal.SIGALRM, overtime)
    outer, interval = signal.setitimer(signal.ITIMER_REAL, seconds)  # an earlier timer's time left, if any
    start = time.monotonic()
    try:
        try:
            yield
        finally:  # nested: should the alarm go off right here, the handler is still put back below
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous)
        if outer:
            left = max(outer - (time.monotonic() - start), 1e-6)  # 1e-6: overdue, it goes off at once
            signal.setitimer(signal.ITIMER_REAL, left, interval)


def _overtime_message(case: str) -> str:
    seconds = f"{TIME_LIMIT:g} s"
    return (
        f"your function ran for more than {seconds}{case} and was stopped: an endless loop (a `while` whose "
        "condition never changes?), or a Python loop over every pixel or number? Tensor operations on "
        "whole tensors take well under a second here"
    )


def call_learner(
    fn: Callable,
    *args,
    returns: Returns = torch.Tensor,
    expected: str | None = None,
    where: str = "",
    explain: Callable[[Exception], str | None] | None = None,
):
    """Run the learner's function; turn its own exception or a result of the wrong kind into a readable failure.

    Args:
        fn: the learner's function, called as fn(*args); a blank exercise's NotImplementedError passes through.
        returns: what the result must be: a type, a tuple of types, or a predicate (result -> bool).
        expected: that in words, e.g. "a pair (out, weights)"; by default the type names ("a torch.Tensor").
        where: the case, named in the message, e.g. "for q (2, 7, 16)".
        explain: the learner's exception -> a sentence naming its likely cause, or None; added to the message.
    Returns:
        the learner's result.
    """
    case = f" {where}" if where else ""
    if not callable(fn):
        raise CheckFailed(
            f"expected your function itself, got {describe(fn)}: pass the function without calling it, "
            "e.g. check_patchify(my_patchify), not check_patchify(my_patchify(images, 8))"
        )
    try:
        with _time_limit(TIME_LIMIT):
            result = fn(*args)
    except _Overtime:
        raise CheckFailed(_overtime_message(case)) from None
    except NotImplementedError as error:
        if is_blank_exercise(error):
            raise
        failure = error
    except Exception as error:  # the learner's code may raise anything
        failure = error
    else:
        if not _returns_ok(result, returns):
            raise CheckFailed(f"expected {expected or _in_words(returns)}, got {describe(result)}{case}")
        return result
    hint = (explain(failure) if explain else None) or _explain_torch_error(failure)
    hint = f" ({hint})" if hint else ""
    text = str(failure)
    text = text if len(text) <= MAX_QUOTED else text[:MAX_QUOTED] + " ..."
    raise CheckFailed(f"your function raised {type(failure).__name__}{case}: {text}{hint}") from failure


def raise_if_meta(value: Any, what: str, where: str = "", hint: str = "") -> None:
    """CheckFailed when `value` is a tensor on the meta device: it has a shape but no values to check.

    Args:
        what: the value's name, e.g. "the parameter count"; hint: what to do instead, after a colon.
    """
    if isinstance(value, torch.Tensor) and value.is_meta:
        case = f" {where}" if where else ""
        advice = f": {hint}" if hint else ""
        raise CheckFailed(f"{what} is a tensor on the meta device{case}, which keeps shapes but no values{advice}")


def python_number(value: Any, what: str, where: str = "") -> Any:
    """The Python number a torch or NumPy number holds (a 0-d or one-element tensor or array, a NumPy
    scalar); any other value as it is. A tensor on the meta device holds none: CheckFailed.

    Args:
        what: the number's name in the message, e.g. "the loss".
    """
    raise_if_meta(value, what, where, "return the number itself (p.numel(), len(...) and int(...) give Python ints)")
    array = isinstance(value, torch.Tensor) or type(value).__module__ == "numpy"
    if array and math.prod(getattr(value, "shape", (0,))) == 1:
        return value.item()
    return value


def whole_number(value: Any, what: str, where: str = "") -> int:
    """`value` as an int when it is a whole number (an int, a whole float, a NumPy or one-element torch
    number); CheckFailed naming what came otherwise (a bool, a fraction, NaN, a string, None, ...).

    Args:
        what: the number's name in the message, e.g. "num_tokens".
    """
    case = f" {where}" if where else ""
    number = python_number(value, what, where)
    if isinstance(number, bool) or not isinstance(number, int | float):
        raise CheckFailed(f"{what} must be a whole number, got {describe(value)}{case}")
    if isinstance(number, float) and not (math.isfinite(number) and number.is_integer()):
        raise CheckFailed(f"{what} must be a whole number, got {number!r}{case}")
    return int(number)


def real_number(value: Any, what: str, where: str = "") -> float:
    """`value` as a float when it is one real number (an int or a float, a NumPy or one-element torch
    number, NaN and infinity included); CheckFailed naming what came otherwise (a bool, a string, ...).

    Args:
        what: the number's name in the message, e.g. "p".
    """
    number = python_number(value, what, where)
    if isinstance(number, bool) or not isinstance(number, int | float):
        case = f" {where}" if where else ""
        raise CheckFailed(f"{what} must be a number, got {describe(value)}{case}")
    return float(number)


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
        if not torch.isfinite(wrong).any():  # all NaN or inf: it would name any result that is all NaN
            continue
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


_DTYPE_HINTS = {
    torch.bool: "True/False values came back (a comparison, or the mask itself), not numbers",
    torch.float32: "float32 keeps about 7 digits of the float64 inputs' 16; a tensor made without dtype= "
    "(torch.zeros(shape)) or with .float() is float32: keep the inputs' dtype (torch.zeros_like(x), dtype=x.dtype)",
    torch.float16: "half precision loses digits; compute in float32",
    torch.bfloat16: "half precision loses digits; compute in float32",
}


def _dtype_is_fine(got: torch.dtype, expected: torch.dtype) -> bool:
    """Whether a result of dtype `got` may be compared with a reference of dtype `expected`: the same
    dtype, a float of at least as many bits for a float reference (float64 for float32: its values
    are compared), or any dtype against a reference that is not a float."""
    if got == expected or not expected.is_floating_point:
        return True
    return got.is_floating_point and torch.finfo(got).bits >= torch.finfo(expected).bits


def raise_if_not_like(got: Any, expected: torch.Tensor, where: str, name: str = "") -> None:
    """Raise CheckFailed when `got` is not an ordinary (dense, not sparse or nested) tensor on
    expected's device whose dtype can hold the reference's values: an integer, boolean, complex or
    less precise float tensor for a float reference (float16 for float32, float32 for float64).

    Args:
        name: what `got` is, e.g. "weights", put in front of the message.
    """
    label = f"{name}: " if name else ""
    if not isinstance(got, torch.Tensor):
        raise CheckFailed(f"{label}expected a torch.Tensor, got {describe(got)} {where}")
    if got.is_nested or got.layout != torch.strided:
        kind = "nested" if got.is_nested else str(got.layout).removeprefix("torch.")
        raise CheckFailed(
            f"{label}expected an ordinary (dense) tensor, got a {kind} one {where}: build the result with "
            "ordinary tensor operations (a sparse tensor becomes dense with .to_dense())"
        )
    if not _dtype_is_fine(got.dtype, expected.dtype):
        dtype, wanted = (str(t).removeprefix("torch.") for t in (got.dtype, expected.dtype))
        if got.dtype.is_floating_point or got.dtype.is_complex or got.dtype == torch.bool:
            hint = _DTYPE_HINTS.get(got.dtype, f"convert it with .to(torch.{wanted})")
        else:
            hint = "whole numbers lose the fractions; keep the inputs' float dtype (torch.arange and // give integers)"
        raise CheckFailed(f"{label}expected a {wanted} tensor, got {dtype} {where}: {hint}")
    raise_if_meta(
        got, name or "your result", where, "make it on the CPU, like the inputs (not inside torch.device('meta'))"
    )
    if got.device != expected.device:
        raise CheckFailed(
            f"{label}expected a tensor on {expected.device}, like the inputs, got one on {got.device} {where}"
        )


def raise_if_not_finite(got: torch.Tensor, expected: torch.Tensor, where: str, name: str = "", hint: str = "") -> None:
    """Raise CheckFailed when `got` holds NaN or infinite values where `expected` holds numbers.

    Args:
        hint: what usually causes it in this exercise, appended after a colon.
    """
    for what, test in (("NaN", torch.isnan), ("infinite", torch.isinf)):
        bad = test(got) & ~test(expected)
        if bad.any():
            label = f"{name}: " if name else ""
            explanation = f": {hint}" if hint else ""
            raise CheckFailed(f"{label}{int(bad.sum())} of {got.numel()} values are {what} {where}{explanation}")


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
    nan_hint: str = "",
) -> str:
    """Compare the learner's tensor with the reference: type, dtype and device, shape, then values, then
    the known mistakes (a known mistake of a wrong shape that shape_hints does not explain is named
    before the shape), then NaN, then diagnose.

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
        nan_hint: what usually puts NaN or inf in this exercise's result, added to that message.
    Returns:
        the verdict, "exact" or "approximate (max difference ...)".
    """
    raise_if_not_like(got, expected, where, name)
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
    raise_if_not_finite(got, expected, where, name, nan_hint)
    diagnosis = diagnose(got) if diagnose else None
    if diagnosis:
        raise CheckFailed(diagnosis)
    label = f"{name}: " if name else ""
    raise CheckFailed(f"{label}{difference} {where}{advice}")


def other_numbers(got: torch.Tensor, source: torch.Tensor, what: str, where: str) -> str | None:
    """For an exercise that only moves numbers around (a reshape, a permute): a message when `got`
    holds other numbers than `source` (scaled, averaged, padded, one image copied, ...), else None.

    Args:
        what: the exercise's name, e.g. "patchify".
    """
    values, wanted = got.detach().flatten().double().sort().values, source.flatten().double().sort().values
    if values.shape == wanted.shape and torch.allclose(values, wanted, rtol=0, atol=1e-6):
        return None
    return (
        f"your result holds other numbers than the input {where}: {what} only moves the numbers to new places "
        "(reshape, permute, transpose), with no arithmetic on them (no scaling, sum or mean) and none left out "
        "or repeated"
    )


def _kind(t: torch.Tensor) -> tuple:
    """A tensor's layout, device, dtype and shape: what must agree before two tensors are compared."""
    return t.layout, t.device, t.dtype, tuple(t.shape)


def varies_between_calls(again: Callable[[], torch.Tensor], got: torch.Tensor, expected: torch.Tensor) -> bool:
    """Whether the learner's function, run `again` on the same inputs, gives another result than
    `got` (a dropout or another random step in it); asked only of a result comparable with `expected`."""
    if _kind(got) != _kind(expected):
        return False
    other = again()
    return _kind(other) != _kind(got) or not torch.allclose(
        other.detach(), got.detach(), rtol=0, atol=0, equal_nan=True
    )


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
