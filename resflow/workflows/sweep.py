"""Sweeps beyond one process: a grid of configurations, one task per cell, on dask.distributed.

:func:`run_sweep` is what ``resflow sweep`` calls.  A **cell** is one grid point x one replicate
(all its students batched in one task); each cell is written by the worker that trained it as one
``toy-run`` record; ``STORE/sweeps/<sweep-id>.json`` is the sweep's manifest (its plan, and which
cells are done or failed).  ``resume=True`` runs only the cells without a record.  Design and
guarantees: ``docs/design/sweeps.md``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._atomic import atomic_write
from .._validate import check_int
from ..errors import ConfigError, ResflowError
from ..experiments.config import ExperimentConfig, parse_assignment
from ..experiments.registry import get_experiment
from ..experiments.registry import preset as load_preset
from ..records.kinds import TOY_RUN
from ..store import Store

__all__ = ["SweepPlan", "SweepCell", "SweepResult", "SweepCellError", "run_sweep", "run_cell", "parse_grid",
           "load_manifest", "done_cells", "MANIFEST_DIR"]

MANIFEST_DIR = "sweeps"
MANIFEST_SCHEMA = "resflow-sweep"
#: keys a grid cannot vary: the replicate axis is the sweep's own
NOT_GRIDDABLE = ("replicates",)


class SweepCellError(ResflowError):
    """A cell that trained but produced nothing usable (every student diverged)."""


@dataclass(frozen=True)
class SweepCell:
    """One grid point x one replicate; ``key`` names it in records, the manifest and messages."""

    point: tuple[tuple[str, str], ...]
    replicate: int

    @property
    def key(self) -> str:
        return " ".join([f"{k}={v}" for k, v in self.point] + [f"replicate={self.replicate}"])

    def config(self, base: ExperimentConfig) -> ExperimentConfig:
        """The base config at this point, reduced to replicate ``r``: its teachers, data and student
        initialisations are those of replicate ``r`` of the batched run."""
        config = base.with_overrides([f"{k}={v}" for k, v in self.point])
        return dataclasses.replace(config, replicates=1,
                                   first_replicate=config.first_replicate + self.replicate)

    @property
    def digest(self) -> str:
        """A short hash of :attr:`key`: dask task keys and work-directory names."""
        return hashlib.sha256(self.key.encode()).hexdigest()[:12]


def parse_grid(items: Sequence[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``["train.lr=0.01,0.02", "targets=tied,independent"]`` -> ``(("train.lr", ("0.01", "0.02")), ...)``.

    Every value is checked against the key's declared type now, so a typo fails before any training.
    """
    grid: dict[str, tuple[str, ...]] = {}
    for item in items:
        key, sep, raw = str(item).partition("=")
        key = key.strip()
        values = tuple(v.strip() for v in raw.split(",") if v.strip())
        if not sep or not values:
            raise ConfigError(f"--grid expects KEY=V1,V2,...; got {item!r}.")
        if key in NOT_GRIDDABLE:
            raise ConfigError(f"--grid {key}: replicates are the sweep's own axis; "
                              "set them with --replicates.")
        if key in grid:
            raise ConfigError(f"--grid {key} is given twice; give all its values once: {key}=V1,V2.")
        if len(set(values)) != len(values):
            raise ConfigError(f"--grid {key} repeats a value: {', '.join(values)}.")
        for value in values:
            parse_assignment(f"{key}={value}")  # raises ConfigError naming the key and the valid ones
        grid[key] = values
    return tuple(grid.items())


