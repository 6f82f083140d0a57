"""utils.doctor (make doctor): this set-up passes; a wrong or missing package, a CUDA torch, widgets
without their front end, low memory, Colab and Binder each give the line they should, naming the
problem; `python -m utils.doctor` exits 1 on a [FAIL] and 0 otherwise."""

import os
import subprocess
import sys
import types
from importlib.metadata import PackageNotFoundError, PackagePath
from pathlib import Path

import pytest
import torch

import utils
from utils import doctor

ROOT = Path(__file__).resolve().parents[1]
IN_MAKE_LAB_VENV = Path(sys.prefix).resolve() == (ROOT / ".venv").resolve()
needs_make_lab_venv = pytest.mark.skipif(
    not IN_MAKE_LAB_VENV, reason="holds make lab's .venv to requirements.txt; this is another environment"
)


@pytest.fixture(autouse=True)
def local(monkeypatch):
    """Every test starts on "this computer": no Colab module, no Binder or JupyterHub variables."""
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    for name in list(os.environ):
        if name == "COLAB_RELEASE_TAG" or name.startswith(("BINDER_", "JUPYTERHUB_")):
            monkeypatch.delenv(name)


@pytest.fixture
def colab(monkeypatch):
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))


def with_versions(monkeypatch, pinned: bool = False, **versions):
    """Pretend these distributions are installed at these versions (None: missing); the rest as they
    are, or with `pinned` at requirements.txt's pins (so that a test reads the same on any stack, the
    compatibility lane's too)."""
    real = doctor.installed_version
    if pinned:
        versions = {**doctor.PINS, **versions}
    versions = {name.replace("_", "-"): found for name, found in versions.items()}
    monkeypatch.setattr(doctor, "installed_version", lambda name: versions.get(name.replace("_", "-"), real(name)))


def lines(findings, check):
    return [finding for finding in findings if finding.check == check]


def statuses(findings) -> dict[str, set[str]]:
    found = {}
    for finding in findings:
        found.setdefault(finding.check, set()).add(finding.status)
    return found


@needs_make_lab_venv
def test_this_set_up_passes():
    findings = doctor.checks()
    assert [finding.check for finding in findings] == [
        *["python", "packages", "torch", "library", "widgets", "threads", "memory", "where"]
    ]
    assert not [finding for finding in findings if finding.status == "FAIL"], "\n".join(map(str, findings))
    for check in ("python", "packages", "torch", "library", "widgets", "where"):  # a busy machine may WARN on the rest
        assert statuses(findings)[check] == {"OK"}, "\n".join(map(str, findings))
    assert "all 15 of requirements.txt" in str(lines(findings, "packages")[0])
    assert "19 data files present" in str(lines(findings, "library")[0])


def test_utils_doctor_prints_a_line_per_check_and_returns_true_without_a_fail(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "checks", lambda requirements=None: [doctor.Finding("torch", "WARN", "torch differs")])
    assert utils.doctor() is True  # utils.doctor is the module, and calling it runs the checks
    assert capsys.readouterr().out.splitlines() == [
        "[WARN] torch differs",
        "Nothing fails; the [WARN] lines are differences the lessons run with.",
    ]
    monkeypatch.setattr(doctor, "checks", lambda requirements=None: [doctor.Finding("torch", "FAIL", "torch broken")])
    assert doctor.doctor(quiet=True) is False
    assert capsys.readouterr().out == ""


def test_a_package_at_another_version_fails_and_says_how_to_fix_it(monkeypatch):
    with_versions(monkeypatch, numpy="2.3.0")
    [finding] = doctor.check_packages("local", ROOT)
    assert finding.status == "FAIL"
    assert "numpy 2.3.0 (pinned 2.4.6)" in finding.text
    assert "make lab" in finding.text and "pip install -r requirements.txt" in finding.text


def test_a_missing_package_fails_by_name(monkeypatch):
    with_versions(monkeypatch, tqdm=None, scipy=None)
    [finding] = doctor.check_packages("local", ROOT)
    assert finding.status == "FAIL"
    assert "tqdm missing (pinned 4.70.1)" in finding.text and "scipy missing (pinned 1.17.1)" in finding.text


def test_torch_cpu_build_with_a_local_label_matches_the_plain_pin(monkeypatch):
    with_versions(monkeypatch, torch="2.13.0+cpu")
    assert "torch " not in doctor.check_packages("local", ROOT)[0].text
    with_versions(monkeypatch, torch="2.12.0+cpu")
    assert "torch 2.12.0+cpu (pinned 2.13.0)" in doctor.check_packages("local", ROOT)[0].text


