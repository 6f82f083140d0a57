"""Each lesson's wall time and its kernel's peak memory, from a fresh kernel, with the full
training budgets: what a learner on Binder meets (1 GB of RAM guaranteed, idle sessions stopped
after 10 minutes). `make measure` runs it and writes its table into docs/time-and-memory.md.

The memory budget: a lesson may use BUDGET_MB, its kernel and the Jupyter server together, so that
a fifth of Binder's 1 GB stays free for a cell run twice; the server holds about 93 MB while a
lesson runs (tools/binder_memory.py measures it), so a kernel alone may use KERNEL_LIMIT_MB.

Run: python tools/notebook_budget.py [--page] [--write] [notebook ...]
  --page    update those notebooks' rows of the table in docs/time-and-memory.md
  --write   save each executed notebook in place (its outputs are then the committed ones)
Peak memory is the kernel process's high-water mark (VmHWM in /proc, Linux only).
"""

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout, the course library needs no install
PAGE = ROOT / "docs" / "time-and-memory.md"  # its table between START and END is this tool's
BINDER_MB = 1024  # Binder's guaranteed memory for the whole container (kubespawner's "1G")
BUDGET_MB = 800  # a lesson's server and kernel together: a fifth of Binder's left for a cell run twice
SERVER_MB = 100  # what the Jupyter server may hold meanwhile (tools/binder_memory.py checks it)
KERNEL_LIMIT_MB = BUDGET_MB - SERVER_MB  # a lesson's kernel alone: nbval's gate in make test
# A lesson that starts processes of its own (lesson 14: two Pythons with torch, about 290 MB each
# while they train) cannot keep to BUDGET_MB: it may use, kernel and its processes together,
# Binder's 1 GB less the server's share. nbval's gate in make test holds it there.
PROCESSES_LIMIT_MB = BINDER_MB - SERVER_MB
START, END = "<!-- budget:start -->", "<!-- budget:end -->"


