"""utils.tables.Table: the text a lesson prints and the HTML table Jupyter and the site show, the
same cells in both; and the rubric's verdict_table built on it."""

import html
import re

import pytest
from IPython.core.formatters import DisplayFormatter

from utils.rubric import grade, grade_family, verdict_table
from utils.tables import Table


def cells_of(page: str) -> list[list[str]]:
    """The HTML table's cells, row by row (the header first), unescaped."""
    return [
        [html.unescape(cell) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", page)
    ]


def test_the_text_lines_up_its_columns_and_the_html_holds_the_same_cells():
    table = Table(["", "accuracy", "steps"], [["learned", "96.1%", 300], ["none <&>", "70.3%", 1200]], align="lrr")
    assert table.splitlines() == [
        "          accuracy  steps",
        "learned      96.1%    300",
        "none <&>     70.3%   1200",
    ]
    assert "96.1%" in table  # a str: what lessons and tests did with the text still works
    assert cells_of(table._repr_html_()) == [
        ["", "accuracy", "steps"],
        ["learned", "96.1%", "300"],
        ["none <&>", "70.3%", "1200"],
    ]
    assert "<&>" not in table._repr_html_()  # escaped
    assert "overflow-x:auto" in table._repr_html_()  # too wide, it scrolls in its own box


def test_jupyter_shows_the_html_table_with_the_text_beside_it():
    table = Table(["comparison", "verdict"], [["a", "supported: a long sentence that wraps"]])
    data, _ = DisplayFormatter().format(table)
    assert data["text/plain"] == str(table)  # not a quoted str: nbval compares this
    assert data["text/html"].count("<tr>") == 2 and "white-space:normal" in data["text/html"]


@pytest.mark.parametrize(
    ("header", "rows", "align", "message"),
    [
        ("a b", [], None, "header must be a list of column titles"),
        ([], [], None, "header must be a list of column titles"),
        (["a", "b"], "rows", None, "rows must be a list of rows"),
        (["a", "b"], [["only one"]], None, r"row 0 must be a list of 2 cells"),
        (["a", "b"], [["x", "y"]], "lrr", r"align must be one letter per column \(2\)"),
        (["a", "b"], [["x", "y"]], "lc", "align must be one letter per column"),
    ],
)
def test_a_malformed_table_is_refused_by_name(header, rows, align, message):
    with pytest.raises((TypeError, ValueError), match=message):
        Table(header, rows, align)


def test_the_verdict_table_has_a_row_per_comparison_with_its_grade():
    family = {
        "clear": dict(a=[0.9, 0.91, 0.92], b=[0.5, 0.52, 0.51], claim="higher", effect=0.02, percent=True),
        "tie": dict(a=[0.7, 0.71, 0.72], b=[0.7, 0.72, 0.71], claim="higher", effect=0.02, percent=True),
    }
    grades = grade_family(family)
    table = verdict_table(grades)
    assert table.header == ("comparison", "verdict")
    assert [row[0] for row in table.rows] == ["clear", "tie"]
    assert table.rows[0][1] == str(grades["clear"]) and table.rows[0][1].startswith("supported")
    outlier = grade([0.5, 0.5, 0.5, 0.5, 0.9], [0.5, 0.51, 0.49, 0.5, 0.5], claim="higher", effect=0.02, percent=True)
    assert outlier.assumption and verdict_table({"x": outlier}).rows[0][1].endswith(f"[{outlier.assumption}]")
    with pytest.raises(TypeError, match="non-empty dict"):
        verdict_table({})
    with pytest.raises(TypeError, match="expected a Grade"):
        verdict_table({"x": "supported"})
