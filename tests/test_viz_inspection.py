"""Lesson 7's plots draw the attention maps, distances and filter components they are given,
write the shares the inspection maths computes, and refuse the wrong input."""

import numpy as np
import pytest
import torch

from utils import VisionTransformer, ViTConfig
from utils.embeddings import grid_coordinates
from utils.inspection import (
    attention_rollout,
    attention_share,
    cls_attention_map,
    mean_attention_distance,
    patch_embedding_components,
)
from utils.viz.embeddings import show_pos_similarity
from utils.viz.inspection import (
    normalise_component,
    share_colour_scale,
    show_attention_distance,
    show_attention_maps,
    show_filter_components,
)


def drawn(ax):
    """The arrays of the images drawn on `ax`, bottom first."""
    return [np.asarray(image.get_array()) for image in ax.images]


def outline_segments(ax):
    """The outline segments drawn on `ax`, as a set of ((x0, y0), (x1, y1)) in pixels."""
    return {tuple(map(tuple, np.round(s, 6))) for c in ax.collections for s in c.get_segments()}


def test_attention_maps_on_digits_overlay_each_map_on_its_image():
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(3, 1, 8, 8, generator=generator)  # digits: 1 channel, 8 px, 2 px patches
    maps = {
        "last layer": torch.rand(3, 4, 4, generator=generator),
        "rollout": torch.rand(3, 4, 4, generator=generator),
    }
    fig = show_attention_maps(images, maps, titles=["0", "1", "2"])
    axes = np.array(fig.axes[:9]).reshape(3, 3)  # rows: image, last layer, rollout; one column per image
    bars = fig.axes[9:]  # then one colour bar per row of maps
    assert [bar.get_ylabel() for bar in bars] == ["last layer: weight", "rollout: weight"]
    assert [ax.get_title() for ax in axes[0]] == ["0", "1", "2"]
    assert [ax.get_title() for ax in axes[:, 1]] == ["1", "last layer", "rollout"]
    for b in range(3):
        assert np.allclose(drawn(axes[0, b])[0], images[b, 0].numpy())  # the image alone, grey
        for row, values in enumerate(maps.values(), start=1):
            image, overlay = axes[row, b].images
            assert np.allclose(np.asarray(image.get_array()), images[b, 0].numpy())  # the image underneath
            assert np.allclose(np.asarray(overlay.get_array()), values[b].numpy())  # the map on top
            assert overlay.get_extent() == image.get_extent() == [0, 8, 8, 0]  # stretched over the image
            assert overlay.get_interpolation() == "nearest"
            assert overlay.get_alpha() == pytest.approx(0.6)
            # one scale per row, from 0 to the row's largest weight: the images' maps can be compared
            assert overlay.norm.vmin == 0 and overlay.norm.vmax == pytest.approx(values.max().item())
    for bar, values in zip(bars, maps.values()):
        assert bar.get_ylim() == pytest.approx((0, values.max().item()))
    assert not any(ax.collections for ax in axes.flat)  # no regions, no outlines


def test_attention_maps_on_a_shared_scale_have_one_colour_bar():
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(2, 3, 16, 16, generator=generator)
    maps = {
        "layer 1": torch.rand(2, 4, 4, generator=generator) * 0.1,
        "layer 4": torch.rand(2, 4, 4, generator=generator),
    }
    fig = show_attention_maps(images, maps, scale="shared")
    top = max(values.max().item() for values in maps.values())
    assert len(fig.axes) == 6 + 1 and fig.axes[-1].get_ylabel() == "attention weight"
    for ax in fig.axes[2:6]:
        assert ax.images[1].norm.vmin == 0 and ax.images[1].norm.vmax == pytest.approx(top)
    assert fig.axes[-1].get_ylim() == pytest.approx((0, top))
    with pytest.raises(ValueError, match=r"scale must be 'row' .* or 'shared' .* got 'panel'"):
        show_attention_maps(images, maps, scale="panel")


def test_attention_maps_outline_the_regions_and_title_their_share():
    generator = torch.Generator().manual_seed(1)
    images = torch.rand(2, 3, 32, 32, generator=generator)  # RGB, 32 px, 8 px patches
    maps = torch.rand(2, 4, 4, generator=generator)
    regions = torch.zeros(2, 4, 4, dtype=torch.bool)
    regions[0, 1:3, 1:3] = True  # a 2 x 2 block in the middle: a 16 x 16 px square
    regions[1, 0, 0] = regions[1, 3, 3] = True  # two single patches in opposite corners
    fig = show_attention_maps(images, maps, regions=regions)
    axes = np.array(fig.axes[:4]).reshape(2, 2)
    assert [ax.get_title() for ax in axes[0]] == ["image 0", "image 1"]
    shares = attention_share(maps, regions)
    for b, uniform in enumerate(["25%", "12%"]):
        assert axes[1, b].get_title() == f"attention\n{shares[b].item():.0%} inside (uniform {uniform})"
        assert np.allclose(np.asarray(axes[1, b].images[0].get_array()), images[b].permute(1, 2, 0).numpy())
        assert np.allclose(np.asarray(axes[1, b].images[1].get_array()), maps[b].numpy())
    square = outline_segments(axes[1, 0])  # the 16 x 16 px square from (8, 8) to (24, 24)
    assert len(square) == 8  # four sides, two patch edges each; no edges between inner patches
    points = np.array([point for segment in square for point in segment])
    on_border = np.isin(points, [8, 24]).any(axis=1) & ((points >= 8) & (points <= 24)).all(axis=1)
    assert on_border.all()
    assert sum(np.hypot(*np.subtract(*segment)) for segment in square) == pytest.approx(4 * 16)
    assert len(outline_segments(axes[0, 1])) == 8  # two lone patches, four edges each, on the image too
    assert axes[1, 1].get_xlim() == (0, 32) and axes[1, 1].get_ylim() == (32, 0)  # outline changes no limits


