"""One sitting per lesson: the core path, from the title through the exercises and the summary, holds
at most 2,200 words of prose (about 2,000 aimed at); the rest sits after it under "Going further",
still run and tested. Words are counted as the course's review counts them: the Markdown cells'
words before the "Going further" heading, folded help (<details>) left out."""

import json
import re

import pytest
from notebook_cells import NOTEBOOKS, ROOT

CORE_WORDS = 2200
# lessons whose core carries training runs and graded experiments (lessons 6 and 9) may take 2,500
CORE_WORDS_WITH_EXPERIMENTS = {"06_training": 2500, "09_claims": 2500}
# Every lesson is one sitting (the lesson-rewrite issues of this round, and Part II from the start).
ONE_SITTING = [
    "01_patches",
    "02_embeddings",
    "03_attention",
    "04_multi_head",
    "05_encoder",
    "06_training",
    "07_inside_vit",
    "08_real_weights",
    "09_claims",
    "10_backward_by_hand",
    "11_stable_training",
    "12_positions_beyond_grid",
    "13_masked_autoencoder",
    "14_beyond_one_process",
]
GOING_FURTHER = re.compile(r"^## .*going further", re.IGNORECASE | re.MULTILINE)
HEADING = re.compile(r"^## (.*)$", re.MULTILINE)


def markdown_cells(name: str) -> list[str]:
    notebook = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
    return ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "markdown"]


def core_words(cells: list[str]) -> int:
    """The words of the Markdown cells before the "Going further" heading, folded help left out."""
    words = 0
    for text in cells:
        if GOING_FURTHER.search(text):
            break
        words += len(re.findall(r"\w+", re.sub(r"<details>.*?</details>", " ", text, flags=re.S)))
    return words


def test_the_count_stops_at_going_further_and_skips_folded_help():
    cells = [
        "# Title\n\nfour words of prose",
        "<details><summary>Hint</summary>\nnot counted\n</details>two",
        "## Going further\nno",
    ]
    assert core_words(cells) == 5 + 1  # "Title four words of prose", then "two"


def test_every_lesson_is_held_to_one_sitting():
    """A new lesson joins the list (and so the length and order tests) from the start."""
    assert sorted(ONE_SITTING) == [path.stem for path in NOTEBOOKS]


@pytest.mark.parametrize("name", ONE_SITTING)
def test_the_core_path_is_one_sitting(name):
    cells = markdown_cells(name)
    assert any(GOING_FURTHER.search(text) for text in cells), f"{name} has no '## Going further' section"
    words = core_words(cells)
    limit = CORE_WORDS_WITH_EXPERIMENTS.get(name, CORE_WORDS)
    assert words <= limit, f"{name}: {words} words before 'Going further', over {limit}"


@pytest.mark.parametrize("name", ONE_SITTING)
def test_going_further_comes_after_the_exercises_and_the_summary(name):
    headings = [heading for text in markdown_cells(name) for heading in HEADING.findall(text)]
    further = next(i for i, heading in enumerate(headings) if re.search("going further", heading, re.I))
    before = " ".join(headings[:further]).lower()
    assert "your turn" in before and "summary" in before, f"{name}: put them before {headings[further]!r}"
