"""Learner copies of the lessons for a workshop: `make exercises` writes them to exercises/.

In every exercise cell the solution, between `# BEGIN SOLUTION` and `# END SOLUTION`, becomes a
`raise NotImplementedError` that carries the exercise's `# HINT:` line, and the cell's outputs
are cleared; everything else is kept as it is. Run: python tools/exercises.py [out_dir] [--force]

A learner's copy is never overwritten: copies that differ from a fresh one, and symbolic links
(which could point anywhere), stop the run with their names, unless --force (`make exercises
FORCE=1`), which first moves them to exercises/backups/<date>_<time>/. Each copy is written whole
or not at all, and out_dir is never the lessons' own folder.
"""

import argparse
import contextlib
import copy
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "notebooks"
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
    """Some learner copies differ from fresh ones (a learner's answers, an older lesson) or are symbolic links:
    nothing was written."""


def read_lesson(path: Path) -> dict:
    """A lesson's notebook as JSON; a ValueError naming the file when it is not valid JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as error:  # JSONDecodeError, or not UTF-8
        raise ValueError(
            f"{_shown(path)} is not valid JSON ({error}): a lesson cut off or edited by hand? "
            "restore it with git checkout"
        ) from None


def copy_text(path: Path) -> str:
    """The text of the learner copy of the lesson at `path`; a ValueError naming the lesson if it is broken."""
    lesson = read_lesson(path)
    try:
        blanked = learner_copy(lesson)
    except ValueError as error:  # unmatched markers, an exercise without a hint
        raise ValueError(f"{_shown(path)}: {error}") from None
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{_shown(path)} is not a Jupyter notebook ({type(error).__name__}: {error})") from None
    return json.dumps(blanked, indent=1, ensure_ascii=False) + "\n"


def fresh_copies(notebooks: list[Path] | None = None) -> dict[str, str]:
    """{file name: the text of its learner copy} for every lesson (or the given notebooks)."""
    return {path.name: copy_text(path) for path in notebooks or sorted(LESSONS.glob("*.ipynb"))}


def check_out_dir(out_dir: Path, names: list[str], notebooks: list[Path] | None = None) -> None:
    """Refuse an out_dir that is the lessons' folder, holds lessons with their solutions, or is a file,
    and a copy's place taken by a folder."""
    shown = _shown(out_dir)
    if out_dir.resolve() in {LESSONS.resolve(), *(Path(path).resolve().parent for path in notebooks or [])}:
        raise ValueError(
            f"out_dir {shown} is the lessons' own folder: the learner copies go elsewhere, e.g. exercises/"
        )
    if (out_dir.exists() or out_dir.is_symlink()) and not out_dir.is_dir():
        raise NotADirectoryError(f"out_dir {shown} is a file, not a folder: name a folder for the learner copies")
    for name in names:
        target = out_dir / name
        if target.is_symlink():
            continue  # a learner's file: differing_copies names it
        if target.is_dir():
            raise IsADirectoryError(f"{_shown(target)} is a folder, where a learner copy goes: move it away first")
        if target.is_file() and BEGIN.encode() in target.read_bytes():
            raise ValueError(
                f"out_dir {shown} holds lessons with their solutions ({name} has '{BEGIN}'), not learner copies: "
                "the learner copies go elsewhere, e.g. exercises/"
            )


def differing_copies(out_dir: Path, copies: dict[str, str]) -> list[str]:
    """The names of the copies in out_dir that a fresh one would replace: those that differ from the
    fresh `copies`, and symbolic links (never written through: they could point anywhere)."""
    targets = {name: Path(out_dir) / name for name in copies}
    return [
        name
        for name, target in targets.items()
        if target.is_symlink() or (target.exists() and target.read_bytes() != copies[name].encode())
    ]


def plan(out_dir: Path, notebooks: list[Path] | None = None) -> tuple[dict[str, str], list[str]]:
    """The fresh copies and the names of the copies in out_dir they would replace, once out_dir and
    the lessons are checked (ValueError or OSError naming the problem; nothing is written)."""
    out_dir = Path(out_dir)
    check_out_dir(out_dir, [], notebooks)  # before the lessons are read: the most costly slip first
    copies = fresh_copies(notebooks)
    check_out_dir(out_dir, list(copies), notebooks)
    return copies, differing_copies(out_dir, copies)


