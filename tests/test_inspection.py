"""The inspection maths, against hand computations on small, known inputs."""

import math

import numpy as np
import pytest
import torch

from utils import VisionTransformer, ViTConfig
from utils.inspection import (
    attention_rollout,
    attention_share,
    cls_attention_map,
    delete_patches,
    mean_attention_distance,
    patch_coverage,
    patch_embedding_components,
    top_patches,
)


def random_attention(depth=3, B=2, heads=4, T=5, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(depth, B, heads, T, T, generator=generator).softmax(-1)


def test_rollout_matches_a_hand_loop():
    attn = random_attention()
    rollout = attention_rollout(attn)
    expected = []
    for b in range(2):
        result = np.eye(5)
        for layer in attn[:, b].numpy():
            a = layer.mean(0) + np.eye(5)
            a = a / a.sum(-1, keepdims=True)
            result = a @ result
        expected.append(result)
    np.testing.assert_allclose(rollout.numpy(), np.stack(expected), atol=1e-6)
    torch.testing.assert_close(rollout.sum(-1), torch.ones(2, 5))


def test_rollout_of_one_layer_without_residual_is_the_head_mean():
    attn = random_attention(depth=1)
    torch.testing.assert_close(attention_rollout(attn, residual=False), attn[0].mean(1))


def test_rollout_on_a_real_model_and_shape_errors():
    model = VisionTransformer(ViTConfig.tiny(depth=2)).eval()
    _, attn = model(torch.rand(2, 3, 32, 32), return_attention=True)
    assert attention_rollout(attn).shape == (2, 65, 65)
    with pytest.raises(ValueError, match=r"\(depth, B, heads, T, T\)"):
        attention_rollout(attn[0])


def test_cls_attention_map_is_row_zero_on_the_grid():
    weights = torch.rand(2, 1 + 6, 1 + 6)
    maps = cls_attention_map(weights, (2, 3))
    assert maps.shape == (2, 2, 3)
    assert torch.equal(maps[1, 1, 2], weights[1, 0, 1 + 5])  # patch (1, 2) is token 6
    assert maps.untyped_storage().nbytes() == maps.numel() * maps.element_size()  # a copy: no hold on weights
    with pytest.raises(ValueError, match="expected 1 \\+ 3 x 3 = 10 tokens"):
        cls_attention_map(weights, 3)


def test_patch_coverage_and_attention_share():
    masks = torch.zeros(1, 8, 8, dtype=torch.bool)
    masks[0, 1, 1] = True  # patch (0, 0)
    masks[0, 6, 5] = True  # patch (1, 1)
    covered = patch_coverage(masks, 4)
    assert covered.tolist() == [[[True, False], [False, True]]]
    maps = torch.tensor([[[0.4, 0.1], [0.2, 0.3]]])
    torch.testing.assert_close(attention_share(maps, covered), torch.tensor([0.7]))


def test_mean_attention_distance_known_cases():
    grid, P = 2, 4  # 4 patches on a 2 x 2 grid, 4 px apart
    T = 1 + 4
    identity = torch.eye(T).expand(1, 1, 1, T, T)  # every patch looks at itself
    assert mean_attention_distance(identity, grid, P).item() == 0.0
    uniform = torch.full((1, 1, 1, T, T), 1.0 / T)  # spread evenly (the class token is left out)
    expected = (0 + 4 + 4 + 4 * math.sqrt(2)) / 4  # from any patch to the four patches
    assert mean_attention_distance(uniform, grid, P).item() == pytest.approx(expected)
    assert mean_attention_distance(random_attention(T=5), 2, P).shape == (3, 4)


def test_patch_embedding_components_are_the_principal_axes():
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(64, 3, 4, 4, generator=generator) * torch.linspace(0.1, 2, 48).reshape(1, 3, 4, 4)
    components, share = patch_embedding_components(weight, count=5)
    assert components.shape == (5, 3, 4, 4)
    flat = components.reshape(5, -1).double()
    torch.testing.assert_close(flat @ flat.T, torch.eye(5, dtype=torch.float64), atol=1e-5, rtol=0)
    centred = weight.reshape(64, -1).double().numpy()
    centred = centred - centred.mean(0)
    values, vectors = np.linalg.eigh(centred.T @ centred)  # an independent route: eigenvectors
    top = vectors[:, ::-1][:, :5].T  # (5, 48), largest first
    np.testing.assert_allclose(np.abs((flat.numpy() * top).sum(1)), np.ones(5), atol=1e-4)
    np.testing.assert_allclose(share.numpy(), (values[::-1][:5] / values.sum()), atol=1e-5)


def test_top_patches_picks_the_k_highest_of_each_map():
    scores = torch.tensor([[[0.1, 0.9], [0.5, 0.3]], [[4.0, 1.0], [2.0, 3.0]]])
    assert top_patches(scores, 1).tolist() == [[[False, True], [False, False]], [[True, False], [False, False]]]
    assert top_patches(scores, 3).tolist() == [[[False, True], [True, True]], [[True, False], [True, True]]]
    assert top_patches(scores, 0).sum() == 0 and top_patches(scores, 4).all()
    generator = torch.Generator().manual_seed(0)
    many = torch.rand(50, 8, 8, generator=generator)
    chosen = top_patches(many, 10)
    assert (chosen.sum(dim=(1, 2)) == 10).all()
    lowest_chosen = torch.where(chosen, many, torch.inf).amin(dim=(1, 2))
    highest_left = torch.where(chosen, -torch.inf, many).amax(dim=(1, 2))
    assert (lowest_chosen > highest_left).all()  # every chosen patch outscores every other


def test_top_patches_breaks_ties_in_row_major_order():
    flat = torch.zeros(1, 2, 3)
    assert top_patches(flat, 2).tolist() == [[[True, True, False], [False, False, False]]]


def test_delete_patches_paints_exactly_the_chosen_patches():
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(2, 3, 8, 12, generator=generator)  # a 2 x 3 grid of 4 px patches
    patches = torch.zeros(2, 2, 3, dtype=torch.bool)
    patches[0, 1, 2] = True  # rows 4-7, columns 8-11 of image 0
    patches[1, 0, 0] = patches[1, 1, 1] = True
    colour = torch.tensor([0.1, 0.2, 0.3])
    deleted = delete_patches(images, patches, fill=colour)
    expected = images.clone()
    expected[0, :, 4:8, 8:12] = colour.reshape(3, 1, 1)
    expected[1, :, 0:4, 0:4] = colour.reshape(3, 1, 1)
    expected[1, :, 4:8, 4:8] = colour.reshape(3, 1, 1)
    assert torch.equal(deleted, expected)
    assert torch.equal(delete_patches(images, patches, fill=0.5)[0, :, 4:, 8:], torch.full((3, 4, 4), 0.5))
    assert torch.equal(delete_patches(images, torch.zeros_like(patches)), images)  # nothing chosen: unchanged
    assert not torch.equal(images, expected)  # the input is left as it was


def test_deleting_what_decides_a_models_answer_changes_it():
    """The point of the test: a model that reads one patch loses its answer when that patch goes."""
    images = torch.zeros(4, 1, 4, 4)
    images[torch.arange(4), 0, [0, 0, 2, 2], [0, 2, 0, 2]] = 1.0  # one bright pixel, in a different patch

    def brightest_patch(x):  # (B, 1, 4, 4) -> (B, 4) "logits": the ink in each 2 x 2 patch
        return x.reshape(-1, 2, 2, 2, 2).sum(dim=(2, 4)).reshape(-1, 4)

    labels = brightest_patch(images).argmax(-1)
    scores = brightest_patch(images).reshape(-1, 2, 2)  # a perfect map: the ink itself
    deleted = delete_patches(images, top_patches(scores, 1), fill=0.0)
    assert (brightest_patch(deleted).amax(-1) == 0).all() and labels.tolist() == [0, 1, 2, 3]


# ---- bad inputs: a clear error rather than NaN or a wrong map -----------------------------


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: top_patches(torch.rand(2, 4), 1), ValueError, r"scores shaped \(B, rows, cols\), got a 2-D"),
        (lambda: top_patches(torch.rand(2, 2, 2), 5), ValueError, r"k must be a whole number of patches .* got 5"),
        (lambda: top_patches(torch.rand(2, 2, 2), 1.0), TypeError, r"k must be a whole number"),
        (lambda: top_patches(torch.full((1, 2, 2), float("nan")), 1), ValueError, r"expected finite scores, got NaN"),
        (
            lambda: top_patches(torch.ones(1, 2, 2, dtype=torch.long), 1),
            ValueError,
            r"floating-point scores, got torch.int64",
        ),
        (
            lambda: delete_patches(torch.rand(2, 3, 8, 8), torch.ones(2, 2, 2)),
            ValueError,
            r"boolean patches .* got torch.float32",
        ),
        (
            lambda: delete_patches(torch.rand(2, 3, 8, 8), torch.ones(3, 2, 2, dtype=torch.bool)),
            ValueError,
            r"one patch mask per image, 2, got 3",
        ),
        (
            lambda: delete_patches(torch.rand(2, 3, 8, 8), torch.ones(2, 3, 2, dtype=torch.bool)),
            ValueError,
            r"8x8 pixels does not split into a 3 x 2 grid",
        ),
        (
            lambda: delete_patches(torch.rand(2, 3, 8, 8), torch.ones(2, 2, 2, dtype=torch.bool), torch.ones(2)),
            ValueError,
            r"one value per channel \(3,\), got \(2,\)",
        ),
        (
            lambda: delete_patches(torch.rand(2, 3, 8, 8), torch.ones(2, 2, 2, dtype=torch.bool), "grey"),
            TypeError,
            r"fill must be a finite number",
        ),
        (
            lambda: delete_patches(torch.rand(3, 8, 8), torch.ones(3, 2, 2, dtype=torch.bool)),
            ValueError,
            r"images shaped \(B, C, H, W\), got a 3-D",
        ),
    ],
)
def test_top_patches_and_delete_patches_refuse_what_does_not_fit(call, error, words):
    with pytest.raises(error, match=words):
        call()


