"""Time the engine and keep the figures: what ``resflow bench`` calls.

The rows (and any precision checks) become one ``bench`` record of the store ``out``, with the
machine, the versions and the commit in its attrs, like every other record.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr

from ..errors import ConfigError
from ..provenance import provenance
from ..records.kinds import BENCH
from ..store import Store
from ..training.bench import CASES, BenchRow, PrecisionCheck, bench_meta, precision_check, run_bench

__all__ = ["CHECKS", "BenchResult", "bench_dataset", "bench_engine"]

#: what ``--check NAME`` compares against float32 eager: the TrainConfig settings switched on
CHECKS = {"tf32": {"tf32": True}, "cuda-graphs": {"cuda_graphs": True}}
NUMERIC = ("ms_per_step", "gflops", "gflops_per_s", "fraction_of_sgemm", "speedup_vs_loop", "peak_mem_mb",
           "sgemm_gflops_per_s", "students", "rounds", "steps_per_round", "threads", "slowdown_vs_quiet")


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    """The rows, the precision checks and the ``bench`` record that holds them."""

    rows: tuple[BenchRow, ...]
    checks: tuple[PrecisionCheck, ...]
    record: str

    def to_json(self) -> dict:
        return {"record": self.record, "meta": bench_meta(), "rows": [r.to_json() for r in self.rows],
                "checks": [c.to_json() for c in self.checks]}


def bench_dataset(rows: Sequence[BenchRow], checks: Sequence[PrecisionCheck] = ()) -> xr.Dataset:
    """A ``bench`` record: one entry per (case, engine) on dim ``row``; the checks as JSON in the attrs."""
    def value(row, name):
        v = getattr(row, name)
        return np.nan if v is None else float(v)

    return xr.Dataset(
        {name: (("row",), [value(r, name) for r in rows]) for name in NUMERIC},
        coords={"case": (("row",), [r.case for r in rows]), "engine": (("row",), [r.engine for r in rows]),
                "device": (("row",), [r.device for r in rows])},
        attrs={"checks": json.dumps([c.to_json() for c in checks]),
               **{k: str(v) for k, v in bench_meta().items()}},
    )


def bench_engine(device: str = "auto", *, cases: Sequence[str] = tuple(CASES), rounds: int = 3,
                 checks: Sequence[str] = (), check_steps: int = 300, out: Path | str = "results",
                 progress: Callable[[str, int, int], None] | None = None) -> BenchResult:
    """Run the bench (and the precision checks ``checks``, names of :data:`CHECKS`), write a ``bench`` record.

    Nothing is written until everything has run."""
    unknown = [name for name in checks if name not in CHECKS]
    if unknown:  # before the bench runs, not after
        raise ConfigError(f"--check must be one of {', '.join(CHECKS)}; got {', '.join(map(repr, unknown))}.")
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise ConfigError(f"unknown bench case(s) {unknown}; choose from {', '.join(CASES)}.")
    store = Store.open(out, create=True)  # a bad --out fails before the work
    rows = run_bench(device, cases=tuple(cases), rounds=rounds, progress=progress)
    done = tuple(precision_check(device, steps=check_steps, other=CHECKS[name]) for name in checks)
    ds = bench_dataset(rows, done)
    ds.attrs.update(provenance({"device": device, "cases": list(cases), "rounds": rounds,
                                "checks": list(checks), "check_steps": check_steps}, seed=0))
    return BenchResult(rows=tuple(rows), checks=done, record=store.write(ds, kind=BENCH, name="engine"))
