"""Lesson 8's checkers pass the reference, accept equivalent answers and name each typical mistake."""

import itertools
import math

import numpy as np
import pytest
import torch
from checker_cases import assert_each_named_as_itself

from utils.checks.core import CheckFailed
from utils.checks.pretrained import (
    JAX_CASES,
    check_convert_jax_block,
    check_convert_layer,
    check_preprocess,
    jax_block_example,
    jax_block_forward,
)
from utils.encoder import EncoderBlock
from utils.imagenet import normalize
from utils.pretrained import hf_to_timm

# ---- converting one encoder layer ---------------------------------------------------------

RENAMES = {  # Hugging Face name inside a layer -> the course's name inside a block
    "layernorm_before": "norm1",
    "attention.output.dense": "attn.proj",
    "layernorm_after": "norm2",
    "intermediate.dense": "mlp.fc1",
    "output.dense": "mlp.fc2",
}


def convert_layer(hf_layer):
    """A correct converter, written out by hand."""
    out = {}
    for hf_name, name in RENAMES.items():
        for kind in ["weight", "bias"]:
            out[f"{name}.{kind}"] = hf_layer[f"{hf_name}.{kind}"]
    for kind in ["weight", "bias"]:
        q, k, v = (hf_layer[f"attention.attention.{part}.{kind}"] for part in ["query", "key", "value"])
        out[f"attn.qkv.{kind}"] = torch.cat([q, k, v])  # (3D, D) or (3D,)
    return out


def convert_with_the_library(hf_layer):
    """A correct converter that calls the library on the layer as layer 7 of a checkpoint."""
    converted = hf_to_timm({f"vit.encoder.layer.7.{name}": tensor for name, tensor in hf_layer.items()})
    return {name.removeprefix("blocks.7."): tensor for name, tensor in converted.items()}


def popping_convert(hf_layer):
    """A correct converter that empties the dict it is given, and clones and casts what it returns."""
    out = {}
    for hf_name, name in RENAMES.items():
        for kind in ["weight", "bias"]:
            out[f"{name}.{kind}"] = hf_layer.pop(f"{hf_name}.{kind}").clone().double()
    for kind in ["weight", "bias"]:
        parts = [hf_layer.pop(f"attention.attention.{part}.{kind}") for part in ["query", "key", "value"]]
        out[f"attn.qkv.{kind}"] = torch.cat(parts).requires_grad_()
    assert not hf_layer
    return out


def test_check_convert_layer_passes_the_reference_and_equivalents(capsys):
    check_convert_layer(convert_layer)
    assert (
        "✓ convert_layer matches utils.pretrained.hf_to_timm on 2 random layers (12 tensors each): exact"
        in capsys.readouterr().out
    )
    check_convert_layer(convert_with_the_library)
    check_convert_layer(popping_convert)
    assert capsys.readouterr().out.count("✓ convert_layer matches") == 2


def test_check_convert_layer_keeps_its_reference_from_the_learners_in_place_edits():
    def doubling(hf_layer):
        hf_layer["layernorm_before.weight"].mul_(2)  # in place: the checker's own copy must not change
        return convert_layer(hf_layer)

    with pytest.raises(CheckFailed, match="^norm1.weight: values differ from the reference"):
        check_convert_layer(doubling)


def changed(**edits):
    """A converter that returns the right dict with some tensors replaced: each edit maps a block
    key (dots written as '__') to a function of the Hugging Face layer."""

    def convert(hf_layer):
        out = convert_layer(hf_layer)
        for key, make in edits.items():
            out[key.replace("__", ".")] = make(hf_layer)
        return out

    return convert


def qkv(hf_layer, kind="weight", order="qkv", join=torch.cat, transpose=False):
    """q, k and v of the layer in some order, joined by torch.cat (or another join)."""
    names = {"q": "query", "k": "key", "v": "value"}
    parts = [hf_layer[f"attention.attention.{names[part]}.{kind}"] for part in order]
    return join([part.T if transpose else part for part in parts])


def layer(name):
    """The layer's tensor of that Hugging Face name."""
    return lambda hf_layer: hf_layer[name]


def wrong_qkv_orders():
    for order in itertools.permutations("qkv"):
        if order != ("q", "k", "v"):
            yield "".join(order), r"in the order \[" + "; ".join(order) + r"\]; MultiHeadSelfAttention splits"


