"""What a Binder container holds while a learner runs a lesson: the Jupyter server and the lesson's
kernel. Binder guarantees 1 GB for the whole container (kubespawner's "1G" is 1024**3 bytes); a lesson
keeps the two together within tools/notebook_budget.BUDGET_MB (800 MB), a fifth left for a cell run
twice.

This starts JupyterLab as `make lab` does, loads the lab page, opens a session on the lesson through
the server's REST API and runs every code cell through the server's websocket, as the browser's Run
All does (so the server relays every output), then reads each process's peak resident memory.
`make measure` runs it on every lesson and writes the table in docs/time-and-memory.md.

Run: python tools/binder_memory.py [--page] [notebook ...]   (default: every lesson)
  --page  write the table in docs/time-and-memory.md (its rows for the lessons run), unless a
          lesson is over the budget
The sum of the two peaks is an upper bound on the container's: the two need not peak at the same
moment, and pages the two processes share count twice. A lesson that starts processes of its own (lesson 14
starts two Pythons with torch) has them counted with its kernel, sampled while its cells run (their
proportional set sizes: a page they share counts once), and may use Binder's whole 1 GB.
"""

import argparse
import asyncio
import datetime
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: tools.notebook_budget holds the budget
from tools.notebook_budget import (  # noqa: E402
    BINDER_MB,
    BUDGET_MB,
    SERVER_MB,
    TreePeak,
    check_markers,
    check_page,
    notebooks,
)

PAGE = ROOT / "docs" / "time-and-memory.md"  # its table between START and END is this tool's
START, END = "<!-- binder-memory:start -->", "<!-- binder-memory:end -->"
TOKEN = uuid.uuid4().hex


def peak_mb(pid: int) -> float:
    """The most resident memory process `pid` has held so far (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def kernel_pid(kernel_id: str) -> int:
    """The process whose command line names the kernel's connection file."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if f"kernel-{kernel_id}.json" in (proc / "cmdline").read_text():
                    return int(proc.name)
            except OSError:
                continue
    raise RuntimeError(f"no process for kernel {kernel_id}")


def message(code: str, session: str) -> str:
    """An execute_request in the JSON form the server's websocket takes."""
    header = {
        "msg_id": uuid.uuid4().hex,
        "msg_type": "execute_request",
        "session": session,
        "username": "learner",
        "version": "5.3",
        "date": datetime.datetime.now(datetime.UTC).isoformat(),
    }
    content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False}
    return json.dumps({"header": header, "parent_header": {}, "metadata": {}, "content": content, "channel": "shell"})


async def run_cells(url: str, kernel_id: str, cells: list[str]) -> None:
    """Execute the cells one by one through the server; a cell's error stops with its name."""
    from tornado.websocket import websocket_connect

    session = uuid.uuid4().hex
    socket_url = url.replace("http", "ws", 1) + f"/api/kernels/{kernel_id}/channels?session_id={session}&token={TOKEN}"
    connection = await websocket_connect(socket_url, max_message_size=1 << 30)
    for index, code in enumerate(cells):
        request = message(code, session)
        msg_id = json.loads(request)["header"]["msg_id"]
        await connection.write_message(request)
        while True:
            reply = await connection.read_message()
            if reply is None:
                raise RuntimeError("the server closed the kernel's websocket")
            if isinstance(reply, bytes):
                continue  # binary buffers (widgets): not a reply
            reply = json.loads(reply)
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if reply["msg_type"] == "execute_reply":
                if reply["content"]["status"] != "ok":
                    raise RuntimeError(
                        f"code cell {index}: {reply['content'].get('ename')}: {reply['content'].get('evalue')}"
                    )
                break
    connection.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def request(url: str, method: str = "GET", body: dict | None = None) -> dict | bytes:
    data = None if body is None else json.dumps(body).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method), timeout=30) as response:
        raw = response.read()
    return json.loads(raw) if response.headers.get_content_type() == "application/json" else raw


def measure(notebook: Path) -> dict[str, float]:
    """Peak resident MB of the server, of the lesson's kernel, and of the two together; a cell's
    error stops the run (RuntimeError naming the cell). The server's home is removed afterwards,
    also after an error or a Ctrl-C."""
    if not notebook.resolve().is_relative_to(ROOT):
        raise ValueError(f"{notebook} is outside the repository, which the server serves: copy it under {ROOT}")
    with tempfile.TemporaryDirectory(prefix="binder-memory-", ignore_cleanup_errors=True) as scratch:
        home = Path(scratch)
        with (home / "server.log").open("w") as log:
            server, url = start_server(home, log)
            try:
                peaks = run_lesson(url, server.pid, notebook)
            finally:
                stop(server)
    return peaks | {"sum": peaks["server"] + peaks["kernel"]}


def start_server(home: Path, log: TextIO) -> tuple[subprocess.Popen, str]:
    """JupyterLab on a free loopback port, as `make lab` starts it, its workspaces in `home`; the
    process and its address."""
    bin_dir = Path(sys.executable).parent
    port = free_port()
    command = [
        bin_dir / "jupyter",
        "lab",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={ROOT}",
        f"--IdentityProvider.token={TOKEN}",
        f"--LabApp.workspaces_dir={home}",
        "--allow-root",
    ]
    server = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}"),
        start_new_session=True,  # its own process group, which stop() ends
    )
    return server, f"http://127.0.0.1:{port}"


