"""Lesson 13's masked autoencoder (utils.mae): the masking keeps exactly the patches it says, the
encoder on the visible tokens is the course's ViT, the loss is MAE's, the arms compare like with
like, and the verdicts the lesson prints follow from the shipped results."""

import pytest
import torch

from utils.ablations import SEEDS, experiment_data, read_results
from utils.mae import (
    ARMS,
    CHECKPOINT,
    KINDS,
    LABELS_PER_CLASS,
    LRS,
    PRETRAIN_STEPS,
    PROBE_LRS,
    RESULTS_FILE,
    TUNE_STEPS,
    MaskedAutoencoder,
    arm_name,
    best_arm,
    best_lr,
    block_masking,
    encode_visible,
    few_labels,
    gather_tokens,
    load_checkpoint,
    masked_loss,
    pretraining_multiply_adds,
    random_masking,
    run_arm,
    shipped_runs,
    shipped_values,
    verdicts,
)
from utils.patches import patchify
from utils.vit import VisionTransformer, ViTConfig


def encoder():
    torch.manual_seed(0)
    return VisionTransformer(
        ViTConfig.tiny(image_size=8, in_channels=1, num_classes=10, patch_size=2, pool="mean", pos_embed="sincos")
    ).eval()


def test_random_masking_keeps_exactly_the_patches_its_mask_shows():
    generator = torch.Generator().manual_seed(0)
    keep, restore, mask = random_masking(5, 16, 0.75, generator)
    assert keep.shape == (5, 4) and restore.shape == (5, 16) and mask.shape == (5, 16)
    assert (mask.sum(1) == 12).all()
    for b in range(5):
        visible = set(torch.nonzero(mask[b] == 0).flatten().tolist())
        assert set(keep[b].tolist()) == visible
    shuffle = restore.argsort(dim=1)
    assert torch.equal(shuffle[:, :4], keep)  # the kept ones are the first of the shuffle
    tokens = torch.randn(5, 16, 3)
    shuffled = gather_tokens(tokens, shuffle)
    assert torch.equal(gather_tokens(shuffled, restore), tokens)  # restore undoes the shuffle


def test_random_masking_refuses_a_ratio_that_hides_everything():
    with pytest.raises(ValueError, match="leaves no patch"):
        random_masking(2, 4, 0.9)
    with pytest.raises(ValueError, match="mask_ratio"):
        random_masking(2, 4, 1.0)


def test_the_encoder_on_every_patch_in_order_is_the_vit():
    model = encoder()
    images = torch.rand(3, 1, 8, 8)
    keep = torch.arange(16).expand(3, -1)
    torch.testing.assert_close(encode_visible(model, images, keep), model.forward_features(images))


def test_the_encoder_sees_the_visible_tokens_with_their_own_positions():
    model = encoder()
    images = torch.rand(2, 1, 8, 8)
    keep = torch.tensor([[5, 0, 9, 15], [3, 2, 1, 0]])
    tokens = model.patch_embed(images) + model.pos_embed  # (2, 16, 64)
    x = torch.stack([tokens[b, keep[b]] for b in range(2)])  # (2, 4, 64)
    for block in model.blocks:
        x = block(x)
    torch.testing.assert_close(encode_visible(model, images, keep), model.norm(x))


def test_the_loss_is_on_the_hidden_patches_only():
    prediction, target = torch.rand(2, 16, 4), torch.rand(2, 16, 4)
    mask = torch.zeros(2, 16)
    mask[:, :3] = 1
    expected = ((prediction[:, :3] - target[:, :3]) ** 2).mean()
    torch.testing.assert_close(masked_loss(prediction, target, mask), expected)
    changed = prediction.clone()
    changed[:, 3:] += 5  # the visible patches do not count
    torch.testing.assert_close(masked_loss(changed, target, mask), expected)