@pytest.mark.parametrize("order, words", list(wrong_qkv_orders()))
@pytest.mark.parametrize("kind", ["weight", "bias"])
def test_check_convert_layer_names_q_k_v_in_another_order(order, words, kind):
    wrong = changed(**{f"attn__qkv__{kind}": lambda hf_layer: qkv(hf_layer, kind, order)})
    with pytest.raises(CheckFailed, match=f"{words} .*torch.cat\\(\\[q, k, v\\]\\) \\(attn.qkv.{kind}, "):
        check_convert_layer(wrong)


def wrong_convert_cases():
    cat_dim_1 = lambda parts: torch.cat(parts, dim=1)  # noqa: E731
    return [
        (changed(attn__qkv__weight=lambda h: qkv(h, join=torch.stack)), r"you used torch.stack.*\(attn.qkv.weight"),
        (changed(attn__qkv__bias=lambda h: qkv(h, "bias", join=torch.stack)), r"you used torch.stack.*qkv.bias"),
        (changed(attn__qkv__weight=lambda h: qkv(h).T), r"your attn.qkv.weight is transposed: nn.Linear"),
        (changed(attn__qkv__weight=lambda h: qkv(h, join=cat_dim_1)), r"concatenated q, k and v along dim 1"),
        (changed(attn__qkv__weight=lambda h: qkv(h, transpose=True)), r"each transposed before the concatenation"),
        (
            changed(norm1__weight=layer("layernorm_after.weight"), norm2__weight=layer("layernorm_before.weight")),
            r"norm1 and norm2 are swapped: layernorm_before is norm1, the norm BEFORE attention.*\(norm1.weight",
        ),
        (
            changed(norm1__bias=layer("layernorm_after.bias"), norm2__bias=layer("layernorm_before.bias")),
            r"norm1 and norm2 are swapped.*\(norm1.bias",
        ),
        (changed(norm2__weight=layer("layernorm_before.weight")), r"norm1 and norm2 are swapped.*\(norm2.weight"),
        (
            changed(
                attn__proj__weight=layer("output.dense.weight"), mlp__fc2__weight=layer("attention.output.dense.weight")
            ),
            r"attn.proj and mlp.fc2 are mixed up.*match the whole name.*\(attn.proj.weight",
        ),
        (changed(mlp__fc2__weight=layer("attention.output.dense.weight")), r"mixed up.*\(mlp.fc2.weight"),
        (
            changed(attn__proj__bias=layer("output.dense.bias"), mlp__fc2__bias=layer("attention.output.dense.bias")),
            r"attn.proj and mlp.fc2 are mixed up.*\(attn.proj.bias",
        ),
        (changed(mlp__fc2__bias=layer("attention.output.dense.bias")), r"mixed up.*\(mlp.fc2.bias"),
        (
            changed(mlp__fc1__weight=layer("output.dense.weight"), mlp__fc2__weight=layer("intermediate.dense.weight")),
            r"mlp.fc1 and mlp.fc2 are swapped: intermediate.dense \(D -> hidden\) is mlp.fc1.*\(mlp.fc1.weight",
        ),
        (
            changed(mlp__fc1__bias=layer("output.dense.bias"), mlp__fc2__bias=layer("intermediate.dense.bias")),
            r"mlp.fc1 and mlp.fc2 are swapped.*\(mlp.fc1.bias",
        ),
        (changed(mlp__fc2__weight=layer("intermediate.dense.weight")), r"mlp.fc1 and mlp.fc2 are swapped.*\(mlp.fc2"),
        (
            changed(attn__proj__weight=lambda h: h["attention.output.dense.weight"].T),
            r"your attn.proj.weight is transposed: nn.Linear keeps its weight as \(out, in\) in both layouts",
        ),
        (changed(mlp__fc1__weight=lambda h: h["intermediate.dense.weight"].T), r"your mlp.fc1.weight is transposed"),
        (changed(mlp__fc2__weight=lambda h: h["output.dense.weight"].T), r"your mlp.fc2.weight is transposed"),
        (changed(attn__qkv__weight=lambda h: qkv(h, order="qqq")), r"attn.qkv.weight holds q's weight three times"),
        (
            changed(attn__qkv__bias=lambda h: torch.zeros_like(qkv(h, "bias"))),
            r"attn.qkv.bias is all zeros: the query, key and value biases are learned too",
        ),
        (
            changed(norm1__weight=layer("layernorm_before.bias"), norm1__bias=layer("layernorm_before.weight")),
            r"a LayerNorm's weight and bias are swapped.*\(norm1.weight",
        ),
        (
            changed(norm1__weight=lambda h: 2 * h["layernorm_before.weight"]),
            r"^norm1.weight: values differ from the reference: max difference .* hidden = 24; check which Hugging Face",
        ),
    ]


