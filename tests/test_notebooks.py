"""The course's notebook conventions, checked on every committed notebook (nbval runs them)."""

import json
import re

import pytest
from notebook_cells import NOTEBOOKS


def code_cells(path):
    notebook = json.loads(path.read_text())
    return [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]


def source(cell):
    return "".join(cell["source"])


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_named_in_lesson_order(path):
    assert re.fullmatch(r"\d\d_[a-z_]+\.ipynb", path.name), f"{path.name}: expected NN_topic.ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_from_a_fresh_run_all(path):
    counts = [cell["execution_count"] for cell in code_cells(path) if source(cell).strip()]
    assert counts == list(range(1, len(counts) + 1)), f"{path.name}: run it top to bottom from a fresh kernel"
    for cell in code_cells(path):
        for output in cell["outputs"]:
            assert output["output_type"] != "error", f"{path.name}: an error output is committed"
            assert not re.search(r"/(work|root|home|Users)/", json.dumps(output)), (
                f"{path.name}: an output shows a machine path"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_imports_the_course_library_cleanly(path):
    code = "\n".join(source(cell) for cell in code_cells(path))
    assert "from utils" in code, f"{path.name}: the lessons import what earlier lessons built from utils"
    assert "sys.path" not in code, f"{path.name}: no sys.path hacks; utils is installed in the venv"
    assert not re.search(r"import \*", code), f"{path.name}: no star imports"
    assert "set_seed(" in code, f"{path.name}: the setup cell seeds everything"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercises_have_solution_markers_and_a_checker(path):
    exercises = [source(cell) for cell in code_cells(path) if "# BEGIN SOLUTION" in source(cell)]
    for text in exercises:
        assert text.count("# BEGIN SOLUTION") == text.count("# END SOLUTION"), text
        assert re.search(r"\bcheck_\w+\(", text), f"{path.name}: an exercise without a checker:\n{text}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_ignored_outputs_are_backed_by_an_assert(path):
    for cell in code_cells(path):
        if "nbval-ignore-output" in cell.get("metadata", {}).get("tags", []):
            assert re.search(r"\bassert|\bclaim\(", source(cell)), (
                f"{path.name}: a cell whose output nbval ignores needs an assert (or a claim):\n{source(cell)}"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_widget_displays_are_not_compared(path):
    """A widget's committed view (a model id) differs on every run: its cell must be ignored by
    nbval, and backed by an assert (above)."""
    for cell in code_cells(path):
        shows_widget = any(
            "application/vnd.jupyter.widget-view+json" in output.get("data", {}) for output in cell["outputs"]
        )
        if shows_widget:
            assert "nbval-ignore-output" in cell.get("metadata", {}).get("tags", []), (
                f"{path.name}: a cell that displays a widget needs the nbval-ignore-output tag:\n{source(cell)}"
            )
