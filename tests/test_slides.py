"""The instructors' slide decks (tools/slides.py, `make slides`): each follows its lesson's core path,
and a deck opens offline in Chromium, moves with the keyboard and fits every slide on the screen."""

import json
import re

import pytest
from notebook_cells import NOTEBOOKS, ROOT
from test_browser import CHROMIUM, CHROMIUM_ARGS, browser_or_skip

from tools import slides


def markdown(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_deck_follows_the_lessons_core_path(path):
    deck = slides.lesson_slides(path)
    text = markdown(path)
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    core = headings[: next((i for i, h in enumerate(headings) if "going further" in h.lower()), len(headings))]
    shown = [h for h in core if not h.lower().startswith("where we are")]
    assert deck[0].title.startswith("Lesson ") and deck[0].bullets == shown  # the agenda
    assert [slide.title for slide in deck[1:]] == shown  # one slide per section, Going further left out
    summary = next(slide for slide in deck if slide.title == "Summary")
    assert len(summary.bullets) == len(re.findall(r"^- ", text.split("## Summary")[1].split("\n## ")[0], flags=re.M))
    pictures = {
        slides._figure({"outputs": [output]})[0]
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]
        for output in cell.get("outputs", [])
        if slides._is_picture(output)
    }
    assert all(slide.figure in pictures for slide in deck if slide.figure)  # committed outputs, nothing run
    assert all("$" not in slides._inline(slide.text) for slide in deck)  # inline maths as plain text


def test_every_lesson_deck_is_written(tmp_path, capsys):
    assert slides.main(["--out", str(tmp_path)]) == 0
    assert sorted(path.stem for path in tmp_path.glob("*.html")) == [path.stem for path in NOTEBOOKS]
    assert "01_patches.html: " in capsys.readouterr().out
    with pytest.raises(SystemExit):
        slides.main(["notebooks/99_nowhere.ipynb"])


def test_make_slides_runs_the_tool():
    recipe = re.search(r"^slides:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    assert recipe and "tools/slides.py" in recipe[1]


@pytest.mark.browser
def test_a_deck_opens_offline_moves_with_the_keys_and_fits_the_screen(tmp_path):
    sync_playwright = browser_or_skip()
    deck = slides.write_deck(ROOT / "notebooks" / "01_patches.ipynb", tmp_path)
    count = len(slides.lesson_slides(ROOT / "notebooks" / "01_patches.ipynb"))
    outside, errors = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.route(
            "**/*",
            lambda route: (
                route.continue_()
                if route.request.url.startswith(("file:", "data:"))
                else (outside.append(route.request.url), route.abort())
            ),
        )
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(deck.as_uri())
        assert page.locator("footer").inner_text() == f"1 / {count}"
        overflowing = []
        for number in range(1, count + 1):
            current = page.locator("section.current")
            size = current.evaluate("s => [s.scrollHeight, s.clientHeight, s.scrollWidth, s.clientWidth]")
            if size[0] > size[1] or size[2] > size[3]:
                overflowing.append(f"slide {number}: {size}")
            images = current.evaluate(
                "s => [...s.querySelectorAll('img')].map(i => i.complete && i.naturalWidth > 0 && i.alt.length > 0)"
            )
            assert all(images), f"slide {number}: a picture that did not load or has no alt text"
            page.keyboard.press("ArrowRight")
        assert page.locator("footer").inner_text() == f"{count} / {count}"  # stops at the last
        page.keyboard.press("Home")
        assert page.locator("footer").inner_text() == f"1 / {count}"
        browser.close()
    assert not overflowing, "slides that do not fit 1280 x 720: " + ", ".join(overflowing)
    assert not outside and not errors, (outside, errors)