@pytest.mark.parametrize("wrong, words", wrong_convert_cases())
def test_check_convert_layer_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_convert_layer(wrong)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (
            changed(attn__qkv__weight=lambda h: qkv(h, order="kqv", join=torch.stack)),
            r"attn.qkv.weight should have shape \(24, 8\), got \(3, 8, 8\) for a layer of width D = 8 and MLP width "
            r"hidden = 24: torch.stack adds a new dimension; torch.cat\(\[q, k, v\]\) puts the rows one under",
        ),
        (
            changed(attn__qkv__bias=lambda h: qkv(h, "bias", order="vkq", join=torch.stack)),
            r"attn.qkv.bias should have shape \(24,\), got \(3, 8\) .*: torch.stack adds a new dimension",
        ),
        (
            changed(attn__qkv__weight=lambda h: qkv(h, order="kvq", join=lambda p: torch.cat(p, dim=1))),
            r"should have shape \(24, 8\), got \(8, 24\) .*: you concatenated q, k and v along dim 1 \(or transposed",
        ),
        (
            changed(mlp__fc1__weight=lambda h: 2 * h["intermediate.dense.weight"].T),
            r"mlp.fc1.weight should have shape \(24, 8\), got \(8, 24\) .*: the weight is transposed; nn.Linear",
        ),
        (
            changed(mlp__fc1__bias=lambda h: h["intermediate.dense.bias"][:-1]),
            r"^mlp.fc1.bias should have shape \(24,\), got \(23,\) for a layer of width D = 8 and MLP width "
            r"hidden = 24$",
        ),
    ],
)
def test_check_convert_layer_names_a_wrong_shape(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_convert_layer(wrong)


def unfused(hf_layer):
    """Renamed, but q, k and v left apart."""
    out = convert_layer(hf_layer)
    for kind in ["weight", "bias"]:
        del out[f"attn.qkv.{kind}"]
        for part in ["query", "key", "value"]:
            out[f"attn.{part[0]}.{kind}"] = hf_layer[f"attention.attention.{part}.{kind}"]
    return out


@pytest.mark.parametrize(
    "wrong, words",
    [
        (
            unfused,
            r"^your dict lacks the key\(s\) attn.qkv.weight, attn.qkv.bias; it also has key\(s\) that a "
            r"block does not have: attn.q.weight, attn.k.weight, attn.v.weight, attn.q.bias, attn.k.bias, "
            r"attn.v.bias \(for a layer .*\); q, k and v must end up in one attn.qkv: attn.qkv.weight = "
            r"torch.cat\(\[q, k, v\]\) of their three weights",
        ),
        (
            lambda h: {**h, **convert_layer(h)},
            r"^your dict has key\(s\) that a block does not have: layernorm_before.weight, .* still have their "
            r"Hugging Face names",
        ),
        (
            lambda h: {f"blocks.0.{name}": tensor for name, tensor in convert_layer(h).items()},
            r"lacks the key\(s\) norm1.weight, .* has key\(s\) .*: blocks.0.norm1.weight, .*leave out the 'blocks.0.'",
        ),
    ],
)
def test_check_convert_layer_names_missing_and_unexpected_keys(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_convert_layer(wrong)


def test_check_convert_layer_turns_errors_into_failures():
    with pytest.raises(
        CheckFailed, match="your function raised KeyError for a layer of width D = 8 .*: 'attention.query.weight'"
    ):
        check_convert_layer(lambda h: {"attn.qkv.weight": h["attention.query.weight"]})
    with pytest.raises(CheckFailed, match="expected a dict that maps the course's names to tensors, got list"):
        check_convert_layer(lambda h: list(convert_layer(h).values()))
    with pytest.raises(CheckFailed, match=r"norm2.bias should be a torch.Tensor, got list \(for a layer"):
        check_convert_layer(changed(norm2__bias=lambda h: h["layernorm_after.bias"].tolist()))


# ---- preparing a photo ---------------------------------------------------------------------

VIT = ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


def preprocess(pixels, mean, std):
    """The reference: channels first, a batch dimension, [0, 1], then (x - mean) / std per channel."""
    return normalize(torch.from_numpy(pixels).permute(2, 0, 1)[None].float() / 255, mean, std)


def preprocess_in_numpy(pixels, mean, std):
    """A correct answer in NumPy, float32 throughout."""
    x = (pixels.astype(np.float32) / 255 - np.float32(mean)) / np.float32(std)  # (H, W, 3)
    return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1)))[None]  # (1, 3, H, W)


