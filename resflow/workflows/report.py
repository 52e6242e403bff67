"""The Markdown tables of a run in a store: what ``resflow report`` calls.

An experiment with a report of its own (:attr:`resflow.experiments.Experiment.report`: compositional,
group-students, roughness) prints that; every other run prints :func:`resflow.analysis.report.run_tables`
(losses by training length, fits and verdict, asymptotic estimates, accumulation along depth).
"""

from __future__ import annotations

from pathlib import Path

from ..analysis.report import run_tables
from ..errors import ConfigError
from ..experiments import registered
from ..records import load_run
from ..store import Store

__all__ = ["report_run"]


def report_run(store: Path | str, record: str | None = None, *, experiment: str | None = None,
               replicate: int | None = None) -> str:
    """Markdown tables of the run ``record`` of ``store``, or of its latest run of ``experiment`` (default: its
    latest toy run).  ``replicate`` keeps one replicate (intervals then from the evaluation batches only), to set
    one teacher of a run beside a one-replicate run of the same teacher seed."""
    opened = Store.open(store)
    runs = [r for r in opened.records(kind="toy-run") + opened.records(kind="lm-ladder")
            if (r.id == record if record else (r.kind == "toy-run" if experiment is None else r.name == experiment))]
    runs.sort(key=lambda r: r.created)
    if not runs:
        what = f"record {record!r}" if record else f"run of {experiment!r}" if experiment else "toy run"
        raise ConfigError(f"no {what} in the store {str(store)!r}; `resflow fit {store}` lists each run's record id "
                          "(give one, or --experiment with a run's name).")
    info = runs[-1]
    if info.kind == "lm-ladder":  # the language-model ladder: its own record and tables
        ds = opened.load(info)
        if replicate is not None:
            ds = ds.sel(seed=[replicate]) if replicate in ds["seed"].values else _no_replicate(ds["seed"], replicate)
        return registered()["lm-ladder"].report(ds, info.id)
    ds = load_run(opened, info)  # a record of an earlier version: upgraded to today's shape
    if replicate is not None:
        have = [int(r) for r in ds["replicate"].values]
        if replicate not in have:
            _no_replicate(ds["replicate"], replicate)
        ds = ds.sel(replicate=[replicate])
    own = registered().get(ds.attrs.get("experiment", info.name))
    return own.report(ds, info.id) if own is not None and own.report is not None else run_tables(ds, info.id)


def _no_replicate(values, replicate: int):
    raise ConfigError(f"replicate must be one of the run's replicates (seeds) {[int(v) for v in values.values]}; "
                      f"got {replicate}.")
