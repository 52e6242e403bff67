"""The command line: help, version, listings, the demo, and clean errors."""

import json
import shutil
import subprocess
import sys

import pytest
import xarray as xr
from typer.testing import CliRunner

import resflow
from resflow.cli import app

runner = CliRunner()


def test_help_and_version():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "demo" in result.output and "tableaux" in result.output
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and resflow.__version__ in result.output


def test_console_script_is_installed():
    exe = shutil.which("resflow") or str(__import__("pathlib").Path(sys.executable).parent / "resflow")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and resflow.__version__ in out.stdout


def test_tableaux_json_lists_the_registry():
    result = runner.invoke(app, ["tableaux", "--json"])
    rows = json.loads(result.output)
    assert [r["name"] for r in rows] == list(resflow.TABLEAUX)
    assert all(r["order"] == resflow.TABLEAUX[r["name"]].order for r in rows)


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    first = runner.invoke(app, ["demo", "overview", "--out", str(out), "--seed", "1"])
    second = runner.invoke(app, ["demo", "overview", "--out", str(out), "--seed", "1"])
    return out, first, second


def test_demo_writes_dataset_figure_and_provenance(demo_runs):
    out, first, _ = demo_runs
    assert first.exit_code == 0, first.output
    run_dir = sorted((out / "work").iterdir())[0]
    assert run_dir.name.startswith("demo-overview-")
    assert {p.name for p in run_dir.iterdir()} == {"demo.nc", "demo.png", "provenance.json"}
    ds = xr.open_dataset(run_dir / "demo.nc", engine="scipy")
    for key in ("config", "seed", "resflow_version", "torch_version", "git_commit", "created"):
        assert key in ds.attrs
    assert ds.attrs["seed"] == "1"
    for name, var in ds.data_vars.items():
        assert "long_name" in var.attrs and "units" in var.attrs, name
    # the printed table reports an empirical order for every scheme
    assert all(scheme in first.output for scheme in resflow.TABLEAUX)
    assert (run_dir / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_never_overwrites_an_earlier_run(demo_runs):
    out, _, second = demo_runs
    assert second.exit_code == 0
    assert len(list((out / "work").iterdir())) == 2


def test_bad_input_exits_nonzero_without_traceback(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = runner.invoke(app, ["demo", "overview", "--out", str(blocker)])
    assert result.exit_code == 2
    assert str(blocker) in " ".join(result.output.split()).replace(" ", "") or "store" in result.output
    assert "Traceback" not in result.output and blocker.read_text() == "x"
    unnamed = runner.invoke(app, ["demo"])
    assert unnamed.exit_code == 2 and "no demo named" in unnamed.output and "overview" in unnamed.output
    assert runner.invoke(app, ["nonsense"]).exit_code != 0
