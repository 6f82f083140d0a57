"""Lesson 12's explorer (utils.widgets.resolution.RopeScores): its controls redraw what they say,
the maps depend on the offset only, and scaling shrinks the offsets never seen in training."""

import pytest
import torch

from utils.widgets.resolution import RopeScores, rope_scores


def _widget(**options):
    generator = torch.Generator().manual_seed(0)
    return RopeScores(torch.randn(16, generator=generator), torch.randn(16, generator=generator), **options)


def test_a_score_depends_on_the_offset_only():
    generator = torch.Generator().manual_seed(1)
    q, k = torch.randn(16, generator=generator), torch.randn(16, generator=generator)
    here = rope_scores(q, k, (6, 6), (1, 1))
    there = rope_scores(q, k, (6, 6), (3, 4))
    assert torch.allclose(here[0:4, 0:3], there[2:6, 3:6], atol=1e-5)  # the same offsets, the same scores


def test_the_sliders_move_the_query_and_the_summary_follows():
    widget = _widget()
    assert widget.state_line() == "query (0, 0) of 6 x 6, positions as they are"
    assert widget.unseen_offsets() == 20  # rows or columns 4 and 5 lie 4-5 patches away
    widget.row.value, widget.col.value = 5, 2
    _, right = widget.maps()
    assert torch.allclose(right, rope_scores(widget.q, widget.k, (6, 6), (5, 2)))
    assert widget.state_line() == "query (5, 2) of 6 x 6, positions as they are"
    assert "of 36" in widget.summary.value and widget.axes[1].patches[0].get_xy() == (1.5, 4.5)


def test_scaling_the_positions_shrinks_the_unseen_offsets():
    widget = _widget()
    before = widget.unseen_offsets()
    widget.scaled.value = True
    assert widget.scale == pytest.approx(4 / 6)
    assert widget.unseen_offsets() < before and "scaled by 0.67" in widget.state_line()
    assert "query (0, 0)" in widget.alt_text() and widget.png().startswith(b"\x89PNG")


def test_inputs_that_do_not_fit_are_refused():
    with pytest.raises(ValueError, match="divisible by 4"):
        RopeScores(torch.randn(6), torch.randn(6))
    with pytest.raises(ValueError, match="at least train_grid"):
        _widget(train_grid=(4, 4), new_grid=(3, 6))
