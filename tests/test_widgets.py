"""The widgets, driven from Python: move a control, check what is now drawn and reported."""

import atexit
import base64
import builtins
import html
import io
import math
import re
import sys

import ipywidgets
import numpy as np
import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display
from IPython.utils.capture import capture_output
from PIL import Image
from references import randomize_
from traitlets.config import Config

from utils import VisionTransformer, ViTConfig, pos_embed_similarity, sincos_pos_embed_2d
from utils.embeddings import neighbour_similarity
from utils.widgets import WIDGET_VIEW, AttentionExplorer, PatchSlicer, PositionSimilarityExplorer, SoftmaxTemperature


def test_patch_slicer_redraws_the_grid_and_the_counts():
    slicer = PatchSlicer(torch.rand(3, 32, 32), patch_size=16)
    assert len(slicer.lines) == 3 + 3  # borders at 0, 16, 32 each way
    assert "5 tokens" in slicer.summary.value and "<b>25</b>" in slicer.summary.value
    slicer.patch_size.value = 4
    assert len(slicer.lines) == 9 + 9
    assert slicer.ax.get_title() == "8 x 8 patches of 4 x 4 px"
    assert "65 tokens" in slicer.summary.value and "4,225" in slicer.summary.value
    assert len(slicer.ax.lines) == 18  # the old grid was removed, not drawn over


def test_patch_slicer_offers_only_sizes_that_divide_the_image():
    slicer = PatchSlicer(torch.rand(3, 24, 36), patch_size=12)
    assert list(slicer.patch_size.options) == [2, 3, 4, 6, 12]
    with pytest.raises(ValueError, match="must divide the image"):
        PatchSlicer(torch.rand(3, 24, 36), patch_size=5)


def test_softmax_temperature_sharpens_and_flattens():
    scores = torch.tensor([2.0, 1.0, 0.0, -1.0])
    widget = SoftmaxTemperature(scores)
    torch.testing.assert_close(widget.weights, torch.softmax(scores, 0))
    heights = [bar.get_height() for bar in widget.bars]
    torch.testing.assert_close(torch.tensor(heights), torch.softmax(scores, 0))
    widget.scale.value = 10.0
    assert widget.weights.max() > 0.99 and widget.bars[0].get_height() > 0.99
    assert "largest weight <b>1.00</b>" in widget.summary.value
    widget.scale.value = 0.01
    assert widget.weights.max() < 0.26  # nearly uniform over 4 keys
    with pytest.raises(ValueError, match=r"\(N,\)"):
        SoftmaxTemperature(torch.rand(2, 3))


@pytest.fixture
def vit():
    """A tiny ViT with random weights everywhere (12 x 12 px, 4 px patches: a 3 x 3 grid, 10 tokens),
    3 images, and their attention computed directly: (depth 3, B 3, heads 2, T 10, T 10)."""
    torch.manual_seed(0)
    config = ViTConfig(image_size=12, patch_size=4, in_channels=3, num_classes=3, embed_dim=16, depth=3, num_heads=2)
    model = randomize_(VisionTransformer(config), std=0.5).eval()
    images = torch.rand(3, 3, 12, 12)
    with torch.no_grad():
        logits, attn = model(images, return_attention=True)
    return model, images, logits, attn


def drawn(image) -> torch.Tensor:
    """The array an AxesImage shows."""
    return torch.from_numpy(np.asarray(image.get_array(), dtype=np.float32))


def test_attention_explorer_shows_the_class_token_row_of_the_chosen_layer_and_head(vit):
    model, images, logits, attn = vit
    explorer = AttentionExplorer(model, images)
    assert explorer.layer.value == 3 and explorer.head.value == -1 and explorer.query.value == "class token"
    expected = attn[2, 0].mean(dim=0)[0, 1:].reshape(3, 3)  # last layer, heads averaged, class token's row
    torch.testing.assert_close(explorer.map, expected)
    torch.testing.assert_close(drawn(explorer.overlay), expected)
    for h, image in enumerate(explorer.head_images):  # the small multiples: every head, same query
        torch.testing.assert_close(drawn(image), attn[2, 0, h, 0, 1:].reshape(3, 3))

    explorer.image.value = 2
    explorer.layer.value = 1
    explorer.head.value = 1
    torch.testing.assert_close(drawn(explorer.overlay), attn[0, 2, 1, 0, 1:].reshape(3, 3))
    assert explorer.ax.get_title() == "class token: layer 1, head 2"
    assert (
        explorer.head_axes[1].spines["left"].get_edgecolor()[:3]
        != explorer.head_axes[0].spines["left"].get_edgecolor()[:3]
    )
    torch.testing.assert_close(drawn(explorer.picture), images[2].permute(1, 2, 0))
    assert f"predicted <b>{int(logits[2].argmax())}</b>" in explorer.summary.value


