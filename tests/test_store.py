"""The result store: round trip, atomic writes under a kill, concurrent writers, corrupt stores (merging: tests/test_records.py)."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import xarray as xr

from resflow.errors import ConfigError
from resflow.store import Store, StoreError

STORE_ATTRS = ("store_kind", "store_name", "store_record", "store_schema_version", "store_kind_schema")


def sample(seed=0, experiment="smooth-vs-rough", n_seeds=2, seed_offset=0):
    rng = np.random.default_rng(seed)
    return xr.Dataset(
        {
            "final_loss": (("target", "depth", "seed"), rng.random((2, 3, n_seeds)),
                           {"long_name": "final test loss", "units": "1"}),
            "failed": (("target", "depth", "seed"), np.zeros((2, 3, n_seeds), bool),
                       {"long_name": "failed", "units": "1"}),
            "fail_reason": (("target", "depth", "seed"), np.full((2, 3, n_seeds), ""),
                            {"long_name": "why", "units": "1"}),
        },
        coords={"target": ["independent", "tied"], "depth": [2, 4, 8],
                "seed": list(range(seed_offset, seed_offset + n_seeds))},
        attrs={"config": json.dumps({"x": 1}), "experiment": experiment, "loss": "mse", "seed": str(seed)},
    )


def without_store_attrs(ds):
    ds = ds.copy()
    for key in STORE_ATTRS:
        ds.attrs.pop(key, None)
    return ds


def test_round_trip_is_identical(tmp_path):
    store = Store.open(tmp_path / "s", create=True)
    ds = sample()
    record = store.write(ds, kind="toy-run", name="smooth-vs-rough")
    xr.testing.assert_identical(without_store_attrs(store.load(record)), ds)
    # any record opens with plain xarray too
    assert xr.open_zarr(store.records()[0].path)["final_loss"].shape == (2, 3, 2)


def test_appending_never_overwrites(tmp_path):
    store = Store.open(tmp_path / "s", create=True)
    ids = {store.write(sample(k), kind="toy-run", name="same-name") for k in range(3)}
    assert len(ids) == 3 and len(store.records(name="same-name")) == 3
    for k, info in enumerate(store.records()):
        assert store.load(info).attrs["seed"] == str(k)


WRITER = """
import sys, numpy as np, xarray as xr
from resflow.store import Store
store = Store.open(sys.argv[1], create=True)
big = xr.Dataset({f"v{i}": (("x",), np.random.default_rng(i).random(20000)) for i in range(400)},
                 attrs={"experiment": "big", "loss": "mse"})
store.write(big, kind="toy-run", name="big")
"""


def test_a_write_killed_midway_leaves_the_store_readable(tmp_path):
    path = tmp_path / "s"
    store = Store.open(path, create=True)
    old = store.write(sample(1), kind="toy-run", name="old")
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
    deadline = time.time() + 120
    try:
        while time.time() < deadline and not list((path / "runs").glob(".tmp-*/v1*")):
            time.sleep(0.01)
        assert proc.poll() is None, "the writer finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    reopened = Store.open(path)
    assert [r.id for r in reopened.records()] == [old]
    xr.testing.assert_identical(without_store_attrs(reopened.load(old)), sample(1))


CONCURRENT = """
import sys
sys.path.insert(0, sys.argv[3])
from test_store import sample
from resflow.store import Store
store = Store.open(sys.argv[1], create=True)
for k in range(4):
    store.write(sample(100 * int(sys.argv[2]) + k, seed_offset=2 * k), kind="toy-run", name="sweep")
