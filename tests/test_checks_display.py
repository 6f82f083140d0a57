"""How a verdict looks in a notebook: a failed check is its sentence, a blank exercise one or two
lines, any other exception IPython's usual traceback; in a stand-in shell, then in a real kernel."""

import re
import sys

import notebook_cells
import pytest
import torch
from IPython.core import ultratb
from IPython.core.interactiveshell import InteractiveShell
from notebook_cells import ROOT

from utils.checks.core import CheckFailed
from utils.checks.display import learner_traceback, show_verdicts_plainly, verdict
from utils.checks.patches import check_patchify

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def plain(lines: list[str]) -> list[str]:
    """The lines as a learner reads them: colour codes removed, one entry per line."""
    return ANSI.sub("", "\n".join(lines)).splitlines()


def formatter():
    """IPython's traceback formatter, without colour (IPython 9 names its themes, 7 its colour schemes)."""
    try:
        return ultratb.AutoFormattedTB(mode="Context", theme_name="nocolor", tb_offset=1)
    except TypeError:
        return ultratb.AutoFormattedTB(mode="Context", color_scheme="NoColor", tb_offset=1)


def raised(call) -> BaseException:
    with pytest.raises(BaseException) as info:
        call()
    return info.value


def wrong_patchify(images, patch_size):
    return images


def crashing_patchify(images, patch_size):
    return images.shape[0] / 0  # the learner's own error


def blank_patchify(images, patch_size):
    raise NotImplementedError("patchify: not written yet")


def hinted_patchify(images, patch_size):
    raise NotImplementedError("reshape to (B, C, rows, P, cols, P), then permute")


# ---- the lines ------------------------------------------------------------------------------------


def test_a_failed_check_is_the_checkers_name_and_its_sentence():
    failure = raised(lambda: check_patchify(wrong_patchify))
    assert isinstance(failure, CheckFailed)
    assert verdict(failure, formatter()) == ["✗ check_patchify failed", str(failure)]
    assert "(B, N, C*P*P)" in str(failure)


def test_a_check_failed_raised_outside_a_checker_says_check_failed():
    assert verdict(CheckFailed("values differ"), formatter()) == ["✗ check failed", "values differ"]


def test_a_learners_own_error_shows_their_frame_and_error_then_the_sentence():
    failure = raised(lambda: check_patchify(crashing_patchify))
    lines = plain(verdict(failure, formatter()))
    text = "\n".join(lines)
    assert "return images.shape[0] / 0  # the learner's own error" in text  # their line, in their frame
    assert "ZeroDivisionError: division by zero" in text
    assert "utils/checks" not in text and "core.py" not in text and "call_learner" not in text
    assert lines[-2:] == ["✗ check_patchify failed", str(failure)]
    assert "your function raised ZeroDivisionError" in lines[-1]


def test_only_the_learners_frames_are_kept():
    failure = raised(lambda: check_patchify(crashing_patchify))
    frames = []
    tb = learner_traceback(failure.__cause__.__traceback__)
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert frames == ["crashing_patchify"]  # not call_learner's


def test_a_blank_exercise_is_one_line_and_a_hint_adds_a_second():
    blank = verdict(raised(lambda: check_patchify(blank_patchify)), formatter())
    stub = "replace its `raise NotImplementedError(...)` with your code"
    assert blank == [f"✗ `blank_patchify` is not written yet: {stub}"]
    hinted = verdict(raised(lambda: check_patchify(hinted_patchify)), formatter())
    assert len(hinted) == 2 and hinted[1] == "  reshape to (B, C, rows, P, cols, P), then permute"


def test_colour_marks_only_the_verdict_line():
    lines = verdict(CheckFailed("values differ"), formatter(), color=True)
    assert lines[0].startswith("\x1b[") and plain(lines) == ["✗ check failed", "values differ"]


def test_any_other_exception_is_not_a_verdict():
    assert verdict(raised(lambda: 1 / 0), formatter()) is None
    torch_own = raised(lambda: torch.nn.Module()())  # a NotImplementedError that torch raised
    assert isinstance(torch_own, NotImplementedError) and verdict(torch_own, formatter()) is None


