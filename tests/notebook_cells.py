"""What several test modules share about the lessons' notebook files: where they are, their cells,
and which cells a part of a lesson needs, so that a test runs that part alone instead of the whole
lesson again."""

import builtins
import json
import os
import symtable
import sys
from pathlib import Path

from jupyter_client.manager import start_new_kernel

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))  # the lessons, in order
TOKEN = "course-test-token"  # the JupyterLab that tests start with `make lab` answers to this
WIDGET = "application/vnd.jupyter.widget-view+json"  # the output type of a displayed widget


def read_cells(path: Path) -> list[dict]:
    """Every cell of a notebook, markdown included, each with its source as one string."""
    cells = json.loads(path.read_text())["cells"]
    for cell in cells:
        cell["source"] = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    return cells


def setup_cell(cells: list[dict]) -> int:
    """The index of the lesson's setup cell: the first code cell that seeds everything (a
    notebook convention that tests/test_notebooks.py checks)."""
    return next(i for i, cell in enumerate(cells) if cell["cell_type"] == "code" and "set_seed(" in cell["source"])


def shows_widget(cell: dict) -> bool:
    return any(WIDGET in output.get("data", {}) for output in cell.get("outputs", []))


def names(source: str) -> tuple[set[str], set[str]]:
    """(the global names a cell's code assigns, imports or defines, the global names it reads),
    found by Python's own symbol tables: a function's parameters and locals are not globals."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    table = symtable.symtable(code, "<cell>", "exec")
    defined = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    read = set()
    tables = [table]
    while tables:
        scope = tables.pop()
        top = scope is table
        read |= {s.get_name() for s in scope.get_symbols() if s.is_referenced() and (top or s.is_global())}
        tables.extend(scope.get_children())
    return defined, read - set(dir(builtins))


def cells_needed(cells: list[dict], targets: list[int]) -> list[int]:
    """The indices of the code cells that running `targets` needs, in order: the setup cell, the
    targets, and for every global name a needed cell reads but does not assign, the last earlier
    cell that assigns it.

    A cell that only changes an object in place (`model.train()`) is not followed: the part still
    runs, on the object as it was assigned.
    """
    code = {index: names(cell["source"]) for index, cell in enumerate(cells) if cell["cell_type"] == "code"}
    keep = {*targets, setup_cell(cells)}
    todo = sorted(keep)
    while todo:
        target = todo.pop()
        defined, read = code[target]
        for name in read - defined:  # a name the cell assigns itself is its own
            source = next((i for i in sorted(code, reverse=True) if i < target and name in code[i][0]), None)
            if source is not None and source not in keep:
                keep.add(source)
                todo.append(source)
    return sorted(keep)


class Kernel:
    """A fresh kernel of this venv, driven with plain blocking messages, the way nbval drives its
    kernels; `run(code)` returns the execute reply's content and the cell's iopub outputs."""

    def __init__(self, cwd: Path = ROOT):
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # this venv's kernel
        self.manager, self.client = start_new_kernel(
            kernel_name="python3", cwd=str(cwd), env={**os.environ, "PATH": path}
        )

    def run(self, code: str, timeout: float = 600) -> tuple[dict, list[dict]]:
        # stop_on_error=False: ipykernel 6 may abort a request sent right after an error's reply
        return self.outcome(self.client.execute(code, store_history=False, stop_on_error=False), timeout)

    def outcome(self, msg_id: str, timeout: float = 600) -> tuple[dict, list[dict]]:
        """The reply to the request `msg_id` and its outputs (errors, streams, results)."""
        reply = self.client.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.client.get_shell_msg(timeout=timeout)
        outputs = []
        while True:
            message = self.client.get_iopub_msg(timeout=timeout)
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                return reply["content"], outputs
            if message["msg_type"] in ("error", "stream", "execute_result"):
                outputs.append(message)

    def raised(self, code: str) -> tuple[str, str] | None:
        """Run `code`: (the exception's name, its value) if it raised, else None."""
        reply, _ = self.run(code)
        return (reply["ename"], reply["evalue"]) if reply["status"] == "error" else None

    def stop(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)
