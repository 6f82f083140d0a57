"""utils.weights: reading weight files, the cache of the downloaded ViT-B/16, and the tiny ViTs
shipped in utils/checkpoints (safe to load, in eval mode, holding position snapshots)."""

import json
import pickle
import re
import struct

import pytest
import torch
from safetensors import SafetensorError
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
    read_safetensors_header,
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
        with pytest.raises(ValueError, match="is not a safetensors file"):
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


def test_the_course_ships_three_models():
    assert shipped_models() == ["digits", "relational", "relational_fine"]


@pytest.mark.parametrize("name", ["digits", "relational", "relational_fine"])
def test_shipped_model_loads_in_eval_mode_with_its_info(name):
    model, info = load_trained(name)
    assert isinstance(model, VisionTransformer) and not model.training
    assert set(info) == {"test_accuracy", "classes", "pos_embed_snapshots"}
    assert 0.9 < info["test_accuracy"] <= 1.0 and len(info["classes"]) == model.config.num_classes


@pytest.mark.parametrize("name", ["digits", "relational", "relational_fine"])
def test_checkpoint_is_small_weights_only_and_holds_position_snapshots(name):
    path = CHECKPOINT_DIR / f"{name}.pt"
    assert path.stat().st_size < 1_000_000  # the README promises under 1 MB each
    checkpoint = torch.load(path, weights_only=True)  # plain tensors, lists and numbers only
    snapshots = checkpoint["pos_embed_snapshots"]
    assert snapshots["steps"][0] == 0 and snapshots["steps"] == sorted(snapshots["steps"])
    assert len(snapshots["tables"]) == len(snapshots["steps"]) >= 10
    assert snapshots["tables"][0].shape == checkpoint["state_dict"]["pos_embed"].shape
    assert torch.equal(snapshots["tables"][-1], checkpoint["state_dict"]["pos_embed"])  # the last is the end


def test_unknown_model_is_named():
    with pytest.raises(ValueError, match="expected one of \\['digits', 'relational', 'relational_fine'\\]"):
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


# ---- files that are no weights files: clear errors, never a MemoryError or a raw library error --

HTML_PAGE = b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body>Not Found</body></html>\n"
LFS_POINTER = b"version https://git-lfs.github.com/spec/v1\noid sha256:0123abcd\nsize 346293852\n"


