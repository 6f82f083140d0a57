"""Workshop copies (`make exercises`): every blank fails, a wrong answer fails its checker, and
the solution passes, run in a real kernel after the lesson's setup cell (and whatever else the
exercise cells read), not after the whole lesson: nbval runs each lesson once already."""

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import start_new_kernel
from lessons import NOTEBOOKS, ROOT, cells_needed, read_cells

from tools.exercises import (
    BLANK,
    LearnerWorkExists,
    backup_folder,
    is_exercise,
    learner_copy,
    replace_solutions,
    write_exercises,
)

CELL = """def area(width, height):
    # HINT: multiply the "two" sides
    # BEGIN SOLUTION
    return width * height
    # END SOLUTION


check_area(area)"""


def test_a_solution_becomes_a_raise_that_carries_the_hint():
    blank = replace_solutions(CELL, BLANK)
    assert blank == (
        "def area(width, height):\n"
        '    raise NotImplementedError("Hint: multiply the \\"two\\" sides")  # replace this line with your code\n'
        "\n\ncheck_area(area)"
    )
    namespace = {"check_area": lambda fn: fn(2, 3)}
    with pytest.raises(NotImplementedError, match='Hint: multiply the "two" sides'):
        exec(blank, namespace)  # the learner's first run: the hint, as an error


def test_a_learner_copy_keeps_everything_but_the_solutions():
    notebook = {
        "cells": [
            {"cell_type": "markdown", "source": "# Lesson", "metadata": {}},
            {
                "cell_type": "code",
                "source": "x = 1",
                "outputs": [{"output_type": "stream", "text": "1"}],
                "execution_count": 1,
                "metadata": {},
            },
            {
                "cell_type": "code",
                "source": CELL,
                "outputs": [{"output_type": "stream", "text": "✓"}],
                "execution_count": 2,
                "metadata": {},
            },
        ]
    }
    copy = learner_copy(notebook)
    assert copy["cells"][:2] == notebook["cells"][:2]
    assert copy["cells"][2]["outputs"] == [] and copy["cells"][2]["execution_count"] is None
    assert "width * height" not in copy["cells"][2]["source"] and "check_area(area)" in copy["cells"][2]["source"]
    assert notebook["cells"][2]["source"] == CELL  # the original is untouched


