"""The course's website in headless Chromium: `make site` builds it (warnings are errors), a loopback
HTTP server serves it, and the home page, lesson 1, lesson 7 and a reference page (time and memory)
are opened with every request to
another host blocked, as a reader with no internet would see them; so are the Chinese edition's home
page, lesson 1 and reference page (zh-CN/), and its language switch is followed on every page.

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
CHINESE = "zh-CN/"  # the Chinese edition's folder in the site, and its lessons' in the repository
CHINESE_ON_A_PHONE = ["01_patches", "06_training", "07_inside_vit", "09_claims"]  # the Chinese lessons opened at 390 px
PAGES = {  # name: (path in the site, the lesson it shows or None)
    "home": ("", None),
    "lesson1": ("lessons/01_patches.html", "01_patches.ipynb"),
    "lesson7": ("lessons/07_inside_vit.html", "07_inside_vit.ipynb"),
    "reference": ("docs/time-and-memory.html", None),
    "zh-home": (CHINESE, None),
    "zh-lesson1": (f"{CHINESE}lessons/01_patches.html", "01_patches.ipynb"),
    "zh-reference": (f"{CHINESE}docs/time-and-memory.html", None),
}
DESKTOP = {"width": 1366, "height": 768}  # a laptop's screen, as the issue measured
PHONE = {"width": 390, "height": 844}  # a phone's screen, in CSS pixels
GUIDE = "docs/instructor-guide.html"
AXE = ROOT / ".venv" / "npm" / "node_modules" / "axe-core" / "axe.min.js"  # make test installs it (npm)
REFERENCE = ["where-to-run", "library", "data", "time-and-memory", "performance", "glossary.zh-CN"]
PARTS = [  # the sidebar's lesson captions (docs/site/conf.py PARTS), English and Chinese, and the lessons under each
    ("Part I: the Vision Transformer", "第一部分：视觉 Transformer", range(1, 11)),  # noqa: RUF001
    ("Part II: the ViT since 2021", "第二部分：2021 年以来的 ViT", range(11, 14)),  # noqa: RUF001
    ("Beyond one process", "超越单个进程", range(14, 100)),
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


def edition(path: str) -> str:
    """The folder of the edition a page of the site belongs to: "" (English) or "zh-CN/"."""
    return CHINESE if path.startswith(CHINESE) else ""


def picture_outputs(notebook: str, folder: str = "") -> int:
    """How many of the lesson's committed outputs carry a picture: a bare PNG, or a described
    figure's <img> (utils.viz.core.with_alt_text)."""
    return sum(
        "image/png" in output.get("data", {}) or '<img alt="' in "".join(output.get("data", {}).get("text/html", ""))
        for cell in read_cells(ROOT / folder / "lessons" / notebook)
        for output in cell.get("outputs", [])
    )


def described_figures(notebook: str, folder: str = "") -> int:
    """How many of the lesson's outputs are figures described with alt text."""
    return sum(
        '<img alt="' in "".join(output.get("data", {}).get("text/html", ""))
        for cell in read_cells(ROOT / folder / "lessons" / notebook)
        for output in cell.get("outputs", [])
    )