@pytest.mark.parametrize(
    "attn, words",
    [
        (random_attention()[:0], r"at least one layer and one token"),
        (torch.randn(2, 1, 2, 5, 5), r"finite, >= 0.*pass the weights, not the scores"),
        (random_attention() * 2, r"rows sum to 1 .* got row sums from 2"),
        (random_attention().long(), r"floating-point attention weights, got torch.int64"),
        (random_attention()[..., :4], r"\(depth, B, heads, T, T\), got \(3, 2, 4, 5, 4\)"),
    ],
)
def test_rollout_rejects_what_is_no_attention(attn, words):
    with pytest.raises(ValueError, match=words):
        attention_rollout(attn)


def test_rollout_rejects_a_residual_that_is_no_flag():
    with pytest.raises(TypeError, match=r"residual must be True or False, got 'yes'"):
        attention_rollout(random_attention(), residual="yes")


def test_cls_attention_map_rejects_no_class_token_and_non_square_weights():
    weights = torch.rand(2, 5, 5)
    with pytest.raises(ValueError, match=r"num_prefix_tokens=0 means there is no class token"):
        cls_attention_map(weights[:, 1:, 1:], 2, num_prefix_tokens=0)  # row 0 would be a patch's
    with pytest.raises(ValueError, match=r"square weights \(\.\.\., T, T\), got \(5,\)"):
        cls_attention_map(torch.rand(5), 2)
    with pytest.raises(ValueError, match=r"square weights .* got \(2, 4, 5\)"):
        cls_attention_map(weights[:, :4], 2)
    with pytest.raises(ValueError, match=r"grid_size must be .* got 0"):
        cls_attention_map(weights, 0)