# ---- the handler, in a stand-in shell --------------------------------------------------------------


class Shell:
    """What the handler uses of IPython's InteractiveShell, with IPython's own set_custom_exc; `run`
    runs code as InteractiveShell.run_code does and `shown` records what was displayed."""

    set_custom_exc = InteractiveShell.set_custom_exc
    call_pdb = False
    colors = "nocolor"

    def __init__(self):
        self.InteractiveTB = formatter()
        self.shown: list[tuple[str, object]] = []
        self.set_custom_exc((), None)

    def _get_exc_info(self, exc_tuple):
        self.last = exc_tuple

    def _showtraceback(self, etype, value, stb):
        self.shown.append(("verdict", stb))

    def showtraceback(self, exc_tuple=None, filename=None, tb_offset=None, exception_only=False, **kwargs):
        self.shown.append(("traceback", exc_tuple[0]))

    def run(self, call) -> object:
        try:
            call()
        except self.custom_exceptions:
            return self.CustomTB(*sys.exc_info())
        except Exception:
            self.showtraceback(sys.exc_info())


def test_the_handler_shows_verdicts_and_leaves_other_errors_to_ipython():
    shell = Shell()
    assert show_verdicts_plainly(shell)
    returned = shell.run(lambda: check_patchify(wrong_patchify))
    assert shell.shown == [("verdict", returned)] and returned[0] == "✗ check_patchify failed"
    assert shell.last[0] is CheckFailed  # sys.last_value's source, for %tb and %debug
    shell.shown.clear()
    shell.run(lambda: 1 / 0)
    shell.run(lambda: torch.nn.Module()())
    assert shell.shown == [("traceback", ZeroDivisionError), ("traceback", NotImplementedError)]


def test_registering_twice_registers_once():
    shell = Shell()
    assert show_verdicts_plainly(shell)
    handler, exceptions = shell.CustomTB, shell.custom_exceptions
    assert show_verdicts_plainly(shell)
    assert shell.CustomTB is handler and shell.custom_exceptions == exceptions == (CheckFailed, NotImplementedError)


def test_a_handler_set_before_for_other_exceptions_keeps_working():
    shell = Shell()
    seen = []
    shell.set_custom_exc((KeyError,), lambda self, etype, value, tb, tb_offset=None: seen.append(etype) or ["mine"])
    assert show_verdicts_plainly(shell) and show_verdicts_plainly(shell)
    assert shell.custom_exceptions == (KeyError, CheckFailed, NotImplementedError)
    assert shell.run(lambda: {}["missing"]) == ["mine"] and seen == [KeyError]
    shell.run(lambda: check_patchify(wrong_patchify))
    assert shell.shown[-1][1][0] == "✗ check_patchify failed"


def test_a_bug_in_the_verdict_falls_back_to_the_usual_traceback(monkeypatch):
    shell = Shell()
    show_verdicts_plainly(shell)
    monkeypatch.setattr("utils.checks.display.verdict", lambda *args: 1 / 0)
    shell.run(lambda: check_patchify(wrong_patchify))
    assert shell.shown == [("traceback", CheckFailed)] and shell.custom_exceptions  # still registered


def test_with_pdb_on_the_whole_traceback_is_shown():
    shell = Shell()
    shell.call_pdb = True
    show_verdicts_plainly(shell)
    shell.run(lambda: check_patchify(wrong_patchify))
    assert shell.shown == [("traceback", CheckFailed)]


def test_outside_ipython_nothing_is_registered():
    from IPython import get_ipython

    assert get_ipython() is None and show_verdicts_plainly() is False


# ---- in a real kernel ------------------------------------------------------------------------------


