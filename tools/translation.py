"""The Chinese edition, made from the English lessons and one translation file per lesson.

    python tools/translation.py template notebooks/01_patches.ipynb  # start or refresh its translation file
    python tools/translation.py write [notebooks/NN_topic.ipynb ...]  # write the Chinese notebooks
    python tools/translation.py [check]                              # what is missing, stale or out of date

The English notebook stays the source of every code cell and output. `translations/zh-CN/<stem>.md`
holds, for each Markdown cell (keyed by its nbformat cell id) and for each exercise's two hints,
the Chinese text under a marker that records a hash of the English it translates:

    <!-- cell 5c0ffee1 en:0123456789ab -->
    译文……

    <!-- hint 8badf00d 1 en:ba9876543210 -->
    提示的译文……

`template` writes a marker and the English text for each unit without a translation, and keeps
every translation there is (a stale one keeps its old hash, so that the check names it). `write`
makes `zh-CN/notebooks/<stem>.ipynb` (the solution edition: the English notebook with its Markdown
replaced) and `zh-CN/lessons/<stem>.ipynb` (the learner's edition, as tools/learner_edition.py makes
the English one, with the hints and the fold labels translated). Code, outputs and checker messages
stay English, byte for byte.
"""

import argparse
import copy
import hashlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools import learner_edition as edition  # noqa: E402

LANGUAGE = "zh-CN"
TRANSLATIONS = ROOT / "translations" / LANGUAGE
SOLUTION = ROOT / LANGUAGE / "notebooks"  # the Chinese solution edition
LEARNER = ROOT / LANGUAGE / "lessons"  # the Chinese learner's edition
MARKER = re.compile(r"^<!-- (cell|hint) (\S+)(?: ([12]))? en:([0-9a-f]{12}) -->$", re.MULTILINE)
SOLUTION_NOTE = "> **答案版**"  # the translated title's line that says which edition it is
LEARNER_NOTE = (
    "> **学员版。** 练习由你来写：每道练习下面依次折叠着两条提示和答案，各点一下即可展开。你的答案保存在这份副本里。"  # noqa: RUF001
)
FOLDS = {"Hint 1": "提示 1", "Hint 2": "提示 2", "Solution": "答案"}


def digest(text: str) -> str:
    """The hash a marker records: the first 12 hex digits of the English text's sha256."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:12]


def units(notebook: dict) -> dict[tuple, str]:
    """What a lesson's translation holds, in order: ("cell", id) -> a Markdown cell's English and
    ("hint", id, "1"/"2") -> an exercise's hint (its `# HINT n:` lines joined)."""
    found = {}
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            found["cell", cell["id"]] = edition.source(cell)
        elif edition.is_exercise(cell):
            parts = edition.split_exercise(edition.source(cell))
            for n in ("1", "2"):
                found["hint", cell["id"], n] = parts[f"hint {n}"]
    return found


def marker(key: tuple, english: str) -> str:
    return f"<!-- {' '.join(key)} en:{digest(english)} -->"


def read_translation(path: Path) -> dict[tuple, tuple[str, str]]:
    """key -> (the hash of the English it translates, the translation)."""
    text = path.read_text(encoding="utf-8")
    found, matches = {}, list(MARKER.finditer(text))
    if text[: matches[0].start() if matches else len(text)].strip():
        raise ValueError(f"{path.name}: text before the first marker (each unit starts with <!-- cell ... -->)")
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        key = (match[1], match[2]) + ((match[3],) if match[3] else ())
        if key in found:
            raise ValueError(f"{path.name}: {' '.join(key)} is translated twice")
        found[key] = (match[4], text[match.end() : following.start() if following else len(text)].strip())
    return found


def problems(path: Path) -> list[str]:
    """What keeps a lesson's translation from being whole: units missing, stale (the English has
    changed since), empty, or left over from cells the lesson no longer has."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    file = TRANSLATIONS / f"{path.stem}.md"
    if not file.exists():
        return [f"{path.stem}: no translation file (python tools/translation.py template {path.relative_to(ROOT)})"]
    done, found = read_translation(file), []
    for key, english in units(notebook).items():
        name = f"{path.stem}: {' '.join(key)}"
        if key not in done:
            found.append(f"{name} has no translation")
        elif done[key][0] != digest(english):
            found.append(f"{name} is stale: the English changed since it was translated")
        elif not done[key][1]:
            found.append(f"{name} is empty")
        elif done[key][1] == english.strip() and re.search(r"[A-Za-z]{3}", english):
            found.append(f"{name} is still the English (the template's text, not yet translated)")
    found += [f"{path.stem}: {' '.join(key)} is no longer in the lesson" for key in done.keys() - units(notebook)]
    return found


def template(path: Path) -> Path:
    """Write the lesson's translation file: each unit's translation kept, a new unit's English put
    under its marker for the translator to replace."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    file = TRANSLATIONS / f"{path.stem}.md"
    done = read_translation(file) if file.exists() else {}
    blocks = []
    for key, english in units(notebook).items():
        old_hash, text = done.get(key, (digest(english), english.strip()))
        blocks.append(f"<!-- {' '.join(key)} en:{old_hash} -->\n{text}\n")
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text("\n".join(blocks), encoding="utf-8")
    return file


