"""Every lesson's launch badges and its Colab cell, made from the one public address and release
tag in pyproject.toml. A lesson's title cell carries an "Open in Colab" and a Binder badge that open
its learner's edition (lessons/), and a line naming it the solution edition; its first code cell
installs the course library on Google Colab and does nothing anywhere else (locally and on Binder
the course is installed by `make lab` and binder/postBuild).

Run: python tools/launch_links.py [--check] [notebook ...]
  --check  change nothing; list the lessons whose badges or Colab cell are out of date (exit 1)
After a change of address or version, run it without --check and commit the lessons.
"""

import argparse
import sys
from pathlib import Path

import nbformat
import tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: tools.notebook_budget reads the command line's lessons
from tools.notebook_budget import notebooks  # noqa: E402

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
    """The lesson's learner's edition opened in Colab, from GitHub at the release tag."""
    return f"https://colab.research.google.com/github/{OWNER_REPO}/blob/{TAG}/lessons/{notebook}"


def binder_url(notebook: str) -> str:
    """The lesson's learner's edition opened in JupyterLab on Binder, built from the release tag."""
    return f"https://mybinder.org/v2/gh/{OWNER_REPO}/{TAG}?urlpath=lab/tree/lessons/{notebook}"


def badges(notebook: str) -> str:
    """The one Markdown line of launch badges under a lesson's title."""
    colab = f"[![Open in Colab]({COLAB_BADGE})]({colab_url(notebook)})"
    return f"{colab} [![Binder]({BINDER_BADGE})]({binder_url(notebook)})"


def solution_note(notebook: str) -> str:
    """The title cell's line that says this is the solution edition (the learner's edition has its own)."""
    return (
        "> **Solution edition**, for instructors and the tests: every exercise is solved here. Learners open "
        f"the learner's edition, [`lessons/{notebook}`](../lessons/{notebook})."
    )


def colab_cell_source() -> str:
    return COLAB_CELL.format(title=COLAB_TITLE, source=SOURCE)


def is_colab_cell(cell) -> bool:
    return cell.cell_type == "code" and cell.source.startswith(COLAB_TITLE)


def with_launch_links(notebook, name: str):
    """The notebook with its badge line (second line of the title cell), the line that names it the
    solution edition, and its Colab cell (the
    first code cell, collapsed in Colab and JupyterLab) as this release's; other cells untouched."""
    title = notebook.cells[0] if notebook.cells else nbformat.v4.new_code_cell()
    if title.cell_type != "markdown" or not title.source.startswith("# "):
        raise ValueError(f"{name}: the first cell must be the lesson's Markdown title (# ...)")
    heading, _, rest = title.source.partition("\n")
    rest = rest.lstrip("\n")
    if rest.startswith("[![Open in Colab]"):
        rest = rest.partition("\n")[2].lstrip("\n")
    if rest.startswith("> **Solution edition**"):
        rest = rest.partition("\n")[2].lstrip("\n")
    title.source = f"{heading}\n\n{badges(name)}\n\n{solution_note(name)}\n\n{rest}"
    cell = next((c for c in notebook.cells if is_colab_cell(c)), None)
    if cell is None:
        first_code = next((i for i, c in enumerate(notebook.cells) if c.cell_type == "code"), None)
        if first_code is None:
            raise ValueError(f"{name}: no code cell; the Colab cell goes before a lesson's first one (its setup cell)")
        cell = nbformat.v4.new_code_cell()
        notebook.cells.insert(first_code, cell)
    cell.source = colab_cell_source()
    cell.metadata["cellView"] = "form"  # Colab: show the title, hide the code
    cell.metadata["jupyter"] = {"source_hidden": True}  # JupyterLab: the same, one click to open
    return notebook


def read_lesson(text: str, name: str) -> nbformat.NotebookNode:
    """The notebook in `text`; a ValueError naming the file `name` when it is not one."""
    try:
        return nbformat.reads(text, as_version=4)
    except nbformat.reader.NotJSONError:
        raise ValueError(f"{name} is not a notebook (not valid JSON): restore it, e.g. git checkout it") from None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("notebooks", nargs="*", type=Path, help="the lessons (default: every lesson)")
    parser.add_argument("--check", action="store_true", help="change nothing; list the lessons out of date (exit 1)")
    args = parser.parse_args(argv)
    updated = {}  # every lesson is made first: a broken one stops the run before anything is written
    for path in notebooks(parser, args.notebooks):
        before = path.read_text(encoding="utf-8")
        try:
            notebook = with_launch_links(read_lesson(before, path.name), path.name)
        except ValueError as error:
            print(f"nothing written: {error}", file=sys.stderr)
            return 1
        after = nbformat.writes(notebook) + "\n"
        if after != before:
            updated[path] = after
    stale = [path.name for path in updated]
    if args.check and stale:
        print("launch badges or Colab cell out of date (run python tools/launch_links.py):", ", ".join(stale))
        return 1
    if not args.check:
        from utils.files import write_text_atomically  # here, not at the top: utils imports torch

        for path, after in updated.items():
            write_text_atomically(path, after)
    print(("would update: " if args.check else "updated: ") + (", ".join(stale) or "nothing"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
