"""The course as a website (`make site`): Sphinx with myst-nb and sphinx-book-theme, built offline.

The source folder is the repository itself, so a page's path is the file's path in the repository
(lessons/01_patches.ipynb -> lessons/01_patches.html) and the launch buttons open that file.
Pages: the README (the home page), the lessons in order as the learner's edition (lessons/: each
exercise a stub, its hints and solution folded) with their committed outputs (nothing is run), the
reference pages in docs/ and the instructor guide. Nothing is fetched when the site is built or read: MathJax is
copied in from a pip package (django-static-mathjax), the widgets' JavaScript is left out (an
explorer shows the picture its display bundle carries), and the README's and the lessons' launch
badges are drawn from copies in docs/site/badges/.

Every address comes from pyproject.toml: [project.urls] Repository and the release tag
v<version>. Binder, Colab and (with SITE_JUPYTERHUB=https://your.hub, `make site HUB=...`) a
JupyterHub through nbgitpuller open each lesson at that tag; a link to a repository file that is
not a page (Makefile, utils/..., LICENSE) leads to the file on GitHub at that tag.

The Chinese edition (SITE_LANGUAGE=zh-CN, the Makefile's second build, into zh-CN/ beside the
English pages) has the same pages under the same names, read from the Chinese sources
(CHINESE_SOURCES: the README, the guide's learner sections, the Chinese learner's edition); a page
without a translation (the reference pages) shows the English under a note saying so. A language
switch in every page's header leads to the same page in the other edition.
"""

import json
import os
import posixpath
import re
import shutil
from importlib.resources import files
from pathlib import Path

import tomllib
from docutils import nodes
from sphinx import addnodes
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
ADDRESS = PROJECT["urls"]["Repository"]  # https://github.com/<owner>/<repository>
TAG = f"v{PROJECT['version']}"
LESSONS = sorted(ROOT.glob("lessons/[0-9][0-9]_*.ipynb"))  # the learner's edition
HOME = "README"
GUIDE = "docs/instructor-guide"
GLOSSARY = "docs/glossary.zh-CN"  # English terms and their Chinese: a page of both editions
LANGUAGE = os.environ.get("SITE_LANGUAGE", "en")  # "en", or "zh-CN" for the Chinese edition
if LANGUAGE not in ("en", "zh-CN"):
    raise ValueError(f"SITE_LANGUAGE is {LANGUAGE!r}: the site comes in en and zh-CN")
CHINESE = LANGUAGE == "zh-CN"
# The Chinese edition's pages: a page's name -> the file its Chinese is read from (the pages not here
# are English in both editions)
CHINESE_SOURCES = {HOME: "README.zh-CN.md", GUIDE: "docs/instructor-guide.zh-CN.md"} | {
    f"lessons/{path.stem}": f"zh-CN/lessons/{path.name}" for path in LESSONS
}
# The lessons in the sidebar, by part (DESIGN.md: Part I is lessons 1-10, Part II the ViT since 2021)
PARTS = {
    ("Part I: the Vision Transformer", "第一部分：视觉 Transformer"): range(1, 11),  # noqa: RUF001
    ("Part II: the ViT since 2021", "第二部分：2021 年以来的 ViT"): range(11, 14),  # noqa: RUF001
    ("Beyond one process", "超越单个进程"): range(14, 100),
}
# The sidebar's other sections: (caption, pages), each a Markdown file in docs/ without its suffix.
REFERENCE = ["docs/where-to-run", "docs/library", "docs/data", "docs/time-and-memory", "docs/performance", GLOSSARY]
CONTRIBUTING = ["docs/testing", "docs/writing-a-lesson"]
CAPTIONS = {  # the other sections' captions: (English, Chinese)
    "reference": ("Reference", "参考"),
    "instructors": ("For instructors", "面向讲师"),
    "contributors": ("For contributors", "面向贡献者"),
}
# The README's line that links the other language's README on GitHub: the site's switch does it instead
LANGUAGE_LINES = re.compile(
    r"^(English · \[简体中文\]\(README\.zh-CN\.md\)|\[English\]\(README\.md\) · 简体中文)\n", re.M
)
SWITCH = {  # the header's language switch: (its label, its label on a phone, the other edition's language)
    "en": ("中文", "中文", "zh-CN"),
    "zh-CN": ("English", "EN", "en"),
}
UNTRANSLATED_NOTE = "> 本页暂无中文版，以下是英文原文。术语的中文见[术语表](glossary.zh-CN.md)。\n"  # noqa: RUF001
# Images the pages link from the internet, drawn from a copy in docs/site/badges/ instead.
LOCAL_COPIES = {
    "https://mybinder.org/badge_logo.svg": "badge-binder.svg",
    "https://colab.research.google.com/assets/colab-badge.svg": "badge-colab.svg",
}
# MathJax 3.2's browser build (es5/) as django-static-mathjax ships it, in a package named mathjax:
# the TeX-to-HTML bundle, the TeX extensions it loads on demand, its fonts, the context menu and the
# accessibility tools.
MATHJAX = files("mathjax") / "static" / "mathjax" / "es5"
MATHJAX_PARTS = ["tex-chtml.js", "input", "output", "ui", "a11y", "adaptors", "sre"]

