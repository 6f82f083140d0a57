"""Figures that describe themselves (utils.viz.core.with_alt_text): a described figure shows in a
notebook as an <img> with its alt text, and as that text in plain form; no lesson draws a figure
without one, the explorers' pictures (utils.widgets.StaticPicture.alt_text) included."""

import base64
import html
import io
import json
import re

import matplotlib.pyplot as plt
import pytest
from notebook_cells import NOTEBOOKS, ROOT, Kernel
from PIL import Image

from utils.viz.core import MIN_ALT_WORDS, alt_text, figure_html, with_alt_text

IMG = re.compile(r'<img alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=\s]+)">')


def test_a_described_figure_is_an_img_with_its_alt_text():
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 2])
    assert alt_text(fig) is None and figure_html(fig) is None
    assert with_alt_text(fig, 'a line from 0 to 2, "steep" & <short>') is fig
    page = figure_html(fig)
    alt, png = IMG.fullmatch(page).groups()
    assert html.unescape(alt) == 'a line from 0 to 2, "steep" & <short>'
    assert Image.open(io.BytesIO(base64.b64decode(png))).size[0] > 50  # a real picture
    plt.close(fig)


def test_alt_text_must_say_something():
    fig, _ = plt.subplots()
    with pytest.raises(ValueError, match=f"at least {MIN_ALT_WORDS} words"):
        with_alt_text(fig, "a plot")
    with pytest.raises(TypeError, match="matplotlib Figure"):
        with_alt_text("figure", "a line from 0 to 2 over one step")
    plt.close(fig)


def displayed(kernel: Kernel, code: str) -> list[dict]:
    """The display_data bundles one cell shows."""
    msg_id = kernel.client.execute(code, store_history=False, stop_on_error=False)
    kernel.client.get_shell_msg(timeout=120)
    bundles = []
    while True:
        message = kernel.client.get_iopub_msg(timeout=120)
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            return bundles
        if message["msg_type"] == "display_data":
            bundles.append(message["content"]["data"])


@pytest.mark.notebook
def test_in_a_kernel_a_described_figure_shows_as_html_and_an_undescribed_one_as_png():
    kernel = Kernel()
    try:
        displayed(kernel, "import matplotlib.pyplot as plt\nfrom utils.viz.core import with_alt_text")
        (described,) = displayed(
            kernel, "fig, ax = plt.subplots(); ax.plot([1, 2]); with_alt_text(fig, 'a line rising from 1 to 2');"
        )
        assert set(described) == {"text/html", "text/plain"}  # no second copy of the picture as image/png
        assert described["text/plain"] == "a line rising from 1 to 2" and IMG.fullmatch(described["text/html"])
        (plain,) = displayed(kernel, "fig, ax = plt.subplots(); ax.plot([2, 1]);")
        assert set(plain) == {"image/png", "text/plain"}  # IPython's inline backend, untouched
    finally:
        kernel.stop()


@pytest.mark.parametrize("name", [path.stem for path in NOTEBOOKS])
def test_every_figure_of_the_lesson_has_alt_text(name):
    """No output is a bare PNG, and every picture's alt text, the explorers' too, has words and a
    number."""
    cells = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]
    bare, described = [], []
    for index, cell in enumerate(cells):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data:
                bare.append(index)
            for alt, _ in IMG.findall("".join(data.get("text/html", ""))):
                described.append(html.unescape(alt))
    assert not bare, f"{name}: cells {bare} show a figure without alt text (utils.viz.core.with_alt_text)"
    for alt in described:
        assert len(alt.split()) >= MIN_ALT_WORDS and re.search(r"\d", alt), alt
