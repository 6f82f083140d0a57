"""utils.imagenet: the class list is ImageNet-1k's, in the checkpoints' order; normalize and top_k
do what the published ViT-B/16's preprocessing and a softmax do, and refuse the wrong shapes."""

import numpy as np
import pytest
import torch

from utils.imagenet import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    VIT_MEAN,
    VIT_STD,
    imagenet_classes,
    imagenet_synsets,
    normalize,
    top_k,
)


def test_the_class_list_is_imagenet_1k_in_the_checkpoints_order():
    synsets = imagenet_synsets()
    ids = [synset for synset, _ in synsets]
    assert len(ids) == len(set(ids)) == 1000 and ids == sorted(ids)  # class index = rank of the WordNet id
    classes = imagenet_classes()
    # well-known indices of ImageNet-1k (the order every ImageNet-1k checkpoint's head uses)
    known = {
        0: "tench",
        1: "goldfish",
        281: "tabby",
        285: "Egyptian cat",
        652: "military uniform",
        967: "espresso",
        999: "toilet tissue",
    }
    assert {index: classes[index] for index in known} == known
    assert synsets[281] == ("n02123045", "tabby, tabby cat")


def test_normalize_maps_zero_to_minus_one_and_one_to_one_per_channel():
    images = torch.stack([torch.zeros(3, 2, 2), torch.ones(3, 2, 2), torch.full((3, 2, 2), 0.25)])
    out = normalize(images)
    assert torch.equal(out[0], -torch.ones(3, 2, 2)) and torch.equal(out[1], torch.ones(3, 2, 2))
    assert torch.allclose(out[2], torch.full((3, 2, 2), -0.5))
    other = normalize(images, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    assert torch.allclose(other[1, 2], torch.full((2, 2), (1 - 0.406) / 0.225))
    with pytest.raises(ValueError, match=r"\(B, 3, H, W\)"):
        normalize(torch.rand(3, 8, 8))


def test_top_k_gives_the_most_probable_classes_with_softmax_probabilities():
    classes = [f"class {i}" for i in range(6)]
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0, 0.0, -1.0], [5.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    answers = top_k(logits, classes, k=3)
    probabilities = logits.softmax(dim=-1)
    assert [name for name, _ in answers[0]] == ["class 1", "class 3", "class 2"]
    assert answers[0][0][1] == pytest.approx(probabilities[0, 1].item())
    assert answers[1][0] == ("class 0", pytest.approx(probabilities[1, 0].item()))
    with pytest.raises(ValueError, match=r"\(B, 6\)"):
        top_k(torch.rand(2, 5), classes)


def test_normalize_takes_uint8_photos_and_scales_them_by_255():
    pixels = torch.tensor([0, 51, 255], dtype=torch.uint8).view(1, 3, 1, 1).expand(2, 3, 4, 4)  # (2, 3, 4, 4)
    out = normalize(pixels)
    assert out.dtype == torch.float32 and not out.isnan().any()
    torch.testing.assert_close(out, normalize(pixels.float() / 255))
    torch.testing.assert_close(out[0, :, 0, 0], torch.tensor([-1.0, -0.6, 1.0]))


@pytest.mark.parametrize(
    "images, says",
    [
        (torch.rand(8, 8, 3), r"channels last; use \.permute\(2, 0, 1\)\[None\]"),
        (torch.rand(2, 8, 8, 3), r"channels are last; use \.permute\(0, 3, 1, 2\)"),
        (torch.rand(3, 8, 8), r"without the batch axis; add it with \[None\]"),
        (torch.rand(2, 1, 8, 8), r"grey images\? repeat the channel"),
        (torch.rand(2, 4, 8, 8), r"expected images \(B, 3, H, W\) in \[0, 1\], got \(2, 4, 8, 8\)"),
        (torch.rand(1, 3, 8, 8) * 255, r"values up to 2\d\d.*divide them by 255"),
        (torch.rand(1, 3, 8, 8) * 2 - 1.5, r"values down to -1.*normalised already"),
        (torch.full((1, 3, 2, 2), float("nan")), "NaN"),
        (torch.randint(0, 256, (1, 3, 2, 2)), r"floats or uint8, got torch.int64"),
    ],
)
def test_normalize_refuses_what_is_no_batch_of_0_1_pixels(images, says):
    with pytest.raises(ValueError, match=says):
        normalize(images)


def test_normalize_refuses_a_numpy_array_and_bad_statistics():
    photo = np.zeros((8, 8, 3), dtype=np.uint8)
    with pytest.raises(TypeError, match=r"torch.from_numpy\(array\).permute\(2, 0, 1\)\[None\]"):
        normalize(photo)
    with pytest.raises(ValueError, match="3 means and 2 stds"):
        normalize(torch.rand(1, 3, 2, 2), mean=(0.5, 0.5, 0.5), std=(0.5, 0.5))
    with pytest.raises(ValueError, match="every std must be > 0"):
        normalize(torch.rand(1, 3, 2, 2), std=(0.5, 0.0, 0.5))
    assert normalize(torch.rand(1, 1, 2, 2), mean=(0.5,), std=(0.25,)).shape == (1, 1, 2, 2)  # one channel, asked for


def test_top_k_refuses_a_k_beyond_the_classes_and_logits_of_the_wrong_kind():
    classes = ["a", "b", "c"]
    for k in (4, 0, -1, 2.0):
        with pytest.raises(ValueError, match=r"k must be a whole number from 1 to the 3 classes"):
            top_k(torch.rand(2, 3), classes, k=k)
    assert len(top_k(torch.rand(2, 3), classes, k=3)[0]) == 3
    with pytest.raises(ValueError, match=r"got \(3,\): add the batch axis"):
        top_k(torch.rand(3), classes, k=2)
    with pytest.raises(ValueError, match="NaN"):
        top_k(torch.tensor([[0.0, float("nan"), 1.0]]), classes, k=2)
    with pytest.raises(TypeError, match="torch.Tensor"):
        top_k([[0.0, 1.0, 2.0]], classes)
    with pytest.raises(TypeError, match="list of names"):
        top_k(torch.rand(1, 3), "abc")


def test_normalize_takes_either_checkpoints_statistics():
    """ViT-B/16's (0.5 everywhere: [0, 1] -> [-1, 1]) and ImageNet's (DeiT, torchvision), per channel."""
    images = torch.rand(2, 3, 4, 5)
    torch.testing.assert_close(normalize(images, VIT_MEAN, VIT_STD), images * 2 - 1)
    mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    torch.testing.assert_close(normalize(images, IMAGENET_MEAN, IMAGENET_STD), (images - mean) / std)
    assert IMAGENET_MEAN == (0.485, 0.456, 0.406) and IMAGENET_STD == (0.229, 0.224, 0.225)
