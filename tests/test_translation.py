"""The Chinese edition (tools/translation.py): made from the English lessons and one translation file
per lesson, its code and outputs the English ones byte for byte; a translation missing, stale or
left in English, a Chinese notebook out of date and a glossary term translated otherwise all fail."""

import json
import re
from pathlib import Path

import pytest
from notebook_cells import ROOT

from tools import learner_edition as edition
from tools import translation as T

GLOSSARY = ROOT / "docs" / "glossary.zh-CN.md"
LESSONS = T.translated()


def glossary() -> dict[str, str]:
    """The checked terms: English -> the fixed Chinese."""
    rows = re.findall(r"^\| ([^|]+?) \| ([^|]+?) \| (yes|no) \|", GLOSSARY.read_text(encoding="utf-8"), re.MULTILINE)
    return {english: chinese for english, chinese, checked in rows if checked == "yes"}


def headings() -> dict[str, str]:
    """The fixed headings: English -> Chinese (the glossary's second table)."""
    table = GLOSSARY.read_text(encoding="utf-8").split("## Headings and fixed phrases")[1]
    rows = re.findall(r"^\| ([^|]+?) \| ([^|]+?) \|$", table, re.MULTILINE)
    return {english: chinese for english, chinese in rows if english not in ("English",) and "N" not in english}


def prose(text: str) -> str:
    """English as read for terms: code spans, link targets, HTML tags and math left out."""
    text = re.sub(r"`[^`]*`|\]\([^)]*\)|<[^>]+>|\$\$.*?\$\$|\$[^$]*\$", " ", text, flags=re.DOTALL)
    return text


def uses(term: str, text: str) -> bool:
    """The term as a whole word, any case, plurals included ("patches", "tokens")."""
    words = r"[\s-]+".join(re.escape(word) for word in term.split())
    return re.search(rf"(?<![\w-]){words}(e?s)?(?![\w-])", prose(text), re.IGNORECASE) is not None


def code_cells(notebook: dict) -> list[tuple]:
    return [
        (cell["id"], cell["source"], cell.get("outputs")) for cell in notebook["cells"] if cell["cell_type"] == "code"
    ]


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


# ---- the tool, on a lesson of its own ------------------------------------------------------------


