"""Every lesson's launch badges and its Colab cell, made from the one public address and release
tag in pyproject.toml. A lesson's title cell carries an "Open in Colab" and a Binder badge for that
lesson; its first code cell installs the course library on Google Colab and does nothing anywhere
else (locally and on Binder the course is installed by `make lab` and binder/postBuild).

Run: python tools/launch_links.py [--check] [notebook ...]
  --check  change nothing; list the lessons whose badges or Colab cell are out of date (exit 1)
After a change of address or version, run it without --check and commit the lessons.
"""

import sys
from pathlib import Path

import nbformat
import tomllib

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
ADDRESS = PROJECT["urls"]["Repository"]  # https://github.com/<owner>/<repository>
OWNER_REPO = ADDRESS.removeprefix("https://github.com/")
TAG = f"v{PROJECT['version']}"
SOURCE = f"git+{ADDRESS}@{TAG}"  # what pip installs on Colab: the course at its release tag
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
BINDER_BADGE = "https://mybinder.org/badge_logo.svg"
COLAB_TITLE = "# @title On Google Colab only: install the course library"  # Colab shows just this line

# The cell is a template (SOURCE filled in), not a function in utils: on Colab utils is not there yet.
COLAB_CELL = """\
{title} (anywhere else this cell does nothing)
# It installs the course at its release without its dependencies, then only the packages Colab lacks,
# never a second torch or numpy. VIT_FROM_SCRATCH_SOURCE points it at another copy (the compatibility lane).
import sys

if "google.colab" in sys.modules:
    import importlib
    import os
    import re
    import subprocess
    import tempfile
    from importlib.metadata import PackageNotFoundError, requires, version

    def _installed(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    if not _installed("vit-from-scratch"):
        _pip = [sys.executable, "-m", "pip", "install", "--quiet"]
        _source = os.environ.get(
            "VIT_FROM_SCRATCH_SOURCE", "{source}"
        )
        subprocess.run([*_pip, "--no-deps", _source], check=True)
        _needed = [re.split(r"[\\s<>=!~;\\[(]", r, maxsplit=1)[0] for r in requires("vit-from-scratch") or []]
        _missing = [name for name in _needed if not _installed(name)]
        if _missing:
            with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as _keep:
                _keep.write("\\n".join(f"{{n}}=={{_installed(n)}}" for n in ("torch", "numpy") if _installed(n)))
            subprocess.run([*_pip, "--constraint", _keep.name, *_missing], check=True)
        importlib.invalidate_caches()"""


def colab_url(notebook: str) -> str:
    """The lesson opened in Colab, from GitHub at the release tag."""
    return f"https://colab.research.google.com/github/{OWNER_REPO}/blob/{TAG}/notebooks/{notebook}"


def binder_url(notebook: str) -> str:
    """The lesson opened in JupyterLab on Binder, built from the release tag."""
    return f"https://mybinder.org/v2/gh/{OWNER_REPO}/{TAG}?urlpath=lab/tree/notebooks/{notebook}"


def badges(notebook: str) -> str:
    """The one Markdown line of launch badges under a lesson's title."""
    colab = f"[![Open in Colab]({COLAB_BADGE})]({colab_url(notebook)})"
    return f"{colab} [![Binder]({BINDER_BADGE})]({binder_url(notebook)})"


def colab_cell_source() -> str:
    return COLAB_CELL.format(title=COLAB_TITLE, source=SOURCE)


def is_colab_cell(cell) -> bool:
    return cell.cell_type == "code" and cell.source.startswith(COLAB_TITLE)


def with_launch_links(notebook, name: str):
    """The notebook with its badge line (second line of the title cell) and its Colab cell (the
    first code cell, collapsed in Colab and JupyterLab) as this release's; other cells untouched."""
    title = notebook.cells[0]
    if title.cell_type != "markdown" or not title.source.startswith("# "):
        raise ValueError(f"{name}: the first cell must be the lesson's Markdown title (# ...)")
    heading, _, rest = title.source.partition("\n")
    rest = rest.lstrip("\n")
    if rest.startswith("[![Open in Colab]"):
        rest = rest.partition("\n")[2].lstrip("\n")
    title.source = f"{heading}\n\n{badges(name)}\n\n{rest}"
    cell = next((c for c in notebook.cells if is_colab_cell(c)), None)
    if cell is None:
        first_code = next(i for i, c in enumerate(notebook.cells) if c.cell_type == "code")
        cell = nbformat.v4.new_code_cell()
        notebook.cells.insert(first_code, cell)
    cell.source = colab_cell_source()
    cell.metadata["cellView"] = "form"  # Colab: show the title, hide the code
    cell.metadata["jupyter"] = {"source_hidden": True}  # JupyterLab: the same, one click to open
    return notebook


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [Path(a) for a in argv if not a.startswith("--")] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    stale = []
    for path in paths:
        before = path.read_text(encoding="utf-8")
        notebook = with_launch_links(nbformat.reads(before, as_version=4), path.name)
        after = nbformat.writes(notebook) + "\n"
        if after != before:
            stale.append(path.name)
            if not check:
                path.write_text(after, encoding="utf-8")
    if check and stale:
        print("launch badges or Colab cell out of date (run python tools/launch_links.py):", ", ".join(stale))
        return 1
    print(("would update: " if check else "updated: ") + (", ".join(stale) or "nothing"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
