"""utils.weights: reading weight files, the cache of the downloaded ViT-B/16, and the tiny ViTs
shipped in utils/checkpoints (safe to load, in eval mode, holding position snapshots)."""

import pytest
import torch
from safetensors.torch import save_file

from utils.runtime import set_seed
from utils.vit import VisionTransformer, ViTConfig
from utils.weights import (
    CACHE_DIR,
    CHECKPOINT_DIR,
    find_vit_b16,
    load_checkpoint,
    load_trained,
    read_safetensors,
    save_trained,
    shipped_models,
    vit_b16_path,
)

# ---- files of tensors --------------------------------------------------------------------


def test_read_safetensors_reads_what_safetensors_wrote(tmp_path):
    torch.manual_seed(0)
    tensors = {
        "a.weight": torch.randn(5, 3),
        "b.half": torch.randn(4).half(),
        "c.bf16": torch.randn(2, 2).bfloat16(),
        "d.index": torch.arange(7),
        "e.flag": torch.tensor([True, False]),
        "f.scalar": torch.tensor(2.5),
    }
    path = tmp_path / "mixed.safetensors"
    save_file(tensors, path, metadata={"format": "pt"})
    read = dict(read_safetensors(path))
    assert read.keys() == tensors.keys()
    for name, tensor in tensors.items():
        assert read[name].dtype == tensor.dtype and torch.equal(read[name], tensor), name
    truncated = tmp_path / "partial.safetensors"
    truncated.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError, match="partial download"):
        dict(read_safetensors(truncated))
    for broken in [b"", b"\x05\x00", path.read_bytes()[:20]]:  # an empty file, a cut length, a cut header
        truncated.write_bytes(broken)
        with pytest.raises(ValueError, match="no .safetensors file"):
            dict(read_safetensors(truncated))


def test_load_checkpoint_rejects_a_missing_file_and_another_format(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path / "absent.safetensors")
    (tmp_path / "weights.npz").write_bytes(b"")
    with pytest.raises(ValueError, match=r"\.safetensors"):
        load_checkpoint(tmp_path / "weights.npz")


def test_load_checkpoint_opens_a_wrapper_and_reads_safetensors(tmp_path):
    state = {"w": torch.arange(6.0).reshape(2, 3)}
    torch.save({"state_dict": state, "epoch": 3}, tmp_path / "wrapped.pth")
    assert torch.equal(load_checkpoint(tmp_path / "wrapped.pth")["w"], state["w"])
    save_file(state, tmp_path / "plain.safetensors")
    assert torch.equal(load_checkpoint(tmp_path / "plain.safetensors")["w"], state["w"])


# ---- the cache of downloaded weights ---------------------------------------------------


def test_the_vit_b16_file_is_looked_for_in_the_cache_dir_and_never_fetched(tmp_path):
    assert vit_b16_path(tmp_path) == tmp_path / "google--vit-base-patch16-224" / "model.safetensors"
    assert find_vit_b16(tmp_path) is None
    vit_b16_path(tmp_path).parent.mkdir(parents=True)
    vit_b16_path(tmp_path).write_bytes(b"")
    assert find_vit_b16(tmp_path) == vit_b16_path(tmp_path)


def test_the_cache_is_the_default_place():
    assert vit_b16_path() == vit_b16_path(CACHE_DIR)


# ---- the shipped tiny ViTs -------------------------------------------------------------


def test_the_course_ships_two_models():
    assert shipped_models() == ["digits", "relational"]


@pytest.mark.parametrize("name", ["digits", "relational"])
def test_shipped_model_loads_in_eval_mode_with_its_info(name):
    model, info = load_trained(name)
    assert isinstance(model, VisionTransformer) and not model.training
    assert set(info) == {"test_accuracy", "classes", "pos_embed_snapshots"}
    assert 0.9 < info["test_accuracy"] <= 1.0 and len(info["classes"]) == model.config.num_classes


@pytest.mark.parametrize("name", ["digits", "relational"])
def test_checkpoint_is_small_weights_only_and_holds_position_snapshots(name):
    path = CHECKPOINT_DIR / f"{name}.pt"
    assert path.stat().st_size < 5_000_000
    checkpoint = torch.load(path, weights_only=True)  # plain tensors, lists and numbers only
    snapshots = checkpoint["pos_embed_snapshots"]
    assert snapshots["steps"][0] == 0 and snapshots["steps"] == sorted(snapshots["steps"])
    assert len(snapshots["tables"]) == len(snapshots["steps"]) >= 10
    assert snapshots["tables"][0].shape == checkpoint["state_dict"]["pos_embed"].shape
    assert torch.equal(snapshots["tables"][-1], checkpoint["state_dict"]["pos_embed"])  # the last is the end


def test_unknown_model_is_named():
    with pytest.raises(ValueError, match="expected one of \\['digits', 'relational'\\]"):
        load_trained("imagenet")


def test_save_trained_and_load_trained_round_trip(tmp_path):
    set_seed(0)
    config = ViTConfig.tiny(image_size=(8, 12), patch_size=4, depth=1, num_classes=3)
    model = VisionTransformer(config)
    snapshots = [(0, torch.zeros(1, 7, 64)), (5, model.pos_embed.detach().clone())]
    save_trained(tmp_path / "small.pt", model, 0.5, ["a", "b", "c"], snapshots)
    loaded, info = load_trained("small", checkpoint_dir=tmp_path)
    assert loaded.config == config and not loaded.training  # the (H, W) tuple survives the file
    for (name, ours), theirs in zip(model.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(ours, theirs), name
    assert info["test_accuracy"] == 0.5 and info["classes"] == ["a", "b", "c"]
    assert info["pos_embed_snapshots"]["steps"] == [0, 5]
    assert torch.equal(info["pos_embed_snapshots"]["tables"][1], snapshots[1][1])


def test_the_error_lists_the_files_that_are_there(tmp_path):
    with pytest.raises(ValueError, match=r"expected one of \[\] in"):
        load_trained("digits", checkpoint_dir=tmp_path)
    save_trained(tmp_path / "mine.pt", VisionTransformer(ViTConfig.tiny(depth=1)), 0.1, [str(i) for i in range(10)], [])
    with pytest.raises(ValueError, match=r"no shipped model 'digits'; expected one of \['mine'\]"):
        load_trained("digits", checkpoint_dir=tmp_path)
