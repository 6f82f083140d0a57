"""The widget lessons in a real JupyterLab, in headless Chromium: each widget is drawn and redraws
when its slider moves. And a learner's first Run All of the learner's edition goes on past every
blank exercise's failing check to the last cell.

nbval runs every lesson once already, so this test runs only the part of a lesson its widgets
need: a copy of the notebook with the setup cell, the cells that display widgets and the earlier
cells that define what they read (`notebook_cells.cells_needed`), written to test-artifacts/browser/.
JupyterLab runs that copy (Run All, no errors, no stderr, the pictures drawn), then one function
per lesson moves its sliders.

One `Lesson` entry per notebook in LESSONS. Needs Debian's chromium (/usr/bin/chromium) and the
playwright package (requirements-dev.txt); `.ci/run` installs both. Without them the test is
skipped, except under CI (CI=true), where a missing browser is a failure. Screenshots go to
test-artifacts/ (git-ignored), named by notebook: after Run All, after each slider move, at the end.
"""

import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from notebook_cells import NOTEBOOKS, ROOT, TOKEN, cells_needed, read_cells, shows_widget

CHROMIUM = "/usr/bin/chromium"
# as root in a container, with no network but loopback: no sandbox, no GPU, no calls home
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = ROOT / "test-artifacts"
TIMEOUT_S = 30  # for one widget to redraw after a key press
# the notebook on show: tabs that another test left open stay in the page, hidden
NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"


def browser_or_skip():
    """Playwright's sync API, or a skip (a failure under CI) naming what is missing."""
    missing = []
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
        missing.append("the playwright package (pip install -r requirements-dev.txt)")
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        missing.append(f"Chromium at {CHROMIUM} (apt-get install -y chromium)")
    if missing:
        message = "browser test needs " + " and ".join(missing)
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return sync_playwright


# --- widgets on the page ---------------------------------------------------------------------
# Every explorer in utils/widgets/ is an ipywidgets VBox: its controls (each a
# `.widget-inline-hbox` with its description in a `.widget-label`), an HTML summary
# (`.widget-html-content`) and an Output whose picture is replaced on every redraw.


def widget(page, summary_text: str, nth: int | None = None):
    """The widget (its outer VBox) whose summary contains `summary_text`: the only one, or the
    `nth` of them in the notebook's order when a lesson shows several of a kind."""
    boxes = page.locator(f"{NOTEBOOK} .widget-vbox", has=page.locator(".widget-html-content", has_text=summary_text))
    if nth is None:
        assert boxes.count() == 1, f"{boxes.count()} widgets with a summary containing {summary_text!r}"
        return boxes
    assert boxes.count() > nth, f"{boxes.count()} widgets with a summary containing {summary_text!r}, wanted #{nth}"
    return boxes.nth(nth)


def control(box, label: str):
    """The control in `box` whose description is exactly `label` ("row" is not "query row")."""
    exact = re.compile(rf"^\s*{re.escape(label)}\s*$")
    found = box.locator(".widget-inline-hbox", has=box.page.locator(".widget-label", has_text=exact))
    assert found.count() == 1, f"{found.count()} controls labelled {label!r} in the widget"
    return found


def state(box) -> tuple[str, str]:
    """(the summary's text, the src of the widget's picture): both change on a redraw.
    textContent, not innerText: JupyterLab skips drawing cells out of view, and innerText is
    empty for what is not drawn."""
    summary, picture = box.evaluate(
        "box => [box.querySelector('.widget-html-content')?.textContent ?? '',"
        " box.querySelector('.widget-output img')?.src ?? '']"
    )
    return " ".join(summary.split()), picture


def move_slider_and_wait(page, box, label: str, key: str, times: int = 1, name: str = "") -> tuple[str, str]:
    """Press `key` `times` on the handle of the slider labelled `label` in the widget `box`, and
    wait until its summary and its picture have both changed and stopped changing.

    Returns the summary's text before and after; screenshots the page as `name`.png if given.
    """
    box.scroll_into_view_if_needed()
    before = state(box)
    assert before[0] and before[1], f"before moving {label!r}: summary {before[0]!r}, picture {before[1][:40]!r}"
    control(box, label).locator(".noUi-handle").focus()
    for _ in range(times):
        page.keyboard.press(key)
    deadline, last, steady_since = time.monotonic() + TIMEOUT_S, None, None
    while True:  # changed in both, then the same for 1 s: every key press has been redrawn
        now = state(box)
        if now != last:
            last, steady_since = now, time.monotonic()
        elif now[0] != before[0] and now[1] != before[1] and now[1] and time.monotonic() - steady_since >= 1:
            break
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{key} x {times} on {label!r}: the widget did not redraw within {TIMEOUT_S} s\n"
                f"summary before: {before[0]!r}\nsummary now: {now[0]!r}\npicture changed: {now[1] != before[1]}"
            )
        time.sleep(0.2)
    if name:
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
    return before[0], last[0]


