"""utils.weights: reading weight files, the cache of the downloaded ViT-B/16, and the tiny ViTs
shipped in utils/checkpoints (safe to load, in eval mode, holding position snapshots)."""

import io
import json
import pickle
import re
import shutil
import struct
import zipfile

import pytest
import torch
from safetensors import SafetensorError
from safetensors.torch import save_file

from utils.runtime import set_seed
from utils.vit import VisionTransformer, ViTConfig
from utils.weights import (
    _FIELDS_ADDED_LATER,
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


SHIPPED = [
    "digits",
    "digits_seed1",
    "digits_seed2",
    "orientation",
    "orientation_seed1",
    "orientation_seed2",
    "relational",
    "relational_fine",
    "relational_seed1",
    "relational_seed2",
]


def test_the_course_ships_ten_models():
    """Lesson 7's three models, and two more seeds of each of its three tasks."""
    assert shipped_models() == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
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
    with pytest.raises(ValueError, match=re.escape(f"expected one of {SHIPPED}")):
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


# ---- files forged to exhaust memory or the parser: refused from their own numbers, before reading --


def forged_torch_file(path, edit_pickle=None, compressed_zeros: int = 0) -> None:
    """torch.save({"w": torch.zeros(4)}) re-zipped: data.pkl changed by `edit_pickle`; with
    `compressed_zeros`, the pickle's storage and size say that many floats and data/0 holds them,
    deflated (a few kB on disk for MBs unpacked)."""
    buffer = io.BytesIO()
    torch.save({"w": torch.zeros(4)}, buffer)
    source = zipfile.ZipFile(buffer)
    with zipfile.ZipFile(path, "w") as out:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename.endswith("data.pkl"):
                if compressed_zeros:  # the storage's numel after "cpu", then the size (4,)
                    count = b"J" + compressed_zeros.to_bytes(4, "little")
                    i = data.index(b"cpu") + 3
                    i += 2 if data[i : i + 1] == b"q" else 0
                    data = data[:i] + count + data[i + 2 :]
                    j = data.index(b"K\x04\x85", i)
                    data = data[:j] + count + data[j + 2 :]
                out.writestr(info.filename, edit_pickle(data) if edit_pickle else data)
            elif info.filename.endswith("data/0") and compressed_zeros:
                record = zipfile.ZipInfo(info.filename)
                record.compress_type = zipfile.ZIP_DEFLATED
                with out.open(record, "w") as file:
                    file.write(bytes(4 * compressed_zeros))
            else:
                out.writestr(info, data)


def test_a_torch_file_that_unpacks_to_far_more_than_its_size_is_refused_before_unpacking(tmp_path, monkeypatch):
    """C1: a zip bomb (here 2 ** 22 floats, 16.8 MB, deflated to a few kB) is refused from the zip's
    table of contents; torch.load is never reached."""
    path = tmp_path / "bomb.pt"
    forged_torch_file(path, compressed_zeros=2**22)
    assert path.stat().st_size < 100_000
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load unpacked the zip bomb"))
    with pytest.raises(
        ValueError,
        match=r"bomb\.pt is not a file torch\.save wrote: its record archive/data/0 is compressed and unpacks to "
        r"16\.8 MB from \d+\.\d kB on disk \(a zip bomb\?\); refused",
    ):
        load_checkpoint(path)


def test_a_torch_file_zipped_again_with_compression_still_loads(tmp_path):
    """What is refused is the ratio, not compression: random weights deflate to about their size."""
    torch.manual_seed(0)
    weights = {"w": torch.randn(1000)}
    path = tmp_path / "model.pt"
    torch.save(weights, path)
    records = [(info.filename, zipfile.ZipFile(path).read(info)) for info in zipfile.ZipFile(path).infolist()]
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for name, data in records:
            out.writestr(name, data)
    assert torch.equal(load_checkpoint(path)["w"], weights["w"])


def test_a_torch_file_of_views_that_repeat_a_few_numbers_is_refused(tmp_path):
    """The same bomb without compression: 1.5 kB on disk, one float viewed 2 ** 27 times (stride 0),
    which any copy or check (isfinite) would turn into 512 MB or more."""
    path = tmp_path / "expanded.pt"
    torch.save({"w": torch.zeros(1).expand(2**27)}, path)
    with pytest.raises(
        ValueError,
        match=r"expanded\.pt is not a file torch\.save wrote from plain weights: a tensor of shape \(134217728,\) "
        r"spans 536\.9 MB but holds 4 bytes of data, from 1\.\d kB on disk \(a view that repeats its numbers",
    ):
        load_checkpoint(path)


def test_tensors_shared_many_times_are_counted_once_and_walked_once(tmp_path):
    """A pickle may name one object many times: 2 ** 60 paths to the same tensor are one tensor."""
    nested = [torch.ones(3)]
    for _ in range(60):
        nested = [nested, nested]
    torch.save({"w": torch.ones(2), "nested": nested}, tmp_path / "shared.pt")
    with pytest.raises(ValueError, match=r"entries that are no tensors: \{'nested': 'list'\}"):
        load_checkpoint(tmp_path / "shared.pt")


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda data: data.replace(b"cpuq\x06K\x04", b"cpuq\x06X\x01\x00\x00\x004"), "get_storage_from_record"),
        (lambda data: data.replace(b"X\x01\x00\x00\x000q\x05", b"X\x01\x00\x00\x007q\x05"), "data/7"),
    ],
    ids=["numel-as-text", "missing-record"],
)
def test_a_torch_file_forged_inside_raises_a_value_error(tmp_path, edit, says):
    """A pickle whose storage size is text makes torch raise a TypeError; a record that is not
    there, a RuntimeError: both are a ValueError that names the file, as load_checkpoint promises."""
    path = tmp_path / "forged.pt"
    forged_torch_file(path, edit_pickle=edit)
    with pytest.raises(ValueError, match=f"forged.pt is not a torch file.*{says}") as error:
        load_checkpoint(path)
    assert "\n" not in str(error.value)  # torch's list of overloads is left out