def test_patch_coverage_rejects_bad_patch_sizes_and_masks():
    masks = torch.zeros(1, 8, 8, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"patch_size must be .* got 0"):
        patch_coverage(masks, 0)
    with pytest.raises(ValueError, match=r"mask size 8x8 is not divisible by the patch size 3"):
        patch_coverage(masks, 3)
    with pytest.raises(ValueError, match=r"boolean masks, got torch.float32.*masks > 0.5"):
        patch_coverage(masks.float(), 4)


def test_attention_share_is_zero_for_an_empty_region_and_refuses_an_empty_map():
    maps = torch.tensor([[[0.4, 0.1], [0.2, 0.3]], [[0.0, 0.0], [0.0, 0.0]]])
    nowhere = torch.zeros(1, 2, 2, dtype=torch.bool)
    assert attention_share(maps[:1], nowhere).tolist() == [0.0]
    with pytest.raises(ValueError, match=r"the maps of images \[1\] are all zero"):  # used to be 0/0 = NaN
        attention_share(maps, torch.ones(2, 2, 2, dtype=torch.bool))


@pytest.mark.parametrize(
    "maps, regions, words",
    [
        (
            torch.rand(2, 2, 2),
            torch.ones(2, 2, dtype=torch.bool),
            r"regions of the maps' shape \(2, 2, 2\), got \(2, 2\)",
        ),
        (torch.rand(1, 2, 2), torch.ones(1, 2, 2), r"boolean regions .* got torch.float32"),
        (-torch.rand(1, 2, 2), torch.ones(1, 2, 2, dtype=torch.bool), r"finite and >= 0"),
        (torch.full((1, 2, 2), float("nan")), torch.ones(1, 2, 2, dtype=torch.bool), r"finite and >= 0"),
    ],
)
def test_attention_share_rejects_maps_and_regions_that_do_not_fit(maps, regions, words):
    with pytest.raises(ValueError, match=words):
        attention_share(maps, regions)


