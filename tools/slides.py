"""A slide deck per lesson for instructors (`make slides`), made from the solution edition's committed
outputs (nothing is run), one self-contained HTML file each in _slides/ that opens offline in any
browser: ← and → (or space, Page Up/Down) move between slides, Home and End jump, F toggles full
screen, and printing gives one slide per page.

    python tools/slides.py                                # every lesson, into _slides/
    python tools/slides.py notebooks/03_attention.ipynb   # one lesson
    python tools/slides.py --out somewhere/               # another folder

A deck follows the lesson's core path: the title and its opening paragraph, then one slide per
numbered section (its heading, its first sentences, its first figure and the one printed line
beside that figure that carries a number), the exercises of "Your turn" (one line each) and the
Summary. "Going further" is left out: it is for after the session.
"""

import argparse
import html
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
OUT = ROOT / "_slides"
MAX_WORDS = 45  # a slide's text: the section's first sentences up to about this many words
CHECK_MARK = ("✓", "✗")


@dataclass
class Slide:
    title: str
    text: str = ""  # a few sentences of Markdown
    bullets: list[str] = field(default_factory=list)  # Markdown
    figure: str | None = None  # a PNG, base64
    alt: str = ""  # the figure's alt text, where the lesson gave it one
    number: str | None = None  # the printed line beside the figure


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _first_sentences(markdown: str, words: int = MAX_WORDS) -> str:
    """The opening sentences of a Markdown passage, whole sentences up to about `words` words;
    headings, quotes, lists, tables, display maths and folded help left out."""
    paragraphs = []
    for paragraph in re.split(r"\n\s*\n", markdown):
        paragraph = paragraph.strip()
        if not paragraph or paragraph.startswith(("#", ">", "|", "$$", "-", "*", "1.", "<", "[![", "```")):
            continue
        paragraphs.append(" ".join(paragraph.split()))
    text = " ".join(paragraphs)
    sentences = re.split(r"(?<=[.!?:])\s+(?=[A-Z*`(])", text)
    kept, count = [], 0
    for sentence in sentences:
        if kept and count + len(sentence.split()) > words:
            break
        kept.append(sentence)
        count += len(sentence.split())
    return " ".join(kept)


IMG = re.compile(r'<img alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=\s]+)"')


def _figure(cell: dict) -> tuple[str, str] | None:
    """The cell's first picture as (PNG in base64, its alt text): a figure described with alt text
    (utils.viz.core.with_alt_text: an HTML <img>) or a bare PNG (alt "")."""
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        page = data.get("text/html")
        page = "".join(page) if isinstance(page, list) else page
        if page and (found := IMG.search(page)):
            return "".join(found[2].split()), html.unescape(found[1])
        png = data.get("image/png")
        if png:
            return ("".join(png) if isinstance(png, list) else png), ""
    return None


def _is_picture(output: dict) -> bool:
    data = output.get("data", {})
    page = data.get("text/html")
    return "image/png" in data or bool(page and IMG.search("".join(page) if isinstance(page, list) else page))


def _printed_lines(cell: dict) -> list[str]:
    lines = []
    for output in cell.get("outputs", []):
        text = (
            output.get("text") or output.get("data", {}).get("text/plain")
            if output.get("output_type") != "error"
            else None
        )
        if isinstance(text, list):
            text = "".join(text)
        if text and output.get("output_type") in ("stream", "execute_result", "display_data"):
            if output.get("output_type") != "stream" and _is_picture(output):
                continue  # a figure's text form: "<Figure size ...>" or its alt text
            lines += [line.rstrip() for line in text.splitlines() if line.strip()]
    return lines


def _number_line(lines: list[str]) -> str | None:
    """The first printed line that carries a number (a claim's line first)."""
    tiers = (
        lambda line: line.startswith(CHECK_MARK) or line.endswith(": True"),  # a claim's line
        lambda line: re.search(r"[:=]\s*[-+(]?\d", line),  # a labelled number
        lambda line: True,
    )
    for wanted in tiers:
        for line in lines:
            if re.search(r"\d", line) and len(line) <= 140 and not line.endswith(":") and wanted(line):
                return line.strip()
    return None