def test_attention_explorer_shows_a_chosen_patch_query_and_outlines_it(vit):
    model, images, _, attn = vit
    explorer = AttentionExplorer(model, images)
    assert explorer.row.disabled and not explorer.box.get_visible()
    explorer.query.value = "patch"
    explorer.row.value, explorer.col.value = 2, 1  # token 1 + 2 * 3 + 1 = 8
    assert explorer.query_index == 8 and not explorer.row.disabled
    torch.testing.assert_close(explorer.map, attn[2, 0].mean(dim=0)[8, 1:].reshape(3, 3))
    assert explorer.box.get_visible() and explorer.box.get_xy() == (1 * 4 - 0.5, 2 * 4 - 0.5)
    top = int(explorer.map.argmax())
    assert f"top patch ({top // 3}, {top % 3}) holds <b>{explorer.map.max():.0%}</b>" in explorer.summary.value
    assert f"the class token {1 - explorer.map.sum():.0%}" in explorer.summary.value


def test_attention_explorer_rollout_equals_a_hand_computation(vit):
    model, images, _, attn = vit
    explorer = AttentionExplorer(model, images)
    explorer.mode.value = "rollout"
    explorer.layer.value = 2
    assert explorer.head.disabled  # rollout averages the heads
    rollout = torch.eye(10)
    for layer in range(2):  # written out: heads averaged, identity added, rows renormalised, later layers on the left
        mixed = attn[layer, 0].mean(dim=0) + torch.eye(10)
        rollout = (mixed / mixed.sum(dim=-1, keepdim=True)) @ rollout
    torch.testing.assert_close(explorer.map, rollout[0, 1:].reshape(3, 3))
    assert explorer.ax.get_title() == "class token: rollout through layer 2"
    explorer.query.value = "patch"
    explorer.row.value, explorer.col.value = 0, 2
    torch.testing.assert_close(drawn(explorer.overlay), rollout[3, 1:].reshape(3, 3))


def test_attention_explorer_runs_the_model_once_per_image_in_eval_mode(vit):
    model, images, _, attn = vit
    model.train()  # dropout would change the weights: the explorer evaluates, then restores the mode
    model.config = ViTConfig(**{**model.config.__dict__})  # same config, to show nothing else changes
    calls = []
    model.register_forward_hook(lambda module, args, output: calls.append((args[0].shape, module.training)))
    explorer = AttentionExplorer(model, images)
    for index in [1, 0, 1, 2, 0]:
        explorer.image.value = index
    explorer.layer.value = 1
    assert calls == [((1, 3, 12, 12), False)] * 3  # each image once, in eval mode, however often it is shown
    assert model.training
    torch.testing.assert_close(explorer.attention(1)[0], attn[:, 1])


def test_attention_explorer_feeds_the_model_preprocessed_images_and_draws_them_as_given(vit):
    model, images, _, _ = vit
    explorer = AttentionExplorer(model, images, preprocess=lambda x: 2 * x - 1)
    with torch.no_grad():
        _, attn = model(2 * images[2:3] - 1, return_attention=True)  # what the model must have seen
    explorer.image.value = 2
    torch.testing.assert_close(explorer.attention(2)[0], attn[:, 0])
    torch.testing.assert_close(drawn(explorer.picture), images[2].permute(1, 2, 0))  # the picture: [0, 1]


