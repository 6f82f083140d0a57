"""What every plot of the course shares: figure resolution, tensor-to-picture conversion, and the
checks of what only a plot is given (names, panels, pictures).

Every plotting function takes tensors (never notebook globals) and returns its matplotlib Figure.
Call it before a cell's prints, not as the cell's last line (IPython would draw it twice).
A plot given the wrong thing raises a ValueError (a TypeError for no tensor at all) that says
what it expected and what came, before it draws anything; a plotted tensor is checked with
`utils.validation.check_tensor(..., ndim=..., nonempty=True)`: nothing empty can be drawn.
"""

import numpy as np
import torch

from utils.validation import WrongTypeError, check_tensor

DPI = 80  # small figures keep the committed notebooks small


def check_names(names, count: int, what: str) -> list[str]:
    """`names` as a list if it holds exactly `count` entries ("expected {count} {what}")."""
    if isinstance(names, str) or not hasattr(names, "__len__"):
        raise WrongTypeError(f"expected {what} as a list, got a {type(names).__name__}")
    if len(names) != count:
        raise ValueError(f"expected {count} {what}, got {len(names)}")
    return list(names)


def check_not_empty(mapping, what: str) -> dict:
    """`mapping` as a dict if it is a non-empty dict ("expected at least one {what}")."""
    if not isinstance(mapping, dict):
        raise WrongTypeError(f"expected {what} as a dict {{name: tensor}}, got a {type(mapping).__name__}")
    if not mapping:
        raise ValueError(f"expected at least one {what}, got an empty dict")
    return mapping


def check_image(image, what: str = "one image shaped (C, H, W)") -> torch.Tensor:
    """`image` if it is one (C, H, W) picture, C = 1 (grey) or 3 (RGB), float in [0, 1] or uint8;
    else a ValueError that names the usual mix-up (a batch, channels last, 0 .. 255 floats)."""
    if isinstance(image, torch.Tensor) and image.ndim == 4:
        raise ValueError(f"expected {what}, got {tuple(image.shape)}: a batch; pick one image, images[0]")
    if isinstance(image, torch.Tensor) and image.ndim == 2:
        raise ValueError(f"expected {what}, got {tuple(image.shape)}: add the channel axis, image[None]")
    C, H, W = check_tensor(image, what, ndim=3, nonempty=True).shape
    if C not in (1, 3):
        hint = ": its channels are last; use image.permute(2, 0, 1)" if W in (1, 3) else ""
        raise ValueError(f"expected {what} with C = 1 (grey) or 3 (RGB), got {tuple(image.shape)}{hint}")
    return _check_pixels(image, what)


def check_image_batch(images, what: str = "images (B, C, H, W)") -> torch.Tensor:
    """`images` if it is a batch of at least one (C, H, W) picture, as check_image wants them."""
    if isinstance(images, torch.Tensor) and images.ndim == 3:
        raise ValueError(f"expected {what}, got {tuple(images.shape)}: one image; add the batch axis, images[None]")
    B, C, H, W = check_tensor(images, what, ndim=4, nonempty=True).shape
    if C not in (1, 3):
        hint = ": the channels are last; use images.permute(0, 3, 1, 2)" if W in (1, 3) else ""
        raise ValueError(f"expected {what} with C = 1 (grey) or 3 (RGB), got {tuple(images.shape)}{hint}")
    return _check_pixels(images, what)


def _check_pixels(images: torch.Tensor, what: str) -> torch.Tensor:
    """`images` if they hold floats in [0, 1] (a little outside is clipped when drawn) or uint8."""
    if images.dtype == torch.uint8:
        return images
    if not images.is_floating_point():
        raise ValueError(f"expected {what} of floats in [0, 1] (or uint8), got {images.dtype}")
    high = images.detach().max().item()
    if high > 1.5:
        raise ValueError(f"expected {what} in [0, 1], got values up to {high:g}: 0 .. 255 pixels? divide by 255")
    return images