@dataclass(frozen=True)
class SweepPlan:
    """Everything that defines a sweep; its :attr:`sweep_id` is a hash of it."""

    experiment: str
    preset: str
    overrides: tuple[str, ...] = ()
    grid: tuple[tuple[str, tuple[str, ...]], ...] = ()
    replicates: int | None = None  # None: the preset's

    def __post_init__(self) -> None:
        if self.replicates is not None:
            object.__setattr__(self, "replicates", check_int("replicates", self.replicates, minimum=1))
        if not self.grid:  # an axis preset sweeps its own grid (Experiment.grids)
            object.__setattr__(self, "grid", parse_grid(get_experiment(self.experiment).grid(self.preset)))

    def base_config(self) -> ExperimentConfig:
        config = load_preset(self.experiment, self.preset)
        if not isinstance(config, ExperimentConfig):
            raise ConfigError("sweeps run the teacher-student experiments; "
                              f"{self.experiment!r} trains its models one by one "
                              "(`resflow run` with --set workers=N trains N at once).")
        config = config.with_overrides(list(self.overrides))
        return config if self.replicates is None else dataclasses.replace(config, replicates=self.replicates)

    @property
    def sweep_id(self) -> str:
        text = json.dumps([self.experiment, self.preset, list(self.overrides), self.grid, self.replicates])
        return f"{self.experiment}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"

    def cells(self) -> list[SweepCell]:
        base = self.base_config()
        keys = [k for k, _ in self.grid]
        points = itertools.product(*(values for _, values in self.grid))
        cells = [SweepCell(tuple(zip(keys, point, strict=True)), r)
                 for point in points for r in range(base.replicates)]
        for cell in cells:
            cell.config(base)  # every cell's config is valid before anything runs
        return cells

    def to_dict(self) -> dict:
        return {"experiment": self.experiment, "preset": self.preset, "overrides": list(self.overrides),
                "grid": {k: list(v) for k, v in self.grid}, "replicates": self.replicates}


@dataclass(frozen=True, kw_only=True)
class SweepResult:
    """What :func:`run_sweep` did: every cell's record, and the cells that failed with their errors."""

    plan: SweepPlan
    sweep_id: str
    manifest: Path
    cells: tuple[str, ...]
    records: dict[str, str] = field(default_factory=dict)  # cell key -> record id
    failed: dict[str, str] = field(default_factory=dict)  # cell key -> error
    ran: int = 0  # cells computed by this call (the rest were done before)

    @property
    def complete(self) -> bool:
        return not self.failed and len(self.records) == len(self.cells)


# ---------------------------------------------------------------- the task, run on a worker
def run_cell(store_path: str, sweep_id: str, cell: SweepCell, base: ExperimentConfig,
             threads: int | None = None) -> str:
    """Train one cell and write it as a ``toy-run`` record; return the record id.

    Idempotent: under a per-cell lock, a cell that already has a record returns it.  Training
    checkpoints in ``STORE/work/sweep-<id>/<cell>/``, so a task restarted after its worker was
    killed continues from there.
    """
    import numpy as np
    import torch
    from filelock import FileLock

    from ..records import trained_cells
    from .run import has_checkpoint, train_dataset

    store = Store.open(store_path)
    readable = "".join(c if c.isalnum() or c in "._=-" else "_" for c in cell.key)[:80]
    work = store.path / "work" / f"sweep-{sweep_id}" / f"{readable}-{cell.digest}"
    work.mkdir(parents=True, exist_ok=True)
    threads_before = torch.get_num_threads()
    try:
        if threads:
            torch.set_num_threads(threads)
        with FileLock(str(work / "cell.lock")):
            if existing := done_cells(store, sweep_id).get(cell.key):
                return existing
            config = cell.config(base)
            _, ds, _ = train_dataset(config, run_dir=work, resume=has_checkpoint(work))
            # cells a route leaves empty (continuation at the shallowest depth) hold no student: they neither
            # fail nor count
            if not bool((ds["failed"] == 0).where(trained_cells(ds), False).any()):
                reasons = sorted({str(r) for r in np.ravel(ds["fail_reason"].values) if str(r)})
                raise SweepCellError(f"every student diverged ({'; '.join(reasons) or 'non-finite loss'}).")
            ds.attrs.update(sweep=sweep_id, sweep_cell=cell.key, sweep_point=json.dumps(dict(cell.point)))
            return store.write(ds, kind=TOY_RUN, name=base.experiment)
    finally:
        torch.set_num_threads(threads_before)  # a serial sweep leaves the caller's setting as it was


# ---------------------------------------------------------------- the manifest and the truth
def _manifest_path(store: Store, sweep_id: str) -> Path:
    return store.path / MANIFEST_DIR / f"{sweep_id}.json"


