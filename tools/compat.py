"""The compatibility lane (`make test-compat`): the course on other versions than requirements.txt's
pins, which are a lock and age. For each stack in compat/ it builds a virtual environment in
.compat/<stack>/, runs the library's fast tests there, then every lesson top to bottom from a copy
outside the repository (as a learner's machine or Colab has it), and reports each lesson.

Stacks (compat/<stack>.txt):
  latest  the newest release of every package, torch 2.13.0 kept; the course installed from this
          checkout as a wheel (no editable install: the package data must ship)
  colab   a Google-Colab-like older stack; the course NOT installed: each lesson's first cell
          installs it, because the lane makes the kernel look like Colab's (google.colab imported
          at start) and points the cell at this checkout (VIT_FROM_SCRATCH_SOURCE)

Run: python tools/compat.py [stack ...]   (all stacks by default; exit 1 if anything failed)
The stacks run side by side (most lessons train on one thread), each into a log of its own that is
printed when the stack is done, then the report and a closing count.
Python 3.11 only: the one CPU build of torch on the course's machines is for 3.11 (others would
pull a multi-GB CUDA build).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parents[1]
STACKS = {path.stem: path for path in sorted((ROOT / "compat").glob("*.txt"))}
TOOLS = ["pytest", "pyyaml", "nbclient", "nbformat"]  # to run the library tests and the lessons
FAST_TESTS = "not notebook and not browser and not slow and not timm"
# Imported at the start of every Python process of the Colab stack's kernel, as Colab's kernel does.
COLAB_SITECUSTOMIZE = "import google.colab  # the lane's stand-in for Colab's own module\n"


def run(command: list, log: TextIO | None = None, **kwargs) -> subprocess.CompletedProcess:
    """Run `command`, its output into `log` (standard output when None), after a "$ command" line."""
    print("$", " ".join(map(str, command)), file=log or sys.stdout, flush=True)
    if log is not None:
        kwargs = {"stdout": log, "stderr": subprocess.STDOUT, **kwargs}
    return subprocess.run(command, **kwargs)


def build(stack: str, log: TextIO | None = None) -> Path:
    """A fresh venv with the stack's packages (and, but for colab, the course as a wheel); its python."""
    venv = ROOT / ".compat" / stack
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", venv], log, check=True)
    python = venv / "bin" / "python"
    run([python, "-m", "pip", "install", "--quiet", "-r", STACKS[stack], *TOOLS], log, check=True)
    if stack != "colab":
        with tempfile.TemporaryDirectory() as build_dir:  # a wheel built from a copy: no build/ left here
            run([python, "-m", "pip", "install", "--quiet", "--no-deps", ROOT], log, check=True, cwd=build_dir)
    return python


def versions(python: Path) -> str:
    """The versions that matter, one line."""
    names = ["torch", "numpy", "matplotlib", "ipython", "ipykernel", "ipywidgets", "scipy", "scikit-learn"]
    names += ["scikit-image", "transformers", "huggingface_hub", "safetensors", "pillow"]
    code = "import importlib.metadata as m, sys; print(', '.join(f'{n} {m.version(n)}' for n in sys.argv[1:]))"
    return subprocess.run([python, "-c", code, *names], capture_output=True, text=True, check=True).stdout.strip()


def colab_stub(folder: Path) -> None:
    """A `google.colab` namespace module and a sitecustomize that imports it, in `folder`."""
    (folder / "google" / "colab").mkdir(parents=True)
    (folder / "google" / "colab" / "__init__.py").write_text('"""Stands in for Colab\'s module."""\n')
    (folder / "sitecustomize.py").write_text(COLAB_SITECUSTOMIZE)