def _status_mb(pid: int, field: str) -> float | None:
    """A memory field ("VmHWM", "VmRSS") of /proc/<pid>/status in MB; None off Linux or without it."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024  # kB -> MB
    return None


def peak_rss_mb(pid: int) -> float | None:
    """The most resident memory process `pid` has used so far, in MB (None off Linux)."""
    return _status_mb(pid, "VmHWM")


def resident_mb(pid: int) -> float | None:
    """The resident memory process `pid` holds now, in MB (None off Linux)."""
    return _status_mb(pid, "VmRSS")


def tree_mb(pid: int) -> tuple[float, int] | None:
    """The memory process `pid` and every process it started hold now, in MB, and how many it has
    started: the sum of their proportional set sizes (a page shared by n of them counts 1/n in each,
    as a container's limit counts it once). None off Linux, or when the process is gone."""
    import psutil  # here, not at the top: the tools' --help needs nothing but the standard library

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0
    for process in processes:
        try:
            total += process.memory_full_info().pss
        except (psutil.Error, AttributeError):  # gone meanwhile; or no PSS off Linux
            if process is root:
                return None
    return total / 2**20, len(processes) - 1


class TreePeak:
    """The largest tree_mb(pid) seen while process `pid` had started processes of its own, sampled
    every `every` seconds in a thread: `with TreePeak(pid) as watch: ...`; then `watch.peak` (MB;
    None if it started none, or off Linux) and `watch.children` (the most it had at one time)."""

    def __init__(self, pid: int, every: float = 0.1):
        self.pid, self.every = pid, every
        self.peak: float | None = None
        self.children = 0

    def _sample(self) -> None:
        import psutil

        while not self._stop.wait(self.every):
            try:
                if not psutil.Process(self.pid).children(recursive=True):
                    continue  # the kernel alone: its own peak is VmHWM's to tell, exactly and for free
            except psutil.Error:
                return
            now = tree_mb(self.pid)
            if now is not None:
                self.peak = max(now[0], self.peak or 0.0)
                self.children = max(self.children, now[1])

    def __enter__(self) -> "TreePeak":
        import threading

        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def measure(path: Path, write: bool = False) -> tuple[float, float | None]:
    """(seconds, peak MB) of running the notebook top to bottom in a fresh kernel; with `write`,
    the executed notebook replaces the file."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    peaks = []
    client = NotebookClient(
        notebook,
        timeout=1800,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_executed=lambda **_: peaks.append(peak_rss_mb(client.km.provisioner.pid)),  # the kernel is still up
    )
    start = time.perf_counter()
    client.execute()  # as nbconvert --execute: outputs, widget state, language info
    seconds = time.perf_counter() - start
    peak = None if None in peaks or not peaks else max(peaks)
    if write:
        from utils.files import replacing  # here, not at the top: utils imports torch, which --help does not need

        with replacing(path) as scratch:  # the whole executed notebook, or the old one
            nbformat.write(notebook, scratch)
    return seconds, peak


HEADER = ["| notebook | wall time | kernel peak memory |", "|---|---:|---:|"]


def row(name: str, seconds: float, peak: float | None) -> str:
    return f"| `{name}` | {seconds:.0f} s | {'?' if peak is None else f'{peak:.0f} MB'} |"


def table(rows: list[tuple[str, float, float | None]]) -> str:
    """A Markdown table: notebook, wall time, peak kernel memory."""
    return "\n".join(HEADER + [row(*entry) for entry in rows])


def check_markers(text: str, start: str = START, end: str = END) -> None:
    """Raise ValueError unless the page's text holds `start`, then `end`, once each: the table goes between."""
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise ValueError(
            f"docs/time-and-memory.md must hold the line {start} and then the line {end}, once each, around the "
            f"table this tool writes; found {text.count(start)} and {text.count(end)}: put them back "
            "(git checkout docs/time-and-memory.md)"
        )


def update_page(text: str, rows: list[tuple[str, float, float | None]]) -> str:
    """The page's text with the measured notebooks' rows replaced (or added), the others kept, in name order."""
    check_markers(text)
    head, rest = text.split(START)
    old, tail = rest.split(END)
    lines = {line.split("`")[1]: line for line in old.splitlines() if line.startswith("| `")}
    lines.update({name: row(name, seconds, peak) for name, seconds, peak in rows})
    body = "\n".join(HEADER + [lines[name] for name in sorted(lines)])
    return f"{head}{START}\n{body}\n{END}{tail}"


def notebooks(parser: argparse.ArgumentParser, paths: list[Path]) -> list[Path]:
    """The notebooks named on the command line, or every lesson; a missing one is a usage error (exit 2)."""
    if missing := [str(path) for path in paths if not path.is_file()]:
        parser.error(f"no such notebook: {', '.join(missing)}")
    return paths or sorted((ROOT / "notebooks").glob("*.ipynb"))


def check_page(parser: argparse.ArgumentParser, page: Path, start: str = START, end: str = END) -> None:
    """Check, before a run of minutes, that the page can take the table; a usage error (exit 2) if not."""
    try:
        check_markers(page.read_text(encoding="utf-8"), start, end)
    except (OSError, ValueError) as error:
        parser.error(f"--page: {error}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("notebooks", nargs="*", type=Path, help="the lessons to run (default: every lesson)")
    parser.add_argument("--page", action="store_true", help="update their rows of the time and memory page")
    parser.add_argument("--write", action="store_true", help="save each executed notebook in place")
    args = parser.parse_args(argv)
    paths = notebooks(parser, args.notebooks)
    if args.page:
        check_page(parser, PAGE)
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # this venv's kernel
    rows = []
    for path in paths:
        seconds, peak = measure(path, args.write)
        rows.append((path.name, seconds, peak))
        print(f"{path.name}: {seconds:.0f} s, peak {peak if peak is None else round(peak)} MB", flush=True)
    print(table(rows))
    if args.page:
        from utils.files import write_text_atomically

        write_text_atomically(PAGE, update_page(PAGE.read_text(encoding="utf-8"), rows))
    over = [name for name, _, peak in rows if peak is not None and peak > KERNEL_LIMIT_MB]
    if over:
        print(f"over a kernel's {KERNEL_LIMIT_MB} MB: {', '.join(over)}", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
