"""The package layout's promises: imports without side effects, small modules, mapped subpackages,
figures without pyplot, a command line that uses public names only.  (The layer order itself is
checked by import-linter, `lint-imports`, which `make test` runs first.)"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import resflow

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "resflow"
SUBPACKAGES = sorted(p.parent for p in PACKAGE.glob("*/__init__.py"))
MAX_MODULE_LINES = 400  # "no module over ~400 lines" (issue 11)
MAX_LINE = 110  # "lines at most 110 characters" (issue 37): split the idea, do not pack it
HEAVY = ("torch", "matplotlib", "matplotlib.pyplot", "sympy", "scipy", "xarray", "zarr", "transformers", "pandas")

IMPORT_PROBE = """
import json, sys
import resflow
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def test_import_resflow_loads_no_heavy_library_and_selects_no_backend():
    out = subprocess.run([sys.executable, "-c", IMPORT_PROBE.format(heavy=HEAVY)], capture_output=True, text=True,
                         timeout=120, cwd=ROOT.parent)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []  # not even matplotlib: no backend can have been chosen


def test_a_public_name_loads_only_what_it_needs():
    probe = ("import json, sys, resflow; resflow.MLPField; "
             f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert json.loads(out.stdout) == ["torch"], out.stderr


FIGURE_PROBE = """
import json, sys
import numpy as np, xarray as xr
from resflow.analysis import new_figure, save_figure
fig, axes = new_figure(2)
axes[0].plot([1, 2], [3, 4])
save_figure(fig, sys.argv[1], {"seed": "0"})
import pickle
from matplotlib.figure import Figure
print(json.dumps({"pyplot": "matplotlib.pyplot" in sys.modules, "figure": isinstance(fig, Figure),
                  "inline": fig._repr_png_()[1:4] == b"PNG", "pickles": bool(pickle.dumps(fig))}))
"""


def test_figures_are_built_and_saved_without_pyplot(tmp_path):
    png = tmp_path / "f.png"
    out = subprocess.run([sys.executable, "-c", FIGURE_PROBE, str(png)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"pyplot": False, "figure": True, "inline": True, "pickles": True}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "theory").glob("*.py"))
                         + sorted((ROOT / "sims").glob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_the_size_limit(path):
    assert len(path.read_text().splitlines()) <= MAX_MODULE_LINES


@pytest.mark.parametrize("folder", ["resflow", "theory", "sims", "benchmarks"])
def test_no_line_is_over_the_width_limit(folder):
    long = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / folder).rglob("*.py"))
            for n, line in enumerate(path.read_text().splitlines(), 1) if len(line) > MAX_LINE]
    assert not long, f"lines over {MAX_LINE} characters: {long}"


@pytest.mark.parametrize("package", SUBPACKAGES, ids=lambda p: p.name)
def test_every_subpackage_docstring_maps_its_modules(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
    assert doc, f"{package.name}/__init__.py needs a docstring that maps its modules"
    for module in package.glob("*.py"):
        if module.name != "__init__.py":
            assert f"``{module.stem}``" in doc, f"{module.name} is not in the map of {package.name}/__init__.py"


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module)
    return names


@pytest.mark.parametrize("path", sorted((PACKAGE / "cli").glob("*.py")), ids=lambda p: p.name)
def test_the_command_line_imports_public_names_only(path):
    public = {"resflow"} | {f"resflow.{p.name}" for p in SUBPACKAGES if p.name != "cli"}
    for name in _imports(path):
        if name.startswith("resflow"):
            assert name in public, f"{path.name} imports {name}; import the public name from its subpackage"


def test_public_api_names_resolve_lazily():
    for name in resflow.__all__:
        assert getattr(resflow, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        resflow.nope  # noqa: B018


def test_two_order_condition_modules_say_what_they_are():
    assert not list(ROOT.rglob("order_conditions.py"))
    assert (PACKAGE / "dynamics" / "rooted_trees.py").exists() and (ROOT / "theory" / "taylor_matching.py").exists()


def test_every_subpackage_is_packaged():
    """A subpackage missing from pyproject's package list is absent from a non-editable install."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    declared = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"resflow." + p.parent.relative_to(root / "resflow").as_posix().replace("/", ".")
             for p in (root / "resflow").rglob("__init__.py") if p.parent != root / "resflow"}
    assert found | {"resflow", "resflow.theory", "resflow.sims"} == declared


def test_every_experiment_module_is_an_entry_point_and_nothing_imports_sims_by_a_string():
    """The registry finds experiments by entry point (pyproject.toml), never by importing the layer above it
    from a string: each sims/ module that declares EXPERIMENT is declared, under its experiment's name."""
    import re
    import tomllib

    from resflow.experiments import registered

    root = Path(__file__).resolve().parents[1]
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["entry-points"]["resflow.experiments"]
    modules = {p.stem for p in (root / "sims").glob("*.py") if re.search(r"^EXPERIMENT = ", p.read_text(), re.M)}
    assert {v.split(":")[0].rsplit(".", 1)[1] for v in declared.values()} == modules
    assert set(registered()) == set(declared)
    assert all(registered()[name].name == name for name in declared)
    for path in (root / "resflow").rglob("*.py"):  # no module of the package imports an upper layer by a string
        exempt = path.name == "__init__.py"
        assert not re.search(r"import_module\((?!\"resflow\.theory)", path.read_text()) or exempt, path
