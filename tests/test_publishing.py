"""Ready to publish: the licences and the metadata are there and agree, and every badge and launch
link (Binder, Colab, nbgitpuller) is built from the one public address in pyproject.toml and the
release tag v<version>, never from HEAD or another guess."""

import importlib.metadata
import json
import re
import subprocess
import sys
import types
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

import nbformat
import pytest
import tomllib
import yaml
from notebook_cells import ROOT

from tools import launch_links

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
ADDRESS = PROJECT["urls"]["Repository"]
OWNER_REPO = urlparse(ADDRESS).path.strip("/")  # "owner/repository"
TAG = f"v{PROJECT['version']}"
LAUNCH_LINK = re.compile(
    r"https://(?:mybinder\.org/v2/gh/|colab\.research\.google\.com/github/)[^\s)\"'`>\]]+"
    r"|https://[^\s\"'`]*/git-pull\?[^\s)\"'`>\]]+"
)


def texts() -> dict[str, str]:
    """Every text a learner or an instructor reads links in: the Markdown files and the lessons' cells."""
    found = {path.name: path.read_text(encoding="utf-8") for path in ROOT.glob("*.md")}
    found |= {f"docs/{path.name}": path.read_text(encoding="utf-8") for path in (ROOT / "docs").glob("*.md")}
    for folder in ["notebooks", "lessons", "zh-CN/notebooks", "zh-CN/lessons"]:
        for notebook in sorted((ROOT / folder).glob("*.ipynb")):
            cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
            found[f"{folder}/{notebook.name}"] = "\n".join("".join(cell["source"]) for cell in cells)
    return found


def is_template(link: str) -> bool:
    """A pattern for the reader, not a link: its repository is a placeholder such as <owner>
    (an nbgitpuller link for the course names a real repository on a placeholder <hub-address>)."""
    if "/git-pull?" in link:
        return "<" in parse_qs(urlparse(link).query).get("repo", ["<none>"])[0]
    return "<" in link


def found_launch_links() -> list[tuple[str, str]]:
    """(file, link) for every Binder, Colab and nbgitpuller link that names a real repository."""
    return [
        (name, link) for name, text in texts().items() for link in LAUNCH_LINK.findall(text) if not is_template(link)
    ]


def test_the_address_is_a_github_repository_and_the_version_a_release():
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", ADDRESS), ADDRESS
    assert re.fullmatch(r"\d+\.\d+\.\d+", PROJECT["version"])


def test_every_launch_link_is_built_from_the_address_and_the_release_tag():
    links = found_launch_links()
    assert any("mybinder.org" in link for _, link in links), "the README's Binder badge is missing"
    assert any("git-pull" in link for _, link in links), "the guide's nbgitpuller link for the course is missing"
    wrong = []
    for name, link in links:
        # every door opens the learner's edition: lessons/, or zh-CN/lessons/ from a Chinese text
        lessons = "zh-CN/lessons/" if "zh-CN" in name else "lessons/"
        if "mybinder.org" in link:
            expected = f"https://mybinder.org/v2/gh/{OWNER_REPO}/{TAG}?urlpath=lab/tree/{lessons}"
            ok = link.startswith(expected)
        elif "colab.research.google.com" in link:
            expected = f"https://colab.research.google.com/github/{OWNER_REPO}/blob/{TAG}/{lessons}"
            ok = link.startswith(expected)
        else:  # nbgitpuller
            query = parse_qs(urlparse(link).query)
            expected = f"repo={quote(ADDRESS, safe='')}&branch={TAG}&urlpath=lab/tree/<folder>/lessons/..."
            urlpath = query.get("urlpath", [""])[0]
            ok = query.get("repo") == [ADDRESS] and query.get("branch") == [TAG] and "/lessons/" in urlpath
        if not ok:
            wrong.append(f"{name}: {link} (expected {expected}...)")
    assert not wrong, "links that disagree with pyproject.toml's address or tag:\n" + "\n".join(wrong)


def test_a_stray_link_is_caught():
    """The pattern finds a Binder link at HEAD, and the rule above would reject it."""
    text = f"[![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/{OWNER_REPO}/HEAD?urlpath=x)"
    (link,) = LAUNCH_LINK.findall(text)
    assert not link.startswith(f"https://mybinder.org/v2/gh/{OWNER_REPO}/{TAG}?")


