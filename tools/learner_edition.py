"""The learner's edition: lessons/NN_topic.ipynb, made from the solution edition in notebooks/.

Run: python tools/learner_edition.py [--check] [notebooks/NN_topic.ipynb ...]   (make learner-edition)
  --check  change nothing; list the lessons whose learner's edition is out of date (exit 1)
  names    only those lessons (default: every lesson, and the editions whose lesson is gone are removed)

The solution edition stays the source (instructors, nbval, the tests). In the learner's edition
every exercise cell of notebooks/ becomes three cells:
- the exercise (tag `exercise`): the cell's code up to its check, each solution region between
  `# BEGIN SOLUTION` and `# END SOLUTION` replaced by a stub that raises NotImplementedError
  ("not written yet");
- the help (tag `exercise-help`, Markdown): hint 1 (the `# HINT 1:` lines: the idea), hint 2
  (the `# HINT 2:` lines: closer) and the whole solution, each folded in a <details> block that
  JupyterLab, Colab, GitHub and the site all show closed;
- the check (tag `exercise-check`, and `raises-exception` so that Run All goes on past a check
  that fails): the cell's top-level lines from its first `check_...(` call on.
The title cell's "Solution edition" line becomes the learner's one; every other cell is kept,
outputs included (the cells after an exercise never read the learner's function: a test checks).
"""

import argparse
import copy
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout, the course library needs no install
SOURCE = ROOT / "notebooks"  # the solution edition
EDITION = ROOT / "lessons"  # the learner's edition
BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
HINT = re.compile(r"^[ \t]*# HINT ([12]):[ \t]?(.*)$")
SOLUTION_NOTE = "> **Solution edition**"  # the line of a title cell that says which edition it is
LEARNER_NOTE = (
    "> **Learner's edition.** The exercises are yours to write: under each one, two hints and then the "
    "solution fold out, one click each. Your answers stay in this copy."
)
STUB = '{indent}raise NotImplementedError("not written yet")  # write your code here'
TAGS = {"exercise": ["exercise"], "help": ["exercise-help"], "check": ["exercise-check", "raises-exception"]}


def source(cell: dict) -> str:
    """A cell's source as one string (notebooks store it as a list of lines)."""
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def as_lines(text: str) -> list[str]:
    """A source string as a notebook stores it: lines, each but the last ending in a newline."""
    return text.splitlines(keepends=True)


def is_exercise(cell: dict) -> bool:
    return cell["cell_type"] == "code" and BEGIN in source(cell)


class ExerciseError(ValueError):
    """An exercise cell the tool cannot split: the message says what is missing."""


def split_exercise(text: str) -> dict[str, str]:
    """An exercise cell's source -> {"stub", "hint 1", "hint 2", "solution", "check"}.

    "solution" is the cell's code up to its check with the hints and markers dropped; "stub" the
    same with each solution region replaced by STUB; "check" the top-level lines from the first
    line that starts with `check_` after the last solution region.
    """
    lines = text.split("\n")
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    begins = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    if not begins or len(begins) != len(ends) or any(b >= e for b, e in zip(begins, ends)):
        raise ExerciseError(f"unmatched {BEGIN!r} / {END!r} markers")
    if any(e >= b for e, b in zip(ends, begins[1:])):
        raise ExerciseError(f"nested {BEGIN!r} regions")
    check = next((i for i in range(ends[-1], len(lines)) if lines[i].startswith("check_")), None)
    if check is None:
        raise ExerciseError("no check: a top-level line `check_...(your_function)` after the solution")
    hints = {"hint 1": [], "hint 2": []}
    for line in lines[:check]:
        if match := HINT.match(line):
            hints[f"hint {match[1]}"].append(match[2].strip())
    for label, words in hints.items():
        if not any(words):
            raise ExerciseError(f"no `# {label.upper()}:` line (each exercise has two hints: the idea, then closer)")
    kept = [line for line in lines[:check] if not HINT.match(line)]
    solution = [line for line in kept if line.strip() not in (BEGIN, END)]
    stub, inside = [], False
    for line in kept:
        if line.strip() == BEGIN:
            indent = line[: len(line) - len(line.lstrip())]
            _enclosing_function(stub)  # a stub must sit in the function the learner writes
            stub.append(STUB.format(indent=indent))
            inside = True
        elif line.strip() == END:
            inside = False
        elif not inside:
            stub.append(line)
    return {
        "stub": "\n".join(stub).strip("\n"),
        "hint 1": " ".join(hints["hint 1"]).strip(),
        "hint 2": " ".join(hints["hint 2"]).strip(),
        "solution": "\n".join(solution).strip("\n"),
        "check": "\n".join(lines[check:]).strip("\n"),
    }