def load_manifest(store: str | Path | Store, sweep_id: str) -> dict:
    """The manifest of ``sweep_id`` in ``store`` (plan, cells, done and failed cells)."""
    store = store if isinstance(store, Store) else Store.open(store)
    path = _manifest_path(store, sweep_id)
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"no sweep {sweep_id!r} in {store.path}; run it without --resume first.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"the sweep manifest {path} is corrupt ({exc}); its cells are safe as records: "
                          "move the file away and rerun the same command without --resume "
                          "(cells with a record are not run again).") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != MANIFEST_SCHEMA:
        raise ConfigError(f"{path} is not a resflow sweep manifest.")
    return manifest


def _write_manifest(store: Store, sweep_id: str, manifest: dict) -> Path:
    path = _manifest_path(store, sweep_id)
    path.parent.mkdir(exist_ok=True)
    return atomic_write(path, json.dumps(manifest, indent=1))  # a reader sees the old manifest or the new one


def done_cells(store: Store, sweep_id: str) -> dict[str, str]:
    """Cell key -> record id for every cell of ``sweep_id`` with a record (the oldest, if a cell has two)."""
    done: dict[str, str] = {}
    for info in store.records(kind=TOY_RUN):
        attrs = store.attrs(info)
        if attrs.get("sweep") == sweep_id:
            done.setdefault(attrs["sweep_cell"], info.id)
    return done


