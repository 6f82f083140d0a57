"""pyproject.toml declares every package the library imports (lower bounds only), and
requirements.txt pins each of them exactly."""

import ast
import importlib.metadata
import re
import sys

import tomllib
from notebook_cells import ROOT

from utils.data import PHOTOS

# calls that import a package named by a string: importlib.util.find_spec("sklearn"), importlib.resources.files(...)
IMPORTING_CALLS = {"find_spec", "files", "import_module"}


def imported_packages() -> set[str]:
    """The top-level names of the non-standard-library packages utils/ imports, lazily or not."""
    names = set()
    for path in (ROOT / "utils").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", None) in IMPORTING_CALLS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names.add(node.args[0].value.split(".")[0])
    names |= {package.split(".")[0] for package, _ in PHOTOS.values()}  # files read out of installed packages
    return {name for name in names if name not in sys.stdlib_module_names and name != "utils"}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> dict[str, str]:
    """{distribution: version specifier} of pyproject.toml's dependencies."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = {}
    for requirement in project["dependencies"]:
        name, specifier = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(.*)", requirement).groups()
        found[normalise(name)] = specifier
    return found


def test_every_imported_package_is_a_dependency():
    packages = imported_packages()
    assert {"torch", "safetensors", "tqdm", "ipywidgets", "sklearn", "skimage", "huggingface_hub"} <= packages
    distributions = importlib.metadata.packages_distributions()
    needed = {normalise(distributions[package][0]) for package in packages}
    assert needed - declared().keys() == set(), "imported by utils/ but not in pyproject.toml"


def test_dependencies_have_lower_bounds_only_and_exact_pins_in_requirements():
    pins = {
        normalise(m[1]): m[2]
        for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements.txt").read_text(), re.MULTILINE)
    }
    for name, specifier in declared().items():
        assert re.fullmatch(r">=[0-9][0-9.]*", specifier), f"{name}: {specifier!r}, expected a lower bound only"
        assert name in pins, f"{name} is not pinned in requirements.txt"
        lower = [int(part) for part in specifier[2:].split(".")]
        pinned = [int(part) for part in re.match(r"[0-9.]+", pins[name])[0].rstrip(".").split(".")]
        assert pinned >= lower, f"{name}: requirements.txt pins {pins[name]}, below {specifier}"