def test_the_readme_says_where_the_course_will_live_and_that_it_is_not_there_yet():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert ADDRESS in readme and TAG in readme
    assert "not published" in readme


@pytest.mark.parametrize("name", ["LICENSE", "LICENSE-CONTENT", "NOTICE", "CITATION.cff", "CHANGELOG.md"])
def test_the_publishing_files_exist(name):
    assert (ROOT / name).is_file(), f"{name} is missing"


def test_the_licences_are_the_ones_the_readme_and_pyproject_name():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert "Attribution 4.0 International Public License" in (ROOT / "LICENSE-CONTENT").read_text()
    assert PROJECT["license"] == "MIT"
    assert set(PROJECT["license-files"]) == {"LICENSE", "LICENSE-CONTENT", "NOTICE"}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "MIT" in readme and "CC BY 4.0" in readme
    notice = (ROOT / "NOTICE").read_text()
    assert "utils/imagenet_classes.tsv" in notice and "Apache License 2.0" in notice
    for photo in ("grace_hopper.jpg", "chelsea.png", "coffee.png", "rocket.jpg"):
        assert photo in notice, photo


def test_citation_and_changelog_agree_with_pyproject():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["version"] == PROJECT["version"] and citation["repository-code"] == ADDRESS
    assert citation["license"] == PROJECT["license"]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(PROJECT['version'])}\b", changelog, re.MULTILINE), "no entry for the version"
    assert PROJECT["authors"] and PROJECT["classifiers"]


# --- Colab: a badge and a first cell in every lesson ------------------------------------------


def test_every_lesson_has_its_badges_and_colab_cell_from_the_address_and_tag():
    """tools/launch_links.py made them; run it after a change of address or version."""
    assert launch_links.main(["--check"]) == 0
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        assert launch_links.colab_url(path.name) in cells[0].source, f"{path.name}: no Colab badge for itself"
        assert launch_links.binder_url(path.name) in cells[0].source, f"{path.name}: no Binder badge for itself"
        code = [cell for cell in cells if cell.cell_type == "code"]
        assert launch_links.is_colab_cell(code[0]), f"{path.name}: the Colab cell must be the first code cell"
        assert f"git+{ADDRESS}@{TAG}" in code[0].source
        assert not code[0].outputs, f"{path.name}: the Colab cell printed something outside Colab"


def stale_copy(folder: Path) -> Path:
    """Lesson 1 in `folder`, its badges and Colab cell pointing at an older release."""
    path = folder / "01_patches.ipynb"
    text = (ROOT / "notebooks" / "01_patches.ipynb").read_text(encoding="utf-8")
    path.write_text(text.replace(f"@{TAG}", "@v0.0.1").replace(f"/{TAG}/", "/v0.0.1/"), encoding="utf-8")
    return path


def test_a_stale_lesson_is_listed_by_check_and_rewritten_whole_without_it(tmp_path, capsys):
    path = stale_copy(tmp_path)
    stale = path.read_text(encoding="utf-8")
    assert launch_links.main(["--check", str(path)]) == 1 and path.read_text(encoding="utf-8") == stale
    assert launch_links.main([str(path)]) == 0 and "updated: 01_patches.ipynb" in capsys.readouterr().out
    assert path.read_bytes() == (ROOT / "notebooks" / "01_patches.ipynb").read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["01_patches.ipynb"]  # no scratch file left


@pytest.mark.parametrize("typo", ["--chek", "--no-such-flag", "--help"])
def test_a_misspelt_option_rewrites_nothing(tmp_path, capsys, typo):
    """S18: `--chek` (for --check) rewrote the lessons; --help ran over every lesson."""
    path = stale_copy(tmp_path)
    stale = path.read_text(encoding="utf-8")
    with pytest.raises(SystemExit) as done:
        launch_links.main([typo, str(path)])
    out, err = capsys.readouterr()
    if typo == "--help":
        assert done.value.code == 0 and "usage:" in out
    else:
        assert done.value.code == 2 and f"unrecognized arguments: {typo}" in err
    assert path.read_text(encoding="utf-8") == stale


