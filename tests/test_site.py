"""The course's website in headless Chromium: `make site` builds it (warnings are errors), a loopback
HTTP server serves it, and the home page, lesson 1, lesson 7 and a reference page (time and memory)
are opened with every request to
another host blocked, as a reader with no internet would see them.

On each page: nothing failed to load and nothing was asked of the internet; every figure loaded;
every internal link (sidebar included) leads to a page that exists and to an anchor on it; the
sidebar lists the README, the lessons in order and the guide; the launch buttons open the lesson at
the release tag from pyproject.toml (Binder, Colab, JupyterHub through nbgitpuller). On lesson 1,
MathJax (served by the site itself) has typeset every formula. Lesson 7's explorers show their last
picture as an image.

Needs Debian's chromium and playwright, as tests/test_browser.py: skipped without them, except
under CI (CI=true). The site is built into test-artifacts/site/build/; screenshots go to
test-artifacts/site/ (git-ignored).
"""

import functools
import http.server
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

import pytest
import tomllib
from notebook_cells import NOTEBOOKS, ROOT, WIDGET, read_cells
from test_browser import CHROMIUM, CHROMIUM_ARGS, browser_or_skip

pytestmark = pytest.mark.browser

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
ADDRESS = PROJECT["urls"]["Repository"]
OWNER_REPO = urlparse(ADDRESS).path.strip("/")
TAG = f"v{PROJECT['version']}"
HUB = "https://hub.example.org"  # a workshop's JupyterHub, as `make site HUB=...` takes it
ARTIFACTS = ROOT / "test-artifacts" / "site"
BUILD_S = 120  # the build takes about 10 s on 2 cores
PAGES = {  # name: (path in the site, the lesson it shows or None)
    "home": ("", None),
    "lesson1": ("lessons/01_patches.html", "01_patches.ipynb"),
    "lesson7": ("lessons/07_inside_vit.html", "07_inside_vit.ipynb"),
    "reference": ("docs/time-and-memory.html", None),
}
DESKTOP = {"width": 1366, "height": 768}  # a laptop's screen, as the issue measured
PHONE = {"width": 390, "height": 844}  # a phone's screen, in CSS pixels
GUIDE = "docs/instructor-guide.html"
AXE = ROOT / ".venv" / "npm" / "node_modules" / "axe-core" / "axe.min.js"  # make test installs it (npm)
REFERENCE = ["where-to-run", "library", "data", "time-and-memory", "performance"]
PARTS = [  # the sidebar's lesson captions (docs/site/conf.py PARTS) and the lessons under each
    ("Part I: the Vision Transformer", range(1, 11)),
    ("Part II: the ViT since 2021", range(11, 14)),
    ("Beyond one process", range(14, 100)),
]
SIDEBAR = [
    "README.html",
    *(f"lessons/{path.stem}.html" for path in NOTEBOOKS),
    *(f"docs/{name}.html" for name in REFERENCE),
    "docs/instructor-guide.html",
    "docs/testing.html",
    "docs/writing-a-lesson.html",
]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site_url():
    """`make site` into test-artifacts/site/build, served on a free loopback port."""
    build = ARTIFACTS / "build"
    shutil.rmtree(build, ignore_errors=True)  # no page left over from an earlier build
    run = subprocess.run(
        ["make", "--no-print-directory", "site", f"SITE_DIR={build}", f"HUB={HUB}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_S,
    )
    output = (run.stdout + run.stderr).splitlines()
    problems = [line for line in output if re.search(r"WARNING|ERROR|Error", line)]
    assert run.returncode == 0, "make site failed:\n" + "\n".join(problems or output[-40:])
    assert not problems, "make site warned:\n" + "\n".join(problems)
    handler = functools.partial(QuietHandler, directory=str(build / "html"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser():
    sync_playwright = browser_or_skip()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Visit:
    """A page opened offline: requests to any host but the site's are blocked and listed, and so
    are failed requests, error responses and script errors."""

    def __init__(self, browser, site_url: str, path: str, viewport: dict | None = None):
        self.site = site_url
        self.context = browser.new_context(viewport=viewport or DESKTOP)
        self.outside, self.failed, self.errors = [], [], []
        self.context.route("**/*", self.only_the_site)
        self.page = self.context.new_page()
        self.page.on("requestfailed", lambda request: self.failed.append(f"{request.url}: {request.failure}"))
        self.page.on("response", self.note_error_response)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("console", self.note_console_error)
        self.page.goto(site_url + path, wait_until="load")
        self.page.wait_for_load_state("networkidle")

    def only_the_site(self, route):
        if route.request.url.startswith(self.site) or route.request.url.startswith("data:"):
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def note_error_response(self, response):
        if response.status >= 400:
            self.failed.append(f"{response.url}: HTTP {response.status}")

    def note_console_error(self, message):
        if message.type == "error":
            self.errors.append(message.text)

    def links(self) -> list[str]:
        """Every link's address on the page, resolved."""
        return self.page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")

    def close(self):
        self.context.close()


@pytest.fixture
def visit(browser, site_url):
    opened = []

    def open_page(path: str, viewport: dict | None = None) -> Visit:
        opened.append(Visit(browser, site_url, path, viewport))
        return opened[-1]

    yield open_page
    for page in opened:
        page.close()


def picture_outputs(notebook: str) -> int:
    """How many of the lesson's committed outputs carry a picture: a bare PNG, or a described
    figure's <img> (utils.viz.core.with_alt_text)."""
    return sum(
        "image/png" in output.get("data", {}) or '<img alt="' in "".join(output.get("data", {}).get("text/html", ""))
        for cell in read_cells(ROOT / "lessons" / notebook)
        for output in cell.get("outputs", [])
    )


def described_figures(notebook: str) -> int:
    """How many of the lesson's outputs are figures described with alt text."""
    return sum(
        '<img alt="' in "".join(output.get("data", {}).get("text/html", ""))
        for cell in read_cells(ROOT / "lessons" / notebook)
        for output in cell.get("outputs", [])
    )


def check_launch_buttons(buttons: dict[str, str], notebook: str) -> None:
    """Binder, Colab and JupyterHub (nbgitpuller) open this lesson from the repository at the tag."""
    assert set(buttons) == {"Binder", "Colab", "JupyterHub"}, buttons
    assert buttons["Binder"] == f"https://mybinder.org/v2/gh/{OWNER_REPO}/{TAG}?urlpath=lab/tree/lessons/{notebook}"
    assert buttons["Colab"] == f"https://colab.research.google.com/github/{OWNER_REPO}/blob/{TAG}/lessons/{notebook}"
    hub = urlparse(buttons["JupyterHub"])
    assert f"{hub.scheme}://{hub.netloc}{hub.path}" == f"{HUB}/hub/user-redirect/git-pull", buttons["JupyterHub"]
    folder = OWNER_REPO.split("/")[1]  # nbgitpuller clones into a folder named as the repository
    assert parse_qs(hub.query) == {
        "repo": [ADDRESS],
        "branch": [TAG],
        "urlpath": [f"lab/tree/{folder}/lessons/{notebook}"],
    }, buttons["JupyterHub"]


def check_internal_links(visit: Visit) -> int:
    """Every link into the site leads to a page that is there, and to an anchor that is on it; a
    lesson or a Markdown page is linked as its page, never as its source file. Returns the count."""
    pages: dict[str, str] = {}
    broken = []
    internal = [link for link in visit.links() if link.startswith(visit.site)]
    for link in internal:
        address, _, anchor = link.partition("#")
        path = urlparse(address).path
        if path.endswith((".ipynb", ".md")) and "/_sources/" not in path:
            broken.append(f"{link}: a source file, not its page")
            continue
        if address not in pages:
            response = visit.page.request.get(address)
            pages[address] = response.text() if response.ok else None
        if pages[address] is None:
            broken.append(f"{link}: no such page")
        elif anchor and f'id="{unquote(anchor)}"' not in pages[address]:
            broken.append(f"{link}: no anchor #{anchor} on the page")
    assert not broken, "broken links on " + visit.page.url + ":\n" + "\n".join(broken)
    return len(internal)


def check_repository_links(visit: Visit) -> None:
    """Links to the repository lead to it, or to a file in it at the release tag (never main)."""
    at_tag = re.compile(rf"{re.escape(ADDRESS)}/(blob|tree)/{re.escape(TAG)}/")
    wrong = [link for link in visit.links() if link.startswith(ADDRESS) and link != ADDRESS and not at_tag.match(link)]
    assert not wrong, f"repository links not at {TAG}: {wrong}"


def check_figures(visit: Visit) -> int:
    """Every picture on the page was loaded and has a size. Returns how many there are."""
    images = visit.page.eval_on_selector_all(
        "img", "images => images.map(i => [i.getAttribute('src'), i.complete && i.naturalWidth > 0])"
    )
    missing = [src for src, loaded in images if not loaded]
    assert not missing, f"pictures that did not load: {missing}"
    return len(images)


def check_sidebar(visit: Visit) -> None:
    """The README, the lessons in order, the reference pages, the guide, the contributors' pages."""
    links = visit.page.eval_on_selector_all(".bd-sidebar-primary nav a[href]", "links => links.map(a => a.href)")
    here = visit.page.url.split("#")[0]
    paths = [(here if link.split("#")[0] == here else link).removeprefix(visit.site) for link in links]
    paths = ["README.html" if path == "" else path.split("#")[0] for path in paths]
    assert paths == SIDEBAR, f"sidebar:\n{paths}\nexpected:\n{SIDEBAR}"
    captions = visit.page.locator(".bd-sidebar-primary nav .caption").all_inner_texts()
    captions = [" ".join(text.split()) for text in captions]
    parts = [name for name, numbers in PARTS if any(int(path.stem[:2]) in numbers for path in NOTEBOOKS)]
    assert captions[: len(parts)] == parts, captions


def check_offline(visit: Visit) -> None:
    assert not visit.outside, f"the page asked the internet for: {visit.outside}"
    assert not visit.failed, f"requests that failed: {visit.failed}"
    assert not visit.errors, f"errors on the page: {visit.errors}"


@pytest.mark.parametrize("name", PAGES)
def test_page_reads_offline(visit, name):
    path, notebook = PAGES[name]
    page = visit(path)
    assert page.page.locator("article h1").first.is_visible()
    check_sidebar(page)
    images = check_figures(page)
    links = check_internal_links(page)
    check_repository_links(page)
    buttons = dict(
        page.page.eval_on_selector_all(
            ".dropdown-launch-buttons a.dropdown-item",
            "links => links.map(a => [a.textContent.trim(), a.href])",
        )
    )
    if notebook is None:  # the home page (the README) or a reference page: no launch buttons
        title = "ViT from Scratch" if name == "home" else "Time and memory"
        assert page.page.locator("article h1").first.inner_text().startswith(title)
        assert not buttons, f"launch buttons on a page that is no lesson: {buttons}"
    else:
        figures = page.page.locator("article .cell_output img").count()
        assert figures == picture_outputs(notebook), f"{figures} figures, {picture_outputs(notebook)} in the lesson"
        full_size = page.page.eval_on_selector_all(
            "article .cell_output img", "images => images.map(i => i.closest('a.course-full-size')?.href === i.src)"
        )
        assert all(full_size), "figures that a tap does not open at full size (docs/site/static/course.js)"
        # every figure, the explorers' pictures too, keeps its words as its alt, not a file name
        alts = page.page.eval_on_selector_all("article .cell_output img", "images => images.map(i => i.alt)")
        worded = [alt for alt in alts if len(alt.split()) >= 6 and not alt.endswith(".png")]
        assert len(worded) == figures == described_figures(notebook), [alt for alt in alts if alt not in worded]
        assert images > figures  # the badges and the launch buttons' icons too
        check_launch_buttons(buttons, notebook)
        page.page.locator(".dropdown-launch-buttons button").first.hover()
        page.page.screenshot(path=str(ARTIFACTS / f"{name}-launch.png"))
    assert links >= len(SIDEBAR)
    page.page.mouse.move(0, 0)
    page.page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
    check_offline(page)


def test_lesson1_math_is_typeset_by_the_sites_own_mathjax(visit):
    opened = visit(PAGES["lesson1"][0])
    page = opened.page
    page.wait_for_function("() => window.MathJax?.startup?.promise")
    page.evaluate("() => MathJax.startup.promise")
    formulas = page.locator("article .math")
    assert formulas.count() >= 5, f"{formulas.count()} formulas on lesson 1"
    untypeset = page.eval_on_selector_all(
        "article .math", "maths => maths.filter(m => !m.querySelector('mjx-container')).map(m => m.textContent)"
    )
    assert not untypeset, f"formulas MathJax left as text: {untypeset}"
    assert page.locator("article mjx-merror").count() == 0, page.locator("article mjx-merror").all_inner_texts()
    scripts = page.eval_on_selector_all("script[src*='mathjax']", "scripts => scripts.map(s => s.src)")
    assert scripts and all(src.startswith(page.url.split("lessons/")[0]) for src in scripts), scripts
    page.locator("article div.math").first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "lesson1-math.png"))
    check_offline(opened)  # MathJax's fonts included


def test_lesson7_explorers_show_their_last_picture(visit):
    """Each explorer's output on the page is a picture (its display bundle's image/png), not the
    widget's text form: nothing on the site runs the widget."""
    notebook = PAGES["lesson7"][1]
    opened = visit(PAGES["lesson7"][0])
    page = opened.page
    explorers = [
        cell["source"].strip()
        for cell in read_cells(ROOT / "lessons" / notebook)
        if any(WIDGET in output.get("data", {}) for output in cell.get("outputs", []))
    ]
    assert len(explorers) >= 2, explorers
    without_picture = []
    for number, source in enumerate(explorers, start=1):
        cell = page.locator("article .cell", has=page.locator(".cell_input", has_text=source))
        assert cell.count() == 1, f"{cell.count()} cells on the page show the code {source[:60]!r}..."
        cell.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"lesson7-explorer-{number}.png"))
        if cell.locator(".cell_output img").count() == 0:
            shown = " ".join(cell.locator(".cell_output").inner_text().split())
            without_picture.append(f"{source.splitlines()[0]!r} shows {shown[:100]!r}")
    assert not without_picture, "explorers without their picture:\n" + "\n".join(without_picture)
    check_offline(opened)