@pytest.mark.parametrize(
    "header, says",
    [
        (b"[" * 100_000 + b"]" * 100_000, "nests JSON lists or objects too deeply"),
        (b'{"w": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 4]}}', "is no valid JSON"),
    ],
    ids=["nested", "5000-digit-number"],
)
def test_a_safetensors_header_that_would_break_the_json_reader_is_refused(tmp_path, header, says):
    path = tmp_path / "forged.safetensors"
    path.write_bytes(safetensors_bytes(header, bytes(4)))
    for read in (read_safetensors_header, load_checkpoint):
        with pytest.raises(ValueError, match=f"forged.safetensors is not a safetensors file .*: its header {says}"):
            read(path)


# ---- save_trained writes the whole file or nothing ---------------------------------------------


class Interrupt(torch.Tensor):
    """Pickling it raises KeyboardInterrupt: a Ctrl-C, a kernel restart or a full disk mid-save."""

    def __reduce_ex__(self, protocol):
        raise KeyboardInterrupt


def test_an_interrupted_save_leaves_the_old_checkpoint_whole(tmp_path):
    """D1: torch.save straight into the file left 671 bytes of digits.pt behind."""
    shutil.copy(CHECKPOINT_DIR / "digits.pt", tmp_path / "digits.pt")
    before = (tmp_path / "digits.pt").read_bytes()
    model, info = load_trained("digits", tmp_path)
    snapshots = [(0, Interrupt(model.pos_embed.detach().clone()))]
    with pytest.raises(KeyboardInterrupt):
        save_trained(tmp_path / "digits.pt", model, info["test_accuracy"], info["classes"], snapshots)
    assert (tmp_path / "digits.pt").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["digits.pt"]  # no scratch file left behind
    load_trained("digits", tmp_path)


def test_save_trained_names_the_archive_after_the_file_as_torch_save_does(tmp_path):
    """Written under a scratch name, yet the bytes are those torch.save(checkpoint, path) writes."""
    set_seed(0)
    model = VisionTransformer(ViTConfig.tiny(depth=1, num_classes=2))
    save_trained(tmp_path / "small.pt", model, 0.5, ["a", "b"], [])
    assert {name.split("/")[0] for name in zipfile.ZipFile(tmp_path / "small.pt").namelist()} == {"small"}
    (tmp_path / "direct").mkdir()
    torch.save(torch.load(tmp_path / "small.pt", weights_only=True), tmp_path / "direct" / "small.pt")
    assert (tmp_path / "small.pt").read_bytes() == (tmp_path / "direct" / "small.pt").read_bytes()


def test_save_trained_refuses_weights_holding_nan(tmp_path):
    model = VisionTransformer(ViTConfig.tiny(depth=1, num_classes=2))
    with torch.no_grad():
        model.head.bias[0] = float("nan")
    with pytest.raises(ValueError, match=r"1 tensor of the model holds NaN or infinity \(head\.bias\): a run that"):
        save_trained(tmp_path / "m.pt", model, 0.5, ["a", "b"], [])
    assert not (tmp_path / "m.pt").exists()


