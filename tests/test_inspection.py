"""The inspection maths, against hand computations on small, known inputs."""

import copy
import math

import numpy as np
import pytest
import scipy.stats
import torch
import torch.nn.functional as F

from utils import VisionTransformer, ViTConfig
from utils.inspection import (
    attention_asymmetry,
    attention_entropy,
    attention_rollout,
    attention_share,
    background_distance,
    cls_attention_map,
    delete_patches,
    keep_patches,
    local_attention,
    mean_attention_distance,
    paired_bootstrap,
    patch_coverage,
    patch_embedding_components,
    prune_heads,
    readout_gradient_norm,
    row_column_similarity,
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


# ---- lesson 9: asymmetry and entropy of attention --------------------------------------------


def test_attention_asymmetry_is_zero_for_symmetric_and_uniform_weights():
    generator = torch.Generator().manual_seed(0)
    half = torch.rand(2, 3, 4, 6, 6, generator=generator)
    symmetric = half + half.mT  # not a softmax, but symmetric and positive
    torch.testing.assert_close(attention_asymmetry(symmetric), torch.zeros(2, 4), atol=1e-7, rtol=0)
    uniform = torch.full((1, 2, 3, 5, 5), 0.2)
    assert attention_asymmetry(uniform).abs().max() == 0
    assert attention_asymmetry(uniform).shape == (1, 3)


def test_attention_asymmetry_is_one_for_one_directional_weights():
    T = 5
    upper = torch.triu(torch.rand(T, T) + 0.1, diagonal=1)  # i looks only at later tokens, never at itself
    attn = upper.expand(2, 3, 1, T, T)
    torch.testing.assert_close(attention_asymmetry(attn), torch.ones(2, 1))
    attn_with_diagonal = (upper + torch.eye(T)).expand(1, 1, 1, T, T)  # attending to itself is both ways
    assert attention_asymmetry(attn_with_diagonal).item() < 1


def test_attention_asymmetry_against_a_numpy_formula_and_under_transposition():
    attn = random_attention(depth=3, B=4, heads=2, T=7)
    expected = np.zeros((3, 2))
    for layer, image, head in np.ndindex(3, 4, 2):
        a = attn[layer, image, head].double().numpy()
        expected[layer, head] += np.linalg.norm(a - a.T) / np.linalg.norm(a + a.T) / 4
    np.testing.assert_allclose(attention_asymmetry(attn).numpy(), expected, rtol=1e-5)
    torch.testing.assert_close(attention_asymmetry(attn.mT), attention_asymmetry(attn))  # A and A^T alike
    values = attention_asymmetry(attn)
    assert (values > 0).all() and (values < 1).all()  # softmax weights are positive: strictly inside


def test_attention_entropy_against_scipy():
    attn = random_attention(depth=2, B=3, heads=4, T=6)
    rows = attn.double().numpy()  # (depth, B, heads, T, T)
    expected = scipy.stats.entropy(rows, axis=-1).mean(axis=(1, 3))  # nats, over the keys
    np.testing.assert_allclose(attention_entropy(attn).numpy(), expected, rtol=1e-5)
    assert attention_entropy(attn).shape == (2, 4)


def test_attention_entropy_of_uniform_and_one_hot_rows():
    T = 9
    uniform = torch.full((1, 2, 3, T, T), 1.0 / T)
    torch.testing.assert_close(attention_entropy(uniform), torch.full((1, 3), math.log(T)))
    one_hot = torch.eye(T).roll(1, dims=1).expand(2, 1, 2, T, T)  # each query on one key: 0 log 0 counts 0
    assert torch.equal(attention_entropy(one_hot), torch.zeros(2, 2))


def test_asymmetry_and_entropy_on_a_model_stay_in_their_range():
    model = VisionTransformer(ViTConfig.tiny(depth=2)).eval()
    with torch.no_grad():
        _, attn = model(torch.rand(2, 3, 32, 32), return_attention=True)
    entropy = attention_entropy(attn)
    assert entropy.shape == (2, 4) and (entropy >= 0).all() and (entropy <= math.log(65) + 1e-5).all()
    asymmetry = attention_asymmetry(attn)
    assert asymmetry.shape == (2, 4) and (asymmetry >= 0).all() and (asymmetry <= 1).all()


@pytest.mark.parametrize("measure", [attention_asymmetry, attention_entropy])
@pytest.mark.parametrize(
    "attn, words",
    [
        (random_attention()[0], r"\(depth, B, heads, T, T\)"),
        (random_attention()[..., :4], r"\(depth, B, heads, T, T\), got \(3, 2, 4, 5, 4\)"),
        (torch.randn(2, 1, 2, 5, 5), r"pass the weights, not the scores"),
        (random_attention().long(), r"floating-point attention weights"),
    ],
)
def test_asymmetry_and_entropy_reject_what_is_no_attention(measure, attn, words):
    with pytest.raises(ValueError, match=words):
        measure(attn)


def test_asymmetry_refuses_a_matrix_without_attention_and_entropy_rows_that_do_not_sum_to_one():
    attn = random_attention(depth=2, B=2, heads=2)
    attn[1, 0, 1] = 0
    with pytest.raises(ValueError, match=r"layer 1, image 0, head 1 are all zero"):
        attention_asymmetry(attn)
    with pytest.raises(ValueError, match=r"rows sum to 1 .* got row sums from 2"):
        attention_entropy(random_attention() * 2)


# ---- lesson 9: pruning heads -----------------------------------------------------------------

TINY = dict(image_size=8, patch_size=4, in_channels=1, num_classes=10, embed_dim=16, depth=2, num_heads=2)


def tiny_model(seed=0, **overrides) -> VisionTransformer:
    """A small ViT with random values in every parameter (the biases and norms too), in eval mode."""
    torch.manual_seed(seed)
    model = VisionTransformer(ViTConfig.tiny(**{**TINY, **overrides})).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = 0.5 if "norm" in name else 0.3
            p.copy_(
                (1.0 if "norm" in name and name.endswith("weight") else 0.0)
                + scale * torch.randn(p.shape, generator=generator)
            )
    return model


def tiny_images(B=3, seed=1):
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(B, 1, 8, 8, generator=generator), torch.randint(0, 10, (B,), generator=generator)


def hooks_on(model):
    return sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules())