def lesson_slides(path: Path) -> list[Slide]:
    """The deck of one lesson: the title, each numbered section, the exercises, the summary."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    sections: list[tuple[str, list[dict]]] = []  # (heading, cells under it)
    title = path.stem
    opening = ""
    for cell in cells:
        if cell["cell_type"] != "markdown":
            if sections:
                sections[-1][1].append(cell)
            continue
        text = _source(cell)
        if not sections and (top := re.match(r"^# (.+)$", text, flags=re.M)):
            title = top[1].strip()
            opening = _first_sentences(text[top.end() :].split("\n## ")[0])
        # a Markdown cell may end one section and start the next: split it at its "## " headings
        pieces = re.split(r"^(?=## )", text, flags=re.M)
        for piece in pieces:
            if piece.startswith("## "):
                heading, _, rest = piece.partition("\n")
                sections.append((heading[3:].strip(), [{"cell_type": "markdown", "source": [rest]}]))
            elif sections and piece.strip():
                sections[-1][1].append({"cell_type": "markdown", "source": [piece]})
    core = [heading for heading, _ in sections]
    core = core[: next((i for i, h in enumerate(core) if "going further" in h.lower()), len(core))]
    slides = [Slide(title=title, text=opening, bullets=[h for h in core if not h.lower().startswith("where we are")])]
    for heading, body in sections:
        lowered = heading.lower()
        if "going further" in lowered:
            break
        if lowered.startswith("where we are"):
            continue
        markdown = "\n\n".join(_source(cell) for cell in body if cell["cell_type"] == "markdown")
        if "your turn" in lowered:
            tasks = re.findall(r"\*\*(?:Optional )?[Ee]xercise[^*]*\*\*\s*(.+?)(?:\n\n|$)", markdown, flags=re.S)
            bullets = [_first_sentences(task, 30) for task in tasks]
            slides.append(Slide(title=heading, bullets=bullets or [_first_sentences(markdown)]))
            continue
        if lowered == "summary":
            items = re.findall(r"^- (.+(?:\n  .+)*)", markdown, flags=re.M)
            slides.append(Slide(title=heading, bullets=[" ".join(item.split()) for item in items]))
            continue
        slide = Slide(title=heading, text=_first_sentences(markdown))
        for i, cell in enumerate(body):
            if cell["cell_type"] == "code" and (figure := _figure(cell)):
                slide.figure, slide.alt = figure
                later = [c for c in body[i + 1 :] if c["cell_type"] == "code"][:1]
                slide.number = _number_line(_printed_lines(cell)) or next(
                    (line for c in later if (line := _number_line(_printed_lines(c)))), None
                )
                break
        if slide.figure is None:  # no figure: the section's first printed number
            slide.number = next(
                (line for cell in body if cell["cell_type"] == "code" and (line := _number_line(_printed_lines(cell)))),
                None,
            )
        slides.append(slide)
    return slides


TEX = {  # the TeX commands the lessons' inline maths uses, as characters
    r"\cdot": "·",
    r"\times": "\u00d7",  # multiplication sign
    r"\le": "≤",
    r"\ge": "≥",
    r"\approx": "≈",
    r"\to": "→",
    r"\sqrt": "√",
    r"\sum": "Σ",
    r"\in": "∈",
    r"\odot": "⊙",
    r"\varepsilon": "ε",
    r"\gamma": "\u03b3",
    r"\beta": "β",
    r"\ell": "\u2113",
    r"\ldots": "…",
    r"\cdots": "⋯",
    r"\,": " ",
    r"\ ": " ",
}


def _plain_math(tex: str) -> str:
    """Inline TeX as plain text a slide can show without MathJax: commands as characters, braces
    and \\text{...}, \\mathbf{...} wrappers dropped."""
    text = re.sub(r"\\(?:text|mathrm|mathbf|operatorname)\{([^}]*)\}", r"\1", tex)
    for command, character in sorted(TEX.items(), key=lambda item: -len(item[0])):
        text = text.replace(command, character)
    return text.replace("{", "").replace("}", "").replace("^2", "²")


def _inline(markdown: str) -> str:
    """A line of Markdown as HTML: `code`, **bold**, *italic*, [links](...) as their text, inline
    maths as plain text."""
    markdown = re.sub(r"(?<!\$)\$([^$]+)\$(?!\$)", lambda m: _plain_math(m[1]), markdown)
    text = html.escape(markdown, quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)
    text = re.sub(r"(?<![*\w])\*([^*\s][^*]*)\*(?!\w)", r"<em>\1</em>", text)
    return re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)


STYLE = """
html, body { margin: 0; height: 100%; background: #222; font-family: system-ui, sans-serif; }
section { display: none; box-sizing: border-box; width: 100vw; height: 100vh; padding: 4vh 6vw;
  background: #fff; color: #111; flex-direction: column; overflow: hidden; }
section.current { display: flex; }
h1 { font-size: 5vh; margin: 0 0 2vh; } h2 { font-size: 4.2vh; margin: 0 0 2vh; color: #1a4f8b; }
p, li { font-size: 2.9vh; line-height: 1.4; max-width: 60em; } ul { margin: 0; padding-left: 1.2em; }
figure { flex: 1; min-height: 0; margin: 1vh 0 0; display: flex; flex-direction: column; align-items: center; }
figure img { flex: 1; min-height: 0; max-width: 100%; object-fit: contain; }
figcaption { font: 2.6vh/1.3 ui-monospace, monospace; margin-top: 1vh; background: #f3f3f3; padding: .4em .8em; }
code { font-family: ui-monospace, monospace; background: #f3f3f3; padding: 0 .2em; }
footer { position: fixed; right: 1.5vw; bottom: 1vh; font-size: 2vh; color: #777; }
@media print { section { display: flex !important; page-break-after: always; height: 100vh; }
  footer { display: none; } }
"""

SCRIPT = """
const slides = [...document.querySelectorAll("section")];
const counter = document.querySelector("footer");
let current = Math.max(0, Math.min(slides.length - 1, parseInt(location.hash.slice(1) || "1") - 1));
function show(i) {
  current = Math.max(0, Math.min(slides.length - 1, i));
  slides.forEach((s, j) => s.classList.toggle("current", j === current));
  counter.textContent = `${current + 1} / ${slides.length}`;
  history.replaceState(null, "", `#${current + 1}`);
}
document.addEventListener("keydown", (e) => {
  const moves = {ArrowRight: 1, ArrowDown: 1, PageDown: 1, " ": 1, ArrowLeft: -1, ArrowUp: -1, PageUp: -1};
  if (e.key in moves) { show(current + moves[e.key]); e.preventDefault(); }
  else if (e.key === "Home") show(0);
  else if (e.key === "End") show(slides.length - 1);
  else if (e.key === "f" || e.key === "F") {
    document.fullscreenElement ? document.exitFullscreen() : document.documentElement.requestFullscreen();
  }
});
document.addEventListener("click", (e) => show(current + (e.clientX > innerWidth / 3 ? 1 : -1)));
show(current);
"""


def render(title: str, slides: list[Slide]) -> str:
    """One self-contained HTML deck: every picture inline, no request to anywhere."""
    parts = []
    for i, slide in enumerate(slides):
        heading = f"<h1>{_inline(slide.title)}</h1>" if i == 0 else f"<h2>{_inline(slide.title)}</h2>"
        body = [heading]
        if slide.text:
            body.append(f"<p>{_inline(slide.text)}</p>")
        if slide.bullets:
            body.append("<ul>" + "".join(f"<li>{_inline(b)}</li>" for b in slide.bullets) + "</ul>")
        if slide.figure:
            alt = html.escape(slide.alt or (f"{slide.title}: {slide.number}" if slide.number else slide.title))
            caption = f"<figcaption>{html.escape(slide.number)}</figcaption>" if slide.number else ""
            body.append(f'<figure><img src="data:image/png;base64,{slide.figure}" alt="{alt}">{caption}</figure>')
        elif slide.number:
            body.append(f"<figure><figcaption>{html.escape(slide.number)}</figcaption></figure>")
        parts.append("<section>" + "".join(body) + "</section>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(parts)
        + f"\n<footer></footer><script>{SCRIPT}</script></body></html>\n"
    )


def write_deck(notebook: Path, out: Path) -> Path:
    slides = lesson_slides(notebook)
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{notebook.stem}.html"
    target.write_text(render(slides[0].title, slides), encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="lessons (default: every one in notebooks/)")
    parser.add_argument("--out", type=Path, default=OUT, help="the folder for the decks (default: _slides/)")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or NOTEBOOKS
    for notebook in notebooks:
        if not notebook.is_file() or notebook.suffix != ".ipynb":
            parser.error(f"no such notebook: {notebook}")
    for notebook in notebooks:
        target = write_deck(notebook, args.out)
        slides = lesson_slides(notebook)
        figures = sum(slide.figure is not None for slide in slides)
        shown = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
        print(f"{shown}: {len(slides)} slides, {figures} figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
