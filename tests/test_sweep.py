"""Sweeps on dask.distributed (issue 16): plans, records, resume after a killed client, a killed
worker, failed cells.  Every distributed test uses a real LocalCluster with worker processes and
compares the store's values with a serial run of the same plan (same threads per task, so the
comparison is bitwise)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from resflow import ConfigError, ResflowError
from resflow.analysis import fit_dataset
from resflow.cli import app
from resflow.records import merge_runs
from resflow.store import Store
from resflow.workflows import SweepPlan, load_manifest, parse_grid, run_sweep

TINY = ("train.eval_every=20", "train.eval_batches=2", "train.eval_batch_size=128", "train.batch=32", "width=8",
        "teacher_depth=8", "vocab=16", "depths=2,4", "train.device=cpu", "train.checkpoint_every=20")
GRID = ("train.lr_base=0.01,0.02",)


def plan(steps: int = 60, grid=GRID, replicates: int = 2) -> SweepPlan:
    return SweepPlan("smooth-vs-rough", "cpu", (*TINY, f"train.steps={steps}"), parse_grid(grid), replicates)


def values(store_path: Path, sweep_id: str) -> dict[str, dict[str, np.ndarray]]:
    """Cell key -> the record's data variables (what a resumed or distributed sweep must reproduce)."""
    store = Store.open(store_path)
    manifest = load_manifest(store, sweep_id)
    out = {}
    for cell, record in manifest["done"].items():
        ds = store.load(record)
        out[cell] = {name: ds[name].values for name in ds.data_vars}
    return out


def assert_same_values(got, expected):
    assert sorted(got) == sorted(expected)
    for cell in expected:
        for name, array in expected[cell].items():
            np.testing.assert_array_equal(got[cell][name], array, err_msg=f"{cell}: {name}")


@pytest.fixture(scope="module")
def serial_long(tmp_path_factory):
    """The reference: the 300-step plan run serially in this process, one thread per task."""
    out = tmp_path_factory.mktemp("serial") / "store"
    result = run_sweep(plan(300), out=out, workers=0, threads=1)
    assert result.complete
    return values(out, result.sweep_id)


# ---------------------------------------------------------------- plans
def test_a_plan_has_one_cell_per_grid_point_and_replicate():
    p = plan(grid=("train.lr_base=0.01,0.02", "targets=tied,independent"), replicates=3)
    cells = p.cells()
    assert len(cells) == 2 * 2 * 3 and len({c.key for c in cells}) == 12
    base = p.base_config()
    cell = next(c for c in cells if c.replicate == 2 and dict(c.point)["targets"] == "tied")
    config = cell.config(base)
    assert config.replicates == 1 and config.targets == ("tied",)
    assert list(config.replicate_ids) == [2]  # replicate 2's teachers, data and initialisations
    assert [s.replicate for s in config.student_specs()] == [2] * len(config.student_specs())
    assert list(config.teachers()) == [("tied", 2)]
    assert p.sweep_id == plan(grid=("train.lr_base=0.01,0.02", "targets=tied,independent"), replicates=3).sweep_id
    assert p.sweep_id != plan(replicates=3).sweep_id


@pytest.mark.parametrize(("grid", "words"), [
    (["train.lr=0.1,0.2"], "unknown key 'train.lr'"),
    (["train.steps=ten"], "train.steps"),
    (["replicates=1,2"], "replicates"),
    (["train.lr_base"], "KEY=V1,V2"),
    (["train.lr_base=0.1,0.1"], "repeats"),
    (["train.lr_base=0.1", "train.lr_base=0.2"], "twice"),
])
def test_a_bad_grid_is_refused_before_anything_runs(grid, words):
    with pytest.raises(ConfigError, match=words):
        parse_grid(grid)


# ---------------------------------------------------------------- serial
def test_each_cell_is_one_record_and_a_points_cells_merge_into_a_fittable_run(tmp_path):
    result = run_sweep(plan(), out=tmp_path / "s", workers=0, threads=1)
    assert result.complete and result.ran == 4
    store = Store.open(tmp_path / "s")
    assert len(store.records(kind="toy-run")) == 4
    manifest = load_manifest(store, result.sweep_id)
    assert manifest["cells"] == list(result.cells) and manifest["done"] == result.records and not manifest["failed"]
    point = [r for c, r in result.records.items() if c.startswith("train.lr_base=0.01 ")]
    merged = merge_runs(store, point)
    assert list(merged["replicate"].values) == [0, 1]
    assert all(np.isfinite(f.exponent) for f in fit_dataset(merged))
    attrs = store.attrs(point[0])
    assert attrs["sweep"] == result.sweep_id and json.loads(attrs["sweep_point"]) == {"train.lr_base": "0.01"}
    assert store.check().ok
    # an existing sweep is never silently rerun or overwritten; resuming a complete one runs nothing
    with pytest.raises(ConfigError, match="--resume"):
        run_sweep(plan(), out=tmp_path / "s", workers=0)
    again = run_sweep(plan(), out=tmp_path / "s", workers=0, resume=True)
    assert again.complete and again.ran == 0 and len(store.records(kind="toy-run")) == 4
    with pytest.raises(ResflowError, match="no store"):
        run_sweep(plan(), out=tmp_path / "other", workers=0, resume=True)