def number(pattern: str, text: str) -> float:
    """The number captured by `pattern` in `text` (commas allowed)."""
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in {text!r}"
    return float(match.group(1).replace(",", ""))


# --- one function per lesson: drive its widgets ----------------------------------------------


def check_lesson1_patch_slicer(page, stem: str) -> None:
    """The patch slicer: the next smaller patch size (14 px, 16 x 16 patches) redraws the grid."""
    slicer = widget(page, "tokens")
    before, after = move_slider_and_wait(page, slicer, "patch size", "ArrowLeft", name=f"{stem}-patch_size")
    assert "197 tokens" in before, before
    assert "257 tokens" in after, after


def check_lesson3_temperature(page, stem: str) -> None:
    """The softmax-temperature slider: a larger scale sharpens the weights."""
    temperature = widget(page, "largest weight")
    assert page.locator(f"{NOTEBOOK} .widget-slider").count() == 1  # the lesson's only slider is this one
    before, after = move_slider_and_wait(page, temperature, "scale", "ArrowRight", times=4, name=f"{stem}-scale")
    assert "largest weight 0.33" in before, before  # at 1/sqrt(d_k), as the notebook left it
    largest = r"largest weight ([\d.]+)"
    assert number(largest, after) > number(largest, before), (before, after)


def check_lesson6_progress(page, stem: str) -> None:
    """The two main training runs (shortened: Lesson.shorter) drew tqdm's progress widgets, and each
    ran to its end (n/n)."""
    bars = page.locator(f"{NOTEBOOK} .widget-hprogress")
    assert bars.count() >= 2, f"{bars.count()} progress bars"
    rows = page.locator(f"{NOTEBOOK} .widget-hbox", has=bars.first.page.locator(".widget-hprogress"))
    texts = [" ".join(text.split()) for text in rows.evaluate_all("rows => rows.map(r => r.textContent)")]
    finished = [text for text in texts if (match := re.search(r"(\d+)/(\d+)", text)) and match[1] == match[2]]
    assert len(finished) == len(texts) >= 2, texts
    bars.first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / f"{stem}-progress.png"))


def check_position_explorer(page, stem: str) -> None:
    """The position explorer redraws for the next row."""
    positions = widget(page, "grid neighbours")
    before, after = move_slider_and_wait(page, positions, "row", "ArrowRight", name=f"{stem}-positions-row")
    row = r"position \((\d+), \d+\) is most"
    assert number(row, after) == number(row, before) + 1, (before, after)


def check_explorers(page, stem: str) -> None:
    """The (first) attention explorer redraws for the layer below; the position explorer for the
    next row (lesson 7)."""
    attention = widget(page, "top patch", nth=0)  # lesson 7 shows two: shapes, then digits
    before, after = move_slider_and_wait(page, attention, "layer", "ArrowLeft", name=f"{stem}-attention-layer")
    assert "top patch" in after, after
    check_position_explorer(page, stem)


def check_logit_explorer(page, stem: str) -> None:
    """Lesson 11's logit explorer: one step back along the record redraws the curve's marker and the
    class token's attention at that step."""
    explorer = widget(page, "largest logit")
    before, after = move_slider_and_wait(page, explorer, "step", "ArrowLeft", name=f"{stem}-step")
    step = r"seed 0 at step (\d+)"
    assert number(step, before) == 300 and number(step, after) == 290, (before, after)


def check_rope_explorer(page, stem: str) -> None:
    """Lesson 12's RoPE explorer: the query one row down on the 6 x 6 grid sees fewer keys at offsets
    the 4 x 4 training grid never has (20 of 36 from (0, 0), 16 from (1, 0))."""
    explorer = widget(page, "never has")
    before, after = move_slider_and_wait(page, explorer, "query row", "ArrowRight", name=f"{stem}-query-row")
    unseen = r"never has: (\d+) of 36"
    assert number(unseen, before) == 20 and number(unseen, after) == 16, (before, after)


def check_mask_explorer(page, stem: str) -> None:
    """Lesson 13's mask explorer: one patch more hidden, and the MAE rebuilds what it cannot see."""
    explorer = widget(page, "hidden")
    before, after = move_slider_and_wait(page, explorer, "hidden", "ArrowRight", name=f"{stem}-hidden")
    hidden = r"(\d+) of 16 hidden"
    assert number(hidden, before) == 12 and number(hidden, after) == 13, (before, after)