def test_a_notebook_without_a_code_cell_is_named_and_nothing_is_written(tmp_path, capsys):
    """It raised a bare StopIteration; now the lesson is named, and no lesson of the run is written."""
    title = nbformat.v4.new_markdown_cell("# A lesson\n\nOnly prose.")
    with pytest.raises(ValueError, match="empty.ipynb: no code cell; the Colab cell goes before"):
        launch_links.with_launch_links(nbformat.v4.new_notebook(cells=[title]), "empty.ipynb")
    empty = tmp_path / "empty.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[title]), empty)
    stale = stale_copy(tmp_path)
    before = stale.read_text(encoding="utf-8")
    assert launch_links.main([str(stale), str(empty)]) == 1
    err = capsys.readouterr().err
    assert "empty.ipynb: no code cell" in err and len(err.strip().splitlines()) == 1
    assert stale.read_text(encoding="utf-8") == before  # the run stopped before writing any lesson
    cut = tmp_path / "cut.ipynb"
    cut.write_text(before[:500], encoding="utf-8")
    assert launch_links.main([str(cut)]) == 1 and "cut.ipynb is not a notebook" in capsys.readouterr().err


class Pip:
    """Stands in for subprocess.run: records each pip command and the constraint file it names."""

    def __init__(self):
        self.commands, self.constraints = [], []

    def __call__(self, command, check=False):
        assert check, "a failed install must stop the lesson"
        self.commands.append(command)
        if "--constraint" in command:
            self.constraints.append(Path(command[command.index("--constraint") + 1]).read_text())


def run_colab_cell(monkeypatch, on_colab: bool, installed: dict[str, str], source: str | None = None) -> Pip:
    """Execute the lessons' Colab cell with `installed` as the machine's packages (name -> version)."""
    pip = Pip()
    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    if source is None:
        monkeypatch.delenv("VIT_FROM_SCRATCH_SOURCE", raising=False)
    else:
        monkeypatch.setenv("VIT_FROM_SCRATCH_SOURCE", source)

    def version(name):
        if name not in installed:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(importlib.metadata, "version", version)
    monkeypatch.setattr(
        importlib.metadata, "requires", lambda name: [f"{d} ; python_version >= '3'" for d in DEPENDENCIES]
    )
    monkeypatch.setattr(subprocess, "run", pip)
    exec(launch_links.colab_cell_source(), {"__name__": "__main__"})
    return pip


DEPENDENCIES = PROJECT["dependencies"]  # e.g. "torch>=2.1"
COLAB = {"torch": "2.13.0+cpu", "numpy": "2.0.2"} | {re.split(r"[<>=]", d)[0]: "1.0" for d in DEPENDENCIES[2:]}


def test_the_colab_cell_does_nothing_outside_colab(monkeypatch):
    assert run_colab_cell(monkeypatch, on_colab=False, installed={}).commands == []


def test_the_colab_cell_does_nothing_once_the_course_is_installed(monkeypatch):
    installed = COLAB | {"vit-from-scratch": PROJECT["version"]}
    assert run_colab_cell(monkeypatch, on_colab=True, installed=installed).commands == []


def test_on_colab_the_cell_installs_the_course_alone_when_colab_has_every_dependency(monkeypatch):
    pip = run_colab_cell(monkeypatch, on_colab=True, installed=COLAB)
    assert pip.commands == [[sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", f"git+{ADDRESS}@{TAG}"]]


def test_on_colab_the_cell_adds_only_what_is_missing_and_keeps_colabs_torch_and_numpy(monkeypatch):
    lacking = {name: version for name, version in COLAB.items() if name not in ("safetensors", "scikit-image")}
    pip = run_colab_cell(monkeypatch, on_colab=True, installed=lacking, source="/somewhere/vit-from-scratch")
    assert pip.commands[0][-2:] == ["--no-deps", "/somewhere/vit-from-scratch"]
    second = pip.commands[1]
    assert sorted(second[second.index("--constraint") + 2 :]) == ["safetensors", "scikit-image"]
    assert pip.constraints == ["torch==2.13.0+cpu\nnumpy==2.0.2"]
    assert len(pip.commands) == 2


def test_the_readme_is_a_front_door_that_links_every_reference_page():
    """The README says what the course is and how to start; reference material lives in docs/."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    size = len(readme.encode())
    assert size < 15_000, f"the README has grown to {size:,} bytes: move reference material to docs/"
    pages = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").glob("*.md"))
    unlinked = [page for page in pages if f"]({page})" not in readme]
    assert not unlinked, f"pages in docs/ the README does not link: {unlinked}"
