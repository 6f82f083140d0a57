"""Lesson notebooks in a real JupyterLab, in headless Chromium: Run All, no errors, plots drawn.

Needs Debian's chromium (/usr/bin/chromium) and the playwright package (requirements-dev.txt);
`.ci/run` installs both. Without them the test is skipped, except under CI (CI=true), where a
missing browser is a failure. Screenshots go to test-artifacts/ (git-ignored).
"""

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, TOKEN

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"
NOTEBOOKS = ["01_patches.ipynb"]  # the widget lessons join this list as they are written


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


def check_patch_slicer_reacts(page) -> None:
    """Lesson 1's patch slicer rendered; moving its slider redraws the grid and the counts."""
    slider = page.locator(".widget-slider").first
    slider.scroll_into_view_if_needed()
    summary = page.locator(".widget-html-content", has_text="tokens").first
    picture = page.locator(".widget-output img").first
    before_text, before_picture = summary.inner_text(), picture.get_attribute("src")
    assert "197 tokens" in before_text
    page.locator(".widget-slider .noUi-handle").first.focus()
    page.keyboard.press("ArrowLeft")  # the next smaller patch size: 14 px, 16 x 16 patches
    page.wait_for_function(
        "before => ![...document.querySelectorAll('.widget-html-content')].some(e => e.innerText === before)"
        " && [...document.querySelectorAll('.widget-html-content')].some(e => e.innerText.includes('tokens'))",
        arg=before_text,
        timeout=30_000,
    )
    assert "257 tokens" in summary.inner_text()
    page.wait_for_function(  # the grid was redrawn: a new picture in the widget's output
        "before => { const img = document.querySelector('.widget-output img'); return img && img.src !== before; }",
        arg=before_picture,
        timeout=30_000,
    )
    page.screenshot(path=str(ARTIFACTS / "01_patches-slider.png"))


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_notebook_runs_in_jupyterlab(lab_url, notebook):
    sync_playwright = browser_or_skip()
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )  # fmt: skip
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            page.goto(f"{lab_url}/lab/tree/notebooks/{notebook}?token={TOKEN}")
            page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=60_000)
            page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=60_000)
            # from the file, not the page: JupyterLab renders long notebooks lazily
            cells = json.loads((ROOT / "notebooks" / notebook).read_text())["cells"]
            code_cells = sum(cell["cell_type"] == "code" for cell in cells)
            page.locator(".jp-Notebook").first.click()
            page.keyboard.press("Escape")  # command mode
            for command in ["Clear Outputs of All Cells", "Run All Cells"]:  # no committed output survives
                page.keyboard.press("Control+Shift+c")  # the command palette
                page.keyboard.type(command)
                page.keyboard.press("Enter")
                if command.startswith("Clear"):
                    page.wait_for_function(
                        "() => document.querySelectorAll('.jp-Notebook .jp-OutputArea-output').length === 0",
                        timeout=30_000,
                    )
            last_prompt = page.locator(".jp-Notebook .jp-CodeCell .jp-InputPrompt").last
            page.wait_for_function(
                "count => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]"
                ".at(-1).innerText.trim() === `[${count}]:`",
                arg=code_cells,
                timeout=180_000,
            )
            page.screenshot(path=str(ARTIFACTS / f"{notebook}.png"))
            errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            assert errors.count() == 0, errors.all_inner_texts()
            assert "[*]" not in last_prompt.inner_text()
            assert page.locator(".jp-OutputArea-output img").count() >= 5  # the plots were drawn
            assert page.locator("text=✓ patchify matches the reference").count() == 1
            if notebook == "01_patches.ipynb":
                check_patch_slicer_reacts(page)
        finally:
            page.screenshot(path=str(ARTIFACTS / f"{notebook}-last.png"))
            browser.close()