@dataclass(frozen=True)
class Lesson:
    notebook: str  # in notebooks/
    interact: Callable  # drives the widgets after Run All: f(page, notebook's stem)
    min_images: int = 1  # plots and widget pictures that the widgets' part of the lesson draws
    run_all_s: int = 180  # how long Run All of that part may take
    # (code, the shorter code) in the widgets' part: what a widget shows needs no full training budget,
    # which nbval runs anyway; each must be found exactly once, so a changed lesson fails here, loudly
    shorter: tuple[tuple[str, str], ...] = ()


LESSONS = [
    Lesson("01_patches.ipynb", check_lesson1_patch_slicer),
    Lesson("03_attention.ipynb", check_lesson3_temperature),
    Lesson(
        "06_training.ipynb",
        check_lesson6_progress,
        shorter=(  # the two main runs, 2,000 and 600 steps under nbval, here 200 and 100: the bars are the same
            ("**recipe.fit,", '**(recipe.fit | {"steps": 200}),'),
            (
                'claim("it trained for all 2,000 steps", digits_history.step[-1] == 2000)',
                "assert digits_history.step[-1] == 200",
            ),
            ("**pairs_recipe.fit,", '**(pairs_recipe.fit | {"steps": 100}),'),
            (
                'claim("it trained for all 600 steps", pairs_history.step[-1] == 600)',
                "assert pairs_history.step[-1] == 100",
            ),
        ),
    ),
    Lesson("07_inside_vit.ipynb", check_explorers, min_images=3),
    # without the ViT-B/16 file (as in CI) it shows one explorer: the digits model's position table
    Lesson(  # the explorer shows seed 0's tables: the other two seeds' fine-tunes are nbval's
        "08_real_weights.ipynb", check_position_explorer, shorter=(("for seed in (0, 1, 2):", "for seed in (0,):"),)
    ),
    Lesson("11_stable_training.ipynb", check_logit_explorer),
    Lesson("12_positions_beyond_grid.ipynb", check_rope_explorer),
    Lesson("13_masked_autoencoder.ipynb", check_mask_explorer),
]


def widgets_part(notebook: str, shorter: tuple[tuple[str, str], ...] = ()) -> tuple[str, int]:
    """Write the part of a lesson that its widgets need as a notebook of its own, under
    test-artifacts/browser/ (inside the lab's root folder), its code shortened as `shorter` says;
    (its path in the lab, its code cells)."""
    path = ROOT / "notebooks" / notebook
    cells = read_cells(path)
    widgets = [index for index, cell in enumerate(cells) if shows_widget(cell)]
    assert widgets, f"{notebook} displays no widget"
    part = json.loads(path.read_text())
    part["cells"] = [part["cells"][index] for index in cells_needed(cells, widgets)]
    for cell in part["cells"]:
        cell["outputs"], cell["execution_count"] = [], None  # nothing committed survives
    for code, instead in shorter:
        found = [cell for cell in part["cells"] if code in "".join(cell["source"])]
        assert len(found) == 1, f"{notebook}: {len(found)} cells hold {code!r} (tests/test_browser.py LESSONS)"
        found[0]["source"] = "".join(found[0]["source"]).replace(code, instead)
    folder = ARTIFACTS / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / notebook).write_text(json.dumps(part, indent=1))
    return f"{folder.relative_to(ROOT)}/{notebook}", len(part["cells"])