# -- the pages ---------------------------------------------------------------------------------
project = "ViT from Scratch"
language = "zh_CN" if CHINESE else "en"  # the theme's words (搜索, 目录 ...) and the search's word splitting
author = ", ".join(person["name"] for person in PROJECT["authors"])
copyright = author
version = release = PROJECT["version"]
root_doc = HOME
include_patterns = [f"{page}.md" for page in [HOME, *REFERENCE, GUIDE, *CONTRIBUTING]] + ["lessons/[0-9][0-9]_*.ipynb"]
templates_path = ["templates"]  # docs/site/templates: the language switch
# the source folder is the repository: leave out everything but the pages' folders, unwalked
exclude_patterns = [path.name for path in ROOT.iterdir() if path.name not in {f"{HOME}.md", "docs", "lessons"}]
exclude_patterns += ["docs/site", "**.ipynb_checkpoints"]

extensions = ["myst_nb"]
myst_enable_extensions = ["dollarmath", "amsmath", "tasklist"]  # tasklist: the guide's "- [ ]" checklist
myst_heading_anchors = 3  # [time and memory](../README.md#time-and-memory)
nb_execution_mode = "off"  # the committed outputs, as the lessons were last run
nb_ipywidgets_js = {}  # no widget manager from a CDN: a widget's output shows its picture instead
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
suppress_warnings = ["mystnb.unknown_mime_type"]  # the widget outputs left out above

# -- the HTML ----------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_static_path = ["static"]  # docs/site/static: the course's CSS and JavaScript below
html_css_files = ["course.css"]  # long code wraps, wide equations and printed tables scroll in their box
html_js_files = ["course.js"]  # a tap opens a figure at full size
html_title = project
mathjax_path = "mathjax/tex-chtml.js"  # in _static/, copied from the pip package after the build
mathjax3_config = {"options": {}}  # MathJax 3's settings: myst-parser adds which elements to typeset
html_context = {"default_mode": "light"}  # the figures are drawn on white; a reader can switch
html_theme_options = {
    "repository_url": ADDRESS,
    "repository_branch": TAG,  # "source" and launch links open the release, never main
    "path_to_docs": "zh-CN" if CHINESE else "",  # launch buttons open zh-CN/lessons/<stem>.ipynb
    "article_header_end": ["language-switch.html", "article-header-buttons.html"],
    "use_repository_button": True,
    "use_source_button": True,
    "use_download_button": True,
    "home_page_in_toc": True,
    "navbar_persistent": [],  # no second search box above the sidebar's
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "launch_buttons": {
        "notebook_interface": "jupyterlab",
        "binderhub_url": "https://mybinder.org",
        "colab_url": "https://colab.research.google.com",
        "jupyterhub_url": os.environ.get("SITE_JUPYTERHUB", ""),  # a workshop's hub; none by default
    },
}


def add_sidebar(app, docname: str, source: list[str]) -> None:
    """The sidebar: the lessons in order, by part (PARTS), the reference pages, the guide, then the contributors'
    pages, as hidden tables of contents appended to the README as it is read (the file itself is
    not changed)."""
    if docname != HOME:
        return
    sections = {
        caption[CHINESE]: [f"lessons/{path.stem}" for path in LESSONS if int(path.stem[:2]) in numbers]
        for caption, numbers in PARTS.items()
    }
    sections = {caption: pages for caption, pages in sections.items() if pages} | {
        CAPTIONS["reference"][CHINESE]: REFERENCE,
        CAPTIONS["instructors"][CHINESE]: [GUIDE],
        CAPTIONS["contributors"][CHINESE]: CONTRIBUTING,
    }
    for caption, pages in sections.items():
        entries = "\n".join(pages)
        source[0] += f"\n\n```{{toctree}}\n:hidden:\n:caption: {caption}\n\n{entries}\n```\n"