def run_lesson(url: str, server_pid: int, notebook: Path) -> dict[str, float]:
    """Once the server answers: open a session on the lesson, run its code cells through the server,
    then read the server's and the kernel's peaks (both still running)."""
    for _ in range(180):
        try:
            request(f"{url}/api/status?token={TOKEN}")
            break
        except OSError:
            time.sleep(0.5)
    request(f"{url}/lab?token={TOKEN}")  # the page and its settings, as a browser loads them
    path = notebook.resolve().relative_to(ROOT).as_posix()
    body = {"path": path, "type": "notebook", "name": notebook.name, "kernel": {"name": "python3"}}
    kernel_id = request(f"{url}/api/sessions?token={TOKEN}", "POST", body)["kernel"]["id"]
    kernel = kernel_pid(kernel_id)
    cells = [
        "".join(cell["source"]) for cell in json.loads(notebook.read_text())["cells"] if cell["cell_type"] == "code"
    ]
    with TreePeak(kernel) as watch:  # the kernel and any process it starts (lesson 14 starts two)
        asyncio.run(run_cells(url, kernel_id, cells))
    peaks = {"server": peak_mb(server_pid), "kernel": max(peak_mb(kernel), watch.peak or 0.0)}
    return peaks | ({"processes": float(watch.children)} if watch.children else {})


def stop(server: subprocess.Popen) -> None:
    """End the server's process group: politely, then for good after 30 s."""
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    except ProcessLookupError:  # already gone
        server.wait()


HEADER = ["| notebook | server | kernel | together |", "|---|---:|---:|---:|"]


def limit_mb(peaks: dict[str, float]) -> float:
    """What a lesson may hold, server and kernel together: BUDGET_MB, or for a lesson that starts
    processes of its own (their memory counted with the kernel's) Binder's whole BINDER_MB."""
    return float(BINDER_MB) if peaks.get("processes") else float(BUDGET_MB)


def table(results: dict[str, dict[str, float]]) -> str:
    """The page's table: each lesson's server, kernel (with the processes it starts, if any) and
    summed peaks, and the budget they keep."""
    rows = []
    for name, peaks in sorted(results.items()):
        kernel = f"{peaks['kernel']:.0f} MB"
        if peaks.get("processes"):
            kernel += f" (with its {peaks['processes']:.0f} processes)"
        rows.append(f"| `{name}` | {peaks['server']:.0f} MB | {kernel} | {peaks['sum']:.0f} MB |")
    alone = [peaks["sum"] for peaks in results.values() if not peaks.get("processes")]
    sentence = (
        f"Measured by `tools/binder_memory.py`, each lesson run top to bottom inside a JupyterLab server: "
        f"{max(alone, default=0):.0f} MB together at most, within the {BUDGET_MB} MB budget (Binder guarantees "
        f"{BINDER_MB:,} MB)."
    )
    spawning = {name: peaks for name, peaks in results.items() if peaks.get("processes")}
    if spawning:
        worst = max(peaks["sum"] for peaks in spawning.values())
        sentence += (
            f" A lesson that starts processes of its own is counted with them: {worst:.0f} MB at most, within "
            f"Binder's {BINDER_MB:,} MB but not the budget."
        )
    return "\n".join([sentence, "", *HEADER, *rows])


ROW = re.compile(
    r"^\| `(\S+\.ipynb)` \| (\d+) MB \| (\d+) MB(?: \(with its (\d+) processes\))? \| (\d+) MB \|$", re.MULTILINE
)


def page_rows(text: str) -> dict[str, dict[str, float]]:
    """The rows of the table in docs/time-and-memory.md, as table() takes them."""
    block = text.split(START)[1].split(END)[0] if START in text and END in text else ""
    rows = {}
    for name, server, kernel, processes, together in ROW.findall(block):
        rows[name] = {"server": float(server), "kernel": float(kernel), "sum": float(together)}
        if processes:
            rows[name]["processes"] = float(processes)
    return rows


def over_budget(results: dict[str, dict[str, float]]) -> list[str]:
    """The lessons over their limit (limit_mb), or with a server above SERVER_MB."""
    return [
        name for name, peaks in sorted(results.items()) if peaks["sum"] > limit_mb(peaks) or peaks["server"] > SERVER_MB
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("notebooks", nargs="*", type=Path, help="the lessons to run (default: every lesson)")
    parser.add_argument("--page", action="store_true", help="write the time and memory page's table (if all fit)")
    args = parser.parse_args(argv)
    paths = notebooks(parser, args.notebooks)
    if outside := [str(path) for path in paths if not path.resolve().is_relative_to(ROOT)]:
        parser.error(f"outside the repository, which the server serves: {', '.join(outside)}; copy them under {ROOT}")
    if args.page:
        check_page(parser, PAGE, START, END)  # checked before a run of minutes
    results = {}
    for path in paths:
        results[path.name] = peaks = measure(path)
        print(
            f"{path.name}: server {peaks['server']:.0f} MB, kernel {peaks['kernel']:.0f} MB, "
            f"together {peaks['sum']:.0f} MB at most",
            flush=True,
        )
    over = over_budget(results)
    if args.page and not over:
        write_page(results)
    if over:
        print(
            f"over the budget ({BUDGET_MB} MB together, {BINDER_MB} MB for a lesson that starts processes, "
            f"{SERVER_MB} MB for the server): {', '.join(over)}",
            file=sys.stderr,
        )
        return 1
    return 0


def write_page(results: dict[str, dict[str, float]]) -> None:
    """Replace the page's table with one of `results`; the lessons not measured now keep their rows."""
    from utils.files import write_text_atomically  # here, not at the top: utils imports torch

    text = PAGE.read_text(encoding="utf-8")
    check_markers(text, START, END)
    head, rest = text.split(START)
    tail = rest.split(END)[1]
    write_text_atomically(PAGE, f"{head}{START}\n{table(page_rows(text) | results)}\n{END}{tail}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
