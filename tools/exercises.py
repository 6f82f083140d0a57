"""Learner copies of the lessons for a workshop: `make exercises` writes them to exercises/.

In every exercise cell the solution, between `# BEGIN SOLUTION` and `# END SOLUTION`, becomes a
`raise NotImplementedError` that carries the exercise's `# HINT:` line, and the cell's outputs
are cleared; everything else is kept as it is. Run: python tools/exercises.py [out_dir] [--force]

A learner's copy is never overwritten: copies that differ from a fresh one stop the run with
their names, unless --force (`make exercises FORCE=1`), which first moves them to
exercises/backups/<date>_<time>/.
"""

import argparse
import copy
import json
import re
import sys
import time
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


class LearnerWorkExists(FileExistsError):
    """Some learner copies differ from fresh ones (a learner's answers, or an older lesson): nothing was written."""


def fresh_copies(notebooks: list[Path] | None = None) -> dict[str, str]:
    """{file name: the text of its learner copy} for every lesson (or the given notebooks)."""
    return {
        path.name: json.dumps(learner_copy(json.loads(path.read_text(encoding="utf-8"))), indent=1, ensure_ascii=False)
        + "\n"
        for path in notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    }


def backup_folder(out_dir: Path) -> Path:
    """A new folder exercises/backups/<date>_<time>[-n] for copies that are about to be replaced."""
    stamp = time.strftime("%Y-%m-%d_%H%M%S")
    folder, n = out_dir / "backups" / stamp, 1
    while folder.exists():
        n += 1
        folder = out_dir / "backups" / f"{stamp}-{n}"
    return folder


def differing_copies(out_dir: Path, copies: dict[str, str]) -> list[str]:
    """The names of the copies in out_dir that exist and differ from the fresh `copies`."""
    targets = {name: Path(out_dir) / name for name in copies}
    return [
        name for name, target in targets.items() if target.exists() and target.read_bytes() != copies[name].encode()
    ]


def write_exercises(
    out_dir: Path, notebooks: list[Path] | None = None, *, force: bool = False, backups: Path | None = None
) -> list[Path]:
    """Write a learner copy of every lesson into out_dir; returns the files written.

    Missing copies are written and copies identical to a fresh one are left alone. A copy that
    differs (a learner's answers, or a copy of an older lesson) is never overwritten: without
    `force` nothing is written and LearnerWorkExists names those files; with `force` they are
    first moved to `backups` (by default a new exercises/backups/<date>_<time>/), then replaced.
    """
    out_dir = Path(out_dir)
    copies = fresh_copies(notebooks)
    changed = differing_copies(out_dir, copies)
    if changed and not force:
        listing = "\n".join(f"  {_shown(out_dir / name)}" for name in changed)
        raise LearnerWorkExists(
            "not writing any learner copy: these differ from a fresh copy (your answers, or an older lesson) "
            f"and would be overwritten:\n{listing}\n"
            "Your work is safe. To replace them anyway, run `make exercises FORCE=1` "
            f"(or `python tools/exercises.py {_shown(out_dir)} --force`): they are first moved to "
            f"{_shown(out_dir / 'backups')}/<date>_<time>/."
        )
    if changed:
        backups = backups or backup_folder(out_dir)
        backups.mkdir(parents=True)
        for name in changed:
            (out_dir / name).rename(backups / name)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / name for name in copies if not (out_dir / name).exists()]
    for target in written:
        target.write_bytes(copies[target.name].encode())  # bytes: the same file on every system
    return written


def _shown(path: Path) -> Path:
    """The path relative to the repository when it is inside it, for messages."""
    path = Path(path).resolve()
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def main(argv: list[str] | None = None) -> int:
    """`python tools/exercises.py [out_dir] [--force]`; returns the exit status (1: refused)."""
    parser = argparse.ArgumentParser(description="Write learner copies of the lessons, solutions blanked.")
    parser.add_argument("out_dir", nargs="?", type=Path, default=ROOT / "exercises")
    parser.add_argument("--force", action="store_true", help="back up the copies that differ, then replace them")
    args = parser.parse_args(argv)
    copies, backups = fresh_copies(), backup_folder(args.out_dir)
    changed = differing_copies(args.out_dir, copies)
    try:
        written = write_exercises(args.out_dir, force=args.force, backups=backups)
    except LearnerWorkExists as error:
        print(error, file=sys.stderr)
        return 1
    for name in copies:
        count = sum(map(is_exercise, json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))["cells"]))
        target = args.out_dir / name
        state = "unchanged" if target not in written else "replaced" if name in changed else "written"
        print(f"{_shown(target)}: {count} exercises blanked, {state}")
    if changed:
        print(f"the old copies of the {len(changed)} replaced are kept in {_shown(backups)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