def test_attention_explorer_reports_the_share_on_marked_patches(vit):
    model, images, _, attn = vit
    regions = torch.zeros(3, 3, 3, dtype=torch.bool)
    regions[:, 0, :] = True  # the top row of patches
    labels = torch.tensor([0, 1, 2])
    explorer = AttentionExplorer(model, images, labels, ["cat", "dog", "eel"], regions)
    cls_row = attn[2, 0].mean(dim=0)[0, 1:]
    share = cls_row[:3].sum() / cls_row.sum()
    assert f"on the marked patches <b>{share:.0%}</b> (uniform: 33%)" in explorer.summary.value
    assert "(true: cat)" in explorer.summary.value


def test_attention_explorer_refuses_images_of_the_wrong_size(vit):
    model, images, _, _ = vit
    with pytest.raises(ValueError, match=r"expected images \(B, 3, 12, 12\), got \(3, 3, 16, 16\)"):
        AttentionExplorer(model, torch.rand(3, 3, 16, 16))
    with pytest.raises(ValueError, match=r"expected images \(B, 3, 12, 12\), got \(3, 12, 12\)"):
        AttentionExplorer(model, images[0])
    with pytest.raises(ValueError, match=r"regions \(B, rows, cols\) = \(3, 3, 3\)"):
        AttentionExplorer(model, images, regions=torch.ones(3, 4, 4, dtype=torch.bool))


def test_attention_explorer_without_a_class_token_offers_patch_queries_only():
    torch.manual_seed(0)
    config = ViTConfig(image_size=8, patch_size=4, num_classes=2, embed_dim=8, depth=1, num_heads=2, pool="mean")
    model = VisionTransformer(config).eval()
    images = torch.rand(1, 3, 8, 8)
    explorer = AttentionExplorer(model, images)
    assert list(explorer.query.options) == ["patch"]
    with torch.no_grad():
        _, attn = model(images, return_attention=True)  # (1, 1, 2, 4, 4): no class token
    row, col = explorer.row.value, explorer.col.value
    torch.testing.assert_close(explorer.map, attn[0, 0].mean(dim=0)[row * 2 + col].reshape(2, 2))


@pytest.fixture
def tables():
    """Position tables on a 3 x 4 grid (with a class-token entry) and three training snapshots."""
    torch.manual_seed(0)
    learned = torch.randn(1, 13, 16)
    snapshots = {"steps": [0, 10, 20], "tables": [torch.randn(1, 13, 16) for _ in range(3)]}
    return {"learned": learned, "sin-cos": sincos_pos_embed_2d((3, 4), 16, cls_token=True)}, snapshots


def test_position_explorer_draws_the_chosen_position_against_all(tables):
    named, _ = tables
    explorer = PositionSimilarityExplorer(named, (3, 4))
    similarity = pos_embed_similarity(named["learned"])  # (12, 12)
    explorer.row.value, explorer.col.value = 2, 3
    torch.testing.assert_close(explorer.map, similarity[11].reshape(3, 4))
    torch.testing.assert_close(drawn(explorer.map_image), similarity[11].reshape(3, 4))
    assert explorer.marker.get_data()[0][0] == 3 and explorer.marker.get_data()[1][0] == 2
    assert explorer.map[2, 3] == pytest.approx(1.0)  # itself
    near, far = neighbour_similarity(similarity, (3, 4))
    assert f"grid neighbours <b>{near:.2f}</b>, far apart <b>{far:.2f}</b>" in explorer.summary.value

    explorer.table.value = "sin-cos"
    sincos = pos_embed_similarity(named["sin-cos"])
    torch.testing.assert_close(explorer.similarity, sincos)
    others = sincos[11].clone()
    others[11] = -math.inf
    best = int(others.argmax())
    assert f"is most similar to ({best // 4}, {best % 4}): {others[best]:.2f}" in explorer.summary.value


def test_position_explorer_mosaic_puts_every_map_on_its_grid_place(tables):
    named, _ = tables
    explorer = PositionSimilarityExplorer(named, (3, 4))
    mosaic = drawn(explorer.mosaic_image)
    assert mosaic.shape == (3 * 4 - 1, 4 * 5 - 1)  # 3 x 4 tiles of 3 x 4, one blank line between
    similarity = pos_embed_similarity(named["learned"])
    for r in range(3):
        for c in range(4):
            tile = mosaic[r * 4 : r * 4 + 3, c * 5 : c * 5 + 4]
            torch.testing.assert_close(tile, similarity[r * 4 + c].reshape(3, 4))
    assert torch.isnan(mosaic[3]).all() and torch.isnan(mosaic[:, 4]).all()  # the gaps
    explorer.row.value, explorer.col.value = 1, 2
    assert explorer.tile_box.get_xy() == (2 * 5 - 0.5, 1 * 4 - 0.5)


