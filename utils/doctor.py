"""Is this set-up ready for the course? One line per check, [OK], [WARN] or [FAIL], each failing
line saying what to do: `make doctor` in a terminal, `utils.doctor()` in a lesson.

The checks, in order: Python's version; every pin of requirements.txt against what is installed;
torch's build (the CPU one); the course library (where `utils` comes from, its version, its data
files); the widgets' front end; threads and free memory; where it runs, and where the learner's
answers live there. On Google Colab the lessons' first cell keeps Colab's own torch and numpy and
installs only what is missing, so there a version other than the pin is a [WARN], not a [FAIL].

    python -m utils.doctor                 # exits 1 when a line says [FAIL]
    python -m utils.doctor --requirements binder/requirements.txt

Sits on top of the library, beside `widgets`: it imports `utils` modules only inside its checks,
so that one broken package gives one [FAIL] line, not a traceback.
"""

import argparse
import math
import os
import platform
import re
import sys
import types
from importlib.metadata import PackageNotFoundError, distribution, requires, version
from pathlib import Path
from typing import NamedTuple

DISTRIBUTION = "vit-from-scratch"  # the course library's name as a package (pyproject.toml)
LIBRARY = Path(__file__).resolve().parent  # the folder `utils` is imported from
# The pins of requirements.txt at this release, for a copy installed without the repository (Colab's
# cell installs the library alone); a checkout reads its requirements.txt. tests/test_doctor.py keeps
# the two equal.
PINS = {
    "torch": "2.13.0",
    "numpy": "2.4.6",
    "matplotlib": "3.11.2",
    "pillow": "13.0.0",
    "jupyterlab": "4.6.6",
    "ipykernel": "7.4.0",
    "ipywidgets": "8.1.9",
    "ipython": "9.18.1",
    "tqdm": "4.70.1",
    "scikit-learn": "1.9.1",
    "scipy": "1.17.1",
    "safetensors": "0.8.0",
    "scikit-image": "0.26.0",
    "transformers": "5.24.0",
    "huggingface_hub": "2.4.0",
}
COLAB_FRONT_END = {"jupyterlab"}  # Colab draws the notebook itself: JupyterLab is not needed there
LESSON_CHECKPOINTS = (  # what lessons 7-9 load with load_trained
    "digits",
    "relational",
    "relational_fine",
    "digits_seed1",
    "digits_seed2",
    "relational_seed1",
    "relational_seed2",
    "orientation",
    "orientation_seed1",
    "orientation_seed2",
)
WIDGETS_FRONT_END = {7: 1, 8: 3}  # ipywidgets' major version -> the jupyterlab_widgets major that draws it
LESSON_MEMORY_MB = 700  # a lesson's kernel at its peak (docs/time-and-memory.md)
LOW_MEMORY_MB = 800  # less available than this is a [WARN]
CPU_TORCH = "pip install torch=={version} --index-url https://download.pytorch.org/whl/cpu"
COLAB_CELL = "run the lesson's first code cell (On Google Colab only: install the course library)"
NO_LIMIT = 2**60  # a cgroup's "no limit" is a number near 2**63


class Finding(NamedTuple):
    """One line of the doctor's report: which check, its status (OK, WARN or FAIL) and what it found."""

    check: str
    status: str
    text: str

    def __str__(self) -> str:
        return f"{'[' + self.status + ']':<6} {self.text}"


def installed_version(name: str) -> str | None:
    """The installed version of the distribution `name` (e.g. "2.13.0+cpu"), or None when it is missing."""
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def where(environ=None, modules=None) -> str:
    """Where this process runs: "colab", "binder", "jupyterhub" (another hub) or "local"."""
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    if "google.colab" in modules or "COLAB_RELEASE_TAG" in environ:
        return "colab"
    if any(name.startswith("BINDER_") for name in environ):  # BINDER_LAUNCH_HOST, BINDER_REQUEST, ...
        return "binder"
    if any(name.startswith("JUPYTERHUB_") for name in environ):  # set by Binder too, which was caught above
        return "jupyterhub"
    return "local"


def course_root(start: Path = LIBRARY) -> Path | None:
    """The checkout of the course that holds `start` (the folder with its pyproject.toml), or None."""
    for folder in [start, *start.parents]:
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and re.search(rf'^name = "{DISTRIBUTION}"', pyproject.read_text(), re.MULTILINE):
            return folder
    return None