def refusal(out_dir: Path, changed: list[str]) -> str:
    """LearnerWorkExists's message: the copies that would be replaced, and how to replace them anyway."""
    edited = [name for name in changed if not (out_dir / name).is_symlink()]
    links = [out_dir / name for name in changed if (out_dir / name).is_symlink()]
    lines = ["not writing any learner copy:"]
    if edited:
        lines[0] += " these differ from a fresh copy (your answers, or an older lesson) and would be overwritten:"
        lines += [f"  {_shown(out_dir / name)}" for name in edited]
    lines += [
        f"{_shown(link)} is a symbolic link (to {os.readlink(link)}): not writing through it; remove it or use --force"
        for link in links
    ]
    lines.append(
        "Your work is safe. To replace them anyway, run `make exercises FORCE=1` "
        f"(or `python tools/exercises.py {_shown(out_dir)} --force`): they are first moved to "
        f"{_shown(out_dir / 'backups')}/<date>_<time>/."
    )
    return "\n".join(lines)


def backup_folder(out_dir: Path) -> Path:
    """A new, empty folder exercises/backups/<date>_<time>[-n] for copies about to be replaced; two
    runs in the same second get two folders."""
    parent = Path(out_dir) / "backups"
    if (parent.exists() or parent.is_symlink()) and not parent.is_dir():
        raise FileExistsError(f"{_shown(parent)} is a file, not a folder for the replaced copies: rename or remove it")
    parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d_%H%M%S")
    for n in range(1, 1000):
        folder = parent / (stamp if n == 1 else f"{stamp}-{n}")
        with contextlib.suppress(FileExistsError):  # another run took this name: the next one
            folder.mkdir()
            return folder
    raise FileExistsError(f"{_shown(parent)}: 999 backups of {stamp} exist already; remove some")


def move_aside(out_dir: Path, names: list[str], backups: Path) -> None:
    """Move the copies `names` (files, or symbolic links themselves) from out_dir into `backups`."""
    backups.mkdir(parents=True, exist_ok=True)
    for name in names:
        kept = backups / name
        if kept.exists() or kept.is_symlink():
            raise FileExistsError(f"{_shown(kept)} exists already: not replacing a backup; name another folder")
        with contextlib.suppress(FileNotFoundError):  # another run moved it first
            (out_dir / name).rename(kept)


def write_exercises(
    out_dir: Path, notebooks: list[Path] | None = None, *, force: bool = False, backups: Path | None = None
) -> list[Path]:
    """Write a learner copy of every lesson into out_dir; returns the files written.

    Missing copies are written and copies identical to a fresh one are left alone. A copy that
    differs (a learner's answers, or a copy of an older lesson) or is a symbolic link is never
    overwritten: without `force` nothing is written and LearnerWorkExists names those files; with
    `force` they are first moved to `backups` (by default a new exercises/backups/<date>_<time>/),
    then replaced. Each copy is written whole or not at all.
    """
    from utils.files import write_bytes_atomically  # here, not at the top: utils imports torch

    out_dir = Path(out_dir)
    copies, changed = plan(out_dir, notebooks)
    if changed and not force:
        raise LearnerWorkExists(refusal(out_dir, changed))
    try:
        if changed:
            backups = backups or backup_folder(out_dir)
            move_aside(out_dir, changed, backups)
        out_dir.mkdir(parents=True, exist_ok=True)
        written = [out_dir / name for name in copies if not (out_dir / name).exists()]
        for target in written:
            write_bytes_atomically(target, copies[target.name].encode())  # bytes: the same file on every system
    except PermissionError as error:
        raise PermissionError(
            f"cannot write in {_shown(out_dir)}: permission denied (a read-only folder?): "
            "make it writable, or name another out_dir"
        ) from error
    finally:
        if backups is not None:
            with contextlib.suppress(OSError):  # only when empty: nothing was moved there after all
                backups.rmdir()
    return written


def _shown(path: Path) -> Path:
    """The path relative to the repository when it is inside it, for messages (a link is not followed)."""
    path = Path(os.path.abspath(path))
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def main(argv: list[str] | None = None) -> int:
    """`python tools/exercises.py [out_dir] [--force]`; returns the exit status (1: refused)."""
    parser = argparse.ArgumentParser(description="Write learner copies of the lessons, solutions blanked.")
    parser.add_argument("out_dir", nargs="?", type=Path, default=ROOT / "exercises")
    parser.add_argument("--force", action="store_true", help="back up the copies that differ, then replace them")
    args = parser.parse_args(argv)
    backups = None
    try:
        copies, changed = plan(args.out_dir)
        if changed and args.force:
            backups = backup_folder(args.out_dir)
        written = write_exercises(args.out_dir, force=args.force, backups=backups)
    except (ValueError, OSError) as error:  # LearnerWorkExists too: a refusal, or a lesson or folder to fix
        print(error, file=sys.stderr)
        return 1
    for name in copies:
        count = sum(map(is_exercise, read_lesson(LESSONS / name)["cells"]))
        target = args.out_dir / name
        state = "unchanged" if target not in written else "replaced" if name in changed else "written"
        print(f"{_shown(target)}: {count} exercises blanked, {state}")
    if backups is not None and backups.is_dir():
        print(f"the old copies of the {len(changed)} replaced are kept in {_shown(backups)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
