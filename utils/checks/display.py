"""How a checker's verdict looks in a notebook: a failed check as its sentence, not a traceback.

`show_verdicts_plainly()`, called when `utils.checks` is imported, registers an IPython custom
exception handler: a CheckFailed shows "✗ check_x failed" and the checker's sentence (after the
learner's own frames when their function raised), a blank exercise one or two lines, and any other
exception IPython's usual traceback. The cell still fails; `%tb` still prints the whole traceback.
Outside IPython nothing changes.
"""

import os
import re
import sys
import types
from pathlib import Path

from utils.checks.core import _LIBRARIES, CheckFailed, is_blank_exercise

CHECKS = str(Path(__file__).resolve().parent) + os.sep  # the checkers' folder: never shown to a learner
_INSTALLED = "_course_verdict_handler"  # the shell's attribute: (our CustomTB, the exceptions and handler before it)


def _filename(tb: types.TracebackType) -> str:
    return str(Path(tb.tb_frame.f_code.co_filename).resolve())


def _frames(tb: types.TracebackType | None) -> list[types.TracebackType]:
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    return frames


def checker_name(tb: types.TracebackType | None) -> str | None:
    """The name of the checker the cell called (the first frame inside utils/checks), or None."""
    return next((t.tb_frame.f_code.co_name for t in _frames(tb) if _filename(t).startswith(CHECKS)), None)


def learner_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """`tb` with only the learner's frames: none from the course's utils, torch or Python's libraries."""
    kept = [t for t in _frames(tb) if not _filename(t).startswith(_LIBRARIES)]
    learner = None
    for t in reversed(kept):
        learner = types.TracebackType(learner, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return learner


def _red(text: str, color: bool) -> str:
    return f"\x1b[1;31m{text}\x1b[0m" if color else text


def failed_check(failure: CheckFailed, formatter, color: bool = False) -> list[str]:
    """The lines a CheckFailed shows: the learner's frames and error if their function raised, then
    "✗ check_x failed" and the sentence.

    Args:
        formatter: IPython's traceback formatter (`shell.InteractiveTB`), for the learner's frames.
    """
    lines = []
    cause = failure.__cause__
    if cause is not None and not isinstance(cause, CheckFailed):
        frames = learner_traceback(cause.__traceback__)
        if frames is not None:
            lines = list(formatter.structured_traceback(type(cause), cause, frames, tb_offset=0))
    name = checker_name(failure.__traceback__)
    return [*lines, _red(f"✗ {name} failed" if name else "✗ check failed", color), str(failure)]


def not_written_yet(error: NotImplementedError, color: bool = False) -> list[str]:
    """The one or two lines a blank exercise shows: which function is not written yet, and its message."""
    frames = _frames(error.__traceback__)
    name = frames[-1].tb_frame.f_code.co_name if frames else "<module>"
    what = f"`{name}`" if name.isidentifier() else "this exercise"
    lines = [_red(f"✗ {what} is not written yet: replace its `raise NotImplementedError(...)` with your code", color)]
    message = str(error).strip()
    if re.sub(r"^\w+:\s*", "", message).lower() not in ("not written yet", ""):  # the stub's own words add nothing
        lines.append(f"  {message}")
    return lines


def verdict(value: BaseException, formatter, color: bool = False) -> list[str] | None:
    """The lines shown for `value` when it is a failed check or a blank exercise; None for any other exception."""
    if isinstance(value, CheckFailed):
        return failed_check(value, formatter, color)
    if isinstance(value, NotImplementedError) and is_blank_exercise(value):
        return not_written_yet(value, color)
    return None


def _handler(previous: tuple[tuple, object]):
    """The custom exception handler; `previous` is the (exceptions, CustomTB) it took over, still served."""
    before, before_handler = previous

    def show(shell, etype, value, tb, tb_offset=None):
        lines = None
        if not shell.call_pdb:  # with %pdb on, the debugger wants the real traceback
            try:
                color = str(getattr(shell, "colors", "nocolor")).lower() != "nocolor"
                lines = verdict(value, shell.InteractiveTB, color)
            except Exception:  # never lose the learner's error to a bug here: fall back to IPython's
                lines = None
        if lines is not None:
            shell._get_exc_info((etype, value, tb))  # sys.last_value etc., for %tb and %debug
            shell._showtraceback(etype, value, lines)  # in a kernel: the 'error' message, ename kept
            return lines
        if before and isinstance(value, before):
            return before_handler(etype, value, tb, tb_offset)
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)
        return None

    return show


def show_verdicts_plainly(shell=None) -> bool:
    """Register the verdict handler in the running IPython (or `shell`), once; whether one is registered.

    A custom handler set before for other exceptions keeps handling them.
    """
    if shell is None:
        if "IPython" not in sys.modules:  # plain Python: no shell to register in
            return False
        shell = sys.modules["IPython"].get_ipython()
    if shell is None or not all(hasattr(shell, a) for a in ("set_custom_exc", "CustomTB", "custom_exceptions")):
        return False
    installed = getattr(shell, _INSTALLED, None)
    if installed is not None and installed[0] is shell.CustomTB:
        if CheckFailed in shell.custom_exceptions:
            return True
        previous = installed[1]  # a reloaded utils.checks: replace ours, keep what was there before it
    else:
        previous = (tuple(shell.custom_exceptions), shell.CustomTB)
    ours = (CheckFailed, NotImplementedError)
    shell.set_custom_exc(previous[0] + tuple(e for e in ours if e not in previous[0]), _handler(previous))
    setattr(shell, _INSTALLED, (shell.CustomTB, previous))
    return True
