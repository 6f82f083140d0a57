"""The learner's edition (lessons/, made by tools/learner_edition.py from notebooks/): up to date, no
solution in sight, lines that fit, nothing after an exercise that reads the learner's function, and
in a kernel every stub says "not written yet", a wrong answer fails its check and the folded
solution passes it."""

import json
import re
import warnings
from pathlib import Path

import nbformat
import pytest
from notebook_cells import ROOT, Kernel, cells_needed, names, read_cells

import tools.learner_edition as edition
from tools.learner_edition import ExerciseError, learner_edition, split_exercise

LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))
WIDTH = 90  # columns a learner reads without scrolling: the editor at 1366 x 768, the site's code blocks

CELL = """import math


def area(width, height):
    # HINT 1: the idea,
    # HINT 1: on two lines
    # HINT 2: closer
    # BEGIN SOLUTION
    return width * height
    # END SOLUTION


check_area(area)
print("done")"""


def test_an_exercise_splits_into_stub_help_and_check():
    parts = split_exercise(CELL)
    assert parts["stub"] == (
        "import math\n\n\ndef area(width, height):\n"
        '    raise NotImplementedError("not written yet")  # write your code here'
    )
    assert parts["hint 1"] == "the idea, on two lines" and parts["hint 2"] == "closer"
    assert parts["solution"] == "import math\n\n\ndef area(width, height):\n    return width * height"
    assert parts["check"] == 'check_area(area)\nprint("done")'


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (CELL.replace("    # END SOLUTION\n", ""), "unmatched"),
        (CELL.replace("check_area(area)", "area(1, 2)"), "no check"),
        (CELL.replace("    # HINT 2: closer\n", ""), "no `# HINT 2:` line"),
        (CELL.replace("# HINT 1", "# HINT"), "no `# HINT 1:` line"),
        ("# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n# HINT 1: a\n# HINT 2: b\ncheck_x(x)", "outside a function"),
    ],
)
def test_an_exercise_the_tool_cannot_split_is_named(text, problem):
    with pytest.raises(ExerciseError, match=problem):
        split_exercise(text)


def test_a_lesson_becomes_three_cells_per_exercise_and_says_which_edition_it_is():
    notebook = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Lesson 0\n", "> **Solution edition**: x"]},
            {"cell_type": "code", "metadata": {}, "outputs": [{"x": 1}], "execution_count": 3, "source": CELL},
            {"cell_type": "markdown", "metadata": {}, "source": "after"},
        ],
        "metadata": {},
    }
    made = learner_edition(notebook, "00_test.ipynb")
    kinds = [(cell["cell_type"], cell["metadata"].get("tags")) for cell in made["cells"]]
    assert kinds == [
        ("markdown", None),
        ("code", ["exercise"]),
        ("markdown", ["exercise-help"]),
        ("code", ["exercise-check", "raises-exception"]),
        ("markdown", None),
    ]
    assert "".join(made["cells"][0]["source"]).endswith(edition.LEARNER_NOTE)
    assert made["cells"][1]["outputs"] == [] and made["cells"][3]["outputs"] == []
    assert made["metadata"]["vit_from_scratch"] == {"edition": "learner", "made_from": "notebooks/00_test.ipynb"}
    assert notebook["cells"][1]["outputs"] == [{"x": 1}]  # the source is left alone
    with pytest.raises(ExerciseError, match="00_test.ipynb: its title cell has no line"):
        learner_edition({**notebook, "cells": notebook["cells"][1:]}, "00_test.ipynb")


def test_the_learners_edition_is_up_to_date():
    assert [path.name for path in LESSONS] == [path.name for path in edition.lessons()]
    assert edition.stale() == [], "run make learner-edition and commit lessons/"


