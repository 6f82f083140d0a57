"""Every script in tools/ answers its command line as scripts do: `--help` prints the usage and
exits 0 at once, doing nothing else; an unknown option is an error (exit 2), before any work. The
scripts are found, not listed, so that a new tool is held to it too. (`--help` used to start
binder_memory's 17-minute measurement, notebook_budget's 10-minute run, and a rewrite of every
lesson by launch_links; a typo such as `--chek` was silently ignored.)"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from notebook_cells import ROOT

SCRIPTS = sorted(
    path for path in (ROOT / "tools").glob("*.py") if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")
)
SECONDS = 60  # a script still running after this was doing more than printing its usage: it is stopped


def watched_files() -> dict[Path, int]:
    """What a script run by mistake would change first: the lessons, the README, the shipped results."""
    paths = [ROOT / "README.md", *(ROOT / "notebooks").glob("*.ipynb"), *(ROOT / "utils").glob("*/*.json")]
    paths += list((ROOT / "utils" / "checkpoints").glob("*.pt"))
    return {path: path.stat().st_mtime_ns for path in paths}


def run_script(script: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """Run `python tools/X.py args` from the repository root; (the finished process, its seconds). A
    run past SECONDS is stopped with everything it started in its process group, and fails the test."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, str(script), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"{script.name} {' '.join(args)} was still running after {SECONDS} s: it did more than parse")
    seconds = time.perf_counter() - start
    return subprocess.CompletedProcess(process.args, process.returncode, out, err), seconds


def test_the_tools_are_found():
    names = {path.name for path in SCRIPTS}
    assert {"binder_memory.py", "notebook_budget.py", "launch_links.py", "compat.py", "exercises.py"} <= names
    assert "__init__.py" not in names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_help_prints_the_usage_and_does_nothing_else(script):
    before = watched_files()
    done, seconds = run_script(script, "--help")
    assert done.returncode == 0, f"{script.name} --help: exit {done.returncode}\n{done.stderr[-2000:]}"
    assert done.stdout.startswith("usage:"), done.stdout[:500]
    assert seconds < 20, f"{script.name} --help took {seconds:.1f} s"  # torch's import, on a busy machine
    assert watched_files() == before, f"{script.name} --help changed files"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_an_unknown_option_is_an_error(script):
    before = watched_files()
    done, _ = run_script(script, "--no-such-flag")
    assert done.returncode == 2, f"{script.name} --no-such-flag: exit {done.returncode}\n{done.stderr[-2000:]}"
    assert "error: unrecognized arguments: --no-such-flag" in done.stderr, done.stderr[-2000:]
    assert done.stdout == "" and watched_files() == before
