"""A library function under every command: the command and the function give the same result.

Each test runs a command through the CLI and the public function it calls, on the same inputs,
and compares what they return; plus fit records (written once, read back, never refitted) and
Ctrl-C handling.
"""

import json
import math

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from typer.testing import CliRunner

import resflow
from resflow import laws
from resflow.analysis import FitSettings, fits_from_dataset, fits_to_dataset
from resflow.cli import app
from resflow.store import Store

runner = CliRunner()
TINY = ["train.steps=60", "train.eval_every=20", "train.eval_batches=2", "train.eval_batch_size=128",
        "train.batch=32", "width=8", "teacher_depth=8", "vocab=16", "depths=2,4", "replicates=2", "train.device=cpu"]


def invoke(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def tiny_config():
    return resflow.preset("smooth-vs-rough", "cpu").with_overrides(TINY)


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory):
    """A store written by `resflow run` on the tiny configuration."""
    out = tmp_path_factory.mktemp("cli-store")
    invoke("run", "smooth-vs-rough", "--out", out, *[x for s in TINY for x in ("--set", s)])
    return out


def test_run_command_equals_run_experiment(cli_store, tmp_path):
    store = Store.open(cli_store)
    (run,) = store.records(kind="toy-run")
    from_cli = store.load(run)
    result = resflow.run_experiment(tiny_config(), out=tmp_path)
    assert result.finished and result.record and result.fit_record and result.figure.exists()
    np.testing.assert_array_equal(from_cli["final_loss"].values, result.dataset["final_loss"].values)
    (fit_record,) = store.records(kind="fit")
    assert [f.to_json() for f in fits_from_dataset(store.load(fit_record))] == [f.to_json() for f in result.fits]


def test_fit_command_equals_fit_store_and_reuses_fit_records(cli_store):
    rows = json.loads(invoke("fit", cli_store, "--json").stdout)
    runs = resflow.fit_store(cli_store)
    assert all(r.reused for r in runs)  # `resflow run` wrote the fit record; nothing was refitted
    assert rows == [{"run": r.run, "fit_record": r.fit_record, **row.to_json()} for r in runs
                    for row in (*r.fits, *r.separations)]
    assert len(Store.open(cli_store).records(kind="fit")) == 1
    other = resflow.fit_store(cli_store, FitSettings(gain_tolerance=0.5))
    assert not any(r.reused for r in other) and len(Store.open(cli_store).records(kind="fit")) == 2


def test_fit_skips_and_names_a_foreign_run_record_and_fits_the_rest(cli_store, tmp_path):
    import shutil

    store_dir = tmp_path / "store"
    shutil.copytree(cli_store, store_dir)
    foreign = Store.open(store_dir).write(xr.Dataset({"x": (("i",), np.arange(3.0))},
                                                     attrs={"experiment": "smooth-vs-rough"}),
                                          kind="toy-run", name="foreign")
    result = runner.invoke(app, ["fit", str(store_dir), "--json"])
    assert result.exit_code == 0, result.output
    assert f"skipped {foreign}" in " ".join(result.stderr.split())
    rows = json.loads(result.stdout)
    assert rows and {r["run"] for r in rows} == {Store.open(cli_store).records(kind="toy-run")[0].id}
    runs = resflow.fit_store(store_dir)
    assert [r.skipped is not None for r in runs] == [False, True] and runs[1].run == foreign and not runs[1].fits
    only_foreign = tmp_path / "foreign-only"
    Store.open(only_foreign, create=True).write(xr.Dataset({"x": (("i",), np.arange(3.0))}), kind="toy-run",
                                                name="foreign")
    refused = runner.invoke(app, ["fit", str(only_foreign)])
    assert refused.exit_code == 2 and "could be fitted" in " ".join(refused.output.split())


def test_fit_records_round_trip_exactly(cli_store):
    store = Store.open(cli_store)
    run = store.load(store.records(kind="toy-run")[0])
    fits = resflow.fit_dataset(run)
    settings = FitSettings()
    record = fits_to_dataset(fits, source_record="x", settings=settings)
    store.write(record, kind="fit", name="roundtrip")
    back = fits_from_dataset(store.load(store.records(kind="fit", name="roundtrip")[0]))
    assert [f.to_json() for f in back] == [f.to_json() for f in fits]  # NaN (no bootstrap at 2 replicates) as None
    assert json.loads(record.attrs["fit_settings"])["gain_tolerance"] == settings.gain_tolerance