def test_position_explorer_steps_through_training_snapshots(tables):
    named, snapshots = tables
    explorer = PositionSimilarityExplorer(named, (3, 4), snapshots=snapshots)
    assert explorer.step.disabled
    explorer.table.value = PositionSimilarityExplorer.DURING_TRAINING
    assert not explorer.step.disabled and explorer.step.value == 20
    torch.testing.assert_close(explorer.similarity, pos_embed_similarity(snapshots["tables"][2]))
    explorer.step.value = 10
    torch.testing.assert_close(explorer.similarity, pos_embed_similarity(snapshots["tables"][1]))
    assert "step 10" in explorer.fig._suptitle.get_text()


def test_position_explorer_takes_steps_as_numpy_or_torch_integers(tables):
    named, snapshots = tables
    for steps in (np.array([0, 10, 20]), torch.tensor([0, 10, 20])):
        explorer = PositionSimilarityExplorer(named, (3, 4), snapshots={**snapshots, "steps": steps})
        assert list(explorer.step.options) == [0, 10, 20] and all(type(step) is int for step in explorer.step.options)


def test_position_explorer_refuses_a_table_of_another_grid(tables):
    named, snapshots = tables
    with pytest.raises(ValueError, match=r"table 'learned': expected 1 \+ 4 x 4 = 17 entries, got shape \(1, 13, 16\)"):
        PositionSimilarityExplorer(named, 4)
    bad = {"steps": [0], "tables": [torch.randn(1, 10, 16)]}
    with pytest.raises(ValueError, match="table 0: expected 1 \\+ 3 x 4 = 13 entries"):
        PositionSimilarityExplorer(named, (3, 4), snapshots=bad)


# ---- mismatched inputs: a ValueError at construction that names what was expected ------------


@pytest.mark.parametrize(
    "image, patch_size, says",
    [
        (torch.rand(4, 3, 32, 32), 16, r"one image shaped \(C, H, W\), got \(4, 3, 32, 32\): a batch; .*images\[0\]"),
        (torch.rand(32, 32, 3), 16, r"channels are last; use image.permute\(2, 0, 1\)"),
        (torch.rand(3, 32, 32) * 255, 16, "divide by 255"),
        (torch.rand(3, 1, 1), 1, "no patch size from 2 px up"),
        (torch.rand(3, 32, 32), 16.0, "patch_size must be a whole number"),
    ],
)
def test_patch_slicer_refuses_what_is_no_single_image(image, patch_size, says):
    with pytest.raises(ValueError, match=says):
        PatchSlicer(image, patch_size=patch_size)


@pytest.mark.parametrize(
    "scores, scale, says",
    [
        (torch.zeros(0), 1.0, r"\(N,\) with something on every axis"),
        (torch.tensor([1.0, float("nan")]), 1.0, "finite scores"),
        (torch.rand(3), 0.0, "scale must be a finite number, greater than 0"),
        (torch.rand(3), 1000.0, "between 0.01 and 100"),
    ],
)
def test_softmax_temperature_refuses_empty_or_broken_scores_and_a_scale_off_the_slider(scores, scale, says):
    with pytest.raises(ValueError, match=says):
        SoftmaxTemperature(scores, scale=scale)


