"""Your own copies of the learner's edition (lessons/): `make lab` writes them into my-lessons/ and
opens them there; `make exercises` writes them into exercises/ for a workshop.

Run: python tools/exercises.py [out_dir] [--keep | --force] [--edition zh-CN]

A copy is never overwritten. Missing copies are written; a copy identical to a fresh one is left
alone. A copy that differs (a learner's answers, or a copy of an older lesson) or is a symbolic
link (which could point anywhere) stops the run with its name, unless:
- --keep (`make lab`): leave it as it is, and list the lessons that changed in the course since
  that copy was made (each copy records the lesson it was made from);
- --force (`make lab FORCE=1`, `make exercises FORCE=1`): move it to <out_dir>/backups/<date>_<time>/
  first, then write a fresh copy.
Each copy is written whole or not at all, and out_dir is never one of the course's own folders.
"""

import argparse
import contextlib
import hashlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout, the course library needs no install
EDITIONS = {"en": ROOT / "lessons", "zh-CN": ROOT / "zh-CN" / "lessons"}  # the learner's editions, by language
LESSONS = EDITIONS["en"]  # what the copies are made of (--edition chooses)
COURSE_FOLDERS = (ROOT / "notebooks", ROOT / "zh-CN" / "notebooks", *EDITIONS.values())  # never an out_dir
BEGIN = "# BEGIN SOLUTION"  # in a notebook of the solution edition only


def fingerprint(text: str) -> str:
    """The sha256 of a lesson's text: a copy records the one it was made from."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
    """The text of a copy of the learner's-edition lesson at `path`: the lesson, with the fingerprint
    of its text in the notebook's metadata (vit_from_scratch.copied_from)."""
    text = path.read_text(encoding="utf-8")
    lesson = read_lesson(path)
    if not isinstance(lesson, dict) or not isinstance(lesson.get("metadata"), dict):
        raise ValueError(f"{_shown(path)} is not a Jupyter notebook: restore it with git checkout")
    lesson["metadata"].setdefault("vit_from_scratch", {})["copied_from"] = fingerprint(text)
    return json.dumps(lesson, indent=1, ensure_ascii=False) + "\n"


def fresh_copies(notebooks: list[Path] | None = None) -> dict[str, str]:
    """{file name: the text of its copy} for every lesson of the learner's edition (or the given notebooks)."""
    return {path.name: copy_text(path) for path in notebooks or sorted(LESSONS.glob("*.ipynb"))}


def changed_upstream(out_dir: Path, copies: dict[str, str]) -> list[str]:
    """The names of the copies in out_dir made from another version of their lesson than today's."""
    changed = []
    for name, fresh in copies.items():
        target = Path(out_dir) / name
        if not target.is_file() or target.is_symlink():
            continue
        try:
            made_from = json.loads(target.read_text(encoding="utf-8"))["metadata"]["vit_from_scratch"]["copied_from"]
        except (ValueError, KeyError, TypeError):  # not a notebook any more, or no record: say so
            made_from = None
        if made_from != json.loads(fresh)["metadata"]["vit_from_scratch"]["copied_from"]:
            changed.append(name)
    return changed


def check_out_dir(out_dir: Path, names: list[str], notebooks: list[Path] | None = None) -> None:
    """Refuse an out_dir that is the lessons' folder, holds lessons with their solutions, or is a file,
    and a copy's place taken by a folder."""
    shown = _shown(out_dir)
    own = {*(folder.resolve() for folder in COURSE_FOLDERS), *(Path(path).resolve().parent for path in notebooks or [])}
    if out_dir.resolve() in own:
        raise ValueError(
            f"out_dir {shown} is one of the course's own folders: the copies go elsewhere, e.g. my-lessons/"
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
    out_dir: Path,
    notebooks: list[Path] | None = None,
    *,
    force: bool = False,
    keep: bool = False,
    backups: Path | None = None,
) -> list[Path]:
    """Write a copy of every lesson of the learner's edition into out_dir; returns the files written.

    Missing copies are written and copies identical to a fresh one are left alone. A copy that
    differs (a learner's answers, or a copy of an older lesson) or is a symbolic link is never
    overwritten: with `keep` it is left as it is; with `force` it is first moved to `backups` (by
    default a new <out_dir>/backups/<date>_<time>/), then replaced; otherwise nothing is written and
    LearnerWorkExists names those files. Each copy is written whole or not at all.
    """
    from utils.files import write_bytes_atomically  # here, not at the top: utils imports torch

    out_dir = Path(out_dir)
    copies, changed = plan(out_dir, notebooks)
    if changed and keep and not force:
        copies, changed = {name: text for name, text in copies.items() if name not in changed}, []
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
    """`python tools/exercises.py [out_dir] [--keep | --force]`; returns the exit status (1: refused)."""
    parser = argparse.ArgumentParser(description="Write your own copies of the lessons (the learner's edition).")
    parser.add_argument("out_dir", nargs="?", type=Path, default=ROOT / "exercises")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--keep", action="store_true", help="leave copies that differ as they are (make lab)")
    mode.add_argument("--force", action="store_true", help="back up the copies that differ, then replace them")
    parser.add_argument(
        "--edition", choices=list(EDITIONS), default="en", help="English (lessons/) or Chinese (zh-CN/lessons/)"
    )
    args = parser.parse_args(argv)
    global LESSONS
    LESSONS = EDITIONS[args.edition]
    backups = None
    try:
        copies, changed = plan(args.out_dir)
        if changed and args.force:
            backups = backup_folder(args.out_dir)
        written = write_exercises(args.out_dir, force=args.force, keep=args.keep, backups=backups)
    except (ValueError, OSError) as error:  # LearnerWorkExists too: a refusal, or a lesson or folder to fix
        print(error, file=sys.stderr)
        return 1
    for target in written:
        print(f"{_shown(target)}: {'replaced' if target.name in changed else 'written'}")
    if backups is not None and backups.is_dir():
        print(f"the old copies of the {len(changed)} replaced are kept in {_shown(backups)}")
    if args.keep:
        folder = _shown(args.out_dir)
        print(f"{folder}/ holds your copies of the lessons: git ignores it, so `git pull` never touches them")
        behind = changed_upstream(args.out_dir, copies)
        if behind:
            print(
                f"changed in the course since your copy: {', '.join(behind)}. See what is new in lessons/, or "
                f"take fresh copies with `make lab FORCE=1` (yours are kept in {_shown(args.out_dir)}/backups/)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
