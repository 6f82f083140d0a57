"""tools/binder_memory.py: a lesson run inside a JupyterLab server, the server's memory added to the
kernel's, as Binder's 1 GB counts them; and the page's sentence, which `make measure` writes."""

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from notebook_cells import ROOT

from tools import binder_memory
from tools.notebook_budget import BUDGET_MB, SERVER_MB


def test_the_page_shows_every_lesson_within_the_budget():
    text = (ROOT / "docs" / "time-and-memory.md").read_text()
    rows = binder_memory.page_rows(text)
    assert sorted(rows) == sorted(path.name for path in (ROOT / "notebooks").glob("*.ipynb"))
    for name, peaks in rows.items():
        assert peaks["sum"] <= binder_memory.limit_mb(peaks) and peaks["server"] <= SERVER_MB, name
        assert abs(peaks["server"] + peaks["kernel"] - peaks["sum"]) <= 1, name  # each rounded to the MB
    worst = max(peaks["sum"] for peaks in rows.values() if not peaks.get("processes"))
    assert f"{worst:.0f} MB together at most, within the {BUDGET_MB} MB budget" in text
    assert [name for name, peaks in rows.items() if peaks.get("processes")] == ["14_beyond_one_process.ipynb"]


def test_a_lesson_that_starts_processes_is_counted_with_them_against_binders_whole_gigabyte():
    results = {
        "06_training.ipynb": {"server": 95.0, "kernel": 650.0, "sum": 745.0},
        "14_beyond_one_process.ipynb": {"server": 95.0, "kernel": 830.0, "sum": 925.0, "processes": 2.0},
    }
    text = binder_memory.table(results)
    assert "745 MB together at most, within the 800 MB budget" in text
    assert "counted with them: 925 MB at most, within Binder's 1,024 MB but not the budget" in text
    assert "| `14_beyond_one_process.ipynb` | 95 MB | 830 MB (with its 2 processes) | 925 MB |" in text
    page = f"{binder_memory.START}\n{text}\n{binder_memory.END}"
    assert binder_memory.page_rows(page) == results
    assert binder_memory.over_budget(results) == []
    results["14_beyond_one_process.ipynb"] |= {"kernel": 940.0, "sum": 1035.0}
    assert binder_memory.over_budget(results) == ["14_beyond_one_process.ipynb"]


def test_the_table_names_every_lesson_and_the_largest_sum():
    results = {
        "05_encoder.ipynb": {"server": 90.0, "kernel": 600.0, "sum": 690.0},
        "06_training.ipynb": {"server": 95.0, "kernel": 650.0, "sum": 745.0},
    }
    text = binder_memory.table(results)
    assert "745 MB together at most" in text
    assert "| `05_encoder.ipynb` | 90 MB | 600 MB | 690 MB |" in text.splitlines()


def test_the_page_rows_read_back_as_they_were_written():
    results = {
        "05_encoder.ipynb": {"server": 90.0, "kernel": 600.0, "sum": 690.0},
        "06_training.ipynb": {"server": 95.0, "kernel": 650.0, "sum": 745.0},
    }
    text = f"intro\n{binder_memory.START}\n{binder_memory.table(results)}\n{binder_memory.END}\nrest"
    assert binder_memory.page_rows(text) == results


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


# --- the command line and clean-up: --help measures nothing, the server's home never stays behind -----

LESSON = str(ROOT / "notebooks" / "01_patches.ipynb")
RESULTS = {"01_patches.ipynb": {"server": 90.0, "kernel": 300.0, "sum": 390.0}}


@pytest.fixture
def scratch_page(tmp_path, monkeypatch) -> tuple[Path, list]:
    """The tool pointed at a page in tmp_path (lesson 2's row in its table) and a stand-in for a
    lesson's run: the list records each measured lesson, which gets RESULTS' peaks."""
    page = tmp_path / "time-and-memory.md"
    two = {"02_x.ipynb": {"server": 92.0, "kernel": 500.0, "sum": 592.0}}
    page.write_text(f"intro\n{binder_memory.START}\n{binder_memory.table(two)}\n{binder_memory.END}\nend\n")
    measured = []
    monkeypatch.setattr(binder_memory, "PAGE", page)
    monkeypatch.setattr(binder_memory, "measure", lambda path: measured.append(path.name) or RESULTS[path.name])
    return page, measured