def test_compare_reads_fit_records_and_never_refits(tmp_path):
    out = tmp_path / "store"
    run = resflow.run_experiment(tiny_config(), out=out)
    store = Store.open(out)
    marked = store.load(run.fit_record)
    marked["exponent"] = marked["exponent"] * 0 + 42.0  # a newer fit record with a value no fit would give
    store.write(marked, kind="fit", name="marked")
    rows = json.loads(invoke("compare", out, "--json").stdout)
    result = resflow.compare_stores([out])
    assert rows == [r.to_json() for r in result.rows]
    assert {r["source"] for r in rows} == {"theory", "toy"} and not result.unfitted
    assert [r["exponent"] for r in rows if r["source"] == "toy"] == [42.0, 42.0]
    theory = {r["name"]: r["exponent"] for r in rows if r["source"] == "theory"}
    assert theory["procedural, euler block (order 1, q = 2, incoherent)"] == 3.0


def test_theory_command_equals_laws_describe():
    rows = json.loads(invoke("theory", "--json").stdout)
    assert rows == [laws.describe(name).to_json() for name in laws.names()]


def test_tableaux_command_equals_the_registry():
    rows = json.loads(invoke("tableaux", "--json").stdout)
    assert [(r["name"], r["order"], r["stages"]) for r in rows] == [
        (t.name, t.order, t.stages) for t in resflow.TABLEAUX.values()]


def test_probe_command_equals_probe_models(tmp_path):
    cli = json.loads(invoke("probe", "teacher:tied", "teacher:independent", "--max-tokens", 256, "--out",
                            tmp_path / "a", "--json").stdout)
    run = resflow.probe_models(["teacher:tied", "teacher:independent"], max_tokens=256, out=tmp_path / "b")
    assert cli == [r.to_json() for r in run.results]
    assert Store.open(tmp_path / "b").records(kind="probe")[0].id == run.record and run.figure.exists()


def test_llm_fit_command_equals_fit_llm_table(tmp_path):
    rng = np.random.default_rng(0)
    m, ell, D = rng.choice([256, 512, 1024], 60), rng.choice([4, 8, 16, 32], 60), 10 ** rng.uniform(8, 10, 60)
    loss = 50 * m**-0.5 + 3 * ell**-1.0 + 400 * D**-0.3 + 1.7
    csv = tmp_path / "grid.csv"
    pd.DataFrame({"model_size": 12 * m**2 * ell, "FLOP": 6 * 12 * m**2 * ell * D, "loss": loss, "num_tokens": D,
                  "d_model": m, "n_layers": ell}).to_csv(csv, index=False)
    cli = json.loads(invoke("llm-fit", "--data", csv, "--starts", 32, "--out", tmp_path / "a", "--json").stdout)
    result = resflow.fit_llm_table(csv, settings=resflow.llm.ScalingFitSettings(n_starts=32),
                                   out=tmp_path / "b")
    assert math.isclose(cli["alpha_l"], result.fit.params["alpha_l"]) and abs(cli["alpha_l"] - 1.0) < 0.05


def test_demo_command_equals_run_flow_demo(tmp_path):
    invoke("demo", "overview", "--out", tmp_path / "a", "--seed", 3)
    result = resflow.run_flow_demo(tmp_path / "b", resflow.workflows.FlowDemoConfig(seed=3))
    (cli_dir,) = (tmp_path / "a" / "work").iterdir()
    with xr.open_dataset(cli_dir / "demo.nc", engine="scipy") as cli:
        np.testing.assert_array_equal(cli["empirical_order"].values, result.dataset["empirical_order"].values)


@pytest.mark.parametrize(("command", "function", "message"), [
    (["fit", "STORE"], "fit_store", "fit records already written are kept"),
    (["compare", "STORE"], "compare_stores", "nothing was written"),
    (["probe", "teacher:tied", "--out", "STORE"], "probe_models", "nothing was written"),
])
def test_ctrl_c_says_what_survived_and_exits_130(command, function, message, monkeypatch, cli_store):
    import resflow.workflows

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(resflow.workflows, function, interrupted)
    result = runner.invoke(app, [str(cli_store) if a == "STORE" else a for a in command])
    assert result.exit_code == 130 and message in result.output and "Traceback" not in result.output


def test_one_resume_check_for_run_and_sweep(tmp_path):
    """A run directory is resumable with a checkpoint of the run or of a depth-doubling stage; run and sweep
    both ask has_checkpoint (a sweep cell of a doubling run once restarted its stages from scratch), which the
    run directory's module alone defines."""
    from pathlib import Path

    from resflow.workflows.run import has_checkpoint

    assert not has_checkpoint(tmp_path)
    (tmp_path / "depth-4").mkdir()
    (tmp_path / "depth-4" / "checkpoint.pt").write_bytes(b"x")
    assert has_checkpoint(tmp_path)
    workflows = Path(resflow.__file__).parent / "workflows"
    asking = [p.name for p in workflows.glob("*.py") if "CHECKPOINT_NAME" in p.read_text()]
    assert asking == ["rundir.py"], asking
