"""pytest setup for the whole repository; tests/conftest.py holds what the library tests share.

Every lesson fits in Binder's memory: nbval runs each notebook in a kernel of its own; after every
cell, the kernel's peak resident memory so far is read (Linux) and the cell fails if it passed
Binder's guaranteed 1 GB. The peaks are listed at the end of the run.
"""

from pathlib import Path

import pytest

from tools.notebook_budget import LIMIT_MB, peak_rss_mb

KERNEL_PEAKS: dict[str, float] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    kernel = getattr(item.parent, "kernel", None)  # nbval's running kernel, for notebook cells
    if call.when != "call" or kernel is None or not report.passed:
        return
    peak = peak_rss_mb(kernel.km.provisioner.pid)
    if peak is None:
        return
    name = Path(str(item.fspath)).name
    KERNEL_PEAKS[name] = max(peak, KERNEL_PEAKS.get(name, 0.0))
    if peak > LIMIT_MB:
        report.outcome = "failed"
        report.longrepr = (
            f"{name}: the kernel's memory peaked at {peak:.0f} MB by this cell; Binder guarantees {LIMIT_MB} MB"
        )


def pytest_terminal_summary(terminalreporter):
    if KERNEL_PEAKS:
        peaks = ", ".join(f"{name} {peak:.0f} MB" for name, peak in sorted(KERNEL_PEAKS.items()))
        terminalreporter.write_line(f"kernel peak memory (Binder guarantees {LIMIT_MB} MB): {peaks}")