def by_hand(pixels, mean, std, scale=255.0, divide=True, bgr=False, use=None):
    """The preprocessing written out by hand, with switches for the mistakes (use: fixed stats)."""
    mean, std = use if use is not None else (mean, std)
    x = torch.tensor(pixels).float().permute(2, 0, 1).unsqueeze(0) / scale  # (1, 3, H, W)
    mean, std = torch.tensor(mean).view(1, 3, 1, 1), torch.tensor(std).view(1, 3, 1, 1)
    x = (x - mean) / std if divide else (x - mean) * std
    return x.flip(1) if bgr else x


def reshaped(pixels, mean, std):
    """The commonest slip: reshape where permute belongs (the shape comes out right)."""
    H, W, _ = pixels.shape
    x = torch.from_numpy(pixels).float().reshape(1, 3, H, W) / 255
    return (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)


def test_check_preprocess_passes_the_reference_and_equivalents(capsys):
    check_preprocess(preprocess)
    assert (
        "✓ preprocess matches utils.imagenet.normalize on 2 random photos, with ViT-B/16's and DeiT's "
        "normalisation: exact" in capsys.readouterr().out
    )
    check_preprocess(preprocess_in_numpy)
    check_preprocess(by_hand)
    check_preprocess(lambda p, m, s: preprocess(p, m, s).requires_grad_())
    assert capsys.readouterr().out.count("✓ preprocess matches utils.imagenet.normalize on 2 random photos") == 3


PREPROCESS_MISTAKES = [
    ("reshape", reshaped, "you used reshape \\(or view\\) where permute belongs"),
    ("view", lambda p, m, s: reshaped(p, m, s).view(1, 3, *p.shape[:2]), "where permute belongs"),
    ("no 255", lambda p, m, s: by_hand(p, m, s, scale=1.0), "you did not divide by 255: the pixels go from 0 to 255"),
    (
        "0..255",
        lambda p, m, s: torch.from_numpy(p).permute(2, 0, 1)[None].float(),
        "your values still go from 0 to 255",
    ),
    (
        "[0, 1]",
        lambda p, m, s: by_hand(p, m, s, use=((0, 0, 0), (1, 1, 1))),
        r"your values are in \[0, 1\], but not normalised",
    ),
    (
        "fixed 0.5",
        lambda p, m, s: by_hand(p, m, s, use=VIT),
        r"you normalised with ViT-B/16's mean 0.5 .* use the arguments",
    ),
    (
        "fixed ImageNet",
        lambda p, m, s: by_hand(p, m, s, use=IMAGENET),
        r"you normalised with ImageNet's mean .* use the arguments",
    ),
    ("times std", lambda p, m, s: by_hand(p, m, s, divide=False), "you multiplied by the std; divide by it"),
    ("no std", lambda p, m, s: by_hand(p, m, (1, 1, 1)), "subtracted the mean but did not divide by the std"),
    ("swapped", lambda p, m, s: by_hand(p, s, m), "you swapped mean and std"),
    ("bgr", lambda p, m, s: by_hand(p, m, s, bgr=True), r"BGR order \(reversed\)"),
    ("bgr photo", lambda p, m, s: preprocess(p[..., ::-1].copy(), m, s), r"BGR order"),
    ("reversed stats", lambda p, m, s: by_hand(p, m[::-1], s[::-1]), "applied to the channels in reverse order"),
    ("256", lambda p, m, s: by_hand(p, m, s, scale=256.0), r"you divided by 256"),
    (
        "own stats",
        lambda p, m, s: (lambda x: (x - x.mean()) / x.std())(by_hand(p, m, s, use=((0, 0, 0), (1, 1, 1)))),
        "you standardised the photo with its own mean and std",
    ),
    (
        "own channel stats",
        lambda p, m, s: (lambda x: (x - x.mean(dim=(2, 3), keepdim=True)) / x.std(dim=(2, 3), keepdim=True))(
            by_hand(p, m, s, use=((0, 0, 0), (1, 1, 1)))
        ),
        "you standardised each channel with its own mean and std",
    ),
    ("channels last", lambda p, m, s: preprocess(p, m, s)[0].permute(1, 2, 0), "the channels are still last"),
    ("no batch", lambda p, m, s: preprocess(p, m, s)[0], r"there is no batch dimension; add one with \[None\]"),
    ("h w", lambda p, m, s: preprocess(p, m, s).transpose(2, 3), "height and width are swapped"),
    ("uint8", lambda p, m, s: torch.from_numpy(p).permute(2, 0, 1)[None], "it is still the photo's uint8 integers"),
    (
        "float64",
        lambda p, m, s: preprocess(p, m, s).double(),
        r"got float64 .*; float64 comes from NumPy arithmetic .* convert it with .float\(\)",
    ),
    (
        "resized",
        lambda p, m, s: torch.nn.functional.interpolate(preprocess(p, m, s), size=(224, 224)),
        "already at the model's size, so do not resize it",
    ),
]