def test_attention_explorer_refuses_inputs_that_do_not_fit_the_model(vit):
    model, images, _, _ = vit
    with pytest.raises(ValueError, match=r"expected 3 class names, one per output of the model \(3\), got 2"):
        AttentionExplorer(model, images, classes=["cat", "dog"])  # the third class's name would be missing
    with pytest.raises(ValueError, match=r"at least one image \(B, 3, 12, 12\), got an empty batch"):
        AttentionExplorer(model, images[:0])
    with pytest.raises(ValueError, match=r"channels are last; use images.permute\(0, 3, 1, 2\)"):
        AttentionExplorer(model, images.permute(0, 2, 3, 1))
    with pytest.raises(ValueError, match=r"one image; add the batch axis"):
        AttentionExplorer(model, images[0])
    with pytest.raises(ValueError, match=r"labels \(B,\) = \(3,\), one class index per image"):
        AttentionExplorer(model, images, labels=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"labels must be class indices 0 .. 2, got 0 .. 7"):
        AttentionExplorer(model, images, labels=torch.tensor([0, 1, 7]))
    with pytest.raises(ValueError, match=r"regions of bools.*\.bool\(\)"):
        AttentionExplorer(model, images, regions=torch.ones(3, 3, 3))
    with pytest.raises(ValueError, match="divide by 255"):
        AttentionExplorer(model, images * 255)
    with pytest.raises(TypeError, match="VisionTransformer"):
        AttentionExplorer(model.state_dict(), images)
    with pytest.raises(TypeError, match="preprocess must be a function"):
        AttentionExplorer(model, images, preprocess="normalize")


def test_attention_explorer_refuses_images_holding_nan_and_a_preprocess_that_resizes(vit):
    model, images, _, _ = vit
    broken = images.clone()
    broken[1, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"of finite values, image 1 holds NaN or infinity \(1 of 3 images do\)"):
        AttentionExplorer(model, broken)
    H, W = images.shape[-2:]
    bigger = lambda x: torch.nn.functional.interpolate(x, size=(H * 2, W * 2))  # noqa: E731
    with pytest.raises(ValueError, match=rf"preprocess turned image 0 of shape \(1, 3, {H}, {W}\) into shape"):
        AttentionExplorer(model, images, preprocess=bigger)
    with pytest.raises(ValueError, match="preprocess turned image 0 into values holding NaN"):
        AttentionExplorer(model, images, preprocess=lambda x: x / 0 * 0)


def test_attention_explorer_names_the_class_of_every_image_it_can_show(vit):
    model, images, logits, _ = vit
    explorer = AttentionExplorer(model, images, torch.tensor([2, 1, 0]), ["cat", "dog", "eel"])
    for index in range(3):  # every slider position draws, naming the predicted and the true class
        explorer.image.value = index
        predicted = ["cat", "dog", "eel"][int(logits[index].argmax())]
        assert f"predicted <b>{predicted}</b> (true: {['eel', 'dog', 'cat'][index]})" in explorer.summary.value


def test_position_explorer_refuses_snapshots_and_tables_that_do_not_match(tables):
    named, snapshots = tables
    short = {"steps": [0, 10, 20], "tables": snapshots["tables"][:2]}
    with pytest.raises(ValueError, match="one snapshot table per step .*3 steps and 2 tables"):
        PositionSimilarityExplorer(named, (3, 4), snapshots=short)
    with pytest.raises(ValueError, match=r"expected tables of one width D, got widths \{'learned': 16, 'wide': 32\}"):
        PositionSimilarityExplorer({"learned": named["learned"], "wide": torch.randn(1, 13, 32)}, (3, 4))
    with pytest.raises(ValueError, match=r"table 'batch': expected a position table \(1, T, D\)"):
        PositionSimilarityExplorer({"batch": torch.randn(2, 13, 16)}, (3, 4))
    with pytest.raises(ValueError, match="distinct training steps"):
        PositionSimilarityExplorer(named, (3, 4), snapshots={"steps": [0, 0], "tables": snapshots["tables"][:2]})
    with pytest.raises(ValueError, match=r"snapshots\['steps'\]\[1\] must be a whole number"):
        PositionSimilarityExplorer(named, (3, 4), snapshots={"steps": [0, 1.5], "tables": snapshots["tables"][:2]})
    with pytest.raises(ValueError, match=r"expected snapshots \{'steps'"):
        PositionSimilarityExplorer(named, (3, 4), snapshots={"steps": [0]})
    with pytest.raises(ValueError, match="grid_size must be a whole number"):
        PositionSimilarityExplorer(named, 0)
    with pytest.raises(ValueError, match="NaN"):
        PositionSimilarityExplorer({"broken": torch.full((1, 13, 16), float("nan"))}, (3, 4))
    with pytest.raises(TypeError, match="dict"):
        PositionSimilarityExplorer([named["learned"]], (3, 4))