@pytest.mark.parametrize("path", ["", GUIDE, *(f"lessons/{path.stem}.html" for path in NOTEBOOKS)])
def test_no_page_is_wider_than_a_phone(visit, path):
    """At 390 px nothing makes the page pan sideways: long inline code wraps, wide equations and
    printed tables scroll inside their own box (docs/site/static/course.css)."""
    opened = visit(path, PHONE)
    page = opened.page
    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    if widths[0] > widths[1]:
        wide = page.evaluate(
            """(width) => [...document.querySelectorAll('article *')]
                .filter(e => e.getBoundingClientRect().right > width + 1)
                .slice(0, 5).map(e => e.tagName + ' ' + (e.textContent || '').trim().slice(0, 60))""",
            widths[1],
        )
        page.screenshot(path=str(ARTIFACTS / f"phone-{Path(path).stem or 'home'}.png"), full_page=False)
        pytest.fail(f"{path or 'the home page'} is {widths[0]} px wide on a {widths[1]} px screen: {wide}")
    check_offline(opened)


@pytest.mark.parametrize(("lesson", "least"), [("06_training", 10), ("09_claims", 10)])
def test_result_tables_are_real_tables_that_read_on_a_phone(visit, lesson, least):
    """Lessons 6 and 9 show their results and verdicts as HTML tables (utils.tables.Table), not as
    text wider than the column; on a phone a long cell wraps in a column still wide enough to read."""
    page = visit(f"lessons/{lesson}.html", PHONE).page
    assert page.locator("article div.course-table table").count() >= least
    squeezed = page.evaluate(
        """() => [...document.querySelectorAll('article div.course-table td')]
            .filter(td => td.textContent.length > 40 && td.getBoundingClientRect().width < 100)
            .map(td => Math.round(td.getBoundingClientRect().width) + ' px: ' + td.textContent.slice(0, 50))"""
    )
    assert not squeezed, f"cells squeezed to a sliver: {squeezed[:5]}"
    page.locator("article div.course-table").first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / f"phone-table-{lesson}.png"))