def in_this_edition(app, docname: str, source: list[str]) -> None:
    """The page as this edition shows it. In both, the README without its line linking the other
    README (the header's switch does that). In the Chinese edition, a page with a translation is read
    from CHINESE_SOURCES, its links retargeted (chinese_links); any other page but the glossary gets
    a note under its title saying it is in English."""
    if CHINESE and docname in CHINESE_SOURCES:
        source[0] = (ROOT / CHINESE_SOURCES[docname]).read_text(encoding="utf-8")
        if docname.startswith("lessons/"):
            return
        text = LANGUAGE_LINES.sub("", re.sub(r"^<!-- section .* -->\n", "", source[0], flags=re.M))
        source[0] = chinese_links(text, docname)
    elif CHINESE and docname != GLOSSARY:
        source[0] = re.sub(
            r"^(# .*\n)", lambda title: title[1] + "\n" + UNTRANSLATED_NOTE, source[0], count=1, flags=re.M
        )
    elif docname == HOME:
        source[0] = LANGUAGE_LINES.sub("", source[0])


def chinese_links(text: str, docname: str) -> str:
    """A translated page's links, for the Chinese edition: a Chinese lesson or page (zh-CN/lessons/...,
    README.zh-CN.md) is that page of this edition; a link to an English page this edition shows in
    Chinese (the README, the guide) leads to the English edition's page."""
    english_files = {f"{name}.md": name for name in CHINESE_SOURCES if not name.startswith("lessons/")}
    chinese_files = {file: name for name, file in CHINESE_SOURCES.items() if file.endswith(".md")}
    here = posixpath.dirname(docname)

    def retarget(link: re.Match) -> str:
        words, target, fragment = link[1], link[2], link[3] or ""
        path = posixpath.normpath(posixpath.join(here, target))
        if path in english_files:  # raw HTML, so that Sphinx does not take it for this edition's page
            words = re.sub(r"`([^`]+)`", r"<code>\1</code>", words)
            return f'<a href="{other_edition(docname, english_files[path])}{fragment}">{words}</a>'
        if path in chinese_files:
            path = f"{chinese_files[path]}.md"
        return f"[{words}]({posixpath.relpath(path.replace('zh-CN/lessons/', 'lessons/'), here or '.')}{fragment})"

    return re.sub(r"(?<!!)\[([^\]]*)\]\((?!https?:)([^)#\s]+)(#[^)\s]*)?\)", retarget, text)


def other_edition(docname: str, page: str) -> str:
    """The address of `page` in the other edition, relative to `docname` in this one."""
    up = "../" * (docname.count("/") + CHINESE)
    return f"{up}{'' if CHINESE else 'zh-CN/'}{page}.html"