"""


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "s"
    here = os.path.dirname(__file__)
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT, str(path), str(w), here]) for w in range(4)]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    store = Store.open(path)
    records = store.records(kind="toy-run")
    assert len(records) == 16
    seeds = sorted(store.load(r).attrs["seed"] for r in records)
    assert seeds == sorted(str(100 * w + k) for w in range(4) for k in range(4))


def test_netcdf_export_never_overwrites(tmp_path):
    store = Store.open(tmp_path / "s", create=True)
    record = store.write(sample(), kind="toy-run", name="x")
    out = store.export_netcdf(record, tmp_path / "x.nc")
    assert xr.open_dataset(out, engine="scipy")["final_loss"].shape == (2, 3, 2)
    with pytest.raises(ConfigError, match="exists"):
        store.export_netcdf(record, out)


def test_corrupt_and_foreign_stores_give_clear_errors(tmp_path):
    with pytest.raises(StoreError, match="no store at"):
        Store.open(tmp_path / "missing")
    store_path = tmp_path / "s"
    Store.open(store_path, create=True)
    marker = store_path / "resflow-store.json"
    marker.write_text(json.dumps({"schema": "resflow-store", "version": 99}))
    with pytest.raises(StoreError, match="schema version 99 is not supported"):
        Store.open(store_path)
    marker.write_text("{not json")
    with pytest.raises(StoreError, match="corrupt"):
        Store.open(store_path)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "data.csv").write_text("a,b\n")
    with pytest.raises(StoreError, match="not a resflow store"):
        Store.open(foreign, create=True)


def test_corrupt_record_names_itself(tmp_path):
    store = Store.open(tmp_path / "s", create=True)
    record = store.write(sample(), kind="toy-run", name="x")
    (store.records()[0].path / ".zmetadata").write_text("{broken")
    with pytest.raises(StoreError, match=f"record {record} is corrupt"):
        store.load(record)


def test_gc_removes_dead_writers_leftovers_and_keeps_live_ones(tmp_path):
    """Deterministic: a partial record of this (live) process, of a finished child, of another host."""
    from resflow.store.store import _host

    store = Store.open(tmp_path / "s", create=True)
    kept = store.write(sample(), kind="probe", name="kept")  # a kind without a schema: sample() is no toy run
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its PID is free
    runs = tmp_path / "s" / "runs"
    live = runs / f".tmp-{os.getpid()}@{_host()}--toy-run--x--1--a.zarr"
    dead = runs / f".tmp-{child.pid}@{_host()}--toy-run--x--2--b.zarr"
    elsewhere = runs / ".tmp-1@another.host.1--toy-run--x--3--c.zarr"
    for path in (live, dead, elsewhere):
        path.mkdir()
    report = store.check()
    assert {left.path: left.removable for left in report.leftovers} == {live: False, dead: True, elsewhere: False}
    assert report.ok and report.records == 1
    assert store.gc(dry_run=True).removed == [dead] and dead.exists()
    assert store.gc().removed == [dead] and not dead.exists() and live.exists() and elsewhere.exists()
    old = time.time() - 2 * 24 * 3600
    os.utime(elsewhere, (old, old))
    assert store.gc().removed == [elsewhere]
    assert [r.id for r in store.records()] == [kept] and live.exists()


def test_a_failed_write_leaves_nothing_and_names_are_safe(tmp_path):
    store = Store.open(tmp_path / "s", create=True)
    bad = sample()
    bad.attrs["unwritable"] = object()  # zarr cannot encode it
    with pytest.raises(Exception):  # noqa: B017 (whatever zarr raises)
        store.write(bad, kind="toy-run", name="x")
    assert not list((tmp_path / "s" / "runs").iterdir())
    record = store.write(sample(), kind="toy-run", name="a -- b-")
    assert [r.id for r in store.records(name="a -- b-")] == [record]


def test_opening_to_read_creates_nothing(tmp_path):
    Store.open(tmp_path / "s", create=True)
    for sub in ("runs", "work"):
        (tmp_path / "s" / sub).rmdir()
    reopened = Store.open(tmp_path / "s")
    assert reopened.records() == [] and sorted(p.name for p in (tmp_path / "s").iterdir()) == ["resflow-store.json"]