@pytest.fixture
def lesson(tmp_path, monkeypatch):
    """A two-cell lesson and an exercise, with the translation folders in tmp_path."""
    monkeypatch.setattr(T, "TRANSLATIONS", tmp_path / "translations")
    monkeypatch.setattr(T, "SOLUTION", tmp_path / "zh" / "notebooks")
    monkeypatch.setattr(T, "LEARNER", tmp_path / "zh" / "lessons")
    exercise = (
        "def double(x):\n    # HINT 1: Think of addition.\n    # HINT 2: Add x to itself.\n"
        "    # BEGIN SOLUTION\n    return 2 * x\n    # END SOLUTION\n\n\ncheck_double(double)"
    )
    notebook = {
        "cells": [
            {
                "cell_type": "markdown",
                "id": "t",
                "metadata": {},
                "source": "# Lesson 0\n\n> **Solution edition**, here.",
            },
            {"cell_type": "markdown", "id": "a", "metadata": {}, "source": "The patch and its tokens."},
            {"cell_type": "code", "id": "c", "metadata": {}, "execution_count": 1, "outputs": [], "source": exercise},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "00_test.ipynb"
    path.write_text(json.dumps(notebook))
    return path


TRANSLATED = {  # the little lesson's four units, in Chinese
    "cell t": "# 第 0 课\n\n> **答案版**，在此。",  # noqa: RUF001 (Chinese punctuation)
    "cell a": "图块和它的词元。",
    "hint c 1": "想想加法。",
    "hint c 2": "x + x。",
}


def fill(path: Path, translations: dict[str, str]) -> None:
    """Replace each unit's text (after its marker) by translations[marker's key words]."""
    text = path.read_text(encoding="utf-8")
    for match in reversed(list(T.MARKER.finditer(text))):
        key = " ".join(filter(None, (match[1], match[2], match[3])))
        end = text.find("<!--", match.end())
        end = len(text) if end == -1 else end
        text = text[: match.end()] + "\n" + translations[key] + "\n\n" + text[end:]
    path.write_text(text, encoding="utf-8")


def test_a_template_is_not_a_translation_until_each_unit_is_translated(lesson):
    file = T.template(lesson)
    assert [problem.split(": ", 1)[1] for problem in T.problems(lesson)] == [
        "cell t is still the English (the template's text, not yet translated)",
        "cell a is still the English (the template's text, not yet translated)",
        "hint c 1 is still the English (the template's text, not yet translated)",
        "hint c 2 is still the English (the template's text, not yet translated)",
    ]
    fill(file, TRANSLATED)
    assert T.problems(lesson) == []
    made = T.editions(lesson)
    assert set(made) == {T.SOLUTION / lesson.name, T.LEARNER / lesson.name}
    learner = json.loads(made[T.LEARNER / lesson.name])
    help_cell = next(cell for cell in learner["cells"] if cell["id"] == "c-help")
    text = "".join(help_cell["source"])
    assert (
        "<summary>提示 1</summary>\n\n想想加法。" in text
        and "<summary>答案</summary>" in text
        and "return 2 * x" in text
    )
    assert "".join(learner["cells"][0]["source"]).splitlines()[-1] == T.LEARNER_NOTE


def test_a_changed_english_cell_makes_its_translation_stale_and_template_keeps_the_work(lesson):
    file = T.template(lesson)
    fill(file, TRANSLATED)
    notebook = read(lesson)
    notebook["cells"][1]["source"] = "The patch and its three tokens."
    lesson.write_text(json.dumps(notebook))
    assert T.problems(lesson) == ["00_test: cell a is stale: the English changed since it was translated"]
    T.template(lesson)  # refreshing the file keeps the translation and its old hash: still stale
    assert "图块和它的词元。" in file.read_text(encoding="utf-8") and len(T.problems(lesson)) == 1
    with pytest.raises(ValueError, match="stale"):
        T.editions(lesson)


def test_a_unit_translated_twice_or_text_before_the_first_marker_is_refused(lesson):
    file = T.template(lesson)
    text = file.read_text(encoding="utf-8")
    file.write_text("stray words\n" + text, encoding="utf-8")
    with pytest.raises(ValueError, match="text before the first marker"):
        T.problems(lesson)
    first = text.split("\n")[0]
    file.write_text(text + "\n" + first + "\n又一次\n", encoding="utf-8")
    with pytest.raises(ValueError, match="translated twice"):
        T.problems(lesson)


# ---- the course's translated lessons ---------------------------------------------------------------


def test_some_lessons_are_translated_and_the_glossary_has_the_issue_s_terms():
    assert LESSONS, "no translation file in translations/zh-CN/"
    terms = glossary()
    assert terms["patch"] == "图块" and terms["token"] == "词元" and terms["attention"] == "注意力"
    assert terms["position embedding"] == "位置嵌入" and "class token" in terms and "register" in terms


@pytest.mark.parametrize("path", LESSONS, ids=[path.stem for path in LESSONS])
def test_the_translation_is_whole_and_the_chinese_notebooks_are_up_to_date(path):
    assert T.problems(path) == []
    for where, text in T.editions(path).items():
        assert where.exists() and where.read_text(encoding="utf-8") == text, (
            f"{where.relative_to(ROOT)} is out of date: python tools/translation.py write"
        )


@pytest.mark.parametrize("path", LESSONS, ids=[path.stem for path in LESSONS])
def test_code_and_outputs_are_the_english_ones_byte_for_byte(path):
    english, chinese = read(path), read(T.SOLUTION / path.name)
    assert code_cells(chinese) == code_cells(english)
    assert [cell["id"] for cell in chinese["cells"]] == [cell["id"] for cell in english["cells"]]
    learner_en, learner_zh = read(ROOT / "lessons" / path.name), read(T.LEARNER / path.name)
    assert code_cells(learner_zh) == code_cells(learner_en)
    assert [cell["id"] for cell in learner_zh["cells"]] == [cell["id"] for cell in learner_en["cells"]]
    for cell in chinese["cells"]:
        if cell["cell_type"] == "markdown":  # every one translated: Chinese characters in each
            assert re.search(r"[\u4e00-\u9fff]", "".join(cell["source"])), cell["id"]


@pytest.mark.parametrize("path", LESSONS, ids=[path.stem for path in LESSONS])
def test_the_chinese_lesson_opens_its_own_edition(path):
    title = "".join(read(T.LEARNER / path.name)["cells"][0]["source"])
    assert f"/{T.LANGUAGE}/lessons/{path.name}" in title and f"lab/tree/{T.LANGUAGE}/lessons/{path.name}" in title
    assert T.LEARNER_NOTE in title and edition.LEARNER_NOTE not in title
    solution = "".join(read(T.SOLUTION / path.name)["cells"][0]["source"])
    assert T.SOLUTION_NOTE in solution and f"](../lessons/{path.name})" in solution  # zh-CN/lessons/, beside it


@pytest.mark.parametrize("path", LESSONS, ids=[path.stem for path in LESSONS])
def test_each_glossary_term_keeps_its_chinese(path):
    done = T.read_translation(T.TRANSLATIONS / f"{path.stem}.md")
    wrong = []
    for key, english in T.units(read(path)).items():
        chinese = done[key][1]
        for term, fixed in glossary().items():
            if uses(term, english) and fixed not in chinese:
                wrong.append(f"{' '.join(key)}: {term!r} is not rendered {fixed!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path", LESSONS, ids=[path.stem for path in LESSONS])
def test_the_lesson_headings_are_the_glossary_s(path):
    """ "Where we are", "Your turn", "Summary", "Going further": the same Chinese in every lesson."""
    done = T.read_translation(T.TRANSLATIONS / f"{path.stem}.md")
    wrong = []
    for key, english in T.units(read(path)).items():
        chinese_headings = re.findall(r"^#+ (.*)$", done[key][1], re.MULTILINE)
        for heading in re.findall(r"^#+ (?:\d+\. )?(.*)$", english, re.MULTILINE):
            for phrase, fixed in headings().items():
                if heading.lower().startswith(phrase.lower()) and not any(fixed in h for h in chinese_headings):
                    wrong.append(f"{' '.join(key)}: {heading!r} is not headed {fixed!r}")
    assert not wrong, "\n".join(wrong)


def test_make_lab_zh_copies_the_chinese_learners_edition(tmp_path, monkeypatch):
    """`make lab-zh` writes the learner's copies from zh-CN/lessons/ and opens lesson 1 there."""
    from tools import exercises

    recipe = re.search(r"^lab-zh:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert recipe and "tools/exercises.py my-lessons-zh --edition zh-CN" in recipe[1]
    assert "default_url=/lab/tree/my-lessons-zh/01_patches.ipynb" in recipe[1]
    monkeypatch.setattr(exercises, "LESSONS", exercises.LESSONS)  # main() chooses the edition: put it back after
    assert exercises.main([str(tmp_path / "copies"), "--keep", "--edition", "zh-CN"]) == 0
    assert sorted(path.name for path in (tmp_path / "copies").glob("*.ipynb")) == [path.name for path in LESSONS]
    title = "".join(read(tmp_path / "copies" / "01_patches.ipynb")["cells"][0]["source"])
    assert T.LEARNER_NOTE in title


# ---- the README and the guide, a section at a time -----------------------------------------------


@pytest.fixture
def page(tmp_path, monkeypatch):
    """A two-section English page of its own, its Chinese page to be made beside it."""
    monkeypatch.setattr(T, "ROOT", tmp_path)
    monkeypatch.setattr(T, "PAGES", {"GUIDE.md": ("GUIDE.zh-CN.md", None)})
    english = "# Guide\n\nOpen [lesson 1](lessons/01_patches.ipynb).\n\n"
    english += "## Run it\n\n```bash\nmake lab  # opens lesson 1\n```\n"
    (tmp_path / "GUIDE.md").write_text(english, encoding="utf-8")
    return tmp_path


PAGE_TRANSLATED = {  # the little page's two sections, in Chinese
    "guide": "# 指南\n\n打开[第 1 课](zh-CN/lessons/01_patches.ipynb)。",
    "run-it": "## 运行\n\n```bash\nmake lab  # 打开第 1 课\n```",
}


def fill_page(path: Path, translations: dict[str, str]) -> None:
    """Replace each section's text (after its marker) by translations[its key]."""
    text = path.read_text(encoding="utf-8")
    for match in reversed(list(T.SECTION_MARKER.finditer(text))):
        end = text.find("<!--", match.end())
        end = len(text) if end == -1 else end
        text = text[: match.end()] + "\n" + translations[match[1]] + "\n\n" + text[end:]
    path.write_text(text, encoding="utf-8")


def test_a_page_template_leads_to_the_chinese_lessons_and_is_no_translation_until_translated(page):
    made = T.page_template("GUIDE.md")
    assert "](zh-CN/lessons/01_patches.ipynb)" in made.read_text(encoding="utf-8")  # the link already retargeted
    assert T.page_problems("GUIDE.md") == [
        "GUIDE.zh-CN.md: section guide is still the English (the template's text, not yet translated)",
        "GUIDE.zh-CN.md: section run-it is still the English (the template's text, not yet translated)",
    ]
    fill_page(made, PAGE_TRANSLATED)
    assert T.page_problems("GUIDE.md") == []
    T.page_template("GUIDE.md")  # a refresh keeps every translation
    assert T.page_problems("GUIDE.md") == []


def test_a_changed_section_is_stale_and_other_commands_or_a_lost_link_are_named(page):
    fill_page(T.page_template("GUIDE.md"), PAGE_TRANSLATED)
    english = (page / "GUIDE.md").read_text(encoding="utf-8")
    (page / "GUIDE.md").write_text(english.replace("make lab ", "make lab-zh "), encoding="utf-8")
    found = T.page_problems("GUIDE.md")
    assert found[0] == "GUIDE.zh-CN.md: section run-it is stale: the English changed since it was translated"
    assert "its commands differ from the English ones" in found[1] and "make lab-zh" in found[1]
    (page / "GUIDE.md").write_text(english, encoding="utf-8")
    chinese = (page / "GUIDE.zh-CN.md").read_text(encoding="utf-8")
    (page / "GUIDE.zh-CN.md").write_text(chinese.replace("](zh-CN/lessons/", "](lessons/"), encoding="utf-8")
    assert T.page_problems("GUIDE.md") == [
        "GUIDE.zh-CN.md: section guide: links the English has and it lacks: ['zh-CN/lessons/01_patches.ipynb']"
    ]
    (page / "GUIDE.zh-CN.md").write_text(chinese.split("<!-- section run-it")[0], encoding="utf-8")
    assert T.page_problems("GUIDE.md") == ["GUIDE.zh-CN.md: section run-it has no translation"]


@pytest.mark.parametrize("english", list(T.PAGES))
def test_the_readme_and_the_guide_s_learner_sections_are_translated_and_fresh(english):
    assert T.page_problems(english) == []
    required = T.PAGES[english][1]
    done = T.read_page_translation(ROOT / T.PAGES[english][0])
    assert list(done) == (required or list(T.sections((ROOT / english).read_text(encoding="utf-8"))))


def test_each_readme_links_the_other_at_its_top():
    english = (ROOT / "README.md").read_text(encoding="utf-8").split("\n")[:4]
    chinese = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8").split("\n")[:5]
    assert any("](README.zh-CN.md)" in line for line in english), english
    assert any("](README.md)" in line for line in chinese), chinese


@pytest.mark.parametrize("english", list(T.PAGES))
def test_each_glossary_term_keeps_its_chinese_in_the_pages(english):
    sections = T.sections((ROOT / english).read_text(encoding="utf-8"))
    wrong = []
    for key, (_, chinese) in T.read_page_translation(ROOT / T.PAGES[english][0]).items():
        for term, fixed in glossary().items():
            if uses(term, sections[key]) and fixed not in chinese:
                wrong.append(f"{key}: {term!r} is not rendered {fixed!r}")
    assert not wrong, "\n".join(wrong)


def test_the_command_refuses_a_file_it_cannot_translate_naming_it(tmp_path, capsys):
    elsewhere = tmp_path / "01_patches.ipynb"
    elsewhere.write_text("{}")
    for named, said in [
        (elsewhere, "not in the course's folder"),
        (ROOT / "notebooks" / "99_none.ipynb", "no such file"),
    ]:
        with pytest.raises(SystemExit) as stopped:
            T.main(["check", str(named)])
        assert stopped.value.code == 2
        assert said in capsys.readouterr().err