def test_the_mae_predicts_every_patch_and_counts_its_cost():
    mae = MaskedAutoencoder(encoder())
    images = torch.rand(4, 1, 8, 8)
    loss, prediction, mask = mae(images, torch.Generator().manual_seed(0))
    assert prediction.shape == patchify(images, 2).shape and mask.shape == (4, 16) and loss.ndim == 0
    cost = pretraining_multiply_adds(mae, (1, 8, 8))
    full = mae.encoder
    from utils.compute import multiply_adds

    assert cost["encoder"] + cost["decoder"] == cost["total"]
    assert cost["encoder"] < 0.35 * multiply_adds(full, (1, 8, 8))  # 4 of 16 tokens, plus the patch embedding


def test_block_masking_hides_one_square():
    mask = block_masking(4, 4, 1, 2, 2).reshape(4, 4)
    assert mask.sum() == 4 and mask[1:3, 2:4].eq(1).all()


def test_the_arms_differ_in_one_thing_each():
    assert len(ARMS) == 2 * len(PROBE_LRS) + 3 * len(LRS)
    for kind in KINDS:
        for lr in PROBE_LRS if "probe" in kind else LRS:
            arm = ARMS[arm_name(kind, lr)]
            fit = dict(arm.experiment.fit)
            assert fit["lr"] == lr and arm.probe == ("probe" in kind)
            assert arm.pretrain_steps == (PRETRAIN_STEPS if kind.startswith("MAE") else 0)
            budget = TUNE_STEPS + PRETRAIN_STEPS if kind == "supervised, equal steps" else TUNE_STEPS
            assert fit["steps"] == budget
    labelled = few_labels(experiment_data("digits").train)
    assert len(labelled) == 10 * LABELS_PER_CLASS and labelled.labels.bincount().tolist() == [LABELS_PER_CLASS] * 10


def test_an_arm_refuses_another_experiments_data_before_training():
    with pytest.raises(ValueError, match="trains on"):
        run_arm(arm_name("random init, linear probe", PROBE_LRS[0]), 0, experiment_data("same_colour"))
    with pytest.raises(ValueError, match="no arm"):
        run_arm("MAE, probe", 0)


def test_the_shipped_file_holds_every_arm_over_five_seeds():
    results = read_results(RESULTS_FILE)
    assert results["produced_by"] == "python tools/run_experiments.py --suite mae"
    assert list(results["experiments"]) == list(ARMS)
    for name in ARMS:
        runs = shipped_runs(name)
        assert [run["seed"] for run in runs] == list(SEEDS)
        assert all(run["labelled_images"] == 10 * LABELS_PER_CLASS for run in runs)
    pretrained = shipped_values(arm_name("MAE, fine-tune", LRS[0]), "pretrain_loss")
    assert pretrained == shipped_values(arm_name("MAE, linear probe", PROBE_LRS[0]), "pretrain_loss")


def test_the_lessons_verdicts_follow_from_the_shipped_results():
    for kind in KINDS:
        lrs = PROBE_LRS if "probe" in kind else LRS
        means = {lr: sum(shipped_values(arm_name(kind, lr))) / len(SEEDS) for lr in lrs}
        assert means[best_lr(kind)] == max(means.values())
        assert best_arm(kind) == arm_name(kind, best_lr(kind))
    grades = verdicts()
    assert list(grades) == list(VERDICTS_PRINTED)
    for label, outcome in VERDICTS_PRINTED.items():
        assert grades[label].outcome == outcome, (label, str(grades[label]))


VERDICTS_PRINTED = {  # as the lesson prints them (section 3) and its summary says
    "MAE's features beat random ones (linear probe)": "supported",
    "MAE then fine-tuning beats the same model from random init": "inconclusive",
    "MAE then fine-tuning beats supervised training at equal steps": "refuted",
}


def test_the_checkpoint_is_seed_0_of_the_suite_and_small():
    assert CHECKPOINT.stat().st_size < 1_000_000
    checkpoint = load_checkpoint()
    assert checkpoint["seed"] == 0 and checkpoint["steps"] == PRETRAIN_STEPS
    shipped = shipped_values(arm_name("MAE, fine-tune", LRS[0]), "pretrain_loss")[0]
    assert checkpoint["pretrain_loss"] == pytest.approx(shipped, abs=2e-3)
