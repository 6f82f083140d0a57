"""Your copies of the learner's edition (`make lab` into my-lessons/, `make exercises` into exercises/):
every lesson copied, none ever overwritten, the lessons changed since a copy listed. The exercises
themselves run in tests/test_learner_edition.py."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from notebook_cells import ROOT

import tools.exercises as exercises
import utils.files
from tools.exercises import LearnerWorkExists, backup_folder, changed_upstream, fresh_copies, write_exercises

NOTEBOOKS = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))  # the learner's edition, what is copied


def test_make_exercises_writes_a_copy_of_every_lesson(tmp_path):
    written = write_exercises(tmp_path)
    assert [path.name for path in written] == [path.name for path in NOTEBOOKS]
    for path in written:
        text = path.read_text()
        assert "# BEGIN SOLUTION" not in text and "# HINT" not in text
        nbformat.validate(nbformat.reads(text, as_version=4))  # JupyterLab opens it
        copied = json.loads(text)
        lesson = json.loads((ROOT / "lessons" / path.name).read_text())
        assert copied["cells"] == lesson["cells"]  # the lesson as it is, its record in the metadata
        assert copied["metadata"]["vit_from_scratch"]["copied_from"] == exercises.fingerprint(
            (ROOT / "lessons" / path.name).read_text()
        )


def test_keep_leaves_a_learners_answers_fills_in_the_missing_and_lists_the_lessons_changed_since(tmp_path):
    """make lab's run: answers untouched, missing copies written, and a copy of an older lesson named."""
    write_exercises(tmp_path)
    answered, missing, older = (tmp_path / path.name for path in NOTEBOOKS[:3])
    answered.write_text(answered.read_text().replace("not written yet", "my answer", 1))
    missing.unlink()
    record = json.loads(older.read_text())
    record["metadata"]["vit_from_scratch"]["copied_from"] = "0" * 64  # made from an earlier version
    older.write_text(json.dumps(record))
    kept = {path: path.read_bytes() for path in (answered, older)}
    assert write_exercises(tmp_path, keep=True) == [missing]
    assert {path: path.read_bytes() for path in kept} == kept
    assert changed_upstream(tmp_path, fresh_copies()) == [older.name]