def safetensors_bytes(header, data: bytes = b"") -> bytes:
    """A file in the safetensors layout: 8-byte length, the header (a dict as JSON, or raw bytes), the data."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


@pytest.mark.parametrize(
    "content, says",
    [
        (HTML_PAGE, "HTML"),
        (LFS_POINTER, "git-LFS pointer"),
        (b"", "empty"),
        (b"\x05\x00", "fewer than the 8"),
    ],
    ids=["html-page", "lfs-pointer", "empty", "cut-length"],
)
def test_a_web_page_or_pointer_saved_as_safetensors_is_named_as_such(tmp_path, content, says):
    path = tmp_path / "model.safetensors"
    path.write_bytes(content)
    for read in (read_safetensors, read_safetensors_header, load_checkpoint):
        with pytest.raises(ValueError, match="is not a safetensors file") as error:
            read(path)  # read_safetensors refuses at the call, before any tensor is asked for
        assert says in str(error.value) and str(path) in str(error.value)
        assert "a partial download?" in str(error.value)


F32_ENTRY = {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}


@pytest.mark.parametrize(
    "header, data, says",
    [
        (b"[1, 2, 3]", b"", "JSON list"),
        (b"{not json", b"", "no valid JSON"),
        (b"\xff\xfe{}", b"", "no valid JSON"),
        ({"w": {**F32_ENTRY, "dtype": "F33"}}, bytes(24), "dtype 'F33'"),
        ({"w": {**F32_ENTRY, "shape": [2, -3]}}, bytes(24), r"shape \[2, -3\]"),
        ({"w": {**F32_ENTRY, "shape": [2, 3.0]}}, bytes(24), "not a list of non-negative whole numbers"),
        ({"w": {**F32_ENTRY, "shape": "2x3"}}, bytes(24), "shape '2x3'"),
        ({"w": {**F32_ENTRY, "data_offsets": [0, 24, 48]}}, bytes(48), "not \\[begin, end\\]"),
        ({"w": {**F32_ENTRY, "data_offsets": [8, 4]}}, bytes(24), "needs 24 bytes"),
        ({"w": {**F32_ENTRY, "data_offsets": [0, 20]}}, bytes(24), "needs 24 bytes, its offsets \\[0, 20\\] span 20"),
        ({"w": F32_ENTRY}, bytes(10), "runs to byte 24 of the data, but the file holds only 10"),
        ({"w": F32_ENTRY, "v": {**F32_ENTRY, "data_offsets": [12, 36]}}, bytes(36), "'w' and 'v' overlap"),
        ({"w": [0, 24]}, bytes(24), "no {dtype, shape, data_offsets} object"),
        ({"__metadata__": "pt", "w": F32_ENTRY}, bytes(24), "__metadata__"),
    ],
)
def test_the_header_is_checked_before_anything_is_read(tmp_path, header, data, says):
    path = tmp_path / "weights.safetensors"
    path.write_bytes(safetensors_bytes(header, data))
    with pytest.raises(ValueError, match="is not a safetensors file") as error:
        read_safetensors(path)
    assert re.search(says, str(error.value)), str(error.value)
    with pytest.raises(ValueError, match=says):
        load_checkpoint(path)  # the same check: no raw SafetensorError


def test_a_header_length_beyond_the_file_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", 2 * 10**18) + b"{}")  # what text read as a length looks like
    with pytest.raises(ValueError, match=r"header of 2,000,000,000,000,000,000 bytes, but the file has only 10"):
        read_safetensors(path)


def test_a_valid_header_reads_as_entries_and_scalars_and_empty_tensors_pass(tmp_path):
    tensors = {
        "w": torch.arange(6.0).reshape(2, 3),
        "s": torch.tensor(1.5, dtype=torch.float64),
        "e": torch.zeros(0, 4),
    }
    path = tmp_path / "ok.safetensors"
    save_file(tensors, path)
    entries = read_safetensors_header(path)
    assert entries["w"].dtype == torch.float32 and entries["w"].shape == (2, 3)
    assert entries["w"].end - entries["w"].start == 24 and entries["s"].shape == ()
    read = dict(read_safetensors(path))
    assert all(torch.equal(read[name], tensors[name]) for name in tensors)


def test_load_checkpoint_on_a_cut_or_padded_safetensors_file_says_so(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({"w": torch.ones(10)}, path)
    whole = path.read_bytes()
    path.write_bytes(whole[:-8])  # cut: the last tensor's bytes are missing
    with pytest.raises(ValueError, match="not a safetensors file.*partial download.*runs to byte 40"):
        load_checkpoint(path)
    path.write_bytes(whole + b"\0" * 8)  # bytes past the last tensor: safetensors refuses it
    with pytest.raises(ValueError, match="is not a safetensors file") as error:
        load_checkpoint(path)
    assert isinstance(error.value.__cause__, SafetensorError)


@pytest.mark.parametrize(
    "content, says",
    [
        (HTML_PAGE, "is not a torch file.*HTML"),
        (LFS_POINTER, "is not a torch file.*git-LFS pointer"),
        (b"", "is not a torch file.*empty"),
        (safetensors_bytes({"w": F32_ENTRY}, bytes(24)), "looks like a safetensors file: name it .safetensors"),
    ],
    ids=["html-page", "lfs-pointer", "empty", "safetensors-named-pt"],
)
def test_a_pt_file_that_is_no_torch_file_is_named_as_such(tmp_path, content, says):
    path = tmp_path / "model.pt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=says):
        load_checkpoint(path)


def test_a_cut_torch_file_is_named_as_such(tmp_path):
    path = tmp_path / "model.pth"
    torch.save({"w": torch.ones(1000)}, path)
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(ValueError, match="is not a torch file.*partial download"):
        load_checkpoint(path)


class RunsCode:
    """Unpickling this calls print: a stand-in for a file that would run code."""

    def __reduce__(self):
        return (print, ("this ran",))


def test_a_pickle_that_would_run_code_is_refused(tmp_path, capsys):
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2), "trap": RunsCode()}, path)
    with pytest.raises(ValueError, match="could run code.*refused.*weights_only=True") as error:
        load_checkpoint(path)
    assert isinstance(error.value.__cause__, pickle.UnpicklingError)
    assert "this ran" not in capsys.readouterr().out


def test_a_torch_file_without_named_tensors_is_refused(tmp_path):
    torch.save(torch.ones(3), tmp_path / "tensor.pt")
    with pytest.raises(ValueError, match="holds a Tensor, not a dict of named tensors"):
        load_checkpoint(tmp_path / "tensor.pt")
    torch.save({"net": {"w": torch.ones(2)}, "epoch": 3}, tmp_path / "nested.pt")
    with pytest.raises(ValueError, match=r"entries that are no tensors: \{'net': 'dict', 'epoch': 'int'\}"):
        load_checkpoint(tmp_path / "nested.pt")


def test_a_folder_or_no_path_is_refused(tmp_path):
    save_file({"w": torch.ones(2)}, tmp_path / "model.safetensors")
    for read in (load_checkpoint, read_safetensors):
        with pytest.raises(ValueError, match=r"is a folder, not a weights file; .*\['model.safetensors'\]"):
            read(tmp_path)
        with pytest.raises(TypeError, match="a str or Path"):
            read({"w": torch.ones(2)})
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        read_safetensors(tmp_path / "absent.safetensors")


def test_save_trained_refuses_what_does_not_fit_the_model(tmp_path):
    model = VisionTransformer(ViTConfig.tiny(depth=1))
    classes = [str(i) for i in range(10)]
    with pytest.raises(ValueError, match="expected 10 class names, one per output, got 3"):
        save_trained(tmp_path / "m.pt", model, 0.5, ["a", "b", "c"], [])
    with pytest.raises(ValueError, match="test_accuracy as a share in \\[0, 1\\], got 93.0"):
        save_trained(tmp_path / "m.pt", model, 93.0, classes, [])
    with pytest.raises(
        ValueError, match=r"snapshot of step 5: expected a position table \(1, 65, 64\), got \(1, 17, 64\)"
    ):
        save_trained(tmp_path / "m.pt", model, 0.5, classes, [(5, torch.zeros(1, 17, 64))])
    with pytest.raises(TypeError, match="VisionTransformer"):
        save_trained(tmp_path / "m.pt", model.state_dict(), 0.5, classes, [])
    assert not (tmp_path / "m.pt").exists()


def test_load_trained_says_when_a_checkpoint_is_broken(tmp_path):
    (tmp_path / "broken.pt").write_bytes(HTML_PAGE)
    with pytest.raises(ValueError, match="is not a torch file"):
        load_trained("broken", checkpoint_dir=tmp_path)
    torch.save({"w": torch.ones(2)}, tmp_path / "plain.pt")
    with pytest.raises(ValueError, match="no checkpoint written by save_trained"):
        load_trained("plain", checkpoint_dir=tmp_path)