def test_one_lesson_can_be_made_alone_and_an_unknown_one_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(edition, "EDITION", tmp_path)
    assert edition.write(["02_embeddings.ipynb"]) == ["02_embeddings.ipynb"]
    assert [path.name for path in tmp_path.iterdir()] == ["02_embeddings.ipynb"]
    assert (tmp_path / "02_embeddings.ipynb").read_text() == (ROOT / "lessons" / "02_embeddings.ipynb").read_text()
    with pytest.raises(ExerciseError, match="no such lesson in notebooks/: 2_embeddings.ipynb"):
        edition.stale(["2_embeddings.ipynb"])


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_each_lesson_is_a_valid_notebook_that_jupyterlab_opens(path):
    notebook = nbformat.read(path, as_version=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing cell id is only a warning today
        nbformat.validate(notebook)
    ids = [cell.id for cell in notebook.cells]
    assert len(set(ids)) == len(ids), f"{path.name}: cell ids repeat"


def cells_of(path: Path) -> list[dict]:
    return read_cells(path)


def tagged(cells: list[dict], tag: str) -> list[int]:
    return [i for i, cell in enumerate(cells) if tag in cell.get("metadata", {}).get("tags", [])]


def folded_solution(help_cell: dict) -> str:
    """The code of the Solution block of a help cell."""
    return re.search(r"<summary>Solution</summary>\n\n```python\n(.*?)\n```", help_cell["source"], re.DOTALL)[1]


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_no_solution_is_in_sight(path):
    """The learner sees stubs: no marker, no hint comment and no line of a solution in any code cell;
    the solutions and hints are only inside the folded help."""
    cells = cells_of(path)
    helps = tagged(cells, "exercise-help")
    assert helps and len(helps) == len(tagged(cells, "exercise")) == len(tagged(cells, "exercise-check"))
    solved = {
        line.strip()
        for i in helps
        for line in folded_solution(cells[i]).splitlines()
        if line.strip() and not line.lstrip().startswith(("#", "def ", "import ", "from ", "return"))
    }
    stubs = {cells[i]["source"] for i in tagged(cells, "exercise")}
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        text = cell["source"]
        assert "BEGIN SOLUTION" not in text and "# HINT" not in text, text
        if text in stubs:
            shown = {line.strip() for line in text.splitlines()}
            assert not (shown & solved), f"{path.name}: solution lines in a stub: {shown & solved}"
    for i in helps:
        assert cells[i]["source"].count("<details>") == 3 and "</details>" in cells[i]["source"]


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_every_line_of_an_exercise_fits_on_the_screen(path):
    cells = cells_of(path)
    texts = [cells[i]["source"] for i in tagged(cells, "exercise") + tagged(cells, "exercise-check")]
    texts += [folded_solution(cells[i]) for i in tagged(cells, "exercise-help")]
    wide = [line for text in texts for line in text.splitlines() if len(line) > WIDTH]
    assert not wide, f"{path.name}: {len(wide)} lines wider than {WIDTH} columns, e.g. {wide[0]!r}"


def exercise_functions(text: str) -> set[str]:
    return set(re.findall(r"^def (\w+)\(", text, flags=re.MULTILINE))


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_nothing_after_an_exercise_reads_the_learners_function(path):
    """Each later cell runs the same whether the learner's function is written or a stub: none reads
    a name an exercise defines, unless it defines that name again first."""
    cells = cells_of(path)
    for first in tagged(cells, "exercise"):
        written = exercise_functions(cells[first]["source"])
        for later in range(first + 1, len(cells)):
            cell = cells[later]
            if cell["cell_type"] != "code" or "exercise-check" in cell["metadata"].get("tags", []):
                continue
            defined, read = names(cell["source"])
            if "exercise" in cell["metadata"].get("tags", []):
                written -= defined  # another exercise that writes the same name is the learner's again
                continue
            assert not (read & written), f"{path.name}: cell {later} reads {read & written}, which an exercise writes"


# ---- in a kernel --------------------------------------------------------------------------------


def first_parameter(text: str) -> str:
    return re.search(r"^def \w+\((\w+)", text, flags=re.MULTILINE)[1]


@pytest.mark.notebook
@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_every_stub_says_not_written_yet_a_wrong_answer_fails_and_the_solution_passes(path):
    """At each exercise of the learner's edition, in a fresh kernel after the cells it needs: the stub
    and its check (NotImplementedError, "not written yet"), a wrong answer (the function returns its
    first argument: CheckFailed), then the folded solution pasted into the stub (no error)."""
    cells = cells_of(path)
    stubs, checks = tagged(cells, "exercise"), tagged(cells, "exercise-check")
    kernel = Kernel(path.parent)
    try:
        kernel.run("%matplotlib inline")  # as in JupyterLab
        for index in cells_needed(cells, stubs + checks):
            if index in stubs or index in checks:
                continue
            assert kernel.raised(cells[index]["source"]) is None, f"{path.name}: cell {index} failed"
        for stub, check in zip(stubs, checks, strict=True):
            text, checker, solution = cells[stub]["source"], cells[check]["source"], folded_solution(cells[stub + 1])
            name = re.search(r"^def (\w+)", text, flags=re.MULTILINE)[1]
            assert kernel.raised(text) is None
            blank = kernel.raised(checker)
            assert blank and blank[0] == "NotImplementedError" and "not written yet" in blank[1], (name, blank)
            wrong = re.sub(r"raise NotImplementedError\(.*", f"return {first_parameter(text)}", text)
            assert kernel.raised(wrong) is None
            assert (kernel.raised(checker) or ("",))[0] == "CheckFailed", name
            assert kernel.raised(solution) is None
            assert kernel.raised(checker) is None, f"{path.name}: the folded solution of {name} fails its check"
    finally:
        kernel.stop()


def test_the_solution_edition_says_where_the_learners_edition_is():
    for path in edition.lessons():
        title = json.loads(path.read_text())["cells"][0]["source"]
        assert any(line.startswith(edition.SOLUTION_NOTE) and f"lessons/{path.name}" in line for line in title)
