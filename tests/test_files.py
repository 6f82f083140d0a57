"""utils.files: a write is all or nothing, never through a link, and two writers wait on a lock."""

import multiprocessing
import os
import stat
import time

import pytest

from utils.files import keep_backup, locked, replacing, write_bytes_atomically, write_text_atomically


def test_a_write_replaces_the_whole_file_and_leaves_no_scratch(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old")
    write_text_atomically(path, "new ✓")
    assert path.read_text(encoding="utf-8") == "new ✓"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_an_interrupted_write_keeps_the_old_file_and_removes_the_scratch(tmp_path):
    path = tmp_path / "digits.pt"
    path.write_bytes(b"the old checkpoint")
    with pytest.raises(KeyboardInterrupt), replacing(path) as scratch:
        scratch.write_bytes(b"half a")
        raise KeyboardInterrupt  # Ctrl-C in the middle of the write
    assert path.read_bytes() == b"the old checkpoint"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["digits.pt"]


def test_two_writers_get_scratch_files_of_their_own(tmp_path):
    path = tmp_path / "lesson6.json"
    with replacing(path) as first, replacing(path) as second:
        assert first != second and first.parent == second.parent == tmp_path
        first.write_text("first")
        second.write_text("second")
    assert path.read_text() == "first"  # the outer block ends last and wins; nothing is mixed


def test_a_symbolic_link_is_refused_not_written_through(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    link = tmp_path / "exercises.ipynb"
    link.symlink_to(outside / "target.ipynb")  # dangling: the target does not exist
    with pytest.raises(ValueError, match="is a symbolic link .*not writing through it"):
        write_text_atomically(link, "{}")
    assert not (outside / "target.ipynb").exists()


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a folder: name a file"):
        write_bytes_atomically(tmp_path, b"")


def test_a_replaced_file_keeps_its_permissions_and_a_new_one_gets_the_usual_ones(tmp_path):
    kept = tmp_path / "script.sh"
    kept.write_text("old")
    kept.chmod(0o754)
    write_text_atomically(kept, "new")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o754
    fresh = write_text_atomically(tmp_path / "fresh.txt", "new")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~mask  # not mkstemp's private 0600


def test_a_backup_takes_the_first_free_name(tmp_path):
    path = tmp_path / "digits.pt"
    path.write_bytes(b"v1")
    assert keep_backup(path).name == "digits.pt.bak"
    path.write_bytes(b"v2")
    second = keep_backup(path)
    assert second.name == "digits.pt.bak1" and second.read_bytes() == b"v2"
    assert (tmp_path / "digits.pt.bak").read_bytes() == b"v1"


def _add_one(path, started):
    """Read the number in `path`, wait, write it plus one: a lost update without the lock."""
    with locked(path):
        started.set()
        number = int(path.read_text())
        time.sleep(0.3)
        write_text_atomically(path, str(number + 1))


def test_the_lock_makes_two_read_modify_writes_wait_on_each_other(tmp_path):
    path = tmp_path / "count.txt"
    path.write_text("0")
    context = multiprocessing.get_context("fork")
    started = context.Event()
    other = context.Process(target=_add_one, args=(path, started))
    other.start()
    assert started.wait(10)  # the other process holds the lock and has read 0
    _add_one(path, context.Event())
    other.join(10)
    assert path.read_text() == "2"  # without the lock both read 0 and the file says 1