def _project_field(root: Path | None, field: str) -> str | None:
    """A one-line string field of the checkout's pyproject.toml ([project]'s version, requires-python)."""
    if root is None:
        return None
    found = re.search(rf'^{field} = "([^"]+)"', (root / "pyproject.toml").read_text(), re.MULTILINE)
    return found.group(1) if found else None


def _release(text: str) -> tuple[int, ...]:
    """The leading numbers of a version: "2.13.0+cpu" -> (2, 13, 0), "3.10" -> (3, 10)."""
    return tuple(int(part) for part in re.findall(r"\d+", re.split(r"[^\d.]", text, maxsplit=1)[0]))


def _same_version(installed: str, pin: str) -> bool:
    """`installed` satisfies ==`pin`: a local label (+cpu) counts only when the pin names one."""
    return installed == pin if "+" in pin else installed.split("+")[0] == pin


def read_pins(path: Path) -> dict[str, str | None]:
    """{name: exact version, or None when the line pins none} of a requirements file's packages."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):  # blank, comment, or an option (--extra-index-url)
            continue
        found = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?:==\s*([^\s;,]+))?", line)
        if found:
            pins[found.group(1)] = found.group(2)
    return pins


def library_bounds(root: Path | None = None) -> dict[str, tuple[int, ...]]:
    """{name: the oldest version the library's code uses}: the checkout's pyproject.toml dependencies, else
    the installed library's."""
    pyproject = (root / "pyproject.toml").read_text() if root is not None else ""
    listed = re.search(r"^dependencies = \[(.*?)^\]", pyproject, re.DOTALL | re.MULTILINE)
    if listed:
        lines = re.findall(r'"([^"]+)"', listed.group(1))
    else:
        try:
            lines = requires(DISTRIBUTION) or []
        except PackageNotFoundError:
            return {}
    bounds = {}
    for line in lines:
        found = re.match(r"([A-Za-z0-9._-]+)\s*>=\s*([\d.]+)", line)
        if found:
            bounds[_key(found.group(1))] = _release(found.group(2))
    return bounds


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _shown(path: Path, root: Path | None) -> str:
    """`path` from the checkout's folder when it lies inside it, else in full."""
    if root is not None and path.is_relative_to(root):
        return str(path.relative_to(root))
    return str(path)


def _reinstall(place: str, root: Path | None, requirements: str = "requirements.txt") -> str:
    """What to run to get the pinned packages back, where this runs."""
    if place == "colab":
        return COLAB_CELL
    if place == "binder":
        return "start a new Binder session from the badge (it installs binder/requirements.txt)"
    in_venv = root is not None and Path(sys.prefix).resolve() == (root / ".venv").resolve()
    if in_venv:
        return f"in {root}: rm -f .venv/.runtime && make lab (sets up .venv again), or pip install -r {requirements}"
    return f"pip install -r {requirements} (or make lab in the course's folder, which sets up its own .venv)"


def check_python(place: str, running: tuple[int, ...] | None = None, root: Path | None = None) -> list[Finding]:
    """Python's version against pyproject.toml's requires-python and the course's own (binder/runtime.txt)."""
    running = tuple(sys.version_info[:3]) if running is None else running
    shown = ".".join(map(str, running))
    python = (
        f"Colab's Python {shown}" if place == "colab" else f"Python {shown} at {_shown(Path(sys.executable), root)}"
    )
    needs = _project_field(root, "requires-python")
    if needs is None:
        try:
            needs = distribution(DISTRIBUTION).metadata["Requires-Python"]
        except PackageNotFoundError:
            needs = None
    runtime = root / "binder" / "runtime.txt" if root else None
    course = runtime.read_text().strip().removeprefix("python-") if runtime and runtime.is_file() else None
    minimum = _release(needs.removeprefix(">=")) if needs and needs.startswith(">=") else None
    if minimum and running < minimum:
        wanted = course or ".".join(map(str, minimum))
        return [
            Finding(
                "python",
                "FAIL",
                f"{python}: the course needs Python {needs}; install Python {wanted}, then in the course's folder "
                f"rm -rf .venv && make lab PYTHON=python{wanted}",
            )
        ]
    if course and running[: len(_release(course))] != _release(course):
        return [
            Finding("python", "WARN", f"{python}: supported ({needs}), but the course is made and tested with {course}")
        ]
    return [Finding("python", "OK", f"{python}" + (f", the course's version ({course})" if course else ""))]


def requirement_pins(root: Path | None, requirements: Path | None = None) -> tuple[dict[str, str | None], str]:
    """The pins to hold the packages to, and where they come from: `requirements`, else the checkout's
    requirements.txt, else (an installed copy) this release's PINS."""
    if requirements is None and root is not None and (root / "requirements.txt").is_file():
        requirements = root / "requirements.txt"
    if requirements is None:
        return dict(PINS), "requirements.txt"
    return read_pins(requirements), _shown(requirements.resolve(), root)


def check_packages(place: str, root: Path | None, requirements: Path | None = None) -> list[Finding]:
    """Every pinned package installed at its pin (on Colab: present, and not older than the library needs)."""
    pins, source = requirement_pins(root, requirements)
    if place == "colab":
        pins = {name: pin for name, pin in pins.items() if name not in COLAB_FRONT_END}
    bounds = library_bounds(root) if place == "colab" else {}
    failing, differing, by_cell, to_pip = [], [], [], []  # on Colab: what the cell installs, what pip must
    for name, pin in pins.items():
        found, bound = installed_version(name), bounds.get(_key(name))
        if found is None:
            failing.append(f"{name} missing" + (f" (pinned {pin})" if pin else ""))
            (by_cell if bound else to_pip).append(name)  # the cell installs the library's dependencies only
        elif bound and _release(found) < bound:
            needed = ".".join(map(str, bound))
            failing.append(f"{name} {found}, older than the course needs (>={needed})")
            to_pip.append(f"'{name}>={needed}'")
        elif pin and not _same_version(found, pin):
            (differing if place == "colab" else failing).append(f"{name} {found} (pinned {pin})")
    findings = []
    if failing:
        if place == "colab":
            fixes = [COLAB_CELL] if by_cell else []
            fixes += [f"!pip install {' '.join(to_pip)}, then Runtime > Restart session"] if to_pip else []
            fix = "; ".join(fixes)
        else:
            fix = _reinstall(place, root, source)
        findings.append(Finding("packages", "FAIL", f"packages not as {source} pins them: {', '.join(failing)}; {fix}"))
    if differing:
        findings.append(
            Finding(
                "packages",
                "WARN",
                f"packages differ from {source}, Colab's own kept on purpose: {', '.join(differing)}; the lessons run, "
                "their numbers may differ in the last digits (the course is tested with the pins)",
            )
        )
    if not findings:
        kept = " (JupyterLab: Colab's own front end instead)" if place == "colab" else ""
        findings.append(
            Finding("packages", "OK", f"packages: all {len(pins)} of {source} installed at their pins{kept}")
        )
    return findings


def check_torch(place: str, pin: str | None = None) -> list[Finding]:
    """torch's build: the CPU build the course is made with (Colab's own CUDA build is fine there)."""
    pin = pin or PINS["torch"]
    try:
        import torch
    except Exception as error:  # a broken install can raise more than ImportError
        fix = COLAB_CELL if place == "colab" else CPU_TORCH.format(version=pin)
        return [Finding("torch", "FAIL", f"torch does not import ({type(error).__name__}: {error}): {fix}")]
    built = torch.__version__
    if torch.version.cuda:
        accelerator = f"CUDA {torch.version.cuda}"
    elif getattr(torch.version, "hip", None):
        accelerator = f"ROCm {torch.version.hip}"
    else:
        return [Finding("torch", "OK", f"torch {built}: the CPU build")]
    if place == "colab":
        gpu = "a GPU is attached" if torch.cuda.is_available() else "no GPU attached"
        return [Finding("torch", "OK", f"torch {built}: Colab's own {accelerator} build, kept on purpose ({gpu})")]
    return [
        Finding(
            "torch",
            "WARN",
            f"torch {built} is a {accelerator} build (several GB); the course is made with the CPU build (190 MB) "
            f"and the lessons run on the CPU: {CPU_TORCH.format(version=pin)}",
        )
    ]


def data_files() -> dict[str, Path] | str:
    """{what: path} of the data files the lessons read, named by the modules that read them; or, when one
    of those modules does not import, what went wrong."""
    try:
        from utils import ablations, claims, data, imagenet, mae, norm_order, resolution, stability, weights
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    files = {f"checkpoints/{name}.pt": weights.CHECKPOINT_DIR / f"{name}.pt" for name in LESSON_CHECKPOINTS}
    for path in (
        ablations.RESULTS_FILE,
        claims.RESULTS_FILE,
        norm_order.RESULTS_FILE,
        stability.RESULTS_FILE,
        resolution.RESULTS_FILE,
        mae.RESULTS_FILE,
        mae.CHECKPOINT,
        data.DIGITS_SPLIT_FILE,
        imagenet.CLASSES_FILE,
    ):
        files[_shown(path, LIBRARY)] = path
    return files


def _is_data(path: Path) -> bool:
    """The file is there with content, not a git-LFS pointer in its place."""
    if not path.is_file() or path.stat().st_size == 0:
        return False
    with open(path, "rb") as file:
        return not file.read(64).startswith(b"version https://git-lfs")


def check_library(place: str, root: Path | None, cwd: Path | None = None) -> list[Finding]:
    """`utils` is the course's (this checkout or an installed vit-from-scratch), with its data files."""
    if root is not None:
        origin = f"library: utils {_project_field(root, 'version')} from the checkout {root}"
    else:
        try:
            dist = distribution(DISTRIBUTION)
        except PackageNotFoundError:
            dist = None
        owned = dist is not None and any(
            Path(dist.locate_file(file)).resolve() == LIBRARY / "__init__.py" for file in dist.files or ()
        )
        if not owned:
            fix = COLAB_CELL if place == "colab" else "open the lessons from the course's folder (make lab)"
            return [
                Finding("library", "FAIL", f"library: utils at {LIBRARY} is not the course's ({DISTRIBUTION}): {fix}")
            ]
        origin = f"library: {DISTRIBUTION} {dist.version} installed at {LIBRARY}"
    files = data_files()
    if isinstance(files, str):
        return [
            Finding("library", "FAIL", f"{origin}, but its modules do not import ({files}): {_reinstall(place, root)}")
        ]
    missing = [name for name, path in files.items() if not _is_data(path)]
    if missing:
        fix = f"git checkout -- utils/ in {root}" if root else f"reinstall {DISTRIBUTION} ({_reinstall(place, root)})"
        return [Finding("library", "FAIL", f"{origin}, but data files missing or empty: {', '.join(missing)}: {fix}")]
    here = course_root((cwd or Path.cwd()).resolve())
    if root is not None and here is not None and here != root:
        return [
            Finding(
                "library",
                "WARN",
                f"{origin}, but you are in another copy of the course, {here}: run make lab there to use that one",
            )
        ]
    return [Finding("library", "OK", f"{origin}, its {len(files)} data files present")]


def check_widgets(place: str, root: Path | None) -> list[Finding]:
    """ipywidgets with the jupyterlab_widgets that draws it (Colab draws widgets itself)."""
    widgets = installed_version("ipywidgets")
    if widgets is None:
        fix = COLAB_CELL if place == "colab" else _reinstall(place, root)
        return [Finding("widgets", "FAIL", f"widgets: ipywidgets is not installed, the explorers cannot run: {fix}")]
    if place == "colab":
        return [Finding("widgets", "OK", f"widgets: ipywidgets {widgets}, drawn by Colab's own front end")]
    major = _release(widgets)[0]
    needed = WIDGETS_FRONT_END.get(major)
    front_end = installed_version("jupyterlab_widgets")
    if needed is None:
        return [
            Finding(
                "widgets", "WARN", f"widgets: ipywidgets {widgets}: the doctor knows the front ends of 7 and 8 only"
            )
        ]
    if front_end is None or _release(front_end)[0] != needed:
        found = f"found {front_end}" if front_end else "it is not installed"
        return [
            Finding(
                "widgets",
                "FAIL",
                f"widgets: ipywidgets {widgets} needs jupyterlab_widgets {needed}, {found}: the explorers would "
                f"show as text; {_reinstall(place, root)} (in the Python that runs JupyterLab)",
            )
        ]
    return [
        Finding("widgets", "OK", f"widgets: ipywidgets {widgets} with jupyterlab_widgets {front_end}, a matching pair")
    ]


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _own_cgroups(controller: str, proc: Path, mount: Path) -> list[Path]:
    """The folders of this process's cgroup and of each one above it, under `mount` (v2: controller "")."""
    own = ""
    for line in (_read(proc / "self" / "cgroup") or "").splitlines():
        if line.count(":") < 2:
            continue
        number, names, path = line.split(":", 2)
        if (controller and controller in names.split(",")) or (not controller and number == "0"):
            own = path.strip("/")
    parts = Path(own).parts if own else ()
    folders = [mount.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]
    return [folder for folder in folders if folder.is_dir()]


def _stat(folder: Path, key: str) -> int:
    for line in (_read(folder / "memory.stat") or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


def available_memory(root: Path = Path("/")) -> tuple[int, int | None] | None:
    """(bytes available, the cgroup's limit or None) on Linux: /proc/meminfo's MemAvailable, less where a
    cgroup (v2 memory.max, v1 memory.limit_in_bytes) leaves less; its page cache counts as free. None
    elsewhere (macOS)."""
    meminfo = _read(root / "proc" / "meminfo")
    found = re.search(r"^MemAvailable:\s*(\d+) kB", meminfo or "", re.MULTILINE)
    if found is None:
        return None
    available, limit = int(found.group(1)) * 1024, None
    cgroups = root / "sys" / "fs" / "cgroup"
    v2 = [
        (folder, "memory.max", "memory.current", "inactive_file") for folder in _own_cgroups("", root / "proc", cgroups)
    ]
    v1 = [
        (folder, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        for folder in _own_cgroups("memory", root / "proc", cgroups / "memory")
    ]
    for folder, max_file, usage_file, inactive in v2 + v1:
        most, used = _read(folder / max_file), _read(folder / usage_file)
        if not (most and most.isdigit() and used and used.isdigit()) or int(most) >= NO_LIMIT:
            continue
        left = int(most) - (int(used) - _stat(folder, inactive))
        if limit is None or int(most) < limit:
            limit = int(most)
        available = min(available, max(left, 0))
    return available, limit


def usable_cpus(root: Path = Path("/")) -> tuple[int, str]:
    """How many CPUs this process may keep busy (its affinity), and "its cgroup's CPU quota" when that
    allows fewer ("" otherwise)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    why = ""
    cgroups = root / "sys" / "fs" / "cgroup"
    quotas = [(_read(folder / "cpu.max") or "").split() for folder in _own_cgroups("", root / "proc", cgroups)]
    quotas += [
        [_read(folder / "cpu.cfs_quota_us") or "", _read(folder / "cpu.cfs_period_us") or ""]
        for folder in _own_cgroups("cpu", root / "proc", cgroups / "cpu")
    ]
    for quota in quotas:
        if len(quota) == 2 and quota[0].isdigit() and quota[1].isdigit() and int(quota[1]) > 0:
            allowed = max(1, math.ceil(int(quota[0]) / int(quota[1])))
            if allowed < cpus:
                cpus, why = allowed, "its cgroup's CPU quota"
    return cpus, why


def _size(count: int) -> str:
    return f"{count / 2**30:.1f} GB" if count >= 2**30 else f"{count / 2**20:.0f} MB"


def check_resources() -> list[Finding]:
    """torch's threads against the CPUs this process may use, and the memory available to it."""
    try:
        import torch

        threads = torch.get_num_threads()
    except Exception:  # the torch line says what is wrong
        threads = None
    cpus, why = usable_cpus()
    usable = f"{cpus} CPU{'' if cpus == 1 else 's'}" + (f" ({why})" if why else "")
    if threads is None:
        threads_line = Finding("threads", "WARN", f"threads: not counted, torch does not import ({usable} here)")
    elif threads > cpus:
        threads_line = Finding(
            "threads",
            "WARN",
            f"threads: torch uses {threads} threads, but this process may use {usable}: cells run slower; "
            f"torch.set_num_threads({cpus}) in a lesson, or OMP_NUM_THREADS={cpus} before starting Jupyter",
        )
    else:
        threads_line = Finding(
            "threads", "OK", f"threads: torch uses {threads} of {usable} here (os.cpu_count(): {os.cpu_count()})"
        )
    memory = available_memory()
    need = f"a lesson needs up to about {LESSON_MEMORY_MB} MB"
    if memory is None:
        memory_line = Finding("memory", "OK", f"memory: not measured on {platform.system() or 'this system'} ({need})")
    else:
        available, limit = memory
        shown = f"{_size(available)} available" + (f" (cgroup limit {_size(limit)})" if limit else "")
        if available < LOW_MEMORY_MB * 2**20:
            memory_line = Finding(
                "memory",
                "WARN",
                f"memory: {shown}, under {LOW_MEMORY_MB} MB: {need}; shut down other notebooks' kernels "
                "(Kernel > Shut Down Kernel) and close programs you do not need",
            )
        else:
            memory_line = Finding("memory", "OK", f"memory: {shown} ({need})")
    return [threads_line, memory_line]


def check_where(place: str) -> list[Finding]:
    """Where this runs, and where the learner's answers are kept there."""
    text = {
        "local": "where: this computer; your answers are saved in the folder you opened (with make lab: my-lessons/)",
        "binder": "where: Binder; your answers are lost when the session ends (10 idle minutes): File > Download, "
        "or the toolbar's Save to browser storage",
        "colab": "where: Google Colab; Colab keeps no files after the session: File > Save a copy in Drive",
        "jupyterhub": "where: a JupyterHub; your answers stay in your folder there for as long as the hub keeps it "
        "(ask your instructor), File > Download keeps a copy",
    }[place]
    return [Finding("where", "OK", text)]


def checks(requirements: str | os.PathLike | None = None) -> list[Finding]:
    """Run every check and return its findings, in order (nothing is printed).

    Args:
        requirements: a requirements file to hold the installed packages to, instead of the checkout's
            requirements.txt (or, in an installed copy, the pins of this release).
    """
    place, root = where(), course_root()
    requirements = Path(requirements) if requirements is not None else None
    torch_pin = requirement_pins(root, requirements)[0].get("torch")
    return [
        *check_python(place, root=root),
        *check_packages(place, root, requirements),
        *check_torch(place, torch_pin),
        *check_library(place, root),
        *check_widgets(place, root),
        *check_resources(),
        *check_where(place),
    ]


def doctor(quiet: bool = False, requirements: str | os.PathLike | None = None) -> bool:
    """Check that this set-up is ready for the course; print one line per check (unless `quiet`).

    Returns True when no line says [FAIL] ([WARN] lines are differences the lessons run with).
    """
    findings = checks(requirements)
    failed = [finding for finding in findings if finding.status == "FAIL"]
    if not quiet:
        for finding in findings:
            print(finding)
        if failed:
            print(f"{len(failed)} check(s) failed: do what the [FAIL] lines say, then run the doctor again.")
        elif any(finding.status == "WARN" for finding in findings):
            print("Nothing fails; the [WARN] lines are differences the lessons run with.")
        else:
            print("Everything the course needs is in place.")
    return not failed


class _CallableModule(types.ModuleType):
    """`utils.doctor()` runs the checks: the module and its function share a name, and whichever of
    the two `utils.doctor` is (the import system sets the module), calling it does the same."""

    def __call__(self, quiet: bool = False, requirements: str | os.PathLike | None = None) -> bool:
        return doctor(quiet=quiet, requirements=requirements)


if __name__ != "__main__":
    sys.modules[__name__].__class__ = _CallableModule


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m utils.doctor",
        description="Check that this set-up is ready for ViT from Scratch: Python, the pinned packages, torch's "
        "build, the course library and its data files, the widgets, threads and memory, where it runs. One line "
        "per check, [OK], [WARN] or [FAIL] with what to do; exits with 1 when a line says [FAIL].",
    )
    parser.add_argument(
        "--requirements",
        metavar="FILE",
        help="hold the packages to this requirements file (e.g. binder/requirements.txt) instead of requirements.txt",
    )
    args = parser.parse_args(argv)
    if args.requirements is not None and not Path(args.requirements).is_file():
        parser.error(f"--requirements {args.requirements}: no such file")
    return 0 if doctor(requirements=args.requirements) else 1


if __name__ == "__main__":
    sys.exit(main())