def test_the_guides_day_before_list_is_a_checklist(visit):
    page = visit(GUIDE).page
    boxes = page.eval_on_selector_all(
        "article input[type=checkbox]", "boxes => boxes.map(b => b.getAttribute('aria-label') || '')"
    )
    assert len(boxes) >= 8 and all(boxes), boxes
    assert "[ ]" not in page.locator("article").inner_text()


def axe_or_skip() -> str:
    """axe-core's script, or a skip (a failure under CI) naming what is missing."""
    if not AXE.exists():
        message = f"the accessibility check needs axe-core at {AXE.relative_to(ROOT)} (make test installs it with npm)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return AXE.read_text()


@pytest.mark.parametrize("path", ["", "lessons/01_patches.html", "lessons/07_inside_vit.html", GUIDE])
def test_no_serious_accessibility_violation(visit, path):
    """axe-core's rules on the page as a reader gets it (the course's script has run): no violation
    of impact serious or critical. Moderate ones are the theme's (its sidebar is no landmark)."""
    script = axe_or_skip()
    opened = visit(path)
    opened.page.add_script_tag(content=script)
    violations = opened.page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
            .filter(v => ['serious', 'critical'].includes(v.impact))
            .map(v => `${v.impact} ${v.id}: ${v.nodes.length} x ${v.nodes[0].html.slice(0, 120)}`)"""
    )
    assert not violations, f"{path or 'the home page'}:\n" + "\n".join(violations)