def test_a_grid_points_cells_are_the_replicates_of_the_batched_run(tmp_path):
    """A cell is replicate r of the batched run (its teachers, data and student initialisations)."""
    import torch

    from resflow.workflows.run import train_dataset

    p = plan(grid=("train.lr_base=0.01",))
    result = run_sweep(p, out=tmp_path / "s", workers=0, threads=1)
    merged = merge_runs(Store.open(tmp_path / "s"), list(result.records.values()))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _, batched, _ = train_dataset(p.base_config().with_overrides(["train.lr_base=0.01"]), run_dir=None)
    finally:
        torch.set_num_threads(threads)
    assert list(merged["replicate"].values) == list(batched["replicate"].values) == [0, 1]
    for name in ("final_loss", "test_loss", "update_angle"):
        np.testing.assert_allclose(merged[name].values, batched[name].values, rtol=1e-5, err_msg=name)


# ---------------------------------------------------------------- distributed, with faults
def _dask_workers() -> list[int]:
    import psutil

    me = psutil.Process()
    return [p.pid for p in me.children(recursive=True)
            if "spawn_main" in " ".join(p.cmdline())]


@pytest.mark.slow  # about 100 s of the suite's time: a real dask worker killed mid-task (`make test-slow`)
def test_a_worker_killed_mid_task_is_retried_and_the_store_equals_the_serial_run(tmp_path, serial_long):
    out = tmp_path / "store"
    p = plan(300)
    done: dict = {}
    thread = threading.Thread(target=lambda: done.update(result=run_sweep(p, out=out, workers=2, threads=1)))
    thread.start()
    work = out / "work" / f"sweep-{p.sweep_id}"
    deadline = time.monotonic() + 60
    killed, records_at_kill = None, None
    while killed is None and time.monotonic() < deadline:  # kill a worker once a cell has a checkpoint
        if work.is_dir() and any(work.glob("*/**/checkpoint.pt")) and (pids := _dask_workers()):
            os.kill(pids[0], signal.SIGKILL)
            killed, records_at_kill = pids[0], len(list((out / "runs").glob("toy-run--*.zarr")))
        time.sleep(0.05)
    thread.join(timeout=120)
    assert killed is not None and records_at_kill < 4, "no worker was caught mid-sweep"
    result = done["result"]
    assert result.complete, result.failed
    assert_same_values(values(out, result.sweep_id), serial_long)
    assert len(Store.open(out).records(kind="toy-run")) == len(result.cells)  # no cell written twice


@pytest.mark.slow  # about 70 s: the sweep's client killed and rerun (`make test-slow`)
def test_a_killed_client_resumes_to_the_serial_runs_values(tmp_path, serial_long):
    out = tmp_path / "store"
    args = ["sweep", "smooth-vs-rough", "--preset", "cpu", "--grid", GRID[0], "--replicates", "2", "--out", str(out),
            "--workers", "2", "--threads", "1", *[x for s in (*TINY, "train.steps=300") for x in ("--set", s)]]
    client = subprocess.Popen([sys.executable, "-m", "resflow.cli", *args], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not list((out / "runs").glob("toy-run--*.zarr")):
        time.sleep(0.05)
    client.send_signal(signal.SIGKILL)  # the client only: its workers notice their parent is gone
    client.wait()
    records_at_kill = len(list((out / "runs").glob("toy-run--*.zarr")))
    assert 1 <= records_at_kill < 4, "kill the client mid-sweep"
    resumed = CliRunner().invoke(app, [*args, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    sweep_id = plan(300).sweep_id
    assert_same_values(values(out, sweep_id), serial_long)
    assert len(Store.open(out).records(kind="toy-run")) == 4
    if _group_alive(client.pid):  # nothing of the killed client may linger
        os.killpg(client.pid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_failing_cell_is_reported_and_the_others_are_written(tmp_path):
    out = tmp_path / "store"
    args = ["sweep", "smooth-vs-rough", "--grid", "train.lr_base=0.01,1e12", "--replicates", "1", "--out", str(out),
            "--workers", "2", *[x for s in (*TINY, "train.steps=60") for x in ("--set", s)]]
    result = CliRunner().invoke(app, args)
    assert result.exit_code != 0
    assert "train.lr_base=1e12 replicate=0" in result.output and "diverged" in result.output
    assert "Traceback" not in result.output
    store = Store.open(out)
    [record] = store.records(kind="toy-run")
    assert store.attrs(record)["sweep_cell"] == "train.lr_base=0.01 replicate=0"
    sweep_id = store.attrs(record)["sweep"]
    manifest = load_manifest(store, sweep_id)
    assert list(manifest["failed"]) == ["train.lr_base=1e12 replicate=0"] and len(manifest["done"]) == 1


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"plan": "smooth-vs-rough"}, "plan must be a SweepPlan"),
    ({"workers": -1}, "workers"),
    ({"threads": 0}, "threads"),
    ({"resources": {"GPU": 0}}, "resources"),
    ({"scheduler": "localhost:8786"}, "scheduler"),
])
def test_bad_sweep_arguments_are_named_and_nothing_is_written(tmp_path, kwargs, words):
    args = {"plan": plan(), "out": tmp_path / "s", "workers": 0, **kwargs}
    with pytest.raises(ConfigError, match=words):
        run_sweep(args.pop("plan"), **args)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(("extra", "words"), [
    (["--resources", "GPU"], "NAME=N"),
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "exclude each other"),
    (["--grid", "train.stepz=1,2"], "unknown key"),
    (["--resume"], "no store"),
])
def test_bad_sweep_options_exit_non_zero_with_a_message(tmp_path, extra, words):
    result = CliRunner().invoke(app, ["sweep", "smooth-vs-rough", "--out", str(tmp_path / "s"), *extra])
    assert result.exit_code != 0 and words in result.output and "Traceback" not in result.output
    assert not (tmp_path / "s").exists()