@pytest.mark.parametrize("name, wrong, words", PREPROCESS_MISTAKES, ids=[case[0] for case in PREPROCESS_MISTAKES])
def test_check_preprocess_names_each_typical_mistake(name, wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_preprocess(wrong)


def test_no_preprocess_mistake_is_named_as_another():
    assert_each_named_as_itself(check_preprocess, PREPROCESS_MISTAKES)


def test_check_preprocess_names_reshape_for_permute_in_one_sentence():
    with pytest.raises(CheckFailed) as failure:
        check_preprocess(reshaped)
    message = str(failure.value)
    assert "permute" in message and "reshape" in message and "max difference" not in message


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda p, m, s: None, "^expected a torch.Tensor, got None"),
        (lambda p, m, s: preprocess(p, m, s) * math.nan, "values are NaN for a photo"),
        (
            lambda p, m, s: preprocess(p, m, s).to("meta"),
            r"is a tensor on the meta device .*keeps shapes but no values",
        ),
        (lambda p, m, s: preprocess(p, m, s).tolist(), "^expected a torch.Tensor, got list"),
        (lambda p, m, s: preprocess(p, m, s) > 0, r"^expected a float32 tensor, got bool"),
        (lambda p, m, s: {}["pixel_values"], "your function raised KeyError"),
        (lambda p, m, s: preprocess(p, m, s).numpy(), "expected a torch.Tensor, got ndarray"),
        (
            lambda p, m, s: preprocess(p, m, s) * 1.01,
            r"^values differ from the reference: max difference .*; go through",
        ),
        (lambda p, m, s: p, "expected a torch.Tensor, got ndarray"),
    ],
)
def test_check_preprocess_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_preprocess(wrong)


# ---- more mistakes, what came back, and no mistake named as another -----------------------


def test_no_convert_mistake_is_named_as_another():
    assert_each_named_as_itself(check_convert_layer, wrong_convert_cases()[:-1])


@pytest.mark.parametrize(
    "wrong, words",
    [
        (changed(norm1__weight=lambda h: h["layernorm_before.weight"].long()), r"^norm1.weight: expected a float32"),
        (changed(norm1__bias=lambda h: h["layernorm_before.bias"] > 0), r"^norm1.bias: expected a float32 .*got bool"),
        (changed(mlp__fc1__bias=lambda h: h["intermediate.dense.bias"] * math.nan), r"^mlp.fc1.bias: .* NaN"),
        (
            changed(mlp__fc1__bias=lambda h: h["intermediate.dense.bias"].to("meta")),
            r"^mlp.fc1.bias is a tensor on the meta device",
        ),
        (changed(mlp__fc1__bias=lambda h: h["intermediate.dense.bias"].numpy()), r"mlp.fc1.bias should be a torch"),
        (lambda h: None, "^expected a dict that maps the course's names to tensors, got None"),
    ],
)
def test_check_convert_layer_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_convert_layer(wrong)


