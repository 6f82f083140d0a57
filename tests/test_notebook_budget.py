"""The memory budget: the peak reader, the table, and the nbval hook that fails a cell whose
kernel went over Binder's 1 GB."""

import importlib.util
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from notebook_cells import ROOT

import tools.notebook_budget as notebook_budget
from tools.notebook_budget import END, KERNEL_LIMIT_MB, START, peak_rss_mb, resident_mb, table, update_page

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak memory is read from /proc (Linux)")


@linux_only
def test_peak_memory_rises_by_what_the_process_touched():
    """The peak is at least what the process holds now plus what it touches (a worker of pytest-xdist
    may have peaked higher before, in another test)."""
    before = resident_mb(os.getpid())
    block = np.ones(300 * 2**20 // 8)  # 300 MB, every page written
    after = peak_rss_mb(os.getpid())
    assert block.sum() == block.size
    assert after - before >= 250, (before, after)
    assert peak_rss_mb(2**22 + 12345) is None  # no such process


def test_table_lists_time_and_peak():
    text = table([("01_patches.ipynb", 5.6, 371.8), ("06_training.ipynb", 554.9, None)])
    assert text.splitlines()[2:] == ["| `01_patches.ipynb` | 6 s | 372 MB |", "| `06_training.ipynb` | 555 s | ? |"]


def test_the_page_has_the_budget_table_for_every_lesson():
    page = (ROOT / "docs" / "time-and-memory.md").read_text()
    assert page.count(START) == 1 and page.count(END) == 1
    section = page.split(START)[1].split(END)[0]
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        row = next((line for line in section.splitlines() if f"`{notebook.name}`" in line), None)
        assert row, f"{notebook.name} is not in the page's memory table (make measure)"
        peak = float(row.split("|")[3].split()[0])
        assert peak <= KERNEL_LIMIT_MB, row


def test_make_measure_rewrites_the_page_table():
    """`make measure` (notebook memory) is not to be confused with utils.training.budget (fit's length)."""
    makefile = (ROOT / "Makefile").read_text()
    targets = re.findall(r"^([\w-]+):", makefile, re.MULTILINE)
    assert "measure" in targets and "budget" not in targets
    recipe = re.search(r"^measure:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)[1]
    assert "tools/notebook_budget.py --page" in recipe
    assert "`make measure`" in (ROOT / "docs" / "time-and-memory.md").read_text()


def load_root_conftest():
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@linux_only
@pytest.mark.parametrize("limit, fails", [(10**7, False), (1, True)])  # this process: far below, above
def test_a_notebook_cell_fails_when_its_kernel_passes_the_limit(monkeypatch, limit, fails):
    root = load_root_conftest()
    monkeypatch.setattr(root, "KERNEL_LIMIT_MB", limit)
    kernel = SimpleNamespace(km=SimpleNamespace(provisioner=SimpleNamespace(pid=os.getpid())))  # this process
    item = SimpleNamespace(parent=SimpleNamespace(kernel=kernel), fspath="notebooks/99_test.ipynb")
    report = SimpleNamespace(passed=True, outcome="passed", longrepr=None, user_properties=[])
    hook = root.pytest_runtest_makereport(item, SimpleNamespace(when="call"))
    next(hook)
    with pytest.raises(StopIteration):
        hook.send(SimpleNamespace(get_result=lambda: report))
    assert (report.outcome == "failed") is fails
    if fails:
        assert "99_test.ipynb: the kernel's memory peaked at" in report.longrepr and "may use 1 MB" in report.longrepr
    assert root.KERNEL_PEAKS["99_test.ipynb"] == pytest.approx(peak_rss_mb(os.getpid()), rel=0.05)
    ((key, peak),) = report.user_properties  # what an xdist worker sends the controller
    assert key == "kernel_peak_mb" and peak == root.KERNEL_PEAKS["99_test.ipynb"]


def test_the_controller_lists_the_peaks_its_workers_report():
    """Under pytest-xdist the cells run in workers: their peaks reach the run's summary through the
    reports' user_properties."""
    root = load_root_conftest()
    report = SimpleNamespace(nodeid="notebooks/98_test.ipynb::Cell 3", user_properties=[("kernel_peak_mb", 512.0)])
    root.pytest_runtest_logreport(report)
    root.pytest_runtest_logreport(SimpleNamespace(nodeid="tests/test_x.py::test_y", user_properties=[]))
    assert root.KERNEL_PEAKS == {"98_test.ipynb": 512.0}


def test_the_longest_files_run_first_and_each_file_keeps_its_order():
    root = load_root_conftest()
    names = ["tests/test_a.py", "notebooks/06_training.ipynb", "tests/test_a.py", "notebooks/06_training.ipynb"]
    items = [SimpleNamespace(fspath=name, order=i) for i, name in enumerate(names)]
    root.pytest_collection_modifyitems(items)
    assert [item.order for item in items] == [1, 3, 0, 2]


# --- the command line: nothing runs for --help, a typo or a page that cannot take the table -------


@pytest.fixture
def scratch_page(tmp_path, monkeypatch) -> tuple[Path, list]:
    """The tool pointed at a page in tmp_path (its rows for lessons 1 and 2) and a stand-in for the
    lessons' run: the list records each measure(path, write) call and the call answers (6 s, 400 MB)."""
    page = tmp_path / "time-and-memory.md"
    page.write_text(
        f"intro\n{START}\n{table([('01_patches.ipynb', 1.0, 300.0), ('02_x.ipynb', 2.0, None)])}\n{END}\nend\n"
    )
    calls = []
    monkeypatch.setattr(notebook_budget, "PAGE", page)
    monkeypatch.setattr(
        notebook_budget, "measure", lambda path, write=False: calls.append((path.name, write)) or (6, 400)
    )
    return page, calls


LESSON = str(ROOT / "notebooks" / "01_patches.ipynb")


def test_help_prints_the_usage_and_runs_no_lesson(scratch_page, capsys):
    """H12: `--help` ran every lesson with the full budgets (about 10 minutes)."""
    page, calls = scratch_page
    with pytest.raises(SystemExit) as done:
        notebook_budget.main(["--help"])
    assert done.value.code == 0 and "usage:" in capsys.readouterr().out
    assert calls == []


@pytest.mark.parametrize("typo", ["--pag", "--writ", "--no-such-flag"])
def test_a_misspelt_option_is_a_usage_error_before_any_run(scratch_page, capsys, typo):
    """S19: `--readm` ran the lesson and exited 0 without updating the page."""
    page, calls = scratch_page
    before = page.read_text()
    with pytest.raises(SystemExit) as done:
        notebook_budget.main([typo, LESSON])
    assert done.value.code == 2 and f"unrecognized arguments: {typo}" in capsys.readouterr().err
    assert calls == [] and page.read_text() == before


def test_the_page_and_write_update_the_rows_of_the_lessons_run(scratch_page):
    """`make run-notebooks` (--write --page) and `make measure` (--page) keep their meaning."""
    page, calls = scratch_page
    assert notebook_budget.main(["--write", "--page", LESSON]) == 0
    assert calls == [("01_patches.ipynb", True)]
    rows = page.read_text().split(START)[1].split(END)[0].strip().splitlines()
    assert rows[2:] == ["| `01_patches.ipynb` | 6 s | 400 MB |", "| `02_x.ipynb` | 2 s | ? |"]
    assert sorted(path.name for path in page.parent.iterdir()) == ["time-and-memory.md"]  # no scratch file left
    assert notebook_budget.main([LESSON]) == 0 and calls[-1] == ("01_patches.ipynb", False)


@pytest.mark.parametrize("text", ["a page without the table", f"only {START}", f"{END} then {START}"])
def test_a_page_without_its_markers_is_refused_before_the_run(scratch_page, capsys, text):
    """The markers were found missing at the end of a 10-minute run ("not enough values to unpack")."""
    page, calls = scratch_page
    page.write_text(text)
    with pytest.raises(SystemExit) as done:
        notebook_budget.main(["--page", LESSON])
    assert done.value.code == 2 and "around the table this tool writes" in capsys.readouterr().err
    assert calls == [] and page.read_text() == text
    with pytest.raises(ValueError, match=f"must hold the line {START} and then the line {END}"):
        update_page(text, [("01_patches.ipynb", 6.0, 400.0)])


def test_a_missing_notebook_is_a_usage_error(scratch_page, capsys):
    page, calls = scratch_page
    with pytest.raises(SystemExit) as done:
        notebook_budget.main(["notebooks/99_nowhere.ipynb"])
    assert done.value.code == 2 and "no such notebook: notebooks/99_nowhere.ipynb" in capsys.readouterr().err
    assert calls == []


def test_tree_peak_counts_the_processes_a_process_starts():
    """A process that starts a child holding 100 MB: the tree's peak holds the child's 100 MB too."""
    import subprocess
    import sys

    from tools.notebook_budget import TreePeak, tree_mb

    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; time.sleep(0.5); subprocess.run([sys.executable, '-c', "
            "'import time; x = bytearray(100 * 2**20); x[::4096] = b\"1\" * len(x[::4096]); time.sleep(1.5)'])",
        ]
    )
    try:
        with TreePeak(parent.pid, every=0.05) as watch:
            alone = tree_mb(parent.pid)
            parent.wait(timeout=30)
    finally:
        parent.kill()
    assert alone is not None and alone[1] == 0 and alone[0] < 50
    assert watch.children == 1 and watch.peak > 100, (watch.children, watch.peak)


def test_tree_peak_is_none_for_a_process_that_starts_none():
    import subprocess
    import sys

    from tools.notebook_budget import TreePeak

    alone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    try:
        with TreePeak(alone.pid, every=0.05) as watch:
            alone.wait(timeout=30)
    finally:
        alone.kill()
    assert watch.peak is None and watch.children == 0