# ---- load_trained refuses a checkpoint that does not read as the model it names -----------------


def edited_digits(tmp_path, edit) -> None:
    """A copy of the shipped digits.pt in tmp_path, its checkpoint dict changed by `edit`."""
    checkpoint = torch.load(CHECKPOINT_DIR / "digits.pt", weights_only=True)
    edit(checkpoint)
    torch.save(checkpoint, tmp_path / "digits.pt")


def test_load_trained_refuses_weights_holding_nan_or_infinity(tmp_path):
    """S13: NaN weights loaded without a word, and the model gave NaN logits."""

    def poison(checkpoint):
        checkpoint["state_dict"]["blocks.0.norm1.weight"][3] = float("nan")
        checkpoint["pos_embed_snapshots"]["tables"][2][0, 0, 0] = float("inf")

    edited_digits(tmp_path, poison)
    with pytest.raises(
        ValueError,
        match=r"2 tensors of .*digits\.pt hold NaN or infinity \(blocks\.0\.norm1\.weight, "
        r"pos_embed_snapshots\.tables\.2\): a corrupt file\? restore it with git checkout, or .*make checkpoints",
    ):
        load_trained("digits", tmp_path)


def test_load_trained_refuses_class_names_that_do_not_match_the_outputs(tmp_path):
    """S14: 3 names for 10 outputs loaded; save_trained refuses to write it."""
    edited_digits(tmp_path, lambda checkpoint: checkpoint.update(classes=["0", "1", "2"]))
    with pytest.raises(
        ValueError, match=r"digits\.pt names 3 classes for a model of 10 outputs: it was edited or written by another"
    ):
        load_trained("digits", tmp_path)
    edited_digits(tmp_path, lambda checkpoint: checkpoint.pop("classes"))
    with pytest.raises(ValueError, match=r"names classes None \(NoneType\) for a model of 10 outputs"):
        load_trained("digits", tmp_path)


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda config: config.update(foo=1), r"\(unknown field 'foo'\)"),
        (lambda config: config.pop("image_size"), r"\(missing image_size\)"),
        (
            lambda config: (config.update(foo=1, bar=2), config.pop("depth")),
            r"\(unknown fields 'foo', 'bar'; missing depth\)",
        ),
    ],
    ids=["unknown", "missing", "both"],
)
def test_load_trained_names_the_config_fields_of_another_version(tmp_path, edit, says):
    """Obscure 11: TypeError: ViTConfig.__init__() got an unexpected keyword argument / KeyError."""
    edited_digits(tmp_path, lambda checkpoint: edit(checkpoint["config"]))
    with pytest.raises(ValueError, match=r"digits\.pt was written for another version of ViTConfig " + says) as error:
        load_trained("digits", tmp_path)
    assert str(error.value).endswith("restore it with git checkout, or train it again with make checkpoints")


@pytest.mark.parametrize("fields", [("fc_norm", "norm_pre"), _FIELDS_ADDED_LATER], ids=["fc_norm", "all"])
def test_a_checkpoint_from_before_the_later_options_loads_with_them_off(tmp_path, fields):
    """The options added after the shipped files (fc_norm, norm_pre, registers, LayerScale, the MLP's
    kind, ...): a file without them is the model without them, their defaults."""
    edited_digits(tmp_path, lambda checkpoint: [checkpoint["config"].pop(f, None) for f in fields])
    model, _ = load_trained("digits", tmp_path)
    assert model.config == load_trained("digits")[0].config and not model.config.fc_norm
    defaults = ViTConfig()
    assert all(getattr(model.config, f) == getattr(defaults, f) for f in fields if hasattr(defaults, f))


def test_load_trained_names_weights_that_do_not_fit_the_config(tmp_path):
    edited_digits(tmp_path, lambda checkpoint: checkpoint["config"].update(mlp_ratio=3.0))
    with pytest.raises(ValueError, match=r"digits\.pt: its weights do not fit its config \(checkpoint does not fit"):
        load_trained("digits", tmp_path)
    edited_digits(tmp_path, lambda checkpoint: checkpoint["config"].update(num_heads=5))
    with pytest.raises(ValueError, match=r"digits\.pt holds a config ViTConfig refuses \(.*num_heads"):
        load_trained("digits", tmp_path)