# ---- converting one block of the JAX original's layout ------------------------------------

ATTN = "MultiHeadDotProductAttention_1/"


def convert_jax_block(block):
    """A correct converter, written out by hand."""
    D = block["LayerNorm_0/scale"].shape[0]
    parts = ("query", "key", "value")
    return {
        "norm1.weight": block["LayerNorm_0/scale"],
        "norm1.bias": block["LayerNorm_0/bias"],
        "attn.qkv.weight": torch.cat([block[f"{ATTN}{p}/kernel"].reshape(D, D).T for p in parts]),
        "attn.qkv.bias": torch.cat([block[f"{ATTN}{p}/bias"].reshape(D) for p in parts]),
        "attn.proj.weight": block[f"{ATTN}out/kernel"].reshape(D, D).T,
        "attn.proj.bias": block[f"{ATTN}out/bias"],
        "norm2.weight": block["LayerNorm_2/scale"],
        "norm2.bias": block["LayerNorm_2/bias"],
        "mlp.fc1.weight": block["MlpBlock_3/Dense_0/kernel"].T,
        "mlp.fc1.bias": block["MlpBlock_3/Dense_0/bias"],
        "mlp.fc2.weight": block["MlpBlock_3/Dense_1/kernel"].T,
        "mlp.fc2.bias": block["MlpBlock_3/Dense_1/bias"],
    }


def convert_jax_block_by_einops_style(block):
    """A correct converter that permutes before flattening, in float64, with fresh tensors."""
    out = {}
    D = block["LayerNorm_0/scale"].shape[0]
    for mine, theirs in [("norm1", "LayerNorm_0"), ("norm2", "LayerNorm_2")]:
        out[f"{mine}.weight"], out[f"{mine}.bias"] = block[f"{theirs}/scale"].clone(), block[f"{theirs}/bias"].double()
    kernels = [block[f"{ATTN}{p}/kernel"].permute(1, 2, 0).reshape(D, D) for p in ("query", "key", "value")]
    out["attn.qkv.weight"] = torch.cat(kernels).double()
    out["attn.qkv.bias"] = torch.cat([block[f"{ATTN}{p}/bias"].flatten() for p in ("query", "key", "value")])
    out["attn.proj.weight"] = block[f"{ATTN}out/kernel"].permute(2, 0, 1).reshape(D, D)
    out["attn.proj.bias"] = block[f"{ATTN}out/bias"]
    out["mlp.fc1.weight"], out["mlp.fc1.bias"] = block["MlpBlock_3/Dense_0/kernel"].mT, block["MlpBlock_3/Dense_0/bias"]
    out["mlp.fc2.weight"], out["mlp.fc2.bias"] = block["MlpBlock_3/Dense_1/kernel"].mT, block["MlpBlock_3/Dense_1/bias"]
    return out


def test_the_reference_conversion_computes_what_the_jax_block_computes():
    """Independent of the checker's own tables: an EncoderBlock holding the converted tensors and the
    JAX block computed by einsum from its own tensors agree (exact GELU, eps 1e-6 on both sides)."""
    for D, heads, hidden in JAX_CASES:
        block = jax_block_example(D, heads, hidden)
        ours = EncoderBlock(D, heads, mlp_ratio=hidden / D, norm_eps=1e-6).eval()
        ours.load_state_dict(convert_jax_block(block))
        x = torch.randn(3, 7, D)
        with torch.no_grad():
            torch.testing.assert_close(ours(x), jax_block_forward(block, x), rtol=1e-5, atol=1e-4)


def test_check_convert_jax_block_passes_the_reference_and_equivalents(capsys):
    check_convert_jax_block(convert_jax_block)
    assert "✓ convert_jax_block matches the reference on 2 random blocks (12 tensors each): exact" in (
        capsys.readouterr().out
    )
    check_convert_jax_block(convert_jax_block_by_einops_style)


def jax_changed(**edits):
    """A converter that returns the right dict with some tensors replaced (dots written as '__')."""

    def convert(block):
        out = convert_jax_block(block)
        for key, make in edits.items():
            out[key.replace("__", ".")] = make(block)
        return out

    return convert