def test_mean_attention_distance_rejects_a_grid_of_another_size_and_undefined_distances():
    with pytest.raises(ValueError, match=r"expected 1 \+ 3 x 3 = 10 tokens, got attn of shape \(3, 2, 4, 5, 5\)"):
        mean_attention_distance(random_attention(), 3, 4)
    with pytest.raises(ValueError, match=r"patch_size must be .* got 0"):
        mean_attention_distance(random_attention(), 2, 0)
    on_the_class_token = torch.zeros(1, 1, 1, 5, 5)
    on_the_class_token[..., 0] = 1.0
    with pytest.raises(ValueError, match=r"all its weight on the class token"):  # used to be NaN
        mean_attention_distance(on_the_class_token, 2, 4)


@pytest.mark.parametrize(
    "weight, count, words",
    [
        (torch.randn(8, 3, 2, 2), 0, r"count must be a whole number, .* got 0"),
        (torch.randn(8, 3, 2, 2), 9, r"count must be at most min\(D, C\*P\*P\) = 8 .* got 9"),
        (torch.randn(1, 3, 2, 2), 1, r"at least 2 filters"),
        (torch.ones(8, 3, 2, 2), 1, r"filters are all the same"),
        (torch.randn(8, 3, 2), 1, r"weight shaped \(D, C, P, P\), got a 3-D tensor"),
        (torch.randn(8, 3, 2, 3), 1, r"float filters shaped \(D, C, P, P\)"),
    ],
)
def test_patch_embedding_components_rejects_bad_inputs(weight, count, words):
    with pytest.raises(ValueError, match=words):
        patch_embedding_components(weight, count)
