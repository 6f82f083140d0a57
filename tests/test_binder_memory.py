"""tools/binder_memory.py: a lesson run inside a JupyterLab server, the server's memory added to the
kernel's, as Binder's 1 GB counts them; and the README's sentence, which `make measure` writes."""

import re

import nbformat
import pytest
from lessons import ROOT

from tools import binder_memory
from tools.notebook_budget import BUDGET_MB, SERVER_MB


def test_the_readme_shows_every_lesson_within_the_budget():
    text = (ROOT / "README.md").read_text()
    block = text.split(binder_memory.START)[1].split(binder_memory.END)[0]
    rows = re.findall(r"^\| `(\d\d_\w+\.ipynb)` \| (\d+) MB \| (\d+) MB \| (\d+) MB \|$", block, re.MULTILINE)
    assert sorted(name for name, *_ in rows) == sorted(path.name for path in (ROOT / "notebooks").glob("*.ipynb"))
    for name, server, kernel, together in rows:
        assert int(together) <= BUDGET_MB and int(server) <= SERVER_MB, name
        assert abs(int(server) + int(kernel) - int(together)) <= 1, name  # each rounded to the MB
    worst = max(int(together) for *_, together in rows)
    assert f"{worst} MB together at most, within the {BUDGET_MB} MB budget" in block


def test_the_table_names_every_lesson_and_the_largest_sum():
    results = {
        "05_encoder.ipynb": {"server": 90.0, "kernel": 600.0, "sum": 690.0},
        "06_training.ipynb": {"server": 95.0, "kernel": 650.0, "sum": 745.0},
    }
    text = binder_memory.table(results)
    assert "745 MB together at most" in text
    assert "| `05_encoder.ipynb` | 90 MB | 600 MB | 690 MB |" in text.splitlines()


def test_the_readme_rows_read_back_as_they_were_written():
    results = {
        "05_encoder.ipynb": {"server": 90.0, "kernel": 600.0, "sum": 690.0},
        "06_training.ipynb": {"server": 95.0, "kernel": 650.0, "sum": 745.0},
    }
    text = f"intro\n{binder_memory.START}\n{binder_memory.table(results)}\n{binder_memory.END}\nrest"
    assert binder_memory.readme_rows(text) == results


def test_a_lesson_over_the_budget_or_a_large_server_is_named():
    results = {
        "05_encoder.ipynb": {"server": 90.0, "kernel": 720.0, "sum": 810.0},
        "06_training.ipynb": {"server": 120.0, "kernel": 600.0, "sum": 720.0},
        "07_inside_vit.ipynb": {"server": 95.0, "kernel": 600.0, "sum": 695.0},
    }
    assert binder_memory.over_budget(results) == ["05_encoder.ipynb", "06_training.ipynb"]


@pytest.mark.browser  # a JupyterLab server, started as make lab starts it
def test_a_lesson_run_through_the_server_counts_both_processes():
    peaks = binder_memory.measure(ROOT / "notebooks" / "04_multi_head.ipynb")
    assert 40 < peaks["server"] <= SERVER_MB, peaks  # a Jupyter server: tens of MB, not a kernel's hundreds
    assert peaks["kernel"] > 200, peaks  # torch and the course were imported in the kernel
    assert peaks["sum"] == peaks["server"] + peaks["kernel"] <= BUDGET_MB


def test_a_notebook_outside_the_repository_is_refused(tmp_path):
    with pytest.raises(ValueError, match="outside the repository"):
        binder_memory.measure(tmp_path / "lesson.ipynb")


@pytest.mark.browser
def test_a_failing_cell_is_named():
    """The run stops at a cell's error and names it, instead of measuring half a lesson."""
    folder = ROOT / "test-artifacts" / "binder-memory"
    folder.mkdir(parents=True, exist_ok=True)
    notebook = folder / "broken.ipynb"
    cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("x / 0")]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), notebook)
    with pytest.raises(RuntimeError, match="code cell 1: ZeroDivisionError"):
        binder_memory.measure(notebook)