def test_another_requirements_file_is_used_when_named(tmp_path, monkeypatch):
    pins = tmp_path / "pins.txt"
    pins.write_text("--extra-index-url https://example.invalid\nnumpy==0.0.1  # a comment\ntqdm\n")
    assert doctor.read_pins(pins) == {"numpy": "0.0.1", "tqdm": None}
    with_versions(monkeypatch, tqdm=None)
    [finding] = doctor.check_packages("local", ROOT, pins)
    assert finding.status == "FAIL"
    assert f"numpy {doctor.installed_version('numpy')} (pinned 0.0.1)" in finding.text
    assert "tqdm missing" in finding.text and str(pins) in finding.text


def test_the_installed_copy_pins_are_requirements_txt():
    """A copy installed without the repository (Colab) checks against PINS: the same as requirements.txt."""
    assert doctor.read_pins(ROOT / "requirements.txt") == doctor.PINS


def test_the_checked_checkpoints_are_the_ones_make_checkpoints_trains():
    from tools.train_checkpoints import RECIPES

    assert set(doctor.LESSON_CHECKPOINTS) == set(RECIPES)


def test_a_cuda_build_of_torch_is_named_locally(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.13.0+cu128")
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    [finding] = doctor.check_torch("local")
    assert finding.status == "WARN"
    assert "torch 2.13.0+cu128 is a CUDA 12.8 build" in finding.text
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in finding.text


def test_the_cpu_build_of_torch_is_ok(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    assert doctor.check_torch("local") == [doctor.Finding("torch", "OK", f"torch {torch.__version__}: the CPU build")]


@pytest.mark.parametrize(
    "front_end, expected",
    [("1.1.7", "needs jupyterlab_widgets 3, found 1.1.7"), (None, "needs jupyterlab_widgets 3, it is not installed")],
)
def test_widgets_without_their_front_end_fail(monkeypatch, front_end, expected):
    with_versions(monkeypatch, ipywidgets="8.1.9", jupyterlab_widgets=front_end)
    [finding] = doctor.check_widgets("local", ROOT)
    assert finding.status == "FAIL"
    assert expected in finding.text and "show as text" in finding.text


def test_widgets_7_with_their_front_end_1_pass(monkeypatch):
    with_versions(monkeypatch, ipywidgets="7.7.1", jupyterlab_widgets="1.1.7")
    [finding] = doctor.check_widgets("local", ROOT)
    assert finding.status == "OK" and "ipywidgets 7.7.1 with jupyterlab_widgets 1.1.7" in finding.text


@pytest.mark.parametrize(
    "running, status, expected",
    [
        ((3, 11, 4), "OK", "the course's version (3.11)"),
        ((3, 12, 1), "WARN", "tested with 3.11"),
        ((3, 9, 18), "FAIL", "needs Python >=3.10"),
    ],
)
def test_python_versions(running, status, expected):
    [finding] = doctor.check_python("local", running, ROOT)
    assert finding.status == status and expected in finding.text
    assert finding.text.startswith(f"Python {'.'.join(map(str, running))} at ")


def test_missing_data_files_fail_by_name(tmp_path, monkeypatch):
    (tmp_path / "lesson6.json").write_text("{}")
    (tmp_path / "digits.pt").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:0\n")  # a pointer
    files = {name: tmp_path / Path(name).name for name in ("checkpoints/digits.pt", "results/lesson6.json", "x.npy")}
    monkeypatch.setattr(doctor, "data_files", lambda: files)
    [finding] = doctor.check_library("local", ROOT, cwd=ROOT)
    assert finding.status == "FAIL"
    assert "data files missing or empty: checkpoints/digits.pt, x.npy" in finding.text
    assert f"git checkout -- utils/ in {ROOT}" in finding.text


def test_a_module_that_does_not_import_fails_by_its_error(monkeypatch):
    monkeypatch.setattr(doctor, "data_files", lambda: "ModuleNotFoundError: No module named 'scipy'")
    [finding] = doctor.check_library("local", ROOT, cwd=ROOT)
    assert finding.status == "FAIL" and "No module named 'scipy'" in finding.text


def test_another_copy_of_the_course_as_working_folder_warns(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "vit-from-scratch"\n')
    (tmp_path / "my-lessons").mkdir()
    [finding] = doctor.check_library("local", ROOT, cwd=tmp_path / "my-lessons")
    assert finding.status == "WARN" and f"another copy of the course, {tmp_path}" in finding.text


class InstalledCourse:
    """A stand-in for the distribution of a vit-from-scratch installed as a wheel (no checkout)."""

    version = "1.0.0"
    files = (PackagePath("utils/__init__.py"),)

    def locate_file(self, path):
        return doctor.LIBRARY.parent / path


def test_an_installed_copy_of_the_course_passes_and_a_stranger_fails(monkeypatch):
    monkeypatch.setattr(doctor, "distribution", lambda name: InstalledCourse())
    [finding] = doctor.check_library("local", None, cwd=ROOT)
    assert finding.status == "OK" and f"vit-from-scratch 1.0.0 installed at {doctor.LIBRARY}" in finding.text

    def missing(name):
        raise PackageNotFoundError(name)

    monkeypatch.setattr(doctor, "distribution", missing)
    [finding] = doctor.check_library("colab", None, cwd=ROOT)
    assert finding.status == "FAIL" and "is not the course's" in finding.text and "first code cell" in finding.text


def test_colab_keeps_its_own_torch_and_numpy_with_a_warning_not_a_fail(monkeypatch, colab):
    with_versions(monkeypatch, torch="2.8.0+cu126", numpy="2.0.2", jupyterlab=None, ipykernel="6.17.1")
    monkeypatch.setattr(torch, "__version__", "2.8.0+cu126")
    monkeypatch.setattr(torch.version, "cuda", "12.6")
    findings = doctor.checks()
    assert "FAIL" not in {finding.status for finding in findings}, "\n".join(map(str, findings))
    [packages] = lines(findings, "packages")
    assert packages.status == "WARN"
    for differing in (
        "torch 2.8.0+cu126 (pinned 2.13.0)",
        "numpy 2.0.2 (pinned 2.4.6)",
        "ipykernel 6.17.1 (pinned 7.4.0)",
    ):
        assert differing in packages.text
    assert "jupyterlab" not in packages.text  # Colab's own front end: not needed there
    [torch_line] = lines(findings, "torch")
    assert torch_line.status == "OK" and "Colab's own CUDA 12.6 build" in torch_line.text
    assert (
        lines(findings, "widgets")[0].status == "OK" and "Colab's own front end" in lines(findings, "widgets")[0].text
    )
    assert "File > Save a copy in Drive" in lines(findings, "where")[0].text


def test_colab_missing_packages_point_to_the_install_cell_or_pip(monkeypatch, colab):
    with_versions(monkeypatch, pinned=True, tqdm=None, transformers=None)
    [finding] = doctor.check_packages("colab", ROOT)
    assert finding.status == "FAIL"
    assert "tqdm missing" in finding.text and "transformers missing" in finding.text
    assert doctor.COLAB_CELL in finding.text  # tqdm: the library's, which the cell installs
    assert "!pip install transformers" in finding.text  # lesson 8's, which the cell does not


def test_colab_packages_older_than_the_library_needs_fail(monkeypatch, colab):
    with_versions(monkeypatch, pinned=True, ipywidgets="7.6.5")
    [finding] = doctor.check_packages("colab", ROOT)
    assert finding.status == "FAIL"
    assert "ipywidgets 7.6.5, older than the course needs (>=7.7)" in finding.text
    assert "!pip install 'ipywidgets>=7.7'" in finding.text


@pytest.mark.parametrize(
    "environ, modules, place, answers",
    [
        ({}, {}, "local", "saved in the folder you opened"),
        ({"COLAB_RELEASE_TAG": "release-colab-20260101"}, {}, "colab", "Save a copy in Drive"),
        ({}, {"google.colab": None}, "colab", "Save a copy in Drive"),
        ({"BINDER_LAUNCH_HOST": "https://mybinder.org/", "JUPYTERHUB_USER": "x"}, {}, "binder", "File > Download"),
        ({"JUPYTERHUB_USER": "ada"}, {}, "jupyterhub", "ask your instructor"),
    ],
)
def test_where_it_runs_and_where_answers_live(environ, modules, place, answers):
    assert doctor.where(environ, modules) == place
    [finding] = doctor.check_where(place)
    assert finding.status == "OK" and answers in finding.text


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


MB = 2**20


def test_available_memory_takes_the_cgroup_v2_limit_page_cache_counted_free(tmp_path):
    write(tmp_path / "proc" / "meminfo", f"MemTotal: 16000000 kB\nMemAvailable: {4096 * 1024} kB\n")
    write(tmp_path / "proc" / "self" / "cgroup", "0::/user.slice/lesson\n")
    cgroup = tmp_path / "sys" / "fs" / "cgroup" / "user.slice" / "lesson"
    write(cgroup / "memory.max", f"{1024 * MB}\n")
    write(cgroup / "memory.current", f"{600 * MB}\n")
    write(cgroup / "memory.stat", f"anon 1\ninactive_file {100 * MB}\n")
    assert doctor.available_memory(tmp_path) == (524 * MB, 1024 * MB)
    write(cgroup / "memory.max", "max\n")  # no limit: MemAvailable alone
    assert doctor.available_memory(tmp_path) == (4096 * MB, None)


def test_available_memory_reads_cgroup_v1_and_nothing_on_macos(tmp_path):
    write(tmp_path / "proc" / "meminfo", f"MemAvailable: {4096 * 1024} kB\n")
    write(tmp_path / "proc" / "self" / "cgroup", "5:cpu,cpuacct:/\n4:memory:/docker/abc\n0::/\n")
    memory = tmp_path / "sys" / "fs" / "cgroup" / "memory"
    write(memory / "memory.limit_in_bytes", "9223372036854771712\n")  # the root: no limit
    write(memory / "docker" / "abc" / "memory.limit_in_bytes", f"{2048 * MB}\n")
    write(memory / "docker" / "abc" / "memory.usage_in_bytes", f"{1024 * MB}\n")
    write(memory / "docker" / "abc" / "memory.stat", "inactive_file 5\ntotal_inactive_file 0\n")
    assert doctor.available_memory(tmp_path) == (1024 * MB, 2048 * MB)
    assert doctor.available_memory(tmp_path / "nothing") is None  # no /proc/meminfo


def test_low_memory_and_too_many_threads_warn(monkeypatch):
    monkeypatch.setattr(doctor, "available_memory", lambda: (500 * MB, 1024 * MB))
    monkeypatch.setattr(doctor, "usable_cpus", lambda: (1, "its cgroup's CPU quota"))
    monkeypatch.setattr(torch, "get_num_threads", lambda: 8)
    threads, memory = doctor.check_resources()
    assert (
        threads.status == "WARN"
        and "torch uses 8 threads, but this process may use 1 CPU (its cgroup's CPU quota)" in threads.text
    )
    assert "torch.set_num_threads(1)" in threads.text
    assert memory.status == "WARN" and "500 MB available (cgroup limit 1.0 GB), under 800 MB" in memory.text
    monkeypatch.setattr(doctor, "available_memory", lambda: None)
    assert doctor.check_resources()[1].status == "OK" and "not measured" in doctor.check_resources()[1].text


def test_a_cpu_quota_lowers_the_usable_cpus(tmp_path):
    if doctor.usable_cpus()[0] < 2:
        pytest.skip("one CPU here: a quota of one cannot lower it")
    write(tmp_path / "proc" / "self" / "cgroup", "0::/\n")
    write(tmp_path / "sys" / "fs" / "cgroup" / "cpu.max", "50000 100000\n")
    assert doctor.usable_cpus(tmp_path) == (1, "its cgroup's CPU quota")
    write(tmp_path / "sys" / "fs" / "cgroup" / "cpu.max", "max 100000\n")
    assert doctor.usable_cpus(tmp_path) == (doctor.usable_cpus()[0], "")


def test_help_and_a_requirements_file_that_is_not_there(capsys):
    with pytest.raises(SystemExit) as done:
        doctor.main(["--help"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("usage: python -m utils.doctor")
    with pytest.raises(SystemExit) as done:
        doctor.main(["--requirements", "no-such-file.txt"])
    assert done.value.code == 2 and "no-such-file.txt: no such file" in capsys.readouterr().err


def run_doctor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "utils.doctor", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_the_command_exits_1_on_a_fail(tmp_path):
    pins = tmp_path / "pins.txt"
    pins.write_text("numpy==0.0.1\n")
    done = run_doctor("--requirements", str(pins))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[FAIL] packages not as" in done.stdout and "(pinned 0.0.1)" in done.stdout
    assert "RuntimeWarning" not in done.stderr  # runpy's, had utils imported its doctor module eagerly


@needs_make_lab_venv
def test_the_command_exits_0_here_and_make_doctor_runs_it():
    done = run_doctor()
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("\n") == 9 and "[FAIL]" not in done.stdout
    plan = subprocess.run(["make", "-n", "doctor"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    # under make test, make -n also prints "Entering directory" lines around the command
    assert plan.returncode == 0 and ".venv/bin/python -m utils.doctor" in plan.stdout.splitlines()


def test_importing_utils_does_not_load_the_doctor():
    code = (
        "import sys, utils; print('utils.doctor' in sys.modules); "
        "print(callable(utils.doctor), 'utils.doctor' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "True", "True"], done.stderr