def test_attention_maps_of_a_real_model():
    model = VisionTransformer(ViTConfig.tiny(image_size=8, patch_size=2, in_channels=1, depth=2)).eval()
    images = torch.rand(2, 1, 8, 8)
    with torch.no_grad():
        _, attn = model(images, return_attention=True)  # (depth, B, heads, 17, 17)
    last = cls_attention_map(attn[-1].mean(1), 4)  # (B, 4, 4)
    rollout = cls_attention_map(attention_rollout(attn), 4)
    regions = last > last.mean(dim=(1, 2), keepdim=True)
    fig = show_attention_maps(images, {"last layer": last, "rollout": rollout}, regions=regions)
    shares = attention_share(rollout, regions)
    titles = [ax.get_title() for ax in fig.axes[4:6]]  # the rollout row (then the two colour bars)
    assert [t.split("\n")[1].split(" inside")[0] for t in titles] == [f"{s:.0%}" for s in shares.tolist()]


def test_attention_maps_check_their_input():
    images, maps = torch.rand(2, 3, 32, 32), torch.rand(2, 4, 4)
    with pytest.raises(ValueError, match=r"expected images \(B, C, H, W\), got \(3, 32, 32\)"):
        show_attention_maps(images[0], maps)
    with pytest.raises(ValueError, match=r"expected maps \(B, rows, cols\) with B = 2 for 'attention', got \(16,\)"):
        show_attention_maps(images, maps.reshape(2, 16)[0])
    with pytest.raises(ValueError, match=r"with B = 2 for 'rollout', got \(3, 4, 4\)"):
        show_attention_maps(images, {"last": maps, "rollout": torch.rand(3, 4, 4)})
    with pytest.raises(ValueError, match=r"expected regions \(B, rows, cols\) = \(2, 4, 4\)"):
        show_attention_maps(images, maps, regions=torch.ones(2, 2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="expected 2 titles"):
        show_attention_maps(images, maps, titles=["one"])


def test_attention_distance_draws_one_dot_per_head_and_the_mean():
    distances = torch.tensor([[1.0, 2.0, 3.0], [4.0, 6.0, 8.0]])  # (depth 2, heads 3)
    ax = show_attention_distance(distances, patch_size=4, uniform=5.5).axes[0]
    dots = ax.collections[0].get_offsets()
    assert np.allclose(dots, [[1, 1], [1, 2], [1, 3], [2, 4], [2, 6], [2, 8]])  # x: layer 1-based, y: distance
    mean, uniform, one_patch = ax.lines
    assert list(mean.get_xdata()) == [1, 2] and list(mean.get_ydata()) == pytest.approx([2.0, 6.0])
    assert list(uniform.get_ydata()) == [5.5, 5.5] and uniform.get_linestyle() == "--"
    assert list(one_patch.get_ydata()) == [4, 4]
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels == [
        "one head (3 per layer)",
        "mean over heads",
        "uniform attention (5.5 px)",
        "one patch away (4 px)",
    ]
    assert list(ax.get_xticks()) == [1, 2]
    assert ax.get_ylim()[0] == 0


def test_attention_distance_of_a_real_model_and_shape_errors():
    model = VisionTransformer(ViTConfig.tiny(depth=3)).eval()
    with torch.no_grad():
        _, attn = model(torch.rand(2, 3, 32, 32), return_attention=True)
    distances = mean_attention_distance(attn, 8, 4)  # (3, 4)
    ax = show_attention_distance(distances).axes[0]
    assert len(ax.lines) == 1  # no reference lines unless asked for
    assert np.allclose(ax.collections[0].get_offsets()[:, 1], distances.reshape(-1).numpy())
    with pytest.raises(ValueError, match=r"expected distances \(depth, heads\), got a 3-D tensor of shape \(3, 2, 4\)"):
        show_attention_distance(torch.rand(3, 2, 4))


def test_share_colour_scale_puts_every_panel_and_colour_bar_on_one_scale():
    positions = grid_coordinates(2, 2).float()  # (4, 2)
    near = torch.exp(-torch.cdist(positions, positions))  # (4, 4): neighbours similar
    flat = torch.full((4, 4), 0.5).fill_diagonal_(1.0)
    fig = show_pos_similarity({"near": near, "flat": flat}, 2)
    before = {tuple(image.get_clim()) for ax in fig.axes for image in ax.images}
    assert len(before) == 2  # show_pos_similarity: a scale per table
    low, high = share_colour_scale(fig)
    assert (low, high) == pytest.approx((near.min().item(), 1.0))
    assert {tuple(image.get_clim()) for ax in fig.axes for image in ax.images} == {(low, high)}
    bars = [ax for ax in fig.axes if ax.get_ylabel() == "cosine similarity"]
    assert len(bars) == 2 and all(bar.get_ylim() == pytest.approx((low, high)) for bar in bars)
    assert share_colour_scale(fig, vmin=-1, vmax=1) == (-1.0, 1.0)
    with pytest.raises(ValueError, match=r"vmin < vmax, both finite, got 1.0 and 1.0"):
        share_colour_scale(fig, vmin=1, vmax=1)
    with pytest.raises(TypeError, match="a matplotlib Figure, got Tensor"):
        share_colour_scale(near)
    with pytest.raises(ValueError, match="no image panels"):
        share_colour_scale(show_attention_distance(torch.rand(2, 3)))


@pytest.mark.parametrize("channels", [1, 3])
def test_filter_components_draw_each_component_stretched_to_0_1(channels):
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(32, channels, 4, 4, generator=generator)
    components, share = patch_embedding_components(weight, count=10)
    fig = show_filter_components(components, share, columns=4)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(fig.axes) == 12 and len(panels) == 10  # 3 rows of 4, the last two left empty
    for k, ax in enumerate(panels):
        picture = np.asarray(ax.images[0].get_array())
        component = components[k]
        expected = (component - component.min()) / (component.max() - component.min())
        expected = expected[0] if channels == 1 else expected.permute(1, 2, 0)
        assert picture.shape == ((4, 4) if channels == 1 else (4, 4, 3))
        assert np.allclose(picture, expected.numpy(), atol=1e-6)
        assert picture.min() == pytest.approx(0) and picture.max() == pytest.approx(1)
        value = share[k].item()
        assert ax.get_title() == (f"{value:.0%}" if value >= 0.095 else f"{value:.1%}")


def test_filter_components_titles_and_shape_errors():
    components = torch.stack([torch.ones(1, 2, 2), torch.arange(4.0).reshape(1, 2, 2)])
    fig = show_filter_components(components, torch.tensor([0.12, 0.034]))
    assert [ax.get_title() for ax in fig.axes] == ["12%", "3.4%"]
    assert np.allclose(np.asarray(fig.axes[0].images[0].get_array()), 0.5)  # a flat component is mid grey
    assert torch.equal(normalise_component(components[1]), torch.tensor([[[0.0, 1 / 3], [2 / 3, 1.0]]]))
    with pytest.raises(
        ValueError,
        match=r"expected components \(count, C, P, P\) with C = 1 or 3, got a 3-D tensor of shape \(2, 2, 2\)",
    ):
        show_filter_components(components[:, 0], torch.rand(2))
    with pytest.raises(ValueError, match=r"C = 1 or 3, got \(2, 2, 2, 2\)"):
        show_filter_components(torch.rand(2, 2, 2, 2), torch.rand(2))
    with pytest.raises(ValueError, match=r"one share per component \(2,\), got \(3,\)"):
        show_filter_components(components, torch.rand(3))


@pytest.mark.parametrize(
    "draw, says",
    [
        (lambda: show_attention_maps(torch.rand(0, 3, 8, 8), torch.rand(0, 2, 2)), "something on every axis"),
        (lambda: show_attention_maps(torch.rand(2, 8, 8, 3), torch.rand(2, 2, 2)), r"permute\(0, 3, 1, 2\)"),
        (lambda: show_attention_maps(torch.rand(2, 3, 8, 8) * 255, torch.rand(2, 2, 2)), "divide by 255"),
        (lambda: show_attention_maps(torch.rand(2, 3, 8, 8), [torch.rand(2, 2, 2)]), "or a dict of them, got a list"),
        (lambda: show_attention_maps(torch.rand(2, 3, 8, 8), torch.rand(2, 0, 2)), "something on every axis"),
        (
            lambda: show_attention_maps(torch.rand(2, 3, 8, 8), torch.rand(2, 2, 2), regions=torch.rand(2, 2, 2)),
            r"regions of bools .*got torch.float32",
        ),
        (lambda: show_attention_distance(torch.zeros(0, 3)), "something on every axis"),
        (lambda: show_filter_components(torch.zeros(0, 3, 2, 2), torch.zeros(0)), "something on every axis"),
        (lambda: show_filter_components(torch.rand(2, 3, 2, 2), torch.rand(2), columns=0), "columns must be"),
        (lambda: show_filter_components(torch.rand(2, 3, 2, 2), [0.5, 0.5]), r"torch.tensor\(...\)"),
        (lambda: normalise_component(torch.rand(4)), r"one component \(C, P, P\), got a 1-D tensor of shape \(4,\)"),
    ],
)
def test_the_inspection_plots_refuse_empty_or_mismatched_input(draw, says):
    with pytest.raises(ValueError, match=says):
        draw()
