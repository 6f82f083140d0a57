"""pytest setup for the whole repository; tests/conftest.py holds what the library tests share.

Every lesson keeps a margin on Binder: nbval runs each notebook in a kernel of its own; after every
cell, the kernel's peak resident memory so far is read (Linux) and the cell fails if it passed
KERNEL_LIMIT_MB (the budget of server and kernel together, less what the Jupyter server holds).
While a cell runs, the memory of the kernel and of every process it starts is sampled as well;
a lesson that starts processes of its own (lesson 14) must keep them and its kernel together
within PROCESSES_LIMIT_MB (Binder's 1 GB less the server's share). The peaks are listed at the end
of the run, also when pytest-xdist runs the files in workers.

`make test` runs two workers: the files that take longest go first (HEAVY_FIRST), so that the
run ends with short files on both workers; within a file the order is kept (a notebook's cells
run in order in one kernel). Each worker, and each kernel or server it starts, gets its share of
the cores as torch's thread count (OMP_NUM_THREADS): two processes of two threads on two cores
wait on each other's threads, and a lesson cell of small operations took 30 times as long.
"""

import os
from pathlib import Path

import pytest

from tools.notebook_budget import KERNEL_LIMIT_MB, PROCESSES_LIMIT_MB, TreePeak, peak_rss_mb

# tests/test_vit_b16_file.py raises it to Binder's 1 GB for lesson 8 with the published weights present
KERNEL_LIMIT_MB = float(os.environ.get("VIT_KERNEL_LIMIT_MB", KERNEL_LIMIT_MB))

KERNEL_PEAKS: dict[str, float] = {}
TREE_PEAKS: dict[str, float] = {}  # lessons whose kernel started processes: kernel and processes together
# The longest files first (measured with --durations: lesson 6 alone takes about 4 minutes on one core).
HEAVY_FIRST = [
    "06_training.ipynb",
    "test_browser.py",
    "05_encoder.ipynb",
    "09_claims.ipynb",
    "test_exercises.py",
    "test_peer_bench.py",
    "07_inside_vit.ipynb",
    "test_vit_b16_file.py",
]


def pytest_configure(config):
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if os.environ.get("PYTEST_XDIST_WORKER") and workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        import torch

        threads = max(1, (os.cpu_count() or 1) // workers)
        os.environ["OMP_NUM_THREADS"] = str(threads)  # for the kernels and servers this worker starts
        torch.set_num_threads(threads)


def pytest_collection_modifyitems(items):
    def rank(item):
        name = Path(str(item.fspath)).name
        return HEAVY_FIRST.index(name) if name in HEAVY_FIRST else len(HEAVY_FIRST)

    items.sort(key=rank)  # a stable sort: each file keeps its own order


def note_peak(peaks: dict[str, float], name: str, peak: float) -> None:
    peaks[name] = max(peak, peaks.get(name, 0.0))


def nbval_kernel(item):
    """nbval's running kernel, for a notebook cell; None for any other test."""
    return getattr(item.parent, "kernel", None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    kernel = nbval_kernel(item)
    if kernel is None:
        yield
        return
    with TreePeak(kernel.km.provisioner.pid) as watch:  # the kernel and the processes it starts
        yield
    item.tree_peak = watch.peak if watch.children else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    kernel = nbval_kernel(item)
    if call.when != "call" or kernel is None or not report.passed:
        return
    peak = peak_rss_mb(kernel.km.provisioner.pid)
    if peak is None:
        return
    name = Path(str(item.fspath)).name
    note_peak(KERNEL_PEAKS, name, peak)
    report.user_properties.append(("kernel_peak_mb", peak))  # travels to the xdist controller
    tree = getattr(item, "tree_peak", None)
    if tree is not None:
        note_peak(TREE_PEAKS, name, tree)
        report.user_properties.append(("tree_peak_mb", tree))
    if peak > KERNEL_LIMIT_MB:
        report.outcome = "failed"
        report.longrepr = (
            f"{name}: the kernel's memory peaked at {peak:.0f} MB by this cell; a lesson's kernel may use "
            f"{KERNEL_LIMIT_MB:.0f} MB (tools/notebook_budget.py: the budget on Binder, less the Jupyter server's)"
        )
    elif tree is not None and tree > PROCESSES_LIMIT_MB:
        report.outcome = "failed"
        report.longrepr = (
            f"{name}: the kernel and the processes it started held {tree:.0f} MB together in this cell; they "
            f"may hold {PROCESSES_LIMIT_MB:.0f} MB (Binder's 1 GB less the Jupyter server's share)"
        )


def pytest_runtest_logreport(report):
    for key, value in getattr(report, "user_properties", []):
        name = Path(report.nodeid.split("::")[0]).name  # in the controller, from a worker's report
        if key == "kernel_peak_mb":
            note_peak(KERNEL_PEAKS, name, value)
        elif key == "tree_peak_mb":
            note_peak(TREE_PEAKS, name, value)


def pytest_terminal_summary(terminalreporter):
    if KERNEL_PEAKS:
        peaks = ", ".join(f"{name} {peak:.0f} MB" for name, peak in sorted(KERNEL_PEAKS.items()))
        terminalreporter.write_line(f"kernel peak memory (the limit: {KERNEL_LIMIT_MB:.0f} MB): {peaks}")
    if TREE_PEAKS:
        peaks = ", ".join(f"{name} {peak:.0f} MB" for name, peak in sorted(TREE_PEAKS.items()))
        terminalreporter.write_line(
            f"kernel and its processes together (the limit: {PROCESSES_LIMIT_MB:.0f} MB): {peaks}"
        )
