"""Lesson notebooks in a real JupyterLab, in headless Chromium: Run All, no errors, the plots and
the checkers' lines drawn, and each widget redraws when its slider moves.

One `Lesson` entry per notebook in LESSONS: the checker lines it must show, how many pictures at
least, and a function that drives its widgets. Needs Debian's chromium (/usr/bin/chromium) and
the playwright package (requirements-dev.txt); `.ci/run` installs both. Without them the test is
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

from conftest import ROOT, TOKEN

CHROMIUM = "/usr/bin/chromium"
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
# Every explorer in utils/widgets.py is an ipywidgets VBox: its controls (each a
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
    """The two main training runs drew tqdm's progress widgets, and each ran to its end (n/n)."""
    bars = page.locator(f"{NOTEBOOK} .widget-hprogress")
    assert bars.count() >= 2, f"{bars.count()} progress bars"
    rows = page.locator(f"{NOTEBOOK} .widget-hbox", has=bars.first.page.locator(".widget-hprogress"))
    texts = [" ".join(text.split()) for text in rows.evaluate_all("rows => rows.map(r => r.textContent)")]
    finished = [text for text in texts if (match := re.search(r"(\d+)/(\d+)", text)) and match[1] == match[2]]
    assert len(finished) == len(texts) >= 2, texts
    bars.first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / f"{stem}-progress.png"))


def check_explorers(page, stem: str) -> None:
    """The (first) attention explorer redraws for the layer below; the position explorer for the
    next row (lessons 7 and 8)."""
    attention = widget(page, "top patch", nth=0)  # lesson 7 shows two: shapes, then digits
    positions = widget(page, "grid neighbours")
    before, after = move_slider_and_wait(page, attention, "layer", "ArrowLeft", name=f"{stem}-attention-layer")
    assert "top patch" in after, after
    before, after = move_slider_and_wait(page, positions, "row", "ArrowRight", name=f"{stem}-positions-row")
    row = r"position \((\d+), \d+\) is most"
    assert number(row, after) == number(row, before) + 1, (before, after)


@dataclass(frozen=True)
class Lesson:
    notebook: str  # in notebooks/
    checks: tuple[str, ...]  # the start of each checker's "✓" line; each appears exactly once
    interact: Callable | None = None  # drives the widgets after Run All: f(page, notebook's stem)
    min_images: int = 5  # plots and widget pictures drawn by Run All
    run_all_s: int = 180  # how long Run All may take (VIT_QUICK=1 budgets under make test)


LESSONS = [
    Lesson(
        "01_patches.ipynb",
        ("✓ patchify matches the reference", "✓ unpatchify inverts patchify", "✓ attention_cost is right"),
        check_lesson1_patch_slicer,
    ),
    Lesson(
        "03_attention.ipynb",
        ("✓ attention matches the reference", "✓ masked_softmax matches the reference"),
        check_lesson3_temperature,
    ),
    Lesson(
        "06_training.ipynb",
        ("✓ warmup_cosine matches the reference", "✓ train_step matches the reference"),
        check_lesson6_progress,
        run_all_s=600,
    ),
    Lesson(
        "07_inside_vit.ipynb",
        ("✓ attention_rollout matches the reference", "✓ mean_attention_distance matches the reference"),
        check_explorers,
    ),
    Lesson(  # without the ViT-B/16 file (as in CI) its explorers show the digits model
        "08_real_weights.ipynb",
        ("✓ convert_layer matches utils.pretrained.hf_to_timm", "✓ preprocess matches utils.imagenet.normalize"),
        check_explorers,
    ),
]


def checker_calls(cells: list[dict]) -> int:
    """How many `check_...(...)` calls the notebook's code cells make: each prints one "✓" line."""
    code = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
    return len(re.findall(r"^check_\w+\(", code, flags=re.MULTILINE))


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.notebook.removesuffix(".ipynb") for lesson in LESSONS])
def test_notebook_runs_in_jupyterlab(lab_url, lesson):
    sync_playwright = browser_or_skip()
    ARTIFACTS.mkdir(exist_ok=True)
    notebook, stem = lesson.notebook, lesson.notebook.removesuffix(".ipynb")
    # from the file, not the page: JupyterLab renders long notebooks lazily
    cells = json.loads((ROOT / "notebooks" / notebook).read_text())["cells"]
    code_cells = sum(cell["cell_type"] == "code" for cell in cells)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )  # fmt: skip
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            # a workspace of its own: no tab from another lesson's test is restored beside it
            page.goto(f"{lab_url}/lab/workspaces/{stem}/tree/notebooks/{notebook}?token={TOKEN}")
            page.wait_for_selector(f"{NOTEBOOK} .jp-CodeCell", timeout=60_000)
            assert page.locator(NOTEBOOK).count() == 1
            page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=60_000)
            page.locator(NOTEBOOK).click()
            page.keyboard.press("Escape")  # command mode
            for command in ["Clear Outputs of All Cells", "Run All Cells"]:  # no committed output survives
                page.keyboard.press("Control+Shift+c")  # the command palette
                page.keyboard.type(command)
                page.keyboard.press("Enter")
                if command.startswith("Clear"):
                    page.wait_for_function(
                        f"() => document.querySelectorAll('{NOTEBOOK} .jp-OutputArea-output').length === 0",
                        timeout=30_000,
                    )
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
            outputs = page.locator(f"{NOTEBOOK} .jp-OutputArea-output")
            for check in lesson.checks:
                assert outputs.filter(has_text=check).count() == 1, f"{check!r} not shown once"
            ticks = outputs.filter(has_text="✓").count()
            calls = checker_calls(cells)
            assert ticks >= max(calls, len(lesson.checks)), f"{ticks} ✓ lines for {calls} checker calls"
            if lesson.interact:
                lesson.interact(page, stem)
        finally:
            page.screenshot(path=str(ARTIFACTS / f"{stem}-last.png"))
            browser.close()