def run_lessons(python: Path, stack: str, log: TextIO | None = None) -> list[tuple[str, str]]:
    """(lesson, result) for every lesson run from a copy in a temporary folder (Colab's /content)."""
    with tempfile.TemporaryDirectory() as scratch:
        content = Path(scratch) / "content"
        shutil.copytree(ROOT / "notebooks", content, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        env = dict(os.environ, PATH=f"{python.parent}{os.pathsep}{os.environ['PATH']}")
        if stack == "colab":
            run([python, "-m", "pip", "uninstall", "--quiet", "--yes", "vit-from-scratch"], log, check=False)
            colab_stub(Path(scratch) / "stub")
            env |= {"PYTHONPATH": str(Path(scratch) / "stub"), "VIT_FROM_SCRATCH_SOURCE": str(ROOT)}
        code = "import sys; from tools.compat import lesson_results; lesson_results(sys.argv[1:])"
        notebooks = sorted(str(path) for path in content.glob("*.ipynb"))
        print("$ (in the stack's venv) tools.compat.lesson_results on a copy of notebooks/", file=log, flush=True)
        runner = subprocess.Popen(
            [python, "-c", code, *notebooks], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
        )
        results = []
        for line in runner.stdout:  # one line per lesson, as each finishes
            print(line, end="", file=log or sys.stdout, flush=True)
            if "\t" in line:
                results.append(tuple(line.rstrip("\n").split("\t", 1)))
        returncode = runner.wait()
        if stack == "colab" and results and "vit-from-scratch" not in pip_list(python):
            results.append(("(Colab cell)", "FAILED: the course was not installed by the lessons' first cell"))
        if len(results) < len(notebooks):
            results.append(
                ("(the rest)", f"FAILED: the runner stopped after {len(results)} lessons (exit {returncode})")
            )
        return results


def pip_list(python: Path) -> str:
    return subprocess.run([python, "-m", "pip", "list"], capture_output=True, text=True).stdout


def lesson_results(paths: list[str]) -> None:
    """Inside the stack's venv: run each lesson, print "name<TAB>result" (its time and kernel peak, or
    the error that stopped it)."""
    from tools.notebook_budget import measure

    for path in map(Path, paths):
        try:
            seconds, peak = measure(path)
            result = f"ok, {seconds:.0f} s, kernel peak {peak:.0f} MB" if peak else f"ok, {seconds:.0f} s"
        except Exception as error:  # a cell's error: its last line names it
            last = str(error).strip().splitlines()[-1:] or [type(error).__name__]
            result = f"FAILED: {last[0][:300]}"
        print(f"{path.name}\t{result}", flush=True)


def lane(stack: str) -> tuple[list[str], list[bool], str]:
    """One stack's lane: its report lines, one bool per check (the library tests, each lesson), and
    everything its commands printed."""
    with tempfile.TemporaryFile("w+") as log:
        start = time.perf_counter()
        python = build(stack, log)
        report, checks = [f"## {stack}: {versions(python)}"], []
        tests = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", "-m", FAST_TESTS], log, cwd=ROOT)
        report.append(f"library tests: {'passed' if tests.returncode == 0 else 'FAILED'}")
        checks.append(tests.returncode == 0)
        for name, result in run_lessons(python, stack, log):
            report.append(f"  {name}: {result}")
            checks.append(result.startswith("ok"))
        report.append(f"({time.perf_counter() - start:.0f} s in all)")
        log.seek(0)
        return report, checks, log.read()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("stacks", nargs="*", metavar="stack", help=f"of {', '.join(STACKS)} (default: all)")
    stacks = list(dict.fromkeys(parser.parse_args(argv).stacks)) or list(STACKS)  # a stack named twice runs once
    if unknown := [name for name in stacks if name not in STACKS]:
        parser.error(f"unknown stack {', '.join(unknown)}; the stacks are {', '.join(STACKS)} (compat/*.txt)")
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(stacks)) as pool:  # side by side
        lanes = list(pool.map(lane, stacks))
    report, checks = [], []  # checks: one bool per stack's library tests and per lesson
    for stack, (lines, passed, output) in zip(stacks, lanes):
        print(f"# {stack}: what its commands printed\n{output}", flush=True)
        report += lines
        checks += passed
    report.append(f"({time.perf_counter() - start:.0f} s for all stacks, side by side)")
    passed = sum(checks)
    summary = f"compat: {passed} passed, {len(checks) - passed} failed"  # test suites and lessons, all stacks
    print("\n".join(["", "# Compatibility lane", *report, summary]))
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
