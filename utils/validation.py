"""The argument checks every module shares: a wrong type, size or dtype raises an error that names
the argument, what was expected and what came.

It sits at the very start of the data flow and imports nothing from `utils`, so every module may
import it. A wrong type raises WrongTypeError, both a TypeError and a ValueError; a wrong value a
ValueError.
"""

import math
import numbers
import operator

import numpy as np
import torch


class WrongTypeError(TypeError, ValueError):
    """An argument of the wrong type. Also a ValueError (as NumPy's AxisError is also an
    IndexError), so that `except ValueError` catches every bad input the library refuses."""


def describe(value) -> str:
    """What came, in a few words: "'88' (str)", "2.0 (float)", "a tensor of dtype float32 and shape (3, 4)".

    A tensor or an array is named by its dtype and shape, never printed; a long repr is cut.
    """
    if isinstance(value, torch.Tensor):
        return f"a tensor of dtype {str(value.dtype).removeprefix('torch.')} and shape {tuple(value.shape)}"
    if isinstance(value, np.ndarray):
        return f"a NumPy array of dtype {value.dtype} and shape {value.shape}"
    return f"{_short_repr(value)} ({type(value).__name__})"


def _short_repr(value) -> str:
    """repr(value), cut to 60 characters."""
    try:
        text = repr(value)
    except Exception:  # an int of more than 4,300 digits, an object whose repr fails
        if isinstance(value, int):
            return f"an int of about {round(abs(value).bit_length() * math.log10(2))} digits"
        return "an unprintable value"
    return text if len(text) <= 60 else text[:56] + " ..."


def _item_hint(value, convert: str = ".item()") -> str:
    """For a one-element tensor, how to get its number out; '' for anything else."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return f": use {convert} to get the number out of a one-element tensor"
    return ""


def _range_in_words(low, high, low_open: bool, high_open: bool) -> str:
    """E.g. 'from 0 up to (not including) 1', 'greater than 0', 'at least 1'; '' without bounds."""
    if low is not None and high is not None:
        if low_open and high_open:
            return f"between {low} and {high} (neither included)"
        if low_open:
            return f"greater than {low} and at most {high}"
        return f"from {low} up to (not including) {high}" if high_open else f"from {low} to {high}"
    if low is not None:
        return f"greater than {low}" if low_open else f"at least {low}"
    if high is not None:
        return f"less than {high}" if high_open else f"at most {high}"
    return ""


def _as_whole(value, name: str, expected: str) -> int:
    """`value` as an int: a Python or NumPy int, or a one-element torch integer; bools, floats (even
    4.0), strings and the rest raise WrongTypeError("{expected}, got ...")."""
    is_bool = isinstance(value, bool | np.bool_) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool)
    try:
        if is_bool:
            raise TypeError
        return operator.index(value)
    except (TypeError, RuntimeError):  # RuntimeError: a tensor without data (on the meta device)
        hint = f": use {name}={int(value)}" if isinstance(value, float) and value.is_integer() else ""
        raise WrongTypeError(f"{expected}, got {describe(value)}{hint or _item_hint(value, 'int(x.item())')}") from None


def _as_real(value, expected: str) -> float:
    """`value` as a float (an int too big for one: infinity); anything but a real number (a bool, a
    string, a tensor, None) raises WrongTypeError("{expected}, got ...")."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise WrongTypeError(f"{expected}, got {describe(value)}{_item_hint(value)}")
    try:
        return float(value)
    except OverflowError:  # an int too big for a float
        return math.inf


def check_number(
    value,
    name: str,
    *,
    whole: bool = False,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    meaning: str = "",
) -> int | float:
    """`value` as an int (whole=True) or a finite float; an error naming `name` unless it is a
    number (a whole one with whole=True) between the bounds, e.g. "batch_size must be a whole
    number of images per step, at least 1, got 0".

    Args:
        value: the argument to check.
        name: the argument's name, as the caller wrote it.
        whole: accept only whole numbers (ints, NumPy ints, one-element torch integers).
        low, high: the bounds (None: none); low_open / high_open exclude the bound itself.
        meaning: what the number is, in a few words, put after the kind: " of pixels per side".
    Raises:
        WrongTypeError for a value that is no number (True / False, strings and tensors included),
        ValueError for NaN, infinity or a number out of range.
    """
    kind = "a whole number" if whole else "a number" if high is not None else "a finite number"
    words = _range_in_words(low, high, low_open, high_open)
    expected = f"{name} must be {kind}{meaning}{', ' if words else ''}{words}"
    number = _as_whole(value, name, expected) if whole else _as_real(value, expected)
    in_range = whole or math.isfinite(number)
    if low is not None:
        in_range = in_range and (number > low if low_open else number >= low)
    if high is not None:
        in_range = in_range and (number < high if high_open else number <= high)
    if not in_range:
        came = _short_repr(number if isinstance(value, torch.Tensor) else value)
        raise ValueError(f"{expected}, got {came}")
    return number