def check_launch_buttons(buttons: dict[str, str], notebook: str, folder: str = "") -> None:
    """Binder, Colab and JupyterHub (nbgitpuller) open this lesson (of the edition in `folder`) from
    the repository at the tag."""
    lesson = f"{folder}lessons/{notebook}"
    assert set(buttons) == {"Binder", "Colab", "JupyterHub"}, buttons
    assert buttons["Binder"] == f"https://mybinder.org/v2/gh/{OWNER_REPO}/{TAG}?urlpath=lab/tree/{lesson}"
    assert buttons["Colab"] == f"https://colab.research.google.com/github/{OWNER_REPO}/blob/{TAG}/{lesson}"
    hub = urlparse(buttons["JupyterHub"])
    assert f"{hub.scheme}://{hub.netloc}{hub.path}" == f"{HUB}/hub/user-redirect/git-pull", buttons["JupyterHub"]
    clone = OWNER_REPO.split("/")[1]  # nbgitpuller clones into a folder named as the repository
    assert parse_qs(hub.query) == {
        "repo": [ADDRESS],
        "branch": [TAG],
        "urlpath": [f"lab/tree/{clone}/{lesson}"],
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


def check_sidebar(visit: Visit, folder: str = "") -> None:
    """The README, the lessons in order, the reference pages, the guide, the contributors' pages, all
    of the page's own edition (`folder`), under captions in its language."""
    links = visit.page.eval_on_selector_all(".bd-sidebar-primary nav a[href]", "links => links.map(a => a.href)")
    here = visit.page.url.split("#")[0]
    paths = [(here if link.split("#")[0] == here else link).removeprefix(visit.site) for link in links]
    paths = [f"{folder}README.html" if path == folder else path.split("#")[0] for path in paths]
    expected = [folder + path for path in SIDEBAR]
    assert paths == expected, f"sidebar:\n{paths}\nexpected:\n{expected}"
    captions = visit.page.locator(".bd-sidebar-primary nav .caption").all_inner_texts()
    captions = [" ".join(text.split()) for text in captions]
    parts = [
        chinese if folder else english
        for english, chinese, numbers in PARTS
        if any(int(path.stem[:2]) in numbers for path in NOTEBOOKS)
    ]
    assert captions[: len(parts)] == parts, captions


def check_offline(visit: Visit) -> None:
    assert not visit.outside, f"the page asked the internet for: {visit.outside}"
    assert not visit.failed, f"requests that failed: {visit.failed}"
    assert not visit.errors, f"errors on the page: {visit.errors}"


@pytest.mark.parametrize("name", PAGES)
def test_page_reads_offline(visit, name):
    path, notebook = PAGES[name]
    folder = edition(path)
    page = visit(path)
    assert page.page.locator("article h1").first.is_visible()
    assert page.page.get_attribute("html", "lang") == ("zh-CN" if folder else "en")
    check_sidebar(page, folder)
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
        title = "ViT from Scratch" if name.endswith("home") else "Time and memory"
        assert page.page.locator("article h1").first.inner_text().startswith(title)
        assert not buttons, f"launch buttons on a page that is no lesson: {buttons}"
        if name.endswith("home"):  # the README's line linking the other README is the header's switch on the site
            assert not re.search(r"English · |· 简体中文", page.page.locator("article").inner_text())
        if name == "zh-home":
            assert "从零构建视觉 Transformer" in page.page.locator("article h1").first.inner_text()
        if name == "zh-reference":  # an English page in the Chinese edition says so
            assert "本页暂无中文版" in page.page.locator("article").inner_text()
    else:
        figures = page.page.locator("article .cell_output img").count()
        expected = picture_outputs(notebook, folder)
        assert figures == expected, f"{figures} figures, {expected} in the lesson"
        full_size = page.page.eval_on_selector_all(
            "article .cell_output img", "images => images.map(i => i.closest('a.course-full-size')?.href === i.src)"
        )
        assert all(full_size), "figures that a tap does not open at full size (docs/site/static/course.js)"
        # every figure, the explorers' pictures too, keeps its words as its alt, not a file name
        alts = page.page.eval_on_selector_all("article .cell_output img", "images => images.map(i => i.alt)")
        worded = [alt for alt in alts if len(alt.split()) >= 6 and not alt.endswith(".png")]
        assert len(worded) == figures == described_figures(notebook, folder), [alt for alt in alts if alt not in worded]
        assert images > figures  # the badges and the launch buttons' icons too
        check_launch_buttons(buttons, notebook, folder)
        if folder:
            assert page.page.locator("article h1").first.inner_text().startswith("第 1 课")
        page.page.locator(".dropdown-launch-buttons button").first.hover()
        page.page.screenshot(path=str(ARTIFACTS / f"{name}-launch.png"))
    assert links >= len(SIDEBAR)
    page.page.mouse.move(0, 0)
    page.page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
    check_offline(page)


@pytest.mark.parametrize("name", ["lesson1", "zh-lesson1"])
def test_lesson1_math_is_typeset_by_the_sites_own_mathjax(visit, name):
    opened = visit(PAGES[name][0])
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
    page.screenshot(path=str(ARTIFACTS / f"{name}-math.png"))
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


@pytest.mark.parametrize(
    "path",
    [
        *("", GUIDE, *(f"lessons/{path.stem}.html" for path in NOTEBOOKS)),
        *(CHINESE + page for page in ("", GUIDE, *(f"lessons/{stem}.html" for stem in CHINESE_ON_A_PHONE))),
    ],
)
def test_no_page_is_wider_than_a_phone(visit, path):
    """At 390 px nothing makes the page pan sideways: long inline code wraps, wide equations and
    printed tables scroll inside their own box (docs/site/static/course.css). The Chinese lessons'
    code, outputs, tables and equations are the English ones, so the Chinese edition is opened for
    its own pages (home, guide) and the lessons with the widest tables and figures."""
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
        name = edition(path).strip("/") + (Path(path).stem if Path(path).suffix else "home")
        page.screenshot(path=str(ARTIFACTS / f"phone-{name}.png"), full_page=False)
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


@pytest.mark.parametrize(
    "path",
    ["", "lessons/01_patches.html", "lessons/07_inside_vit.html", GUIDE, CHINESE, f"{CHINESE}lessons/01_patches.html"],
)
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


# --- the Chinese edition and the language switch ---------------------------------------------


def switch_target(build: Path, page: Path) -> Path:
    """The page the language switch of `page` leads to (a file of the build), or a failure."""
    found = re.findall(r'<a class="[^"]*course-language-switch[^"]*" href="([^"]+)"', page.read_text(encoding="utf-8"))
    assert len(found) == 1, f"{page.relative_to(build)}: {len(found)} language switches"
    return Path(os.path.normpath(page.parent / found[0]))


def test_every_page_switches_to_the_same_page_in_the_other_language(site_url):
    """Every page of either edition has one switch; it leads to a page of the other edition at the same
    place (lessons/07_inside_vit.html and zh-CN/lessons/07_inside_vit.html), whose switch leads back."""
    build = ARTIFACTS / "build" / "html"
    chinese = build / CHINESE
    pages = [
        path
        for path in build.rglob("*.html")
        if not any(part.startswith("_") for part in path.relative_to(build).parts)
    ]
    english = [path for path in pages if not path.is_relative_to(chinese)]
    assert len(english) == len(pages) - len(english) >= len(SIDEBAR) + 3  # index, search and genindex too
    wrong = []
    for page in pages:
        target = switch_target(build, page)
        same = page.relative_to(chinese if page.is_relative_to(chinese) else build).as_posix()
        same = "README.html" if same == "index.html" else same  # the home page is the README's page
        expected = (build if page.is_relative_to(chinese) else chinese) / same
        if target != expected or not target.exists():
            wrong.append(f"{page.relative_to(build)} -> {target} (expected {expected.relative_to(build)})")
        elif switch_target(build, target) != page.with_name("README.html" if page.name == "index.html" else page.name):
            wrong.append(f"{target.relative_to(build)} does not lead back to {page.relative_to(build)}")
    assert not wrong, "language switches that miss:\n" + "\n".join(wrong)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_switch_lands_on_the_same_lesson_and_back(visit, viewport):
    """On lesson 7, at a laptop's size and a phone's, the header's switch opens the Chinese lesson 7,
    whose switch opens the English one again."""
    opened = visit(PAGES["lesson7"][0], viewport)
    page = opened.page
    switch = page.locator("a.course-language-switch")
    assert switch.is_visible() and switch.inner_text().strip() == "中文" == switch.get_attribute("aria-label")
    switch.click()
    page.wait_for_load_state("networkidle")
    assert page.url == opened.site + f"{CHINESE}lessons/07_inside_vit.html"
    assert page.get_attribute("html", "lang") == "zh-CN"
    assert page.locator("article h1").first.inner_text().startswith("第 7 课")
    page.screenshot(path=str(ARTIFACTS / f"zh-lesson7-{'phone' if viewport == PHONE else 'desktop'}.png"))
    back = page.locator("a.course-language-switch")  # on a phone its label is short, its name the same
    assert back.is_visible() and back.inner_text().strip() == ("EN" if viewport == PHONE else "English")
    assert back.get_attribute("aria-label") == "English"
    back.click()
    page.wait_for_load_state("networkidle")
    assert page.url == opened.site + PAGES["lesson7"][0]
    check_offline(opened)


def test_the_chinese_pages_name_their_chinese_sources(visit):
    """The header's link to a page's source opens the Chinese file it was made from, at the tag."""
    for path, source in [
        (PAGES["zh-home"][0], "README.zh-CN.md"),
        (PAGES["zh-lesson1"][0], "zh-CN/lessons/01_patches.ipynb"),
    ]:
        page = visit(path).page
        links = page.eval_on_selector_all(".dropdown-source-buttons a", "links => links.map(a => a.href)")
        assert any(link.startswith(f"{ADDRESS}/blob/{TAG}/{source}") for link in links), links
        assert not [link for link in links if f"/{TAG}/zh-CN/README" in link or "/zh-CN/docs/" in link], links


def test_the_chinese_site_is_searched_in_chinese(visit):
    """Sphinx's Chinese search (words split by jieba) finds lesson 3 for 注意力 (attention)."""
    opened = visit(f"{CHINESE}search.html?q=%E6%B3%A8%E6%84%8F%E5%8A%9B")
    page = opened.page
    page.wait_for_selector("#search-results ul.search li a", timeout=20_000)
    found = page.eval_on_selector_all("#search-results ul.search li a", "links => links.map(a => a.href)")
    assert any(link.startswith(opened.site + f"{CHINESE}lessons/03_attention.html") for link in found), found[:10]
    # the switch keeps the query: the same search in English (docs/site/static/course.js)
    assert page.get_attribute("a.course-language-switch", "href").endswith("search.html?q=%E6%B3%A8%E6%84%8F%E5%8A%9B")
    check_offline(opened)