def without_columns(model, heads):
    """A copy of `model` whose proj weights ignore the given heads' channels: the hand computation."""
    copy_ = copy.deepcopy(model)
    head_dim = model.config.embed_dim // model.config.num_heads
    with torch.no_grad():
        for block, head in heads:
            copy_.blocks[block].attn.proj.weight[:, head * head_dim : (head + 1) * head_dim] = 0
    return copy_


def test_pruning_nothing_changes_nothing():
    model = tiny_model()
    images, _ = tiny_images()
    with torch.no_grad():
        before = model(images)
        with prune_heads(model, []) as pruned:
            assert pruned is model and hooks_on(model) == 0
            assert torch.equal(model(images), before)


@pytest.mark.parametrize("heads", [[(1, 0)], [(0, 1)], [(0, 0), (1, 1)], [(1, 1), (1, 0)]])
def test_pruning_a_head_equals_zeroing_its_columns_of_proj(heads):
    model = tiny_model()
    images, _ = tiny_images()
    with torch.no_grad():
        expected = without_columns(model, heads)(images)
        before = model(images)
        with prune_heads(model, heads):
            got = model(images)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)
    assert not torch.allclose(got, before, atol=1e-4)  # the head did matter


def test_pruning_every_head_leaves_only_projs_bias():
    model = tiny_model()
    images, _ = tiny_images()
    every = [(b, h) for b in range(2) for h in range(2)]
    with torch.no_grad(), prune_heads(model, every):
        got = model(images)
    with torch.no_grad():  # the forward pass by hand, each attention branch adding proj.bias alone
        x = model.patch_embed(images)  # (B, N, D)
        x = torch.cat([model.cls_token.expand(len(x), -1, -1), x], dim=1) + model.pos_embed  # (B, T, D)
        for block in model.blocks:
            x = x + block.attn.proj.bias  # (B, T, D)
            x = x + block.mlp(block.norm2(x))
        expected = model.head(model.norm(x)[:, 0])
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("implementation", ["explicit", "fused"])
@pytest.mark.parametrize("no_grad", [True, False])
def test_pruning_works_on_both_attention_paths_and_with_return_attention(implementation, no_grad):
    model = tiny_model()
    for block in model.blocks:
        block.attn.implementation = implementation
    images, _ = tiny_images()
    with torch.no_grad():
        expected = without_columns(model, [(0, 1)])(images)
        _, attn_before = model(images, return_attention=True)
    with torch.set_grad_enabled(not no_grad), prune_heads(model, [(0, 1)]):
        got = model(images)
        got_with_weights, attn = model(images, return_attention=True)
    torch.testing.assert_close(got.detach(), expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(got_with_weights.detach(), expected, atol=1e-6, rtol=0)
    assert torch.equal(attn[0], attn_before[0])  # block 0 still looks where it looked
    assert not torch.allclose(attn[1], attn_before[1])  # block 1 reads what block 0 now passes on


def test_a_pruned_head_gets_no_gradient_in_its_queries_keys_and_values():
    model = tiny_model()
    images, labels = tiny_images()
    with prune_heads(model, [(1, 0)]):
        F.cross_entropy(model(images), labels).backward()
    grad = model.blocks[1].attn.qkv.weight.grad.reshape(3, 2, 8, 16)  # (q/k/v, heads, head_dim, D)
    assert grad[:, 0].abs().max() == 0 and grad[:, 1].abs().max() > 0


def test_the_hooks_go_when_the_block_ends_also_after_an_error():
    model = tiny_model()
    images, _ = tiny_images()
    with torch.no_grad():
        before = model(images)
        with prune_heads(model, [(0, 0), (1, 1)]):
            assert hooks_on(model) == 2
        assert hooks_on(model) == 0 and torch.equal(model(images), before)
        with pytest.raises(RuntimeError, match="inside"), prune_heads(model, [(1, 0)]):
            raise RuntimeError("inside")
        assert hooks_on(model) == 0 and torch.equal(model(images), before)


@pytest.mark.parametrize(
    "model, heads, error, words",
    [
        (
            tiny_model(),
            [(2, 0)],
            ValueError,
            r"heads\[0\]'s block must be a whole number \(depth 2\), from 0 to 1, got 2",
        ),
        (tiny_model(), [(0, 0), (1, 2)], ValueError, r"heads\[1\]'s head .*\(num_heads 2\), from 0 to 1, got 2"),
        (tiny_model(), [(-1, 0)], ValueError, r"block .* from 0 to 1, got -1"),
        (tiny_model(), [(0, 1.0)], TypeError, r"heads\[0\]'s head must be a whole number"),
        (tiny_model(), (1, 0), TypeError, r"got heads\[0\] = 1 \(int\): for one head pass a list of one pair"),
        (tiny_model(), [(0, 1, 2)], TypeError, r"\(block, head\) pairs, .*got heads\[0\] = \(0, 1, 2\)"),
        (tiny_model(), 3, TypeError, r"heads must be \(block, head\) pairs, e.g. \[\(0, 1\), \(3, 2\)\], got 3"),
        (torch.nn.Linear(2, 2), [(0, 0)], TypeError, r"prune_heads needs a VisionTransformer, got Linear"),
    ],
)
def test_prune_heads_refuses_heads_the_model_does_not_have(model, heads, error, words):
    with pytest.raises(error, match=words), prune_heads(model, heads):
        pass
    assert hooks_on(model) == 0


# ---- lesson 9: the gradient at the readout ---------------------------------------------------


def analytic_readout_gradient_norm(model, images, labels) -> float:
    """(softmax(logits) - onehot) @ head.weight, per image: cross-entropy's gradient at the head's input."""
    with torch.no_grad():
        logits = model(images).double()
    error = logits.softmax(dim=-1) - F.one_hot(labels, logits.shape[-1]).double()  # (B, classes)
    return (error @ model.head.weight.double()).norm(dim=1).mean().item()  # (B, D) -> rows' norms -> mean


@pytest.mark.parametrize("overrides", [dict(), dict(pool="mean"), dict(pool="mean", fc_norm=True)])
def test_readout_gradient_norm_is_the_analytic_gradient(overrides):
    model = tiny_model(**overrides)
    images, labels = tiny_images(B=5)
    got = readout_gradient_norm(model, images, labels)
    assert isinstance(got, float) and got > 0
    assert got == pytest.approx(analytic_readout_gradient_norm(model, images, labels), rel=1e-5)


def test_readout_gradient_norm_reads_what_the_head_reads():
    """The class token's output (cls), or the mean of the patch tokens after fc_norm: checked through
    autograd on the model's own pieces, not through the head's weights."""
    model = tiny_model(pool="mean", fc_norm=True)
    images, labels = tiny_images(B=4)
    with torch.no_grad():
        tokens = model.forward_features(images)  # (B, N, D), no norm with fc_norm
    pooled = model.fc_norm(tokens.mean(dim=1)).detach().requires_grad_()  # (B, D)
    loss = F.cross_entropy(model.head(pooled), labels, reduction="sum")
    (gradient,) = torch.autograd.grad(loss, pooled)
    assert readout_gradient_norm(model, images, labels) == pytest.approx(gradient.norm(dim=1).mean().item(), rel=1e-5)


def test_readout_gradient_norm_of_a_batch_is_the_mean_of_its_images():
    model = tiny_model()
    images, labels = tiny_images(B=6)
    one_by_one = [readout_gradient_norm(model, images[i : i + 1], labels[i : i + 1]) for i in range(6)]
    assert readout_gradient_norm(model, images, labels) == pytest.approx(np.mean(one_by_one), rel=1e-5)


def test_readout_gradient_norm_leaves_the_model_as_it_came():
    model = tiny_model(dropout=0.1).train()
    images, labels = tiny_images(B=4)
    expected = analytic_readout_gradient_norm(model.eval(), images, labels)
    model.train()
    model.blocks[0].eval()  # a mixed mode must come back as it was
    state = copy.deepcopy(model.state_dict())
    model.head.weight.grad = torch.ones_like(model.head.weight)  # a training loop's gradient
    values = [readout_gradient_norm(model, images, labels) for _ in range(3)]
    assert values == pytest.approx([expected] * 3, rel=1e-5)  # eval mode: no dropout, the same every call
    assert model.training and not model.blocks[0].training and model.blocks[1].training
    assert torch.equal(model.head.weight.grad, torch.ones_like(model.head.weight))
    assert all(p.grad is None for name, p in model.named_parameters() if name != "head.weight")
    assert all(torch.equal(value, state[name]) for name, value in model.state_dict().items())
    assert hooks_on(model) == 0


def test_readout_gradient_norm_under_no_grad_and_on_a_frozen_model():
    model = tiny_model().requires_grad_(False)
    images, labels = tiny_images()
    expected = analytic_readout_gradient_norm(model, images, labels)
    with torch.no_grad():
        assert readout_gradient_norm(model, images, labels) == pytest.approx(expected, rel=1e-5)
    assert not any(p.requires_grad for p in model.parameters())


@pytest.mark.parametrize(
    "model, images, labels, error, words",
    [
        (
            tiny_model(),
            torch.rand(3, 1, 8, 8),
            torch.tensor([0, 1, 10]),
            ValueError,
            r"from 0 to 9 \(the model gives 10 outputs\), got values from 0 to 10",
        ),
        (
            tiny_model(),
            torch.rand(3, 1, 8, 8),
            torch.tensor([0.0, 1.0, 2.0]),
            ValueError,
            r"int64 class indices, got torch.float32",
        ),
        (
            tiny_model(),
            torch.rand(3, 1, 8, 8),
            torch.tensor([0, 1]),
            ValueError,
            r"one label per image, got 3 images and 2 labels",
        ),
        (
            tiny_model(),
            torch.rand(3, 1, 8, 8).double(),
            torch.tensor([0, 1, 2]),
            ValueError,
            r"torch.float64 but the model's weights are torch.float32",
        ),
        (
            tiny_model(),
            torch.rand(1, 8, 8),
            torch.tensor([0]),
            ValueError,
            r"a batch \(N, C, H, W\), got shape \(1, 8, 8\)",
        ),
        (
            tiny_model(num_classes=0),
            torch.rand(3, 1, 8, 8),
            torch.tensor([0, 1, 2]),
            ValueError,
            r"an Identity head: num_classes=0",
        ),
        (
            torch.nn.Linear(2, 2),
            torch.rand(3, 1, 8, 8),
            torch.tensor([0, 1, 2]),
            ValueError,
            r"classifier is `head` \(Linear has none\)",
        ),
        ("model", torch.rand(3, 1, 8, 8), torch.tensor([0, 1, 2]), TypeError, r"needs a model .* got 'model' \(str\)"),
    ],
)
def test_readout_gradient_norm_refuses_what_does_not_fit(model, images, labels, error, words):
    with pytest.raises(error, match=words):
        readout_gradient_norm(model, images, labels)
    if isinstance(model, VisionTransformer):
        assert hooks_on(model) == 0 and not model.training


# ---- lesson 7's baselines, intervals and table shapes ---------------------------------------------


def test_background_distance_is_each_patchs_mean_pixel_distance_by_hand():
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(2, 3, 6, 9, generator=generator)
    background = torch.tensor([0.1, 0.2, 0.3])
    scores = background_distance(images, background, patch_size=3)  # (2, 2, 3)
    assert scores.shape == (2, 2, 3)
    for b in range(2):
        for r in range(2):
            for c in range(3):
                patch = images[b, :, 3 * r : 3 * r + 3, 3 * c : 3 * c + 3]  # (3, 3, 3)
                by_hand = np.mean(
                    [math.dist(patch[:, i, j].tolist(), background.tolist()) for i in range(3) for j in range(3)]
                )
                assert scores[b, r, c].item() == pytest.approx(by_hand, abs=1e-6)


def test_background_distance_is_zero_on_the_background_and_refuses_a_wrong_patch_size():
    images = torch.full((1, 3, 4, 4), 0.5)
    images[0, :, :2, :2] = 1.0
    scores = background_distance(images, 0.5, patch_size=2)
    assert scores[0, 0, 0] > 0 and (scores.flatten()[1:] == 0).all()
    with pytest.raises(ValueError, match="do not split into patches of 3x3"):
        background_distance(images, 0.5, patch_size=3)
    with pytest.raises(ValueError, match=r"one value per channel \(3,\)"):
        background_distance(images, torch.zeros(2), patch_size=2)


def test_keep_patches_is_deleting_the_others():
    generator = torch.Generator().manual_seed(1)
    images = torch.rand(2, 3, 8, 8, generator=generator)
    mask = top_patches(torch.randn(2, 4, 4, generator=generator), 5)
    fill = torch.tensor([0.1, 0.2, 0.3])
    kept = keep_patches(images, mask, fill)
    assert torch.equal(kept, delete_patches(images, ~mask, fill))
    assert torch.equal(keep_patches(images, torch.ones(2, 4, 4, dtype=torch.bool), fill), images)
    everything_painted = keep_patches(images, torch.zeros(2, 4, 4, dtype=torch.bool), fill)
    assert torch.equal(everything_painted, fill.reshape(1, 3, 1, 1).expand_as(images))
    with pytest.raises(ValueError, match="boolean patches"):
        keep_patches(images, mask.float(), fill)


def test_paired_bootstrap_agrees_with_scipy_and_is_zero_for_the_same_answers():
    generator = torch.Generator().manual_seed(2)
    a = torch.rand(400, generator=generator) < 0.7
    b = torch.rand(400, generator=generator) < 0.6
    gap, low, high = paired_bootstrap(a, b, samples=4000)
    assert gap == pytest.approx((a.float() - b.float()).mean().item())
    reference = scipy.stats.bootstrap(
        ((a.float() - b.float()).numpy(),), np.mean, n_resamples=4000, method="percentile", random_state=0
    ).confidence_interval
    assert low == pytest.approx(reference.low, abs=0.01) and high == pytest.approx(reference.high, abs=0.01)
    assert low < gap < high
    assert paired_bootstrap(a, a) == (0.0, 0.0, 0.0)
    assert paired_bootstrap(a, b, seed=3) == paired_bootstrap(a, b, seed=3)
    with pytest.raises(ValueError, match="two answers per image"):
        paired_bootstrap(a, b[:10])


def test_local_attention_reads_3_by_3_neighbourhoods():
    weights = local_attention(4)  # (17, 17)
    assert weights.shape == (17, 17)
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(17))
    assert weights[0, 0] == 1 and (weights[1:, 0] == 0).all()
    counts = (weights[1:, 1:] > 0).sum(dim=-1).reshape(4, 4)  # neighbourhood sizes on the grid
    assert counts.tolist() == [[4, 6, 6, 4], [6, 9, 9, 6], [6, 9, 9, 6], [4, 6, 6, 4]]
    # by hand: per patch, the mean distance to its neighbourhood, 8 px patches
    by_hand = []
    for r in range(4):
        for c in range(4):
            near = [(i, j) for i in range(4) for j in range(4) if abs(i - r) <= 1 and abs(j - c) <= 1]
            by_hand.append(np.mean([8 * math.hypot(i - r, j - c) for i, j in near]))
    measured = mean_attention_distance(weights[None, None, None], grid_size=4, patch_size=8).item()
    assert measured == pytest.approx(np.mean(by_hand), abs=1e-5)
    assert measured == pytest.approx(7.7, abs=0.05)
    assert (local_attention(3, radius=0)[1:, 1:] == torch.eye(9)).all()


def test_row_column_similarity_tells_a_row_code_from_a_column_code():
    rows = torch.arange(16) // 4
    row_code = F.one_hot(rows, 4).float()  # (16, 4): one direction per row
    similarity = F.normalize(row_code, dim=-1) @ F.normalize(row_code, dim=-1).T
    assert row_column_similarity(similarity, 4) == (1.0, 0.0)
    column_code = F.one_hot(torch.arange(16) % 4, 4).float()
    similarity = column_code @ column_code.T
    assert row_column_similarity(similarity, 4) == (0.0, 1.0)
    with pytest.raises(ValueError, match="expected \\(16, 16\\) similarities for a 4 x 4 grid"):
        row_column_similarity(torch.eye(9), 4)
    with pytest.raises(ValueError, match="needs 2 x 2"):
        row_column_similarity(torch.eye(3), (1, 3))
