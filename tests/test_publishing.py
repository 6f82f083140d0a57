"""Ready to publish: the licences and the metadata are there and agree, and every badge and launch
link (Binder, Colab, nbgitpuller) is built from the one public address in pyproject.toml and the
release tag v<version>, never from HEAD or another guess."""

import json
import re
from urllib.parse import parse_qs, quote, urlparse

import pytest
import tomllib
import yaml
from lessons import ROOT

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
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        found[f"notebooks/{notebook.name}"] = "\n".join("".join(cell["source"]) for cell in cells)
    return found


def is_template(link: str) -> bool:
    """A pattern for the reader, not a link: its repository is a placeholder such as <owner>
    (an nbgitpuller link for the course names a real repository on a placeholder <hub-address>)."""
    if "/git-pull?" in link:
        return "<" in parse_qs(urlparse(link).query).get("repo", ["<none>"])[0]
    return "<" in link


def launch_links() -> list[tuple[str, str]]:
    """(file, link) for every Binder, Colab and nbgitpuller link that names a real repository."""
    return [
        (name, link) for name, text in texts().items() for link in LAUNCH_LINK.findall(text) if not is_template(link)
    ]


def test_the_address_is_a_github_repository_and_the_version_a_release():
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", ADDRESS), ADDRESS
    assert re.fullmatch(r"\d+\.\d+\.\d+", PROJECT["version"])


def test_every_launch_link_is_built_from_the_address_and_the_release_tag():
    links = launch_links()
    assert any("mybinder.org" in link for _, link in links), "the README's Binder badge is missing"
    assert any("git-pull" in link for _, link in links), "the guide's nbgitpuller link for the course is missing"
    wrong = []
    for name, link in links:
        if "mybinder.org" in link:
            expected = f"https://mybinder.org/v2/gh/{OWNER_REPO}/{TAG}?"
            ok = link.startswith(expected)
        elif "colab.research.google.com" in link:
            expected = f"https://colab.research.google.com/github/{OWNER_REPO}/blob/{TAG}/notebooks/"
            ok = link.startswith(expected)
        else:  # nbgitpuller
            query = parse_qs(urlparse(link).query)
            expected = f"repo={quote(ADDRESS, safe='')}&branch={TAG}"
            ok = query.get("repo") == [ADDRESS] and query.get("branch") == [TAG]
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