# ---------------------------------------------------------------- running
def run_sweep(plan: SweepPlan, *, out: str | Path, workers: int = 1, scheduler: str | None = None,
              threads: int | None = None, resources: dict[str, float] | None = None, resume: bool = False,
              progress: Callable[[int, int, str, bool], None] | None = None) -> SweepResult:
    """Run every cell of ``plan`` that has no record yet and write them into the store ``out``.

    Parameters
    ----------
    plan : SweepPlan
    out : path
        The store (created if missing, unless resuming).
    workers : int
        Worker processes of a local dask cluster; 0 runs the cells one after another in this process.
    scheduler : str, optional
        Address of a running dask scheduler (``tcp://HOST:PORT``) instead of a local cluster; the
        store must be on a filesystem its workers see.
    threads : int, optional
        Torch threads per task; default: the cores divided among the local workers (all of them
        serially), the workers' own setting on a scheduler.  Results are bit-identical across runs
        with the same threads per task (a matmul's sums depend on how it is split over threads).
    resources : dict, optional
        Dask worker resources each cell needs, e.g. ``{"GPU": 1}`` so that workers started with
        ``--resources GPU=1`` run one cell at a time on their GPU.
    resume : bool
        Finish the sweep of this plan in ``out``: only cells without a record run.
    progress : callable, optional
        ``progress(cells done, cells in all, cell key, ok)`` after each cell.

    Notes
    -----
    A failed cell does not stop the others; it is reported in ``SweepResult.failed``.
    """
    if not isinstance(plan, SweepPlan):
        raise ConfigError("plan must be a SweepPlan, "
                          "e.g. SweepPlan('smooth-vs-rough', 'cpu', grid=parse_grid([...])); "
                          f"got {type(plan).__name__}.")
    workers = check_int("workers", workers, minimum=0)
    if resources is not None and (not isinstance(resources, dict) or not all(
            isinstance(k, str) and isinstance(v, int | float) and v > 0 for k, v in resources.items())):
        raise ConfigError(f"resources must map names to positive amounts, e.g. {{'GPU': 1}}; "
                          f"got {resources!r}.")
    if resources and workers == 0 and scheduler is None:
        raise ConfigError("resources need dask workers: give workers >= 1 or a scheduler.")
    if threads is not None:
        threads = check_int("threads", threads, minimum=1)
    elif scheduler is None:
        threads = max(1, (os.cpu_count() or 1) // max(workers, 1))
    if scheduler is not None and (not isinstance(scheduler, str) or "://" not in scheduler):
        raise ConfigError(f"scheduler must be an address such as tcp://HOST:8786; got {scheduler!r}.")
    cells = plan.cells()
    base = plan.base_config()
    sweep_id = plan.sweep_id
    if resume:
        store = Store.open(out)
        saved = load_manifest(store, sweep_id)
        if saved.get("config") != json.loads(base.to_json()):
            raise ConfigError(f"sweep {sweep_id} in {store.path} was started with a different configuration "
                              "(the preset changed since, e.g. with a resflow upgrade); "
                              "finish it with the resflow that started it, or run it into another --out.")
    else:
        store = Store.open(out, create=True)
        if _manifest_path(store, sweep_id).exists():
            raise ConfigError(f"sweep {sweep_id} already exists in {store.path}; "
                              "pass --resume to finish it, or choose another --out.")
    records = {k: v for k, v in done_cells(store, sweep_id).items() if k in {c.key for c in cells}}
    todo = [c for c in cells if c.key not in records]
    failed: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        # connect first: a scheduler that cannot be reached leaves no manifest behind
        client = (stack.enter_context(_dask_client(workers=max(workers, 1), scheduler=scheduler,
                                                   resources=resources))
                  if todo and (workers > 0 or scheduler is not None) else None)
        manifest = {"schema": MANIFEST_SCHEMA, "version": 1, "sweep": sweep_id, "plan": plan.to_dict(),
                    "config": json.loads(base.to_json()), "cells": [c.key for c in cells],
                    "done": dict(records), "failed": {}}
        path = _write_manifest(store, sweep_id, manifest)

        def finished(cell: SweepCell, record: str | None, error: BaseException | None) -> None:
            if error is None:
                records[cell.key] = record
                manifest["done"][cell.key] = record
                manifest["failed"].pop(cell.key, None)
            else:
                failed[cell.key] = f"{type(error).__name__}: {error}"
                manifest["failed"][cell.key] = failed[cell.key]
            _write_manifest(store, sweep_id, manifest)
            if progress:
                progress(len(records) + len(failed), len(cells), cell.key, error is None)

        if client is None:
            for cell in todo:
                try:
                    record = run_cell(str(store.path), sweep_id, cell, base, threads)
                except Exception as exc:  # noqa: BLE001 - a cell's failure is reported, the others go on
                    finished(cell, None, exc)
                else:
                    finished(cell, record, None)
        else:
            _submit_all(client, todo, store, sweep_id, base, threads=threads, resources=resources,
                        finished=finished)
    return SweepResult(plan=plan, sweep_id=sweep_id, manifest=path, cells=tuple(c.key for c in cells),
                       records=records, failed=failed, ran=len(todo))


@contextlib.contextmanager
def _dask_client(*, workers: int, scheduler: str | None, resources: dict[str, float] | None):
    """A client of a new local cluster (``workers`` processes) or of the scheduler at ``scheduler``."""
    import logging

    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ConfigError("dask.distributed is not installed: pip install 'resflow[distributed]', "
                          "or run the cells in this process with workers=0 (--workers 0).") from None
    if scheduler is None:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, resources=resources,
                               silence_logs=logging.CRITICAL)  # failed cells: reported once
        try:
            with Client(cluster) as client:
                yield client
        finally:
            cluster.close()
        return
    try:
        client = Client(scheduler, timeout=30)
    except (OSError, TimeoutError) as exc:
        raise ConfigError(f"cannot reach the dask scheduler at {scheduler} ({exc}); "
                          "check the address and that the scheduler runs.") from None
    with client:
        yield client


def _submit_all(client, cells: list[SweepCell], store: Store, sweep_id: str, base: ExperimentConfig, *,
                threads: int | None, resources: dict[str, float] | None, finished: Callable) -> None:
    from distributed import as_completed

    # task keys name the cell (not its place in this call's list): two clients of one scheduler agree on them
    futures = {client.submit(run_cell, str(store.path), sweep_id, cell, base, threads, pure=False,
                             resources=resources, key=f"resflow-cell-{sweep_id}-{cell.digest}"): cell
               for cell in cells}
    for future in as_completed(futures):
        cell = futures[future]
        if future.status == "finished":
            try:
                record = future.result()
            except Exception as exc:  # noqa: BLE001 - e.g. the result lost with its worker
                finished(cell, None, exc)
                continue
            if store.attrs(record).get("sweep_cell") != cell.key:
                finished(cell, None, SweepCellError(f"the task returned record {record} of another cell"))
            else:
                finished(cell, record, None)
        else:  # "error", or "cancelled" (a lost scheduler, a restart): never counted as done
            error = future.exception() if future.status == "error" else None
            finished(cell, None, error or SweepCellError(f"the task was {future.status}"))