def language_switch(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    """The header's switch to the same page in the other edition (templates/language-switch.html)."""
    label, short, language = SWITCH[LANGUAGE]
    page = HOME if pagename == "index" else pagename
    context["course_switch"] = {"href": other_edition(pagename, page), "label": label, "short": short, "lang": language}


def chinese_source_links(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    """In the Chinese edition, the header's link to the page's source names the Chinese file."""
    if not CHINESE:
        return
    source = CHINESE_SOURCES.get(pagename, f"{pagename}{context.get('page_source_suffix', '')}")
    wrong = f"/{TAG}/zh-CN/{pagename}{context.get('page_source_suffix', '')}"

    def fix(buttons: list[dict]) -> None:
        for button in buttons:
            if isinstance(button.get("url"), str):
                button["url"] = button["url"].replace(wrong, f"/{TAG}/{source}")
            fix(button.get("buttons", []))

    fix(context.get("header_buttons", []))


def as_published(app, docname: str, source: list[str]) -> None:
    """A lesson as the site shows it: without the widgets' saved state (nothing on the site runs
    it), and a cell whose code JupyterLab hides (jupyter.source_hidden) collapsed behind a toggle."""
    if not docname.startswith("lessons/"):
        return
    notebook = json.loads(source[0])
    notebook["metadata"].pop("widgets", None)
    for cell in notebook["cells"]:
        if cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"):
            tags = cell["metadata"].setdefault("tags", [])
            if "hide-input" not in tags:
                tags.append("hide-input")
    source[0] = json.dumps(notebook)


def repository_url(path: Path, fragment: str = "") -> str:
    """A repository file or folder on GitHub at the release tag."""
    kind = "tree" if path.is_dir() else "blob"
    return f"{ADDRESS}/{kind}/{TAG}/{path.relative_to(ROOT).as_posix()}" + (f"#{fragment}" if fragment else "")


def link_repository_files(app, doctree) -> None:
    """A link to a repository file or folder that is not a page of the site (Makefile, utils/,
    LICENSE, CHANGELOG.md) leads to it on GitHub at the release tag, instead of a download or a
    broken link. A link to a path that does not exist is left alone, for Sphinx to report."""
    env = app.env
    here = Path(env.doc2path(env.docname)).parent
    candidates = [
        node
        for node in doctree.findall(lambda n: isinstance(n, (addnodes.download_reference, addnodes.pending_xref)))
        if node.get("reftype") == "myst"
        and (
            isinstance(node, addnodes.download_reference)
            or node.get("refdomain") is None
            or (node.get("refdomain") == "doc" and node["reftarget"] not in env.found_docs)
        )
    ]
    chinese_pages = {file: name for name, file in CHINESE_SOURCES.items()}
    for node in candidates:
        if node.get("refdomain") == "doc":  # a Markdown file that is not a page: the file it names
            named = [ROOT / f"{node['reftarget']}{suffix}" for suffix in app.config.source_suffix]
            path, fragment = next((p for p in named if p.exists()), None), node.get("reftargetid") or ""
        else:
            target, _, fragment = node["reftarget"].partition("#")
            path = (here / target).resolve()
        if path is None or not path.exists() or not path.is_relative_to(ROOT):
            continue
        if page := chinese_pages.get(path.relative_to(ROOT).as_posix()):  # the Chinese edition's page
            address = (
                other_edition(env.docname, page) if not CHINESE else f"{'../' * env.docname.count('/')}{page}.html"
            )
            address += f"#{fragment}" if fragment else ""
        else:
            address = repository_url(path, fragment)
        node.replace_self(nodes.reference("", "", *node.children, refuri=address))


def draw_local_copies(app, doctree) -> None:
    """Images from the internet (the launch badges) are drawn from the copies in badges/; any
    other image from the internet is an error, since the site loads nothing from outside."""
    for image in doctree.findall(nodes.image):
        uri = image["uri"]
        if uri in LOCAL_COPIES:
            image["uri"] = f"/{(HERE / 'badges' / LOCAL_COPIES[uri]).relative_to(ROOT).as_posix()}"
        elif "://" in uri:
            LOGGER.warning(
                "the site loads nothing from the internet, and this image is there: %s "
                "(save a copy in docs/site/badges and add it to LOCAL_COPIES)",
                uri,
                location=image,
            )


def finish(app, exception) -> None:
    """After a build: MathJax into _static/, and the README's page as the home page (index.html)."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    for part in MATHJAX_PARTS:
        source = MATHJAX / part
        target = out / "_static" / "mathjax" / part
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    shutil.copyfile(out / f"{HOME}.html", out / "index.html")
    if CHINESE:
        mend_chinese_search(out / "_static" / "language_data.js")


def mend_chinese_search(path: Path) -> None:
    """Sphinx 9.0's Chinese search names a stemmer it never defines (`window.Stemmer = ChineseStemmer`:
    sphinx-doc/sphinx#14229, fixed upstream by #14416, in no release on PyPI yet), so the search page
    fails; it stems with the English stemmer it ships, as the fix does."""
    text = path.read_text(encoding="utf-8")
    if "window.Stemmer = ChineseStemmer;" in text and "ChineseStemmer=" not in text.replace(" ", ""):
        path.write_text(
            text.replace("window.Stemmer = ChineseStemmer;", "window.Stemmer = EnglishStemmer;"), encoding="utf-8"
        )


def setup(app):
    app.connect("source-read", in_this_edition, priority=400)  # before the sidebar is added to the README
    app.connect("source-read", add_sidebar)
    app.connect("source-read", as_published)
    app.connect("doctree-read", link_repository_files, priority=100)
    app.connect("doctree-read", draw_local_copies, priority=100)  # before Sphinx collects the images
    app.connect("html-page-context", language_switch, priority=400)  # before the theme drops empty templates
    app.connect("html-page-context", chinese_source_links, priority=900)  # after the theme has made its buttons
    app.connect("build-finished", finish)