def _d(block):
    return block["LayerNorm_0/scale"].shape[0]


def _qkv(block, order=("query", "key", "value"), how=lambda k, D: k.reshape(D, D).T):
    return torch.cat([how(block[f"{ATTN}{p}/kernel"], _d(block)) for p in order])


JAX_MISTAKES = [
    (jax_changed(attn__qkv__weight=lambda b: _qkv(b, how=lambda k, D: k.reshape(D, D))), "did not transpose"),
    (
        jax_changed(attn__qkv__weight=lambda b: _qkv(b, how=lambda k, D: k.transpose(1, 2).reshape(D, D).T)),
        r"heads and head_dim axes are flattened in the wrong order \(head_dim first\)",
    ),
    (jax_changed(attn__qkv__weight=lambda b: _qkv(b, order=("key", "query", "value"))), r"in the order \[k; q; v\]"),
    (jax_changed(attn__qkv__weight=lambda b: _qkv(b, how=lambda k, D: k)), r"got \(24, 2, 4\) .*flatten the heads"),
    (
        jax_changed(attn__qkv__bias=lambda b: torch.cat([b[f"{ATTN}{p}/bias"] for p in ("query", "key", "value")])),
        r"attn.qkv.bias should have shape \(24,\), got \(6, 4\) .*flatten the heads",
    ),
    (
        jax_changed(
            attn__qkv__bias=lambda b: torch.cat([b[f"{ATTN}{p}/bias"].T.reshape(-1) for p in ("query", "key", "value")])
        ),
        "the bias's heads and head_dim axes are flattened in the wrong order",
    ),
    (jax_changed(attn__qkv__bias=lambda b: torch.zeros(3 * _d(b))), "attn.qkv.bias is all zeros"),
    (
        jax_changed(attn__proj__weight=lambda b: b[f"{ATTN}out/kernel"].reshape(_d(b), _d(b))),
        "attn.proj.weight is not transposed",
    ),
    (
        jax_changed(attn__proj__weight=lambda b: b[f"{ATTN}out/kernel"]),
        r"attn.proj.weight should have shape \(8, 8\), got \(2, 4, 8\) .*flatten the heads",
    ),
    (jax_changed(norm1__weight=lambda b: b["LayerNorm_2/scale"]), "norm1 and norm2 are swapped"),
    (jax_changed(norm2__bias=lambda b: b["LayerNorm_2/scale"]), "a LayerNorm's scale and bias are swapped"),
    (
        jax_changed(mlp__fc1__weight=lambda b: b["MlpBlock_3/Dense_0/kernel"]),
        r"mlp.fc1.weight should have shape .*not transposed",
    ),
    (jax_changed(mlp__fc1__bias=lambda b: b["MlpBlock_3/Dense_1/bias"]), "mlp.fc1 and mlp.fc2 are swapped"),
    (
        jax_changed(attn__proj__bias=lambda b: b["MlpBlock_3/Dense_1/bias"]),
        "attn.proj.bias and mlp.fc2.bias are mixed up",
    ),
    (lambda b: b, "some keys still have their JAX names"),
    (
        lambda b: {k: v for k, v in convert_jax_block(b).items() if not k.startswith("attn.qkv")},
        r"^your dict lacks the key\(s\) attn.qkv.weight, attn.qkv.bias \(for a block",
    ),
    (
        jax_changed(mlp__fc2__bias=lambda b: b["MlpBlock_3/Dense_1/bias"] * 1.01),
        r"^mlp.fc2.bias: values differ .*needs .T",
    ),
]


@pytest.mark.parametrize("wrong, words", JAX_MISTAKES)
def test_check_convert_jax_block_names_each_typical_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_convert_jax_block(wrong)


def test_no_jax_mistake_is_named_as_another():
    assert_each_named_as_itself(check_convert_jax_block, JAX_MISTAKES)


def test_check_convert_jax_block_says_what_came():
    with pytest.raises(CheckFailed, match="^expected a dict that maps the course's names to tensors, got None"):
        check_convert_jax_block(lambda b: None)
    with pytest.raises(CheckFailed, match="norm1.bias should be a torch.Tensor, got list"):
        check_convert_jax_block(jax_changed(norm1__bias=lambda b: b["LayerNorm_0/bias"].tolist()))
