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

The README and the learner-facing sections of the instructor guide are translated the same way,
a section (a heading and the text under it) at a time: `README.zh-CN.md` and
`docs/instructor-guide.zh-CN.md` hold each section's Chinese under a marker with the hash of the
English section, `<!-- section <key> en:<sha12> -->`, the key being the English heading's anchor.
The check names a section missing, stale or untranslated, and one whose commands or links differ
from the English (a lesson's link leads to the Chinese lesson, zh-CN/lessons/).
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
# The pages translated a section at a time: English page -> (Chinese page, the sections it must translate; None: all)
PAGES = {
    "README.md": ("README.zh-CN.md", None),
    "docs/instructor-guide.md": (
        "docs/instructor-guide.zh-CN.md",
        [
            "instructor-guide--vit-from-scratch",
            "who-it-is-for",
            "what-learners-should-know-beforehand",
            "what-each-lesson-assumes",
            "lessons-at-a-glance",
        ],
    ),
}
SECTION_MARKER = re.compile(r"^<!-- section (\S+) en:([0-9a-f]{12}) -->$", re.MULTILINE)
HEADING = re.compile(r"^#{1,6} (.+)$")
LINK = re.compile(r"\]\(([^)\s]+)\)")


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


def marked(path: Path, pattern: re.Pattern) -> list[tuple[re.Match, str]]:
    """A translation file's units in order: (the marker, the text under it); text before the first
    marker is refused."""
    text = path.read_text(encoding="utf-8")
    matches = list(pattern.finditer(text))
    if text[: matches[0].start() if matches else len(text)].strip():
        raise ValueError(f"{path.name}: text before the first marker (each unit starts with a <!-- ... --> marker)")
    ends = [following.start() for following in matches[1:]] + [len(text)]
    return [(match, text[match.end() : end].strip()) for match, end in zip(matches, ends, strict=True)]


def read_translation(path: Path) -> dict[tuple, tuple[str, str]]:
    """key -> (the hash of the English it translates, the translation)."""
    found = {}
    for match, translation in marked(path, MARKER):
        key = (match[1], match[2]) + ((match[3],) if match[3] else ())
        if key in found:
            raise ValueError(f"{path.name}: {' '.join(key)} is translated twice")
        found[key] = (match[4], translation)
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


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub and the site make it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def sections(text: str) -> dict[str, str]:
    """A Markdown page's sections in order: the heading's anchor -> the heading and the text under
    it, up to the next heading of any level (a line starting with # inside a code block is no heading)."""
    found, key, lines, fenced = {}, None, [], False
    for line in text.split("\n"):
        fenced ^= line.startswith("```")
        heading = None if fenced else HEADING.match(line)
        if heading:
            if key is not None:
                found[key] = "\n".join(lines).strip()
            key, lines = anchor(heading[1]), []
            while key in found:  # a heading that repeats takes a number, as on GitHub
                key += "-1"
        lines.append(line)
    if key is not None:
        found[key] = "\n".join(lines).strip()
    return found


def read_page_translation(path: Path) -> dict[str, tuple[str, str]]:
    """A translated page: section key -> (the hash of the English it translates, the translation)."""
    found = {}
    for match, translation in marked(path, SECTION_MARKER):
        if match[1] in found:
            raise ValueError(f"{path.name}: section {match[1]} is translated twice")
        found[match[1]] = (match[2], translation)
    return found


def in_chinese(link: str) -> str:
    """Where a link of the English page leads in the Chinese one: a lesson to the Chinese lesson,
    the link to the Chinese README back to the English one; anything else unchanged."""
    if link == "README.zh-CN.md":
        return "README.md"
    return re.sub(r"(?<![\w-])lessons/(?=\d\d_)", f"{LANGUAGE}/lessons/", link)


def commands(text: str) -> list[str]:
    """The lines of a section's code blocks without their comments: what a reader types."""
    found, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif fenced and (command := line.split(" #")[0].rstrip()):
            found.append(command)
    return found


def page_problems(english_path: str) -> list[str]:
    """What keeps a translated page from being whole: a section missing, stale, untranslated or out
    of order, its commands not the English ones, or a link of the English missing."""
    chinese_path, required = PAGES[english_path]
    file = ROOT / chinese_path
    if not file.exists():
        return [f"{chinese_path}: missing (python tools/translation.py template {english_path})"]
    english = sections((ROOT / english_path).read_text(encoding="utf-8"))
    done, found = read_page_translation(file), []
    for key in required or english:
        if key not in english:
            found.append(f"{chinese_path}: the English page has no section {key} (tools/translation.py PAGES)")
        elif key not in done:
            found.append(f"{chinese_path}: section {key} has no translation")
    for key, (sha, text) in done.items():
        name = f"{chinese_path}: section {key}"
        if key not in english:
            found.append(f"{name} is no longer in {english_path}")
            continue
        if sha != digest(english[key]):
            found.append(f"{name} is stale: the English changed since it was translated")
        elif not re.search(r"[\u4e00-\u9fff]", text):
            found.append(f"{name} is still the English (the template's text, not yet translated)")
        if commands(text) != commands(english[key]):
            found.append(
                f"{name}: its commands differ from the English ones: {commands(text)} != {commands(english[key])}"
            )
        missing = sorted({in_chinese(link) for link in LINK.findall(english[key])} - set(LINK.findall(text)))
        if missing:
            found.append(f"{name}: links the English has and it lacks: {missing}")
    order = [key for key in english if key in done]
    if list(done) != order:
        found.append(f"{chinese_path}: the sections are not in the English page's order")
    return found


def page_template(english_path: str) -> Path:
    """Write the translated page: each section's translation kept, a section to translate put under
    its marker in English for the translator to replace."""
    chinese_path, required = PAGES[english_path]
    file = ROOT / chinese_path
    done = read_page_translation(file) if file.exists() else {}
    english = sections((ROOT / english_path).read_text(encoding="utf-8"))
    blocks = [
        f"<!-- section {key} en:{digest(text)} -->\n{LINK.sub(lambda link: f']({in_chinese(link[1])})', text)}\n"
        if key not in done
        else f"<!-- section {key} en:{done[key][0]} -->\n{done[key][1]}\n"
        for key, text in english.items()
        if key in done or key in (required or english)
    ]
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
    parser.add_argument(
        "notebooks", nargs="*", type=Path, help="English lessons or pages of PAGES (default: every translated one)"
    )
    args = parser.parse_args(argv)
    outside = [str(path) for path in args.notebooks if not path.resolve().is_relative_to(ROOT)]
    if outside:
        parser.error(f"not in the course's folder {ROOT}: {', '.join(outside)}")
    if missing := [str(path) for path in args.notebooks if not path.is_file()]:
        parser.error(
            f"no such file: {', '.join(missing)} (an English lesson in notebooks/, or one of {', '.join(PAGES)})"
        )
    named = [path.resolve().relative_to(ROOT).as_posix() for path in args.notebooks]
    pages = [name for name in named if name in PAGES] or ([] if named else list(PAGES))
    paths = [ROOT / name for name in named if name not in PAGES] or ([] if named else translated())
    if args.action == "template":
        for path in paths:
            print(f"written: {template(path).relative_to(ROOT)}")
        for page in pages:
            print(f"written: {page_template(page).relative_to(ROOT)}")
        return 0
    found = [problem for page in pages for problem in page_problems(page)]
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
