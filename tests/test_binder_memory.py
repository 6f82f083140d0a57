"""tools/binder_memory.py: a lesson run inside a JupyterLab server, the server's memory added to the
kernel's, as Binder's 1 GB counts them; and the README's sentence, which `make measure` writes."""

import re

import nbformat
import pytest
from lessons import ROOT

from tools import binder_memory


def test_the_readme_states_the_measured_sum_under_binders_limit():
    text = (ROOT / "README.md").read_text()
    block = text.split(binder_memory.START)[1].split(binder_memory.END)[0]
    server, name, kernel, together = re.search(
        r"server peaked at (\d+) MB while `(\d\d_\w+\.ipynb)` ran in it \(kernel peak (\d+) MB\): (\d+) MB", block
    ).groups()
    assert (ROOT / "notebooks" / name).exists()
    assert int(together) <= binder_memory.LIMIT_MB
    assert abs(int(server) + int(kernel) - int(together)) <= 1  # each rounded to the MB


def test_the_sentence_names_the_largest_sum():
    results = {
        "05_encoder.ipynb": {"server": 90.0, "kernel": 870.0, "sum": 955.0},
        "06_training.ipynb": {"server": 95.0, "kernel": 850.0, "sum": 940.0},
    }
    assert "`05_encoder.ipynb`" in binder_memory.line(results) and "955 MB together" in binder_memory.line(results)


@pytest.mark.browser  # a JupyterLab server, started as make lab starts it
def test_a_lesson_run_through_the_server_counts_both_processes():
    peaks = binder_memory.measure(ROOT / "notebooks" / "04_multi_head.ipynb")
    assert 40 < peaks["server"] < 400, peaks  # a Jupyter server: tens of MB, not a kernel's hundreds
    assert peaks["kernel"] > 200, peaks  # torch and the course were imported in the kernel
    assert peaks["sum"] == peaks["server"] + peaks["kernel"] <= binder_memory.LIMIT_MB


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