def test_help_prints_the_usage_and_starts_no_server(scratch_page, capsys):
    """H11: `--help` started the 17-minute measurement."""
    page, measured = scratch_page
    with pytest.raises(SystemExit) as done:
        binder_memory.main(["--help"])
    assert done.value.code == 0 and "usage:" in capsys.readouterr().out
    assert measured == []


@pytest.mark.parametrize("typo", ["--pag", "--no-such-flag"])
def test_a_misspelt_option_is_a_usage_error_before_any_run(scratch_page, capsys, typo):
    page, measured = scratch_page
    with pytest.raises(SystemExit) as done:
        binder_memory.main([typo, LESSON])
    assert done.value.code == 2 and f"unrecognized arguments: {typo}" in capsys.readouterr().err
    assert measured == []


def test_the_page_writes_the_rows_of_the_lessons_run(scratch_page, monkeypatch):
    """`make measure` (--page): the lessons run get their rows, the others keep theirs."""
    monkeypatch.setattr(binder_memory, "write_page", lambda results: written.append(results))
    page, measured = scratch_page
    written = []
    assert binder_memory.main(["--page", LESSON]) == 0
    assert measured == ["01_patches.ipynb"] and written == [RESULTS]


def test_write_page_keeps_the_rows_of_the_lessons_not_run(tmp_path, monkeypatch):
    page = tmp_path / "time-and-memory.md"
    two = {"02_x.ipynb": {"server": 92.0, "kernel": 500.0, "sum": 592.0}}
    page.write_text(f"intro\n{binder_memory.START}\n{binder_memory.table(two)}\n{binder_memory.END}\nend\n")
    monkeypatch.setattr(binder_memory, "PAGE", page)
    binder_memory.write_page(RESULTS)
    text = page.read_text()
    assert binder_memory.page_rows(text) == RESULTS | two
    assert text.startswith("intro\n") and text.endswith(f"{binder_memory.END}\nend\n")
    assert "592 MB together at most" in text
    assert sorted(path.name for path in tmp_path.iterdir()) == ["time-and-memory.md"]  # no scratch file left


@pytest.mark.parametrize("text", ["a page without the table", f"only {binder_memory.START}"])
def test_a_page_without_its_markers_is_refused_before_the_run(scratch_page, capsys, text):
    page, measured = scratch_page
    page.write_text(text)
    with pytest.raises(SystemExit) as done:
        binder_memory.main(["--page", LESSON])
    assert done.value.code == 2 and "around the table this tool writes" in capsys.readouterr().err
    assert measured == [] and page.read_text() == text


def test_a_notebook_outside_the_repository_is_a_usage_error(tmp_path, capsys):
    lesson = tmp_path / "lesson.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), lesson)
    with pytest.raises(SystemExit) as done:
        binder_memory.main([str(lesson)])
    assert done.value.code == 2 and "outside the repository" in capsys.readouterr().err


def test_ctrl_c_stops_the_server_and_removes_its_home(monkeypatch):
    """The temporary home (server.log, workspaces) stayed in $TMPDIR after a Ctrl-C. Here the server
    is a sleeping process started the same way (its own session, its output into the home's log)."""
    started = []

    def start_server(home, log):
        sleeper = subprocess.Popen(
            [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        started.append((home, sleeper))
        return sleeper, "http://127.0.0.1:1"

    def interrupted(url, server_pid, notebook):
        raise KeyboardInterrupt

    monkeypatch.setattr(binder_memory, "start_server", start_server)
    monkeypatch.setattr(binder_memory, "run_lesson", interrupted)
    with pytest.raises(KeyboardInterrupt):
        binder_memory.measure(ROOT / "notebooks" / "01_patches.ipynb")
    ((home, sleeper),) = started
    assert sleeper.poll() is not None, "the server was left running"
    assert not home.exists(), f"{home} was left behind"