@pytest.mark.parametrize(
    "text, problem",
    [
        (CELL.replace('    # HINT: multiply the "two" sides\n', ""), "without a '# HINT: ...' line"),
        (CELL.replace("    # END SOLUTION\n", ""), "unmatched"),
        (CELL + "\n    # END SOLUTION", "unmatched"),
    ],
)
def test_malformed_exercises_are_refused(text, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        replace_solutions(text, BLANK)


def test_make_exercises_writes_a_copy_of_every_lesson(tmp_path):
    written = write_exercises(tmp_path)
    assert [path.name for path in written] == [path.name for path in NOTEBOOKS]
    for path in written:
        text = path.read_text()
        assert "# BEGIN SOLUTION" not in text and "# HINT:" not in text
        nbformat.validate(nbformat.reads(text, as_version=4))  # JupyterLab opens it


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under folder, by its path relative to it, with its bytes."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_a_second_run_leaves_identical_copies_alone(tmp_path):
    write_exercises(tmp_path)
    before = {path.name: path.stat().st_mtime_ns for path in tmp_path.glob("*.ipynb")}
    assert write_exercises(tmp_path) == []
    assert {path.name: path.stat().st_mtime_ns for path in tmp_path.glob("*.ipynb")} == before


def test_a_second_run_never_overwrites_a_learners_answers(tmp_path):
    write_exercises(tmp_path)
    edited = tmp_path / NOTEBOOKS[2].name
    edited.write_text(edited.read_text().replace("raise NotImplementedError", "return 42  # my answer", 1))
    (tmp_path / NOTEBOOKS[0].name).unlink()  # a missing copy is not filled in either: the run changes nothing
    before = snapshot(tmp_path)
    with pytest.raises(LearnerWorkExists) as refusal:
        write_exercises(tmp_path)
    assert snapshot(tmp_path) == before
    message = str(refusal.value)
    assert NOTEBOOKS[2].name in message and NOTEBOOKS[1].name not in message
    assert "make exercises FORCE=1" in message and "--force" in message and "backups" in message


def test_force_backs_the_old_copies_up_before_writing(tmp_path):
    write_exercises(tmp_path)
    edited = tmp_path / NOTEBOOKS[2].name
    answers = edited.read_text().replace("raise NotImplementedError", "return 42  # my answer", 1)
    edited.write_text(answers)
    written = write_exercises(tmp_path, force=True)
    assert written == [edited]
    backups = list((tmp_path / "backups").iterdir())
    assert len(backups) == 1 and re.fullmatch(r"\d{4}-\d\d-\d\d_\d{6}", backups[0].name)
    assert (backups[0] / edited.name).read_text() == answers  # the learner's work, kept
    assert "return 42  # my answer" not in edited.read_text()
    assert write_exercises(tmp_path, force=True) == []  # nothing differs any more: no second backup
    assert len(list((tmp_path / "backups").iterdir())) == 1
    assert backup_folder(tmp_path) != backups[0]  # a second backup in the same second gets a new folder


def test_missing_copies_are_filled_in(tmp_path):
    write_exercises(tmp_path)
    for path in NOTEBOOKS[:2]:
        (tmp_path / path.name).unlink()
    assert [path.name for path in write_exercises(tmp_path)] == [path.name for path in NOTEBOOKS[:2]]
    assert write_exercises(tmp_path) == []


def test_the_command_refuses_on_stderr_with_a_failing_status(tmp_path):
    script = [sys.executable, str(ROOT / "tools" / "exercises.py"), str(tmp_path)]
    assert subprocess.run(script, capture_output=True, text=True).returncode == 0
    edited = tmp_path / NOTEBOOKS[0].name
    edited.write_text(edited.read_text() + " ")
    refused = subprocess.run(script, capture_output=True, text=True)
    assert refused.returncode == 1 and NOTEBOOKS[0].name in refused.stderr and "FORCE=1" in refused.stderr
    forced = subprocess.run([*script, "--force"], capture_output=True, text=True)
    assert forced.returncode == 0, forced.stderr
    assert f"{NOTEBOOKS[0].name}: " in forced.stdout and "replaced" in forced.stdout and "backups" in forced.stdout


def first_parameter(text: str) -> str:
    return re.search(r"^def \w+\((\w+)", text, flags=re.MULTILINE)[1]


class Kernel:
    """A fresh kernel of this venv that runs code and reports the exception it raised, driven
    with plain blocking messages, the way nbval drives its kernels."""

    def __init__(self, cwd: Path):
        self.manager, self.client = start_new_kernel(kernel_name="python3", cwd=str(cwd))

    def run(self, code: str, timeout: float = 600) -> str | None:
        """Execute `code`; the name of the exception it raised, or None."""
        msg_id = self.client.execute(code, store_history=False)
        while True:  # the reply to this request on the shell channel
            reply = self.client.get_shell_msg(timeout=timeout)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        while True:  # its outputs on iopub, until the kernel is idle again
            message = self.client.get_iopub_msg(timeout=timeout)
            if (
                message["parent_header"].get("msg_id") == msg_id
                and message["msg_type"] == "status"
                and message["content"]["execution_state"] == "idle"
            ):
                break
        content = reply["content"]
        return content.get("ename") if content["status"] == "error" else None

    def stop(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def run_exercises(path: Path) -> dict[str, tuple]:
    """{exercise: (blank's error, wrong answer's error, solution's error)}, run in a fresh kernel
    in the lesson's order, after the setup cell and any earlier cell that defines a name the
    exercise cells read; those cells must run without error."""
    cells = read_cells(path)
    exercises = [i for i, cell in enumerate(cells) if is_exercise(cell)]
    assert exercises, f"{path.name} has no exercise"
    kernel, outcomes = Kernel(path.parent), {}
    try:
        kernel.run("%matplotlib inline")  # as in JupyterLab
        for index in cells_needed(cells, exercises):
            text = cells[index]["source"]
            if index not in exercises:
                assert kernel.run(text) is None, f"{path.name}: cell {index} failed"
                continue
            blank = replace_solutions(text, BLANK)
            wrong = replace_solutions(text, "{indent}return " + first_parameter(text))
            name = re.search(r"^def (\w+)", text, flags=re.MULTILINE)[1]
            outcomes[name] = kernel.run(blank), kernel.run(wrong), kernel.run(text)
    finally:
        kernel.stop()
    return outcomes


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_exercise_fails_blank_and_wrong_and_passes_solved(path, monkeypatch):
    """At each exercise of the lesson, in a fresh kernel, run the learner's blank
    (NotImplementedError), a wrong answer (the function returns its first argument: the checker
    must raise CheckFailed), then the solution (no error)."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # this venv's kernel
    outcomes = run_exercises(path)
    for name, outcome in outcomes.items():
        assert outcome == ("NotImplementedError", "CheckFailed", None), f"{path.name}, {name}: {outcome}"
