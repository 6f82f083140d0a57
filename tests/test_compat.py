"""The compatibility lane's parts (tools/compat.py; `make test-compat` runs the whole lane): its
stacks keep the one CPU build of torch, and its stand-in Colab makes a kernel that the lessons'
Colab cell takes for Colab's."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from notebook_cells import ROOT

from tools import compat, launch_links


def test_every_stack_keeps_torch_2_13_and_names_every_runtime_dependency():
    """Any other torch is a multi-GB CUDA build; a package left out would come from the pins."""
    assert set(compat.STACKS) == {"latest", "colab"}
    requirements = (ROOT / "requirements.txt").read_text()
    needed = {m[1].lower() for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==", requirements, re.MULTILINE)}
    for name, path in compat.STACKS.items():
        lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
        lines = [line for line in lines if line]
        assert "torch==2.13.0" in lines, f"{name}: torch must stay 2.13.0"
        listed = {re.split(r"[<>=!~ ]", line)[0].lower() for line in lines}
        expected = needed - {"jupyterlab"} if name == "colab" else needed  # Colab has a front end of its own
        assert expected <= listed, f"{name} lacks {sorted(expected - listed)}"


def test_the_colab_stack_is_older_than_the_pins_where_colab_is():
    colab = dict(re.findall(r"^([\w\-]+)==(\S+)", compat.STACKS["colab"].read_text(), re.MULTILINE))
    assert colab["ipywidgets"].startswith("7.") and colab["ipython"].startswith("7.")
    assert colab["transformers"].startswith("4.") and colab["numpy"].startswith("2.0")


def test_the_stand_in_colab_makes_the_lessons_cell_install_the_course(tmp_path):
    """A Python started with the stub on its path has google.colab imported, as Colab's kernel has;
    the Colab cell, run there, reaches its install step (pip itself is replaced by a print)."""
    compat.colab_stub(tmp_path)
    cell = launch_links.colab_cell_source()
    probe = (
        "import subprocess, importlib.metadata as m\n"
        "def _version(name):\n"
        "    raise m.PackageNotFoundError(name)\n"
        "m.version = _version\n"
        "m.requires = lambda name: []\n"
        "subprocess.run = lambda command, check: print('PIP', *command[3:])\n" + cell
    )
    env = {"PYTHONPATH": str(tmp_path), "VIT_FROM_SCRATCH_SOURCE": "/a/checkout", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "PIP install --quiet --no-deps /a/checkout"
    elsewhere = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert elsewhere.stdout == "", "without the stub (anywhere but Colab) the cell must do nothing"


def test_the_lane_reports_each_lesson_and_fails_when_one_fails(monkeypatch, capsys):
    """main() with the venvs, pytest and the lessons stood in for: a report line per lesson, a
    closing count, and exit 1 when a lesson failed (CI reads both)."""
    monkeypatch.setattr(compat, "build", lambda stack, log=None: Path(f"/venvs/{stack}/bin/python"))
    monkeypatch.setattr(compat, "versions", lambda python: "torch 2.13.0")
    monkeypatch.setattr(compat, "run", lambda command, log=None, **kwargs: subprocess.CompletedProcess(command, 0))
    results = {"latest": [("01_patches.ipynb", "ok, 9 s")], "colab": [("01_patches.ipynb", "FAILED: KeyError: 'x'")]}
    monkeypatch.setattr(compat, "run_lessons", lambda python, stack, log=None: results[stack])
    assert compat.main(["latest"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "compat: 2 passed, 0 failed"
    assert compat.main([]) == 1
    out = capsys.readouterr().out
    assert "  01_patches.ipynb: FAILED: KeyError: 'x'" in out
    assert out.splitlines()[-1] == "compat: 3 passed, 1 failed"


def test_help_and_an_unknown_stack_build_nothing(monkeypatch, capsys):
    """`--help` was taken for a stack's name ("unknown stack --help"); now it prints the usage, and an
    unknown stack or option is a usage error (exit 2), before any venv is built."""
    monkeypatch.setattr(compat, "build", lambda stack, log=None: pytest.fail(f"built {stack}"))
    for argv, code, phrase in [
        (["--help"], 0, "usage:"),
        (["windows"], 2, "unknown stack windows; the stacks are colab, latest"),
        (["--stack", "latest"], 2, "unrecognized arguments: --stack"),
    ]:
        with pytest.raises(SystemExit) as done:
            compat.main(argv)
        assert done.value.code == code, argv
        assert phrase in "".join(capsys.readouterr()), argv


def test_a_stack_named_twice_runs_once(monkeypatch, capsys):
    """Two lanes of one stack would build the same .compat/<stack> side by side, each deleting the other's."""
    built = []
    monkeypatch.setattr(compat, "lane", lambda stack: built.append(stack) or ([f"## {stack}"], [True], ""))
    assert compat.main(["latest", "latest"]) == 0
    assert built == ["latest"]
