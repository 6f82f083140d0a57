"""The architecture figure labels the shapes a real model makes, and refuses what is not a config."""

import matplotlib.pyplot as plt
import pytest
import torch

from utils import VisionTransformer, ViTConfig, patchify
from utils.validation import WrongTypeError
from utils.viz.architecture import show_architecture, vit_shapes


def texts(fig: plt.Figure) -> list[str]:
    return [text.get_text() for ax in fig.axes for text in ax.texts] + [fig._suptitle.get_text()]


def measured_shapes(config: ViTConfig, batch_size: int) -> dict[str, tuple[int, ...]]:
    """The shapes a VisionTransformer(config) really makes, caught with forward hooks."""
    torch.manual_seed(0)
    model = VisionTransformer(config).eval()
    seen = {}

    def keep(name, position=None):
        """A hook that notes the shape of the module's output (or, with "in", of its input)."""

        def hook(module, args, output):
            seen[name] = tuple((args[0] if position == "in" else output).shape)

        return hook

    model.patch_embed.register_forward_hook(keep("patch tokens"))
    model.blocks[0].register_forward_hook(keep("tokens", "in"))  # z_0, the first block's input
    model.blocks[0].mlp.fc1.register_forward_hook(keep("MLP hidden"))
    model.norm.register_forward_hook(keep("encoder output"))
    model.head.register_forward_hook(keep("pooled", "in"))
    H, W = (config.image_size, config.image_size) if isinstance(config.image_size, int) else config.image_size
    images = torch.rand(batch_size, config.in_channels, H, W)
    logits, attention = model(images, return_attention=True)
    seen |= {
        "image": tuple(images.shape),
        "patches": tuple(patchify(images, config.patch_size).shape),
        "attention weights": tuple(attention.shape[1:]),
        "logits": tuple(logits.shape),
    }
    if model.cls_token is not None:
        seen["class token"] = tuple(model.cls_token.shape)
    if model.pos_embed is not None:
        seen["position table"] = tuple(model.pos_embed.shape)
    return seen


@pytest.mark.parametrize(
    "config",
    [
        ViTConfig.tiny(),
        ViTConfig.tiny(pool="mean", pos_embed="sincos"),
        ViTConfig.tiny(image_size=(32, 48), pos_embed="none", num_classes=3, mlp_ratio=3.0),
    ],
    ids=["tiny", "mean-pool sin-cos", "not square, no positions"],
)
def test_vit_shapes_are_the_shapes_a_real_model_makes(config):
    assert vit_shapes(config, batch_size=2) == measured_shapes(config, batch_size=2)


def test_vit_shapes_of_vit_b16():
    shapes = vit_shapes(ViTConfig.vit_b16())
    assert shapes == {
        "image": (1, 3, 224, 224),
        "patches": (1, 196, 768),
        "patch tokens": (1, 196, 768),
        "class token": (1, 1, 768),
        "position table": (1, 197, 768),
        "tokens": (1, 197, 768),
        "attention weights": (1, 12, 197, 197),
        "MLP hidden": (1, 197, 3072),
        "encoder output": (1, 197, 768),
        "pooled": (1, 768),
        "logits": (1, 1000),
    }


@pytest.mark.parametrize(
    "config, batch_size",
    [(ViTConfig.vit_b16(), 1), (ViTConfig.tiny(), 8), (ViTConfig.tiny(pool="mean", num_classes=0), 2)],
    ids=["B/16", "tiny, 8 images", "mean-pool, no head"],
)
def test_show_architecture_labels_every_shape_it_is_given(config, batch_size):
    fig = show_architecture(config, batch_size=batch_size)
    words = "\n".join(texts(fig))
    for name, shape in vit_shapes(config, batch_size).items():
        assert str(shape) in words, f"{name} {shape} is not in the figure"
    assert f"L = {config.depth}" in words and f"{config.num_heads} heads" in words
    assert ("class token" in words) == (config.pool == "cls")
    assert "eq. 2" in words and "eq. 3" in words
    plt.close(fig)


def test_show_architecture_draws_the_blocks_of_the_encoder():
    fig = show_architecture(ViTConfig.vit_b16())
    words = texts(fig)
    for part in ("LayerNorm (norm1)", "LayerNorm (norm2)", "+"):
        assert part in words or any(text.startswith(part) for text in words)
    assert words.count("+") == 2  # the two residual additions
    assert any("768 -> 3072 -> 768" in text for text in words)
    assert len(fig.axes[0].patches) > 15  # boxes, arrows, the block's frame
    plt.close(fig)


@pytest.mark.parametrize(
    "draw, error, says",
    [
        (lambda: show_architecture(VisionTransformer), WrongTypeError, "expected a ViTConfig"),
        (lambda: show_architecture({"embed_dim": 768}), WrongTypeError, "expected a ViTConfig, e.g."),
        (lambda: vit_shapes(ViTConfig.tiny(), batch_size=0), ValueError, "batch_size"),
    ],
)
def test_wrong_arguments_are_refused(draw, error, says):
    with pytest.raises(error, match=says):
        draw()


def test_the_roadmap_labels_each_step_with_the_lesson_that_builds_it():
    fig = show_architecture(ViTConfig.vit_b16(), by_lesson=True)
    words = texts(fig)
    assert not any(text.startswith("eq. ") for text in words)  # no equation before lesson 5 shows them
    assert words.count("lesson 1") == 2 and words.count("lesson 2") == 2  # patches, E; class token, positions
    assert words.count("lessons 3-4") == 1  # the attention box
    assert words.count("lesson 5") == 4 + 5  # encoder, LayerNorm, class token, head; norm1, norm2, MLP, two +
    assert "one encoder block" in words and "one encoder block (pre-norm)" not in words
    plt.close(fig)
    with pytest.raises(WrongTypeError, match="by_lesson"):
        show_architecture(ViTConfig.tiny(), by_lesson="yes")