class Kernel(notebook_cells.Kernel):
    """The shared test kernel, in the repository, that also reads a cell's error as the notebook shows it."""

    def error(self, code: str) -> tuple[str, list[str]]:
        """The exception's name and the lines of its traceback, as the notebook shows them."""
        reply, outputs = self.run(code)
        errors = [m["content"] for m in outputs if m["msg_type"] == "error"]
        assert reply["status"] == "error" and len(errors) == 1, (reply, outputs)
        assert (reply["ename"], reply["evalue"]) == (errors[0]["ename"], errors[0]["evalue"])
        return errors[0]["ename"], plain(errors[0]["traceback"])


@pytest.fixture(scope="module")
def kernel():
    kernel = Kernel(ROOT)
    reply, _ = kernel.run("from utils.checks.patches import check_patchify")
    assert reply["status"] == "ok", reply
    yield kernel
    kernel.stop()


@pytest.mark.notebook
def test_in_a_kernel_a_failed_check_is_its_sentence(kernel):
    ename, lines = kernel.error("check_patchify(lambda images, patch_size: images)")
    sentence = str(raised(lambda: check_patchify(wrong_patchify)))
    assert ename == "CheckFailed" and lines == ["✗ check_patchify failed", sentence]
    text = "\n".join(lines)
    assert len(lines) <= 6 and "utils/checks" not in text and "Traceback" not in text


@pytest.mark.notebook
def test_in_a_kernel_a_failed_check_still_stops_run_all(kernel):
    """Two cells sent at once, as Run All does: the second is not run after the failed check."""
    failing = kernel.client.execute("check_patchify(lambda images, patch_size: images)")
    after = kernel.client.execute("print('not run')")
    assert kernel.outcome(failing)[0]["status"] == "error"
    reply, outputs = kernel.outcome(after)
    assert reply["status"] == "aborted" and outputs == []


@pytest.mark.notebook
def test_in_a_kernel_a_learners_error_shows_their_frame_not_the_checkers(kernel):
    ename, lines = kernel.error("def mine(images, patch_size):\n    return 1 / 0\n\ncheck_patchify(mine)")
    text = "\n".join(lines)
    assert ename == "CheckFailed" and "return 1 / 0" in text and "ZeroDivisionError: division by zero" in text
    assert "utils/checks" not in text and "call_learner" not in text
    assert lines[-2] == "✗ check_patchify failed" and "your function raised ZeroDivisionError" in lines[-1]


@pytest.mark.notebook
def test_in_a_kernel_a_blank_exercise_is_at_most_two_lines(kernel):
    code = "def mine(images, patch_size):\n    raise NotImplementedError('not written yet')\n\ncheck_patchify(mine)"
    ename, lines = kernel.error(code)
    assert ename == "NotImplementedError" and len(lines) <= 2 and "`mine` is not written yet" in lines[0]


@pytest.mark.notebook
def test_in_a_kernel_other_errors_look_as_usual_and_the_next_cell_runs(kernel):
    ename, lines = kernel.error("x = 1\n1/0")
    text = "\n".join(lines)
    assert ename == "ZeroDivisionError" and "Traceback" in text and "----> 2 1/0" in text
    ename, lines = kernel.error("import torch\ntorch.nn.Module()()")  # torch's NotImplementedError, not a blank
    assert ename == "NotImplementedError" and "Traceback" in "\n".join(lines) and len(lines) > 6
    reply, outputs = kernel.run("print('still here')")
    assert reply["status"] == "ok" and outputs[0]["content"]["text"] == "still here\n"


@pytest.mark.notebook
def test_in_a_kernel_importing_the_checkers_again_registers_nothing_more(kernel):
    code = (
        "ip = get_ipython(); handler = ip.CustomTB\n"
        "import utils.checks.attention, utils.checks.encoder\n"
        "from utils.checks.display import show_verdicts_plainly\n"
        "show_verdicts_plainly()\n"
        "print(ip.CustomTB is handler, [e.__name__ for e in ip.custom_exceptions])"
    )
    reply, outputs = kernel.run(code)
    assert reply["status"] == "ok" and outputs[0]["content"]["text"] == "True ['CheckFailed', 'NotImplementedError']\n"
