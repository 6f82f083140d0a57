"""Each lesson's wall time and its kernel's peak memory, from a fresh kernel, with the full
training budgets: what a learner on Binder meets (1 GB of RAM guaranteed, idle sessions stopped
after 10 minutes). `make measure` runs it and writes the table into the README.

The memory budget: a lesson may use BUDGET_MB, its kernel and the Jupyter server together, so that
a fifth of Binder's 1 GB stays free for a cell run twice; the server holds about 93 MB while a
lesson runs (tools/binder_memory.py measures it), so a kernel alone may use KERNEL_LIMIT_MB.

Run: python tools/notebook_budget.py [--readme] [--write] [notebook ...]
  --readme  update those notebooks' rows of the README's table
  --write   save each executed notebook in place (its outputs are then the committed ones)
Peak memory is the kernel process's high-water mark (VmHWM in /proc, Linux only).
"""

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BINDER_MB = 1024  # Binder's guaranteed memory for the whole container (kubespawner's "1G")
BUDGET_MB = 800  # a lesson's server and kernel together: a fifth of Binder's left for a cell run twice
SERVER_MB = 100  # what the Jupyter server may hold meanwhile (tools/binder_memory.py checks it)
KERNEL_LIMIT_MB = BUDGET_MB - SERVER_MB  # a lesson's kernel alone: nbval's gate in make test
START, END = "<!-- budget:start -->", "<!-- budget:end -->"


def peak_rss_mb(pid: int) -> float | None:
    """The most resident memory process `pid` has used so far, in MB (None off Linux)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB -> MB
    return None


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
        nbformat.write(notebook, path)
    return seconds, peak


HEADER = ["| notebook | wall time | kernel peak memory |", "|---|---:|---:|"]


def row(name: str, seconds: float, peak: float | None) -> str:
    return f"| `{name}` | {seconds:.0f} s | {'?' if peak is None else f'{peak:.0f} MB'} |"


def table(rows: list[tuple[str, float, float | None]]) -> str:
    """A Markdown table: notebook, wall time, peak kernel memory."""
    return "\n".join(HEADER + [row(*entry) for entry in rows])


def update_readme(text: str, rows: list[tuple[str, float, float | None]]) -> str:
    """The README with the measured notebooks' rows replaced (or added), the others kept, in name order."""
    head, rest = text.split(START)
    old, tail = rest.split(END)
    lines = {line.split("`")[1]: line for line in old.splitlines() if line.startswith("| `")}
    lines.update({name: row(name, seconds, peak) for name, seconds, peak in rows})
    body = "\n".join(HEADER + [lines[name] for name in sorted(lines)])
    return f"{head}{START}\n{body}\n{END}{tail}"


def main(argv: list[str]) -> int:
    write_readme, write = "--readme" in argv, "--write" in argv
    paths = [Path(a) for a in argv if not a.startswith("--")] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # this venv's kernel
    rows = []
    for path in paths:
        seconds, peak = measure(path, write)
        rows.append((path.name, seconds, peak))
        print(f"{path.name}: {seconds:.0f} s, peak {peak if peak is None else round(peak)} MB", flush=True)
    print(table(rows))
    if write_readme:
        readme = ROOT / "README.md"
        readme.write_text(update_readme(readme.read_text(), rows))
    over = [name for name, _, peak in rows if peak is not None and peak > KERNEL_LIMIT_MB]
    if over:
        print(f"over a kernel's {KERNEL_LIMIT_MB} MB: {', '.join(over)}", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