@pytest.mark.browser
@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.notebook.removesuffix(".ipynb") for lesson in LESSONS])
def test_widgets_work_in_jupyterlab(lab_url, lesson):
    sync_playwright = browser_or_skip()
    notebook, stem = lesson.notebook, lesson.notebook.removesuffix(".ipynb")
    lab_path, code_cells = widgets_part(notebook, lesson.shorter)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            # a workspace of its own: no tab from another lesson's test is restored beside it
            page.goto(f"{lab_url}/lab/workspaces/{stem}/tree/{lab_path}?token={TOKEN}")
            page.wait_for_selector(f"{NOTEBOOK} .jp-CodeCell", timeout=60_000)
            assert page.locator(NOTEBOOK).count() == 1
            page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=60_000)
            page.locator(NOTEBOOK).click()
            page.keyboard.press("Escape")  # command mode
            page.keyboard.press("Control+Shift+c")  # the command palette
            page.keyboard.type("Run All Cells")
            page.keyboard.press("Enter")
            last_prompt = page.locator(f"{NOTEBOOK} .jp-CodeCell .jp-InputPrompt").last
            page.wait_for_function(
                f"count => [...document.querySelectorAll('{NOTEBOOK} .jp-CodeCell .jp-InputPrompt')]"
                ".at(-1).innerText.trim() === `[${count}]:`",
                arg=code_cells,
                timeout=lesson.run_all_s * 1000,
            )
            page.screenshot(path=str(ARTIFACTS / f"{stem}-run-all.png"))
            errors = page.locator(f"{NOTEBOOK} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            assert errors.count() == 0, errors.all_inner_texts()
            assert "[*]" not in last_prompt.inner_text()
            images = page.locator(f"{NOTEBOOK} .jp-OutputArea-output img").count()
            assert images >= lesson.min_images, f"{images} pictures drawn, expected at least {lesson.min_images}"
            lesson.interact(page, stem)
        finally:
            page.screenshot(path=str(ARTIFACTS / f"{stem}-last.png"))
            browser.close()


def learners_run_all_part(notebook: str) -> tuple[str, int, int]:
    """Lesson 1's learner's edition as a learner first meets it, cut to its exercises: the cells they
    need, every stub and check, then a last cell that says Run All got there; written under
    test-artifacts/browser/. (Its path in the lab, its code cells, its checks.)"""
    path = ROOT / "lessons" / notebook
    cells = read_cells(path)
    exercise = {"exercise", "exercise-check"}
    tagged = [i for i, cell in enumerate(cells) if exercise & set(cell["metadata"].get("tags", []))]
    part = json.loads(path.read_text())
    part["cells"] = [part["cells"][index] for index in sorted(set(cells_needed(cells, tagged)) | set(tagged))]
    part["cells"].append({"cell_type": "code", "metadata": {}, "source": END_OF_RUN_ALL, "outputs": []})
    for cell in part["cells"]:
        cell["outputs"], cell["execution_count"] = [], None
    folder = ARTIFACTS / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"learner-{notebook}").write_text(json.dumps(part, indent=1))
    checks = sum("exercise-check" in cell["metadata"].get("tags", []) for cell in part["cells"])
    return f"{folder.relative_to(ROOT)}/learner-{notebook}", len(part["cells"]), checks


END_OF_RUN_ALL = 'print("Run All reached the last cell")'


@pytest.mark.browser
def test_run_all_goes_on_past_the_learners_blank_exercises(lab_url):
    """A learner's first Run All of the learner's edition: each blank exercise's check fails ("not
    written yet"), but the check cells carry `raises-exception`, so JupyterLab runs on to the last
    cell; each failure shows as one short line, with no frame of utils/checks."""
    sync_playwright = browser_or_skip()
    lab_path, code_cells, checks = learners_run_all_part("01_patches.ipynb")
    assert checks >= 2
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            page.goto(f"{lab_url}/lab/workspaces/learner-run-all/tree/{lab_path}?token={TOKEN}")
            page.wait_for_selector(f"{NOTEBOOK} .jp-CodeCell", timeout=60_000)
            page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=60_000)
            page.locator(NOTEBOOK).click()
            page.keyboard.press("Escape")
            page.keyboard.press("Control+Shift+c")
            page.keyboard.type("Run All Cells")
            page.keyboard.press("Enter")
            page.wait_for_function(
                f"count => [...document.querySelectorAll('{NOTEBOOK} .jp-CodeCell .jp-InputPrompt')]"
                ".at(-1).innerText.trim() === `[${count}]:`",
                arg=code_cells,
                timeout=180_000,
            )
            page.screenshot(path=str(ARTIFACTS / "learner-run-all.png"))
            outputs = page.locator(f"{NOTEBOOK} .jp-CodeCell").last.locator(".jp-OutputArea-output")
            assert "Run All reached the last cell" in outputs.all_text_contents()[0]
            stderr = page.locator(f"{NOTEBOOK} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            texts = [text.strip() for text in stderr.all_text_contents()]
            assert len(texts) == checks, texts
            for text in texts:
                assert "not written yet" in text and len(text.splitlines()) <= 3, text
                assert "utils/checks" not in text and "Traceback" not in text, text
        finally:
            browser.close()


def test_widget_lessons_are_opened_in_the_browser_test():
    """Every notebook that displays a widget is run and clicked by tests/test_browser.py."""
    with_widgets = {path.name for path in NOTEBOOKS if any(shows_widget(cell) for cell in read_cells(path))}
    assert with_widgets, "no notebook displays a widget"
    assert with_widgets <= {lesson.notebook for lesson in LESSONS}, (
        f"not in the browser test: {sorted(with_widgets - {lesson.notebook for lesson in LESSONS})}"
    )