def to_numpy_image(image: torch.Tensor) -> np.ndarray:
    """(C, H, W) tensor in [0, 1] (or uint8, 0 .. 255) -> (H, W, C) or (H, W) array for imshow;
    floats are clipped to [0, 1]."""
    check_image(image)
    image = image.detach().cpu()
    image = image.float() / 255 if image.dtype == torch.uint8 else image.float().clamp(0, 1)
    array = image.permute(1, 2, 0).numpy()  # (H, W, C)
    return array[..., 0] if array.shape[-1] == 1 else array


# ---- alt text ------------------------------------------------------------------------------------
# A figure a plotting function describes (`with_alt_text(fig, "...")`) is shown in a notebook as an HTML
# <img> with that text as its alt (what it shows and its key number, for a screen reader and the
# course's website) and the same text as its plain-text form; a figure nobody described is shown as
# IPython's inline backend shows it, a bare PNG. JupyterLab's image renderer has no alt attribute,
# so the HTML form is the one way to give the picture its words.

ALT_ATTRIBUTE = "course_alt_text"  # where with_alt_text() keeps the text on the Figure
MIN_ALT_WORDS = 6  # alt text says what a figure shows and a number: a few words at least


def with_alt_text(fig, alt: str):
    """Attach alt text to a matplotlib Figure and return it: what the figure shows, with its key
    number ("14 x 14 = 196 patches of 16 x 16 px, numbered row by row from 0 at the top left").
    In IPython the figure then displays as an <img> with that alt text."""
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):
        raise WrongTypeError(f"expected a matplotlib Figure, got {type(fig).__name__}")
    if not isinstance(alt, str) or len(alt.split()) < MIN_ALT_WORDS:
        raise ValueError(
            f"expected alt text of at least {MIN_ALT_WORDS} words saying what the figure shows, got {alt!r}"
        )
    setattr(fig, ALT_ATTRIBUTE, " ".join(alt.split()))
    _show_described_figures_with_alt()
    return fig


def alt_text(fig) -> str | None:
    """The alt text with_alt_text() attached to `fig`, or None."""
    return getattr(fig, ALT_ATTRIBUTE, None)


def figure_html(fig) -> str | None:
    """A described figure as `<img alt="..." src="data:image/png;base64,...">` (the PNG IPython's
    inline backend would show: tight bounding box, the figure's dpi); None for one not described."""
    import base64
    import html

    text = alt_text(fig)
    if text is None:
        return None
    from IPython.core.pylabtools import print_figure

    png = base64.b64encode(print_figure(fig, fmt="png", bbox_inches="tight")).decode("ascii")
    return f'<img alt="{html.escape(text)}" src="data:image/png;base64,{png}">'


def _show_described_figures_with_alt() -> None:
    """In IPython, display a described Figure as HTML (figure_html) and plain text (its alt), and
    leave its PNG out (it is inside the HTML); an undescribed one is left to the inline backend.
    Registered when the first figure is described: by then pyplot has set up its inline backend,
    which would otherwise replace the PNG formatter afterwards."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or getattr(shell, "_course_alt_text_registered", False):
        return
    from matplotlib.figure import Figure

    formatters = shell.display_formatter.formatters
    png = formatters["image/png"]
    inline_png = png.lookup_by_type(Figure) if Figure in png else None

    def png_unless_described(fig, *args, **kwargs):
        if alt_text(fig) is not None or inline_png is None:
            return None  # IPython leaves a format out when its formatter returns None
        return inline_png(fig, *args, **kwargs)

    def plain(fig, printer, cycle):
        printer.text(alt_text(fig) or repr(fig))

    png.for_type(Figure, png_unless_described)
    formatters["text/html"].for_type(Figure, figure_html)
    formatters["text/plain"].for_type(Figure, plain)
    shell._course_alt_text_registered = True
