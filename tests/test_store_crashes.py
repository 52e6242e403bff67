"""The store under crashes and concurrency (slow: ``make test-slow``).

Writers are killed with SIGKILL at random moments while they write; several writers share one
store.  Afterwards every listed record loads, no partial record is ever listed, ``Store.gc`` (and
``resflow store gc``) reports and removes what the killed writers left, and nothing finished is
touched.
"""

import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

from resflow.cli import app
from resflow.store import Store

pytestmark = pytest.mark.slow

# Writes records of random sizes forever; each record's content is a function of its seed attr,
# so a reader can validate any record it finds.
LOOP_WRITER = """
import sys, numpy as np, xarray as xr
from resflow.store import Store
store = Store.open(sys.argv[1], create=True)
rng = np.random.default_rng(int(sys.argv[2]))
while True:
    seed = int(rng.integers(2**31))
    n = int(rng.integers(1, 200))
    ds = xr.Dataset({f"v{i}": (("x",), np.random.default_rng(seed + i).random(2000)) for i in range(n)},
                    attrs={"experiment": "crash", "loss": "mse", "seed": str(seed), "n": str(n)})
    store.write(ds, kind="probe", name="crash")  # a kind without a schema: these are not toy runs
"""


def valid(ds: xr.Dataset) -> bool:
    seed, n = int(ds.attrs["seed"]), int(ds.attrs["n"])
    return len(ds.data_vars) == n and all(
        np.array_equal(ds[f"v{i}"].values, np.random.default_rng(seed + i).random(2000)) for i in range(n))


def test_random_kills_and_concurrent_writers_never_list_a_partial_record(tmp_path):
    path = tmp_path / "s"
    store = Store.open(path, create=True)
    before = store.write(xr.Dataset({"a": (("x",), np.arange(3.0))}, attrs={"experiment": "x", "loss": "mse",
                                                                          "seed": "0", "n": "0"}),
                         kind="probe", name="before")
    rng = random.Random(20261203)
    kills = 0
    for round_ in range(6):  # 6 rounds x 4 concurrent writers = 24 kills
        procs = [subprocess.Popen([sys.executable, "-c", LOOP_WRITER, str(path), str(10 * round_ + w)])
                 for w in range(4)]
        time.sleep(rng.uniform(1.5, 4.0))  # interpreter start-up, then some records and a write in progress
        for proc in procs:
            time.sleep(rng.uniform(0.0, 0.3))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
        # a reader between rounds: everything listed is whole and valid
        assert all(valid(store.load(r)) for r in store.records(name="crash"))
    assert kills >= 20
    finished = store.records(name="crash")
    assert len(finished) >= 4, "the writers never finished a record; give them more time"
    report = store.check()
    assert report.ok and report.records == len(finished) + 1
    assert report.leftovers and all(left.removable and not left.writer_alive for left in report.leftovers)
    # the command line reports and removes the leftovers; finished records are untouched
    result = CliRunner().invoke(app, ["store", "gc", str(path)])
    assert result.exit_code == 0, result.output
    assert f"{len(report.leftovers)} leftovers removed" in " ".join(result.output.split())
    assert not store.leftovers()
    assert sorted(r.id for r in store.records()) == sorted([before, *(r.id for r in finished)])
    assert CliRunner().invoke(app, ["store", "check", str(path)]).exit_code == 0


def test_gc_keeps_a_live_writers_partial_record(tmp_path):
    path = tmp_path / "s"
    store = Store.open(path, create=True)
    proc = subprocess.Popen([sys.executable, "-c", LOOP_WRITER, str(path), "1"])
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not store.leftovers():
            time.sleep(0.005)
        live = [left for left in store.leftovers() if left.writer_alive]
        assert live and not any(left.removable for left in live), "never saw the writer's partial record"
        report = store.gc()
        assert not set(report.removed) & {left.path for left in live}
        for left in live:  # still being written, or finished since: never removed
            record_id = left.path.name.split("--", 1)[1][: -len(".zarr")]
            assert left.path.exists() or record_id in {r.id for r in store.records()}
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert os.path.exists(path / "resflow-store.json")