def test_position_explorer_every_step_of_valid_snapshots_draws(tables):
    named, snapshots = tables
    explorer = PositionSimilarityExplorer(named, (3, 4), snapshots=snapshots)
    explorer.table.value = PositionSimilarityExplorer.DURING_TRAINING
    for step, table in zip(snapshots["steps"], snapshots["tables"]):
        explorer.step.value = step
        torch.testing.assert_close(explorer.similarity, pos_embed_similarity(table))
    explorer.row.value, explorer.col.value = 2, 3  # the far corner
    assert explorer.map.shape == (3, 4)


# ---- shown without a kernel: every explorer's output carries its picture and its state --------
# A notebook viewed on GitHub, nbviewer or the site has no kernel to draw the live widget: there the
# output's text/html shows: the picture as an <img> whose alt text says what it shows and its
# numbers; text/plain (which nbval compares) names the controls' values.


@pytest.fixture
def explorers(vit, tables):
    """{name: (explorer, a control move, its text/plain before the move, and after)}."""
    model, images, _, _ = vit
    named, snapshots = tables

    def move_attention(explorer):
        explorer.image.value, explorer.layer.value, explorer.head.value = 2, 1, 1
        explorer.query.value, explorer.row.value, explorer.col.value = "patch", 2, 1

    def move_position(explorer):
        explorer.table.value, explorer.step.value = PositionSimilarityExplorer.DURING_TRAINING, 10
        explorer.row.value, explorer.col.value = 0, 3

    def move(control, value):
        return lambda explorer: setattr(getattr(explorer, control), "value", value)

    return {
        "PatchSlicer": (
            PatchSlicer(torch.rand(3, 32, 32), patch_size=16),
            move("patch_size", 4),
            "patch size 16 px: 2 x 2 patches + 1 class token = 5 tokens",
            "patch size 4 px: 8 x 8 patches + 1 class token = 65 tokens",
        ),
        "SoftmaxTemperature": (
            SoftmaxTemperature(torch.tensor([2.0, 1.0, 0.0, -1.0])),
            move("scale", 10.0),
            "softmax(1.00 x scores) over 4 keys",
            "softmax(10.00 x scores) over 4 keys",
        ),
        "AttentionExplorer": (
            AttentionExplorer(model, images),
            move_attention,
            "image 0, class token: layer 3, mean of the heads",
            "image 2, patch (2, 1): layer 1, head 2",
        ),
        "PositionSimilarityExplorer": (
            PositionSimilarityExplorer(named, (3, 4), snapshots=snapshots),
            move_position,
            "table learned, position (1, 2)",
            "table learned, during training, step 10, position (0, 3)",
        ),
    }


EXPLORERS = ["PatchSlicer", "SoftmaxTemperature", "AttentionExplorer", "PositionSimilarityExplorer"]


@pytest.fixture
def shell(tmp_path, monkeypatch):
    """An IPython shell, as inside a kernel (display() publishes only through one), gone after the
    test with what it changed: no history file, its profile in tmp_path; sys.modules["__main__"],
    the builtins it adds and its exit hook taken back."""
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path))
    monkeypatch.setitem(sys.modules, "__main__", sys.modules["__main__"])  # the shell puts its own there
    config = Config()
    config.HistoryManager.enabled = False
    before = set(vars(builtins))
    shell = InteractiveShell.instance(config=config)
    yield shell
    atexit.unregister(shell.atexit_operations)
    InteractiveShell.clear_instance()
    for name in set(vars(builtins)) - before:  # __IPYTHON__, display
        delattr(builtins, name)


def as_last_expression(explorer) -> dict:
    """The bundle a kernel sends when a cell ends with `explorer` (its display hook's), and that
    nothing was published beside it."""
    with capture_output() as captured:
        data, _ = InteractiveShell.instance().displayhook.compute_format_data(explorer)
    assert not captured.outputs, "the explorer published a display of its own"
    return data


def with_display(explorer) -> dict:
    """The bundle that `display(explorer)` publishes."""
    with capture_output() as captured:
        display(explorer)
    assert len(captured.outputs) == 1, f"expected one display of the explorer, got {len(captured.outputs)}"
    return captured.outputs[0].data


