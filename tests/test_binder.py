"""binder/ agrees with the course: the same pins (torch's CPU build), no local paths, the Python
the notebooks were run with, settings that JupyterLab knows, and a badge that opens lesson 1."""

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pytest
from notebook_cells import ROOT

BINDER = ROOT / "binder"


def pins(path: Path) -> dict[str, str]:
    """{package: version} of the `name==version` lines of a requirements file."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if match := re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line):
            found[match[1].lower()] = match[2]
    return found


def test_binder_pins_the_same_versions_with_cpu_torch():
    top, binder = pins(ROOT / "requirements.txt"), pins(BINDER / "requirements.txt")
    assert binder.pop("torch") == top.pop("torch") + "+cpu"  # PyPI's Linux torch would pull CUDA
    assert binder.pop("jupyter-offlinenotebook")  # Binder's save-to-browser buttons, nothing a lesson imports
    assert binder == top


def test_binder_requirements_name_the_cpu_index_and_no_local_paths():
    lines = [line.strip() for line in (BINDER / "requirements.txt").read_text().splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines
    for line in lines:
        # a local path makes repo2docker copy the repo before installing: every edit would reinstall torch
        assert not re.match(r"(-e|--editable|-r|--requirement|-c|--constraint)\b|\.|/|file:", line), line


def test_binder_python_is_the_one_the_notebooks_ran_on():
    runtime = (BINDER / "runtime.txt").read_text().strip()
    assert re.fullmatch(r"python-3\.\d+", runtime), runtime
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        version = json.loads(notebook.read_text())["metadata"]["language_info"].get("version", "")
        assert version.startswith(runtime.removeprefix("python-") + "."), f"{notebook.name} ran on Python {version}"


def test_post_build_installs_the_library_and_the_settings():
    post_build = BINDER / "postBuild"
    assert os.access(post_build, os.X_OK), "repo2docker runs postBuild only when it is executable"
    text = post_build.read_text()
    assert text.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in text
    assert "pip install --no-deps -e ." in text  # the pins are binder/requirements.txt's alone
    assert "cp binder/overrides.json" in text and "/share/jupyter/lab/settings" in text  # make check-binder runs it


def schema_of(plugin: str) -> dict:
    """The settings schema of a JupyterLab plugin ("package:plugin") as installed in this venv."""
    package, name = plugin.split(":")
    share = Path(sys.prefix) / "share" / "jupyter"
    for path in [
        share / "lab" / "schemas" / package / f"{name}.json",
        share / "labextensions" / package / "schemas" / package / f"{name}.json",
    ]:
        if path.exists():
            return json.loads(path.read_text())
    raise AssertionError(f"no settings schema for {plugin} in {share}")


def test_lab_settings_name_real_plugins_and_options():
    if importlib.util.find_spec("jupyterlab") is None:
        pytest.skip("no JupyterLab in this environment (the compatibility lane's Colab stack has Colab's front end)")
    overrides = json.loads((BINDER / "overrides.json").read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    assert overrides["@jupyter-widgets/jupyterlab-manager:plugin"]["saveState"] is True
    for plugin, settings in overrides.items():
        properties = schema_of(plugin)["properties"]
        for key, value in settings.items():
            assert key in properties, f"{plugin} has no setting {key!r}"
            allowed = properties[key].get("enum") or [option["const"] for option in properties[key].get("oneOf", [])]
            assert not allowed or value in allowed, f"{plugin}: {key}={value!r} not in {allowed}"


def test_make_lab_uses_the_same_settings():
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip("checks make lab's .venv, and this is another environment (the compatibility lane's)")
    installed = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert installed.read_text() == (BINDER / "overrides.json").read_text(), "run make lab (or make test) to refresh"


def test_readme_badge_opens_lesson_1_in_jupyterlab():
    readme = (ROOT / "README.md").read_text()
    badge = re.search(
        r"\[!\[Binder\]\(https://mybinder\.org/badge_logo\.svg\)\]\((https://mybinder\.org/v2/gh/[^)]+)\)", readme
    )
    assert badge, "no Binder badge in the README"
    assert badge[1].endswith("?urlpath=lab/tree/lessons/01_patches.ipynb")  # the learner's edition
    assert (ROOT / "lessons" / "01_patches.ipynb").exists()
