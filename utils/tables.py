"""A table a lesson shows: plain text where text is read (print, nbval's text/plain, the tests) and
a real HTML table in Jupyter and on the site, whose cells wrap on a narrow screen and which scrolls
inside its own box when it is still too wide.

    table = Table(["", "accuracy"], [["learned", "96.1%"], ["none", "70.3%"]], align="lr")
    table            # a cell's last expression: the HTML table (the text beside it for nbval)
    print(table)     # the text, columns padded to line up
"""

import html
from collections.abc import Sequence

from utils.validation import WrongTypeError, describe

SEPARATOR = "  "  # between the text form's columns


class Table(str):
    """A table: its text form is the string itself (so `print`, `in` and `.splitlines()` work as on
    the text a lesson used to print); `_repr_html_` gives the HTML table.

    Args:
        header: one title per column ("" for none).
        rows: one list of cells per row, as many as the header has columns; cells are turned into
            str as they are.
        align: one letter per column, "l" (left) or "r" (right, for numbers); default all left.
    """

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    align: str

    def __new__(cls, header: Sequence, rows: Sequence[Sequence], align: str | None = None):
        if isinstance(header, str) or not isinstance(header, Sequence) or not header:
            raise WrongTypeError(f"header must be a list of column titles, got {describe(header)}")
        header = tuple(str(title) for title in header)
        if isinstance(rows, str) or not isinstance(rows, Sequence):
            raise WrongTypeError(f"rows must be a list of rows (each a list of cells), got {describe(rows)}")
        cells = []
        for number, row in enumerate(rows):
            if isinstance(row, str) or not isinstance(row, Sequence) or len(row) != len(header):
                raise ValueError(f"row {number} must be a list of {len(header)} cells (one per column), got {row!r}")
            cells.append(tuple(str(cell) for cell in row))
        align = "l" * len(header) if align is None else align
        if not isinstance(align, str) or len(align) != len(header) or set(align) - {"l", "r"}:
            raise ValueError(f"align must be one letter per column ({len(header)}), 'l' or 'r', got {align!r}")
        widths = [max(len(line[i]) for line in [header, *cells]) for i in range(len(header))]
        lines = [
            SEPARATOR.join(
                cell.rjust(width) if side == "r" else cell.ljust(width)
                for cell, width, side in zip(line, widths, align, strict=True)
            ).rstrip()
            for line in [header, *cells]
        ]
        table = super().__new__(cls, "\n".join(lines))
        table.header, table.rows, table.align = header, tuple(cells), align
        return table

    def _repr_pretty_(self, printer, cycle) -> None:
        """IPython's text/plain: the text itself, not a quoted str."""
        printer.text(str(self))

    def _repr_html_(self) -> str:
        """The table as HTML: numbers right-aligned, text cells free to wrap, the whole in a box that
        scrolls sideways if it must."""

        def cell(tag: str, text: str, side: str) -> str:
            style = "text-align:right" if side == "r" else "text-align:left; white-space:normal"
            return f'<{tag} style="{style}">{html.escape(text)}</{tag}>'

        head = "".join(cell("th", title, side) for title, side in zip(self.header, self.align, strict=True))
        body = "".join(
            "<tr>" + "".join(cell("td", text, side) for text, side in zip(row, self.align, strict=True)) + "</tr>"
            for row in self.rows
        )
        return (
            '<div class="course-table" style="overflow-x:auto"><table>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
        )
