"""The course on other kinds of CPU, emulated on this one (`make test-kinds`, run by CI): the tests
that train and compare with shipped numbers (marker `reproduction`), or lessons under nbval, run
once per emulated kind, the kinds side by side (each test trains on one thread).

A kind is pinned by environment variables that lower the code paths torch, MKL and oneDNN choose:
torch's own vector kernels ($ATEN_CPU_CAPABILITY), MKL's (MKL_CBWR=COMPATIBLE: the same path on
every CPU) and oneDNN's ($ONEDNN_MAX_CPU_ISA). Each adds in another order than this machine's
native path, as another processor would, and `utils.runtime.cpu_kind()` names the pins, so the
shipped results files never count as made here: every rerun is held to where one more seed lands.

Run: python tools/cpu_kinds.py [notebook ...]   (no notebook: the reproduction tests)
Exit 1 if any kind failed; the last line counts the kinds: "kinds: N passed, N failed".
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout, the course library needs no install
KINDS = {  # name: the pins; both lower than any x86-64 CPU with AVX-512 that made a shipped file
    "default": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}
NBVAL = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg"]


def command(notebooks: list[str]) -> list[str]:
    """The pytest command run under each kind."""
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    return run + (NBVAL + notebooks if notebooks else ["tests", "-m", "reproduction"])


def kind_name(pins: dict[str, str]) -> str:
    """What utils.runtime.cpu_kind() says under these pins (from a fresh process)."""
    code = "from utils.runtime import cpu_kind; print(cpu_kind())"
    found = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=os.environ | pins, capture_output=True, text=True, check=True
    )
    return found.stdout.strip()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="The reproduction tests, or lessons, on two emulated kinds of CPU.")
    parser.add_argument("notebooks", nargs="*", help="lessons to run under nbval instead of the reproduction tests")
    notebooks = [str(Path(name)) for name in parser.parse_args(argv).notebooks]
    missing = [name for name in notebooks if not (ROOT / name).is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    runs = {}
    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        for name, pins in KINDS.items():  # side by side: one training thread each
            log = (Path(scratch) / f"{name}.log").open("w")
            runs[name] = (
                subprocess.Popen(
                    command(notebooks), cwd=ROOT, env=os.environ | pins, stdout=log, stderr=subprocess.STDOUT
                ),
                log,
            )
        report, failed = [], 0
        for name, (process, log) in runs.items():
            code = process.wait()
            log.close()
            seconds = time.perf_counter() - start
            output = (Path(scratch) / f"{name}.log").read_text()
            print(f"## {name}: {kind_name(KINDS[name])}\n{output}", flush=True)
            last = output.strip().splitlines()[-1] if output.strip() else "(no output)"
            outcome = "passed" if code == 0 else "FAILED"
            report.append(f"{name}: {outcome} ({last.strip('= ')}), done at {seconds:.0f} s")
            failed += code != 0
    print("\n".join(["# Emulated kinds of CPU", *report, f"kinds: {len(KINDS) - failed} passed, {failed} failed"]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
