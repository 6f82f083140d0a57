"""The instructor guide (docs/instructor-guide.md) stays true to the course: every checker message
it quotes still exists in utils/checks, every exercise of every lesson is covered in its lesson's
section, and every lesson notebook is named."""

import ast
import json
import re
from pathlib import Path

import pytest
from notebook_cells import NOTEBOOKS, ROOT

GUIDE = ROOT / "docs" / "instructor-guide.md"
CHECKERS = sorted((ROOT / "utils" / "checks").glob("*.py"))

LESSON_HEADING = re.compile(r"^## Lesson (\d+)\b.*$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.MULTILINE | re.DOTALL)
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
MIN_MESSAGE = 25  # a backticked span this long, with a space in it, is a quoted checker message


def guide_text() -> str:
    return GUIDE.read_text(encoding="utf-8")


def lesson_sections() -> dict[int, str]:
    """Each '## Lesson N' section of the guide, up to the next '## ' heading, by lesson number."""
    text = guide_text()
    sections = {}
    for match in LESSON_HEADING.finditer(text):
        following = re.search(r"^## ", text[match.end() :], flags=re.MULTILINE)
        end = match.end() + following.start() if following else len(text)
        sections[int(match[1])] = text[match.start() : end]
    return sections


def quoted_messages(section: str) -> list[str]:
    """The backticked spans of a section, outside code blocks, that look like checker messages."""
    return [span for span in SPAN.findall(FENCE.sub("", section)) if len(span) >= MIN_MESSAGE and " " in span]


def checker_strings() -> list[str]:
    """Every string literal of utils/checks/*.py. Adjacent literals are already one constant in the
    AST; an f-string contributes its literal parts, each on its own (a quote may not straddle an
    interpolated value, whose text the guide cannot know)."""
    strings = []
    for path in CHECKERS:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.append(node.value)
    return strings


def exercises(notebook: Path) -> list[str]:
    """The function names defined in the notebook's exercise cells (those holding a solution)."""
    names = []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and "# BEGIN SOLUTION" in source:
            names += re.findall(r"^def (\w+)\(", source, flags=re.MULTILINE)
    return names


def lesson_number(notebook: Path) -> int:
    return int(notebook.name[:2])


def test_the_guide_has_a_section_for_every_lesson_notebook():
    assert NOTEBOOKS, "no lesson notebooks found"
    sections = lesson_sections()
    missing = [nb.name for nb in NOTEBOOKS if lesson_number(nb) not in sections]
    assert not missing, f"no '## Lesson N' section in {GUIDE.name} for {missing}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.name)
def test_each_lesson_notebook_is_named_in_its_section(notebook):
    assert notebook.name in guide_text()
    assert notebook.name in lesson_sections().get(lesson_number(notebook), ""), (
        f"{notebook.name} is not named in the guide's 'Lesson {lesson_number(notebook)}' section"
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.name)
def test_every_exercise_is_covered_in_its_lesson_section(notebook):
    names = exercises(notebook)
    assert names, f"{notebook.name} has no exercise (no '# BEGIN SOLUTION' cell with a def)"
    section = lesson_sections().get(lesson_number(notebook), "")
    missing = [name for name in names if f"`{name}`" not in section]
    assert not missing, f"exercises of {notebook.name} not in its section of the guide: {missing}"


def test_the_checker_strings_are_found():
    """A guard for the search below: an implicitly concatenated message is one string, and an
    f-string's literal parts are found too."""
    strings = checker_strings()
    assert any("the class token got no position entry: pos_embed has N + 1 rows and row 0" in s for s in strings)
    assert any(" a process can hold at once: " in s for s in strings)  # an f-string's literal middle


def test_every_quoted_checker_message_still_exists():
    strings = checker_strings()
    sections = lesson_sections()
    quoted = [(lesson, message) for lesson, section in sections.items() for message in quoted_messages(section)]
    assert len(quoted) >= 2 * len(NOTEBOOKS), "the lesson sections quote hardly any checker messages"
    stale = [f"lesson {lesson}: {message!r}" for lesson, message in quoted if not any(message in s for s in strings)]
    assert not stale, "quoted in the guide but not found in utils/checks/*.py:\n" + "\n".join(stale)


def test_every_exercise_quotes_at_least_two_checker_messages():
    """Each numbered exercise item of a lesson section quotes the checker for two mistakes or more."""
    for lesson, section in lesson_sections().items():
        items = re.split(r"^\d+\. ", section, flags=re.MULTILINE)[1:]
        for item in items:
            name = re.match(r"`(\w+)`", item)
            assert len(quoted_messages(item)) >= 2, (
                f"lesson {lesson}, exercise {name and name[1]}: fewer than 2 quoted messages"
            )


def exercise_cells(notebook: Path) -> int:
    """How many exercise cells (with a solution) the notebook has: one exercise each."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return sum(cell["cell_type"] == "code" and "# BEGIN SOLUTION" in "".join(cell["source"]) for cell in cells)


def test_the_exercise_counts_the_guide_states_are_the_notebooks():
    """The "Lessons at a glance" table's exercise column, and the total in the checklist, are counted
    from the notebooks: a lesson that gains an exercise cannot leave a stale number behind."""
    text = guide_text()
    rows = dict(re.findall(r"^\| (\d+)\. [^|]+\| [^|]+\| (\d+) \|", text, flags=re.MULTILINE))
    counts = {str(lesson_number(notebook)): exercise_cells(notebook) for notebook in NOTEBOOKS}
    assert {lesson: int(count) for lesson, count in rows.items()} == counts
    totals = re.findall(r"(\d+) exercises", text)
    assert totals and all(int(total) == sum(counts.values()) for total in totals), totals


# ---- workshop plans ------------------------------------------------------------------------------

PLAN_HEADING = re.compile(r"^#{3,4} (.+) \((\d+) hours?(?: a day)?\)$", re.MULTILINE)
MINUTES = re.compile(r"^(\d+)(?:-(\d+))?$")


def room_times() -> dict[int, tuple[int, int]]:
    """Lesson -> (low, high) minutes, from the "Lessons at a glance" table."""
    rows = re.findall(r"^\| (\d+)\. [^|]+\| (\d+)-(\d+) min \|", guide_text(), flags=re.MULTILINE)
    return {int(lesson): (int(low), int(high)) for lesson, low, high in rows}


def plans() -> dict[str, tuple[int, list[tuple[str, int, int]]]]:
    """Each plan table in "## Workshop plans": its heading -> (its length in minutes, its rows as
    (block, low, high)), the total row last."""
    text = guide_text()
    section = text[text.index("## Workshop plans") :]
    section = section[: section.index("\n## ", 1)]
    found = {}
    headings = list(PLAN_HEADING.finditer(section))
    for i, heading in enumerate(headings):
        end = headings[i + 1].start() if i + 1 < len(headings) else len(section)
        rows = []
        for line in section[heading.end() : end].splitlines():
            cells = [cell.strip().strip("*") for cell in line.strip().strip("|").split("|")]
            if line.startswith("|") and len(cells) == 3 and (minutes := MINUTES.match(cells[1])):
                low = int(minutes[1])
                rows.append((cells[0], low, int(minutes[2] or low)))
        if rows:
            found[heading[1]] = (int(heading[2]) * 60, rows)
    return found


def test_the_guide_has_a_three_hour_a_one_day_and_a_two_day_plan():
    lengths = sorted(length for length, _ in plans().values())
    assert lengths == [180, 480, 480], plans().keys()
    assert "Day 1 is the one-day plan" in guide_text()


@pytest.mark.parametrize("name", list(plans()))
def test_each_plan_adds_up_with_the_guides_own_room_times(name):
    length, rows = plans()[name]
    *blocks, total = rows
    assert total[0] == "total", f"{name}: the last row is the total"
    times = room_times()
    for block, low, high in blocks:
        if lesson := re.fullmatch(r"lesson (\d+)", block):
            assert (low, high) == times[int(lesson[1])], f"{name}: {block} has {low}-{high} min, the table another"
    assert (total[1], total[2]) == (sum(b[1] for b in blocks), sum(b[2] for b in blocks)), f"{name}: its total"
    assert total[2] <= length, f"{name}: {total[2]} minutes at the upper end, over its {length}"


def test_the_stated_room_time_of_lessons_1_to_8_is_the_tables():
    times = room_times()
    low, high = sum(times[n][0] for n in range(1, 9)), sum(times[n][1] for n in range(1, 9))
    assert f"Lessons 1-8 take {low}-{high} minutes" in guide_text()
    assert f"({low // 60} h {low % 60} min to {high // 60} h {high % 60} min)" in guide_text()