def _retarget(title: str, stem: str) -> str:
    """The Chinese title's badges and edition link point at the Chinese learner's edition."""
    # only the badges' addresses: the relative link to ../lessons/ already lands in zh-CN/lessons/
    title = re.sub(rf"(https://\S*?)/lessons/{stem}\.ipynb", rf"\1/{LANGUAGE}/lessons/{stem}.ipynb", title)
    return title.replace(f"lab/tree/lessons/{stem}.ipynb", f"lab/tree/{LANGUAGE}/lessons/{stem}.ipynb")


def solution_edition(notebook: dict, stem: str, done: dict) -> dict:
    """The Chinese solution edition: every Markdown cell translated, everything else the English."""
    zh = copy.deepcopy(notebook)
    for index, cell in enumerate(zh["cells"]):
        if cell["cell_type"] == "markdown":
            text = done["cell", cell["id"]][1]
            cell["source"] = edition.as_lines(_retarget(text, stem) if index == 0 else text)
    zh["metadata"]["language_info_translated"] = LANGUAGE
    return zh


def learner_edition(notebook: dict, stem: str, done: dict) -> dict:
    """The Chinese learner's edition: the English one's cells, its Markdown translated and each
    exercise's folded help made from the translated hints and the English solution."""
    zh = solution_edition(notebook, stem, done)
    title = edition.source(zh["cells"][0])
    if SOLUTION_NOTE not in title:
        raise ValueError(f"{stem}: the translated title has no line starting with {SOLUTION_NOTE!r}")
    zh["cells"][0]["source"] = edition.as_lines(
        "\n".join(edition.SOLUTION_NOTE if line.startswith(SOLUTION_NOTE) else line for line in title.split("\n"))
    )
    learner = edition.learner_edition(zh, f"{stem}.ipynb")
    learner["cells"][0]["source"] = edition.as_lines(
        "\n".join(
            LEARNER_NOTE if line.startswith(edition.LEARNER_NOTE[:20]) else line
            for line in edition.source(learner["cells"][0]).split("\n")
        )
    )
    exercises = {cell["id"]: cell for cell in zh["cells"] if edition.is_exercise(cell)}
    for cell in learner["cells"]:
        if "exercise-help" in cell["metadata"].get("tags", []):
            key = cell["id"].removesuffix("-help")
            parts = edition.split_exercise(edition.source(exercises[key]))
            parts |= {f"hint {n}": done["hint", key, n][1] for n in ("1", "2")}
            text = edition.help_markdown(parts)
            for english, chinese in FOLDS.items():
                text = text.replace(f"<summary>{english}</summary>", f"<summary>{chinese}</summary>")
            cell["source"] = edition.as_lines(text)
    learner["metadata"]["vit_from_scratch"] |= {
        "language": LANGUAGE,
        "translation": f"translations/{LANGUAGE}/{stem}.md",
    }
    return learner


def editions(path: Path) -> dict[Path, str]:
    """{where: text} of the two Chinese notebooks of the English lesson at `path`."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    if found := problems(path):
        raise ValueError("\n".join(found))
    done = read_translation(TRANSLATIONS / f"{path.stem}.md")
    made = {
        SOLUTION / path.name: solution_edition(notebook, path.stem, done),
        LEARNER / path.name: learner_edition(notebook, path.stem, done),
    }
    return {where: json.dumps(book, indent=1, ensure_ascii=False) + "\n" for where, book in made.items()}


def translated() -> list[Path]:
    """The English lessons that have a translation file."""
    return [ROOT / "notebooks" / f"{file.stem}.ipynb" for file in sorted(TRANSLATIONS.glob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", nargs="?", default="check", choices=["template", "write", "check"])
    parser.add_argument("notebooks", nargs="*", type=Path, help="English lessons (default: every translated one)")
    args = parser.parse_args(argv)
    paths = [path.resolve() for path in args.notebooks] or translated()
    if args.action == "template":
        for path in paths:
            print(f"written: {template(path).relative_to(ROOT)}")
        return 0
    found = []
    for path in paths:
        try:
            made = editions(path)
        except ValueError as error:
            found.append(str(error))
            continue
        for where, text in made.items():
            current = where.read_text(encoding="utf-8") if where.exists() else None
            if args.action == "write" and current != text:
                where.parent.mkdir(parents=True, exist_ok=True)
                where.write_text(text, encoding="utf-8")
                print(f"written: {where.relative_to(ROOT)}")
            elif args.action == "check" and current != text:
                found.append(f"{where.relative_to(ROOT)} is out of date (python tools/translation.py write)")
    print("\n".join(found) or "the Chinese edition is whole and up to date")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