def check_whole(value, name: str, minimum: int = 1, maximum: int | None = None, meaning: str = "") -> int:
    """`value` as a Python int; an error naming `name` unless it is a whole number from minimum to
    maximum (if given). Python, NumPy and one-element torch integers pass; bools, floats (even
    4.0) and strings do not."""
    return check_number(value, name, whole=True, low=minimum, high=maximum, meaning=meaning)


def check_positive(value, name: str, meaning: str = "") -> float:
    """`value` as a float; an error naming `name` unless it is a finite number > 0 (no NaN)."""
    return check_number(value, name, low=0, low_open=True, meaning=meaning)


def check_probability(value, name: str, meaning: str = "") -> float:
    """`value` as a float; an error naming `name` unless it is a probability in [0, 1) (no NaN)."""
    return check_number(value, name, low=0, high=1, high_open=True, meaning=meaning)


def check_flag(value, name: str) -> bool:
    """`value` as a bool; an error naming `name` unless it is True or False (a NumPy bool too; not
    'no', not 0)."""
    if not isinstance(value, bool | np.bool_):
        raise WrongTypeError(f"{name} must be True or False, got {describe(value)}{_item_hint(value)}")
    return bool(value)


def check_tensor(value, name: str, shape: str = "", ndim: int | None = None, *, nonempty: bool = False) -> torch.Tensor:
    """`value` if it is a torch.Tensor (with `ndim` axes, if given, and with nonempty=True none of
    them empty).

    Args:
        name: how the message names it: "tokens", or with its layout in letters "distances (depth, heads)".
        shape: the expected layout, e.g. "(B, N, D)", if `name` does not say it.
    """
    expected = f"{name} shaped {shape}" if shape else name
    if not isinstance(value, torch.Tensor):
        hint = ""
        if isinstance(value, np.ndarray):
            hint = ": convert it with torch.from_numpy(...)"
        elif isinstance(value, list | tuple):
            hint = ": convert it with torch.tensor(...)"
        shaped = f" shaped {shape}" if shape else ""
        raise WrongTypeError(f"expected {name} as a torch.Tensor{shaped}, got {type(value).__name__}{hint}")
    if ndim is not None and value.ndim != ndim:
        raise ValueError(f"expected {expected}, got a {value.ndim}-D tensor of shape {tuple(value.shape)}")
    if nonempty and value.numel() == 0:
        raise ValueError(f"expected {expected} with something on every axis, got an empty {tuple(value.shape)}")
    return value


_CONVERSIONS = {torch.float32: ".float()", torch.float64: ".double()", torch.float16: ".half()"}


def check_dtype(tensor: torch.Tensor, name: str, dtype: torch.dtype | None = None) -> None:
    """Raise unless `tensor` holds floating-point numbers (of `dtype`, if given: the dtype of the
    weights it meets; under autocast any floating dtype passes, autocast converts it)."""
    check_tensor(tensor, name)
    if tensor.is_floating_point() and (
        dtype is None or tensor.dtype == dtype or torch.is_autocast_enabled(tensor.device.type)
    ):
        return
    wanted = dtype if dtype is not None else torch.float32
    convert = _CONVERSIONS.get(wanted, f".to({wanted})")
    why = " (the dtype of the model's weights)" if dtype is not None else ""
    pixels = (
        "" if tensor.is_floating_point() or tensor.is_complex() else " (and divide by 255 if they are 0-255 pixels)"
    )
    raise ValueError(
        f"expected {name} of dtype {wanted}{why}, got {tensor.dtype}; convert with `{name}{convert}`{pixels}"
    )


def check_device(tensor: torch.Tensor, name: str, weight: torch.Tensor) -> None:
    """Raise unless `tensor` sits on the device of the module weight it meets."""
    check_tensor(tensor, name)
    if tensor.device != weight.device:
        raise ValueError(
            f"{name} are on {tensor.device} but the model is on {weight.device}; "
            f"move them with `{name}.to({str(weight.device)!r})`"
        )