def _enclosing_function(lines: list[str]) -> str:
    """The name of the last function defined in `lines` (the one a solution region sits in)."""
    for line in reversed(lines):
        if match := re.match(r"\s*def (\w+)\(", line):
            return match[1]
    raise ExerciseError(f"a {BEGIN!r} region outside a function: the stub must sit in the function to write")


def help_markdown(parts: dict[str, str]) -> str:
    """The folded help under an exercise: hint 1, hint 2, the solution."""
    folded = [
        f"<details><summary>Hint 1</summary>\n\n{parts['hint 1']}\n\n</details>",
        f"<details><summary>Hint 2</summary>\n\n{parts['hint 2']}\n\n</details>",
        f"<details><summary>Solution</summary>\n\n```python\n{parts['solution']}\n```\n\n</details>",
    ]
    return "\n".join(folded)


def code_cell(text: str, tags: list[str], cell_id: str) -> dict:
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": cell_id,
        "metadata": {"tags": list(tags)},
        "outputs": [],
        "source": as_lines(text),
    }


def learner_edition(notebook: dict, name: str) -> dict:
    """The learner's edition of the solution notebook `notebook` (its file name `name`, for messages)."""
    notebook = copy.deepcopy(notebook)
    title = source(notebook["cells"][0])
    if SOLUTION_NOTE not in title:
        raise ExerciseError(f"{name}: its title cell has no line starting with {SOLUTION_NOTE!r}")
    title = "\n".join(LEARNER_NOTE if line.startswith(SOLUTION_NOTE) else line for line in title.split("\n"))
    notebook["cells"][0]["source"] = as_lines(title)
    cells = []
    for index, cell in enumerate(notebook["cells"]):
        if not is_exercise(cell):
            cells.append(cell)
            continue
        try:
            parts = split_exercise(source(cell))
        except ExerciseError as error:
            raise ExerciseError(f"{name}, cell {index}: {error}") from None
        key = cell.get("id", f"cell-{index}")  # the new cells' ids, made from the exercise cell's (nbformat 4.5)
        help_text = as_lines(help_markdown(parts))
        help_cell = {
            "cell_type": "markdown",
            "id": f"{key}-help",
            "metadata": {"tags": TAGS["help"]},
            "source": help_text,
        }
        cells += [
            code_cell(parts["stub"], TAGS["exercise"], key),
            help_cell,
            code_cell(parts["check"], TAGS["check"], f"{key}-check"),
        ]
    notebook["cells"] = cells
    notebook["metadata"]["vit_from_scratch"] = {"edition": "learner", "made_from": f"notebooks/{name}"}
    return notebook


def edition_text(path: Path) -> str:
    """The text of the learner's edition of the solution notebook at `path`."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ExerciseError(f"{path.name} is not valid JSON ({error}): restore it with git checkout") from None
    return json.dumps(learner_edition(notebook, path.name), indent=1, ensure_ascii=False) + "\n"


def lessons() -> list[Path]:
    """The solution notebooks, in order."""
    return sorted(SOURCE.glob("[0-9][0-9]_*.ipynb"))


def stale(only: list[str] | None = None) -> list[str]:
    """The names of the lessons whose learner's edition is missing or differs from a fresh one, and
    the learner's-edition files whose lesson is gone; with `only` (lesson file names), those lessons'."""
    names = [path.name for path in lessons()]
    if only is not None:
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise ExerciseError(f"no such lesson in notebooks/: {', '.join(unknown)}")
        names = [name for name in names if name in only]
    out = [name for name in names if _read(EDITION / name) != edition_text(SOURCE / name)]
    if only is not None:
        return out
    return out + sorted(path.name for path in EDITION.glob("*.ipynb") if path.name not in names)


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.is_file() else None


def write(only: list[str] | None = None) -> list[str]:
    """Write every lesson's learner's edition, or those of `only` (each whole or not at all); remove
    those whose lesson is gone. Returns the names written or removed."""
    from utils.files import write_text_atomically  # here, not at the top: utils imports torch

    changed = stale(only)
    EDITION.mkdir(exist_ok=True)
    for name in changed:
        if (SOURCE / name).is_file():
            write_text_atomically(EDITION / name, edition_text(SOURCE / name))
        else:
            (EDITION / name).unlink()
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; list the lessons out of date (exit 1)")
    parser.add_argument("lessons", nargs="*", type=Path, help="only these lessons (default: every lesson)")
    args = parser.parse_args(argv)
    only = [path.name for path in args.lessons] or None
    try:
        if args.check:
            out = stale(only)
            for name in out:
                print(f"out of date: lessons/{name} (run make learner-edition)")
            return 1 if out else 0
        for name in write(only):
            print(f"written: lessons/{name}")
    except ExerciseError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
