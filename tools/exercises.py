"""Learner copies of the lessons for a workshop: `make exercises` writes them to exercises/.

In every exercise cell the solution, between `# BEGIN SOLUTION` and `# END SOLUTION`, becomes a
`raise NotImplementedError` that carries the exercise's `# HINT:` line, and the cell's outputs
are cleared; everything else is kept as it is. Run: python tools/exercises.py [out_dir]
"""

import copy
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END, HINT = "# BEGIN SOLUTION", "# END SOLUTION", "# HINT:"


def source(cell: dict) -> str:
    """A cell's source as one string (notebooks store it as a list of lines)."""
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def is_exercise(cell: dict) -> bool:
    return cell["cell_type"] == "code" and BEGIN in source(cell)


def replace_solutions(text: str, body: str) -> str:
    """Replace every solution region of a cell's source with `body`, a format string that may
    use {indent} (the region's indentation) and {message} (the cell's `# HINT:` text as a string
    literal); the hint line itself is dropped.

    Raises ValueError for unmatched markers or an exercise without a hint.
    """
    hints = re.findall(rf"^\s*{re.escape(HINT)}\s*(.+)$", text, flags=re.MULTILINE)
    if not hints:
        raise ValueError(f"an exercise without a '{HINT} ...' line:\n{text}")
    pattern = rf"^([ \t]*){re.escape(BEGIN)}\n.*?^[ \t]*{re.escape(END)}[ \t]*$"
    regions = len(re.findall(pattern, text, flags=re.MULTILINE | re.DOTALL))
    if regions == 0 or regions != text.count(BEGIN) or regions != text.count(END):
        raise ValueError(f"unmatched {BEGIN!r} / {END!r} markers:\n{text}")
    message = json.dumps(f"Hint: {hints[0].strip()}", ensure_ascii=False)  # a valid Python string literal
    replace = lambda match: body.format(indent=match[1], message=message)  # noqa: E731
    text = re.sub(pattern, replace, text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(rf"^[ \t]*{re.escape(HINT)}.*\n", "", text, flags=re.MULTILINE)  # the hint is in the message now


BLANK = "{indent}raise NotImplementedError({message})  # replace this line with your code"


def learner_copy(notebook: dict) -> dict:
    """The notebook with every solution blanked (and those cells' outputs cleared)."""
    notebook = copy.deepcopy(notebook)
    for cell in notebook["cells"]:
        if is_exercise(cell):
            cell["source"] = replace_solutions(source(cell), BLANK)
            cell["outputs"], cell["execution_count"] = [], None
    return notebook


def write_exercises(out_dir: Path, notebooks: list[Path] | None = None) -> list[Path]:
    """Write a learner copy of every lesson into out_dir; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in notebooks or sorted((ROOT / "notebooks").glob("*.ipynb")):
        notebook = learner_copy(json.loads(path.read_text()))
        target = out_dir / path.name
        target.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
        written.append(target)
    return written


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "exercises"
    for path in write_exercises(out):
        count = sum(map(is_exercise, json.loads((ROOT / "notebooks" / path.name).read_text())["cells"]))
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {count} exercises blanked")