def test_make_lab_copies_then_says_where_the_copies_live_and_what_changed(tmp_path):
    script = [sys.executable, str(ROOT / "tools" / "exercises.py"), str(tmp_path), "--keep"]
    first = subprocess.run(script, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count(": written") == len(NOTEBOOKS) and "git ignores it" in first.stdout
    older = tmp_path / NOTEBOOKS[1].name
    older.write_text(older.read_text().replace('"copied_from": "', '"copied_from": "x', 1))
    again = subprocess.run(script, capture_output=True, text=True)
    assert again.returncode == 0 and ": written" not in again.stdout
    assert f"changed in the course since your copy: {older.name}" in again.stdout and "FORCE=1" in again.stdout


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under folder, by its path relative to it, with its bytes."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_a_second_run_leaves_identical_copies_alone(tmp_path):
    write_exercises(tmp_path)
    before = {path.name: path.stat().st_mtime_ns for path in tmp_path.glob("*.ipynb")}
    assert write_exercises(tmp_path) == []
    assert {path.name: path.stat().st_mtime_ns for path in tmp_path.glob("*.ipynb")} == before


def test_a_second_run_never_overwrites_a_learners_answers(tmp_path):
    write_exercises(tmp_path)
    edited = tmp_path / NOTEBOOKS[2].name
    edited.write_text(edited.read_text().replace("raise NotImplementedError", "return 42  # my answer", 1))
    assert "return 42" in edited.read_text()
    (tmp_path / NOTEBOOKS[0].name).unlink()  # a missing copy is not filled in either: the run changes nothing
    before = snapshot(tmp_path)
    with pytest.raises(LearnerWorkExists) as refusal:
        write_exercises(tmp_path)
    assert snapshot(tmp_path) == before
    message = str(refusal.value)
    assert NOTEBOOKS[2].name in message and NOTEBOOKS[1].name not in message
    assert "make exercises FORCE=1" in message and "--force" in message and "backups" in message


def test_force_backs_the_old_copies_up_before_writing(tmp_path):
    write_exercises(tmp_path)
    edited = tmp_path / NOTEBOOKS[2].name
    answers = edited.read_text().replace("raise NotImplementedError", "return 42  # my answer", 1)
    edited.write_text(answers)
    written = write_exercises(tmp_path, force=True)
    assert written == [edited]
    backups = list((tmp_path / "backups").iterdir())
    assert len(backups) == 1 and re.fullmatch(r"\d{4}-\d\d-\d\d_\d{6}", backups[0].name)
    assert (backups[0] / edited.name).read_text() == answers  # the learner's work, kept
    assert "return 42  # my answer" not in edited.read_text()
    assert write_exercises(tmp_path, force=True) == []  # nothing differs any more: no second backup
    assert len(list((tmp_path / "backups").iterdir())) == 1
    assert backup_folder(tmp_path) != backups[0]  # a second backup in the same second gets a new folder


def test_missing_copies_are_filled_in(tmp_path):
    write_exercises(tmp_path)
    for path in NOTEBOOKS[:2]:
        (tmp_path / path.name).unlink()
    assert [path.name for path in write_exercises(tmp_path)] == [path.name for path in NOTEBOOKS[:2]]
    assert write_exercises(tmp_path) == []


def test_the_command_refuses_on_stderr_with_a_failing_status(tmp_path):
    script = [sys.executable, str(ROOT / "tools" / "exercises.py"), str(tmp_path)]
    assert subprocess.run(script, capture_output=True, text=True).returncode == 0
    edited = tmp_path / NOTEBOOKS[0].name
    edited.write_text(edited.read_text() + " ")
    refused = subprocess.run(script, capture_output=True, text=True)
    assert refused.returncode == 1 and NOTEBOOKS[0].name in refused.stderr and "FORCE=1" in refused.stderr
    forced = subprocess.run([*script, "--force"], capture_output=True, text=True)
    assert forced.returncode == 0, forced.stderr
    assert f"{NOTEBOOKS[0].name}: " in forced.stdout and "replaced" in forced.stdout and "backups" in forced.stdout


# --- hostile folders and broken lessons: refused in one line, nothing written through a link ---------


def test_a_copy_that_is_a_symbolic_link_is_never_written_through(tmp_path):
    """U1: a dangling link in exercises/ was followed, and the copy written wherever it pointed."""
    out, elsewhere = tmp_path / "exercises", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    link = out / NOTEBOOKS[0].name
    link.symlink_to(elsewhere / "chosen.ipynb")  # dangling: "does not exist"
    with pytest.raises(LearnerWorkExists, match=f"{link.name} is a symbolic link .*: not writing through it"):
        write_exercises(out)
    assert list(elsewhere.iterdir()) == [] and list(out.iterdir()) == [link]
    written = write_exercises(out, force=True)  # the link itself is moved aside, then a copy written in its place
    assert link in written and not link.is_symlink() and "# BEGIN SOLUTION" not in link.read_text()
    assert list(elsewhere.iterdir()) == []
    (kept,) = (out / "backups").iterdir()
    assert (kept / link.name).is_symlink() and os.readlink(kept / link.name) == str(elsewhere / "chosen.ipynb")


def test_a_link_to_a_file_elsewhere_leaves_that_file_alone(tmp_path, capsys):
    out, target = tmp_path / "exercises", tmp_path / "notes.ipynb"
    out.mkdir()
    target.write_text("a file of someone's")
    (out / NOTEBOOKS[1].name).symlink_to(target)
    assert exercises.main([str(out)]) == 1
    assert "is a symbolic link" in capsys.readouterr().err and not (out / NOTEBOOKS[0].name).exists()
    assert exercises.main([str(out), "--force"]) == 0
    assert target.read_text() == "a file of someone's"


def snapshot_lessons() -> dict[str, bytes]:
    return {path: path.read_bytes() for folder in ("notebooks", "lessons") for path in (ROOT / folder).glob("*.ipynb")}


@pytest.mark.parametrize("folder", ["notebooks", "lessons"])
@pytest.mark.parametrize("force", [False, True])
def test_the_courses_own_folders_are_refused(capsys, force, folder):
    """S16: `exercises.py notebooks --force` blanked the course's own lessons."""
    before = snapshot_lessons()
    with pytest.raises(ValueError, match=f"out_dir {folder} is one of the course's own folders: the copies go"):
        write_exercises(ROOT / folder, force=force)
    assert exercises.main([str(ROOT / folder), *(["--force"] if force else [])]) == 1
    assert "the course's own folders" in capsys.readouterr().err
    assert snapshot_lessons() == before and not (ROOT / folder / "backups").exists()


def test_a_folder_holding_lessons_with_their_solutions_is_refused(tmp_path):
    """Another checkout's notebooks/, say: its lessons are not learner copies to replace."""
    shutil.copy(ROOT / "notebooks" / NOTEBOOKS[0].name, tmp_path / NOTEBOOKS[0].name)
    with pytest.raises(ValueError, match=f"holds lessons with their solutions \\({NOTEBOOKS[0].name} has"):
        write_exercises(tmp_path, force=True)
    assert sorted(path.name for path in tmp_path.iterdir()) == [NOTEBOOKS[0].name]


def broken_lesson(folder: Path, text: str) -> Path:
    path = folder / "lessons" / "03_broken.ipynb"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_lesson_that_is_not_json_is_named(tmp_path):
    good = NOTEBOOKS[0].read_text(encoding="utf-8")
    cut = broken_lesson(tmp_path, good[:5000])
    with pytest.raises(ValueError, match="03_broken.ipynb is not valid JSON .*line .*git checkout"):
        write_exercises(tmp_path / "out", [NOTEBOOKS[0], cut])
    assert not (tmp_path / "out").exists()  # nothing written for the good lesson either


def one_line_refusal(capsys, argv: list[str], phrase: str) -> None:
    """The command exits 1 with one line on stderr holding `phrase` (no traceback)."""
    assert exercises.main(argv) == 1
    err = capsys.readouterr().err
    assert phrase in err and len(err.strip().splitlines()) == 1, err


def test_a_copy_that_is_a_folder_is_one_clear_line(tmp_path, capsys):
    (tmp_path / NOTEBOOKS[0].name).mkdir()
    one_line_refusal(capsys, [str(tmp_path), "--force"], f"{NOTEBOOKS[0].name} is a folder, where a learner copy goes")
    assert sorted(path.name for path in tmp_path.iterdir()) == [NOTEBOOKS[0].name]


def test_backups_that_is_a_file_is_one_clear_line(tmp_path, capsys):
    write_exercises(tmp_path)
    edited = tmp_path / NOTEBOOKS[0].name
    edited.write_text(edited.read_text() + " ")
    (tmp_path / "backups").write_text("not a folder")
    one_line_refusal(capsys, [str(tmp_path), "--force"], "backups is a file, not a folder for the replaced copies")
    assert edited.read_text().endswith(" ")  # the learner's copy stays where it was


def test_a_read_only_folder_is_one_clear_line(tmp_path, capsys, monkeypatch):
    """The system's refusal to write there (here stood in for: the tests run as root, whom
    permissions do not stop) is one line, not a traceback."""

    def refused(path, data):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(utils.files, "write_bytes_atomically", refused)
    one_line_refusal(capsys, [str(tmp_path)], f"cannot write in {tmp_path}: permission denied")


def test_an_interrupted_write_leaves_no_half_copy(tmp_path, monkeypatch):
    """Each copy is written whole or not at all: a Ctrl-C while its bytes go to disk leaves no file."""

    def interrupted(descriptor):
        raise KeyboardInterrupt

    monkeypatch.setattr(utils.files.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_exercises(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_two_forced_runs_in_the_same_second_get_two_backup_folders(tmp_path, monkeypatch):
    """Each run creates its folder as it picks the name: the second no longer dies on FileExistsError."""
    monkeypatch.setattr(exercises.time, "strftime", lambda pattern: "2030-01-01_120000")
    first, second = backup_folder(tmp_path), backup_folder(tmp_path)
    assert first.is_dir() and second.is_dir() and first != second
    assert [first.name, second.name] == ["2030-01-01_120000", "2030-01-01_120000-2"]


def test_a_copy_moved_away_by_another_run_is_not_an_error(tmp_path, monkeypatch):
    """Two forced runs together: the one that finds the copy already moved by the other writes on,
    and leaves no empty backup folder."""
    write_exercises(tmp_path)
    edited = tmp_path / NOTEBOOKS[0].name
    edited.write_text(edited.read_text() + " ")
    real_plan = exercises.plan

    def other_run_moves_it_first(out_dir, notebooks=None):
        planned = real_plan(out_dir, notebooks)
        edited.unlink()  # as the other run's move_aside does
        return planned

    monkeypatch.setattr(exercises, "plan", other_run_moves_it_first)
    assert write_exercises(tmp_path, force=True) == [edited]
    assert "# BEGIN SOLUTION" not in edited.read_text() and list((tmp_path / "backups").iterdir()) == []