def picture(bundle: dict) -> np.ndarray:
    """The PNG inside the bundle's text/html <img> (base64, as notebooks store it), decoded:
    (height, width, 4) RGBA."""
    (png,) = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', bundle["text/html"])
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(png))).convert("RGBA"))


def alt(bundle: dict) -> str:
    """The alt text of the bundle's <img>."""
    (text,) = re.findall(r'<img alt="([^"]*)" src=', bundle["text/html"])
    return html.unescape(text)


def rendering(fig) -> np.ndarray:
    """The figure drawn as it is now, (height, width, 4) RGBA at its own DPI: what the PNG must hold."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="rgba", dpi=fig.dpi)
    width, height = (fig.get_size_inches() * fig.dpi).round().astype(int)
    return np.frombuffer(buffer.getvalue(), np.uint8).reshape(height, width, 4)


@pytest.mark.usefixtures("shell")
@pytest.mark.parametrize("name", EXPLORERS)
@pytest.mark.parametrize("show", [as_last_expression, with_display], ids=["last-expression", "display"])
def test_a_shown_explorer_carries_the_live_widget_its_picture_and_its_state(explorers, name, show):
    explorer, _, state, _ = explorers[name]
    hooks = []
    if hasattr(explorer, "on_displayed"):  # ipywidgets 7: a box's hooks still run when it is shown
        explorer.on_displayed(lambda widget, **kwargs: hooks.append(widget))
    bundle = show(explorer)
    assert set(bundle) == {"text/plain", "text/html", WIDGET_VIEW}
    assert bundle[WIDGET_VIEW] == {"version_major": 2, "version_minor": 0, "model_id": explorer.model_id}
    assert bundle["text/plain"] == f"{name}: {state} (interactive in Jupyter)"  # no address, no id: nbval compares it
    width, height = (explorer.fig.get_size_inches() * explorer.fig.dpi).round().astype(int)
    assert picture(bundle).shape == (height, width, 4)  # the figure's own size, not a screenshot of the page
    np.testing.assert_array_equal(picture(bundle), rendering(explorer.fig))
    assert alt(bundle).startswith(f"{explorer.shows} ({state}): ")  # what it shows, then its state
    numbers = alt(bundle).split("): ", 1)[1]
    assert re.search(r"\d", numbers) and "<" not in numbers, numbers  # the summary's numbers, as words
    assert hooks == ([explorer] if hasattr(explorer, "on_displayed") else [])


@pytest.mark.usefixtures("shell")
@pytest.mark.parametrize("name", EXPLORERS)
def test_an_explorer_s_picture_and_state_follow_its_controls(explorers, name):
    explorer, move, before, after = explorers[name]
    first = with_display(explorer)
    move(explorer)
    second = with_display(explorer)
    assert first["text/plain"] == f"{name}: {before} (interactive in Jupyter)"
    assert second["text/plain"] == f"{name}: {after} (interactive in Jupyter)"
    assert picture(first).tobytes() != picture(second).tobytes(), "the picture did not change when the controls moved"
    assert alt(first) != alt(second), "the alt text did not follow the controls"
    np.testing.assert_array_equal(picture(second), rendering(explorer.fig))  # the figure now, not at first display
    assert second[WIDGET_VIEW] == first[WIDGET_VIEW]  # the same live widget


@pytest.mark.usefixtures("shell")
@pytest.mark.parametrize("name", EXPLORERS)
def test_an_explorer_hands_ipython_one_bundle_under_either_ipywidgets(explorers, name):
    """ipywidgets 8 builds its bundle in _repr_mimebundle_; ipywidgets 7 (Colab's) publishes its own
    from Widget._ipython_display_, which IPython prefers: there the explorer's raises
    NotImplementedError, so that IPython's formatter asks _repr_mimebundle_ as under ipywidgets 8."""
    explorer = explorers[name][0]
    if hasattr(ipywidgets.Widget, "_ipython_display_"):
        with pytest.raises(NotImplementedError):
            explorer._ipython_display_()
    else:
        assert not hasattr(explorer, "_ipython_display_")
    data, _ = InteractiveShell.instance().display_formatter.format(explorer, include=["text/html"])
    assert set(data) == {"text/html"}  # and the formatter's include= applies to it
