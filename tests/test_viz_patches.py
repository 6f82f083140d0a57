"""The lesson plots draw what their titles say, and refuse the wrong input."""

import pytest
import torch

from utils import patchify
from utils.viz.patches import (
    compare_patch_sizes,
    plot_token_counts,
    show_image,
    show_patch_grid,
    show_patches,
    show_token_sequence,
)


def test_show_image_draws_the_pixels():
    image = torch.rand(3, 32, 48)
    ax = show_image(image).axes[0]
    drawn = ax.images[0].get_array()
    assert drawn.shape == (32, 48, 3)
    assert torch.allclose(torch.as_tensor(drawn.data), image.permute(1, 2, 0))


def test_show_patch_grid_labels_every_patch_in_reading_order():
    ax = show_patch_grid(torch.rand(3, 32, 48), 8).axes[0]
    labels = [text.get_text() for text in ax.texts]
    assert labels == [str(i) for i in range(4 * 6)]
    assert ax.get_title() == "4 x 6 = 24 patches of 8 x 8 px"
    assert len(ax.lines) == (48 // 8 + 1) + (32 // 8 + 1)  # the patch borders


def test_show_patches_puts_each_patch_in_its_place_with_gaps():
    image = torch.rand(3, 16, 16)
    drawn = torch.as_tensor(show_patches(image, 8, gap=2).axes[0].images[0].get_array().data)  # (H', W', C)
    assert drawn.shape == (18, 18, 3)
    assert torch.allclose(drawn[10:, 10:], image[:, 8:, 8:].permute(1, 2, 0))  # bottom-right patch
    assert torch.all(drawn[8:10] == 1)  # the white gap


def test_show_token_sequence_shows_the_matrix_and_the_first_tokens():
    patches = patchify(torch.rand(1, 3, 32, 32), 8)[0]  # (16, 192)
    fig = show_token_sequence(patches, 8, count=5)
    matrices = [ax for ax in fig.axes if ax.images and ax.images[0].get_array().shape == (16, 192)]
    assert len(matrices) == 1
    assert len([ax for ax in fig.axes if ax.get_xlabel() in {"0", "1", "2", "3", "4"}]) == 5
    with pytest.raises(ValueError, match=r"\(N, C\*P\*P\)"):
        show_token_sequence(patches.unsqueeze(0), 8)


def test_plot_token_counts_bars_are_tokens_and_their_squares():
    ax = plot_token_counts(224, [32, 16]).axes[0]
    heights = [bar.get_height() for bar in ax.patches]
    assert heights == [50, 197, 2500, 197**2]


def test_compare_patch_sizes_draws_one_panel_per_size():
    fig = compare_patch_sizes(torch.rand(3, 32, 32), [16, 8])
    assert [ax.get_title() for ax in fig.axes] == [
        "2 x 2 = 4 patches of 16 x 16 px",
        "4 x 4 = 16 patches of 8 x 8 px",
    ]


def test_images_must_be_one_chw_tensor():
    with pytest.raises(ValueError, match=r"\(C, H, W\)"):
        show_image(torch.rand(1, 3, 8, 8))


@pytest.mark.parametrize(
    "draw, says",
    [
        (lambda: show_image(torch.rand(8, 8, 3)), r"channels are last; use image.permute\(2, 0, 1\)"),
        (lambda: show_image(torch.rand(3, 8, 8) * 255), "divide by 255"),
        (lambda: show_image(torch.rand(3, 0, 8)), "something on every axis"),
        (lambda: show_image(torch.rand(8, 8)), r"add the channel axis, image\[None\]"),
        (lambda: show_patch_grid(torch.rand(3, 8, 8), 0), "patch_size must be a whole number"),
        (lambda: show_patch_grid(torch.rand(3, 8, 8), 3), "not divisible by the patch size 3"),
        (lambda: compare_patch_sizes(torch.rand(3, 8, 8), []), "non-empty list of patch sizes"),
        (lambda: compare_patch_sizes(torch.rand(3, 8, 8), [4, 5]), "not divisible by the patch size 5"),
        (lambda: show_patches(torch.rand(3, 8, 8), 4, gap=-1), "gap must be a whole number"),
        (lambda: show_token_sequence(torch.rand(4, 48), 3), r"not \(N, C\*P\*P\) with P = 3"),
        (lambda: show_token_sequence(torch.rand(0, 48), 4), "something on every axis"),
        (lambda: plot_token_counts(224, []), "non-empty list of patch sizes"),
        (lambda: plot_token_counts(16, [32]), "larger than the image"),
    ],
)
def test_the_patch_plots_refuse_what_they_cannot_draw(draw, says):
    with pytest.raises(ValueError, match=says):
        draw()


def test_uint8_images_are_drawn_as_0_255_pixels():
    image = torch.randint(0, 256, (3, 8, 8), dtype=torch.uint8)
    drawn = show_image(image).axes[0].images[0].get_array()
    assert torch.allclose(torch.as_tensor(drawn.data), image.permute(1, 2, 0).float() / 255)
    gaps = show_patches(image, 4, gap=2).axes[0].images[0].get_array()
    assert torch.allclose(torch.as_tensor(gaps.data)[:4, :4], image[:, :4, :4].permute(1, 2, 0).float() / 255)
