"""The ``toy-run`` record: how a training run becomes an ``xarray.Dataset``, what one must hold, how
records written by earlier versions are upgraded, and how several merge.  One home for the shape.

Dimensions, every one present in every record (size 1 when a run does not vary it), in this order
(:data:`DIMS`): ``target`` (teacher spec), ``scheme``, ``student_groups`` (0: plain students, every
layer its own weights; K: weights shared within K contiguous groups of layers), ``temperature``
(teacher softmax temperature of KL runs; NaN for MSE runs, which have no softmax), ``depth``,
``replicate`` (its own teacher, data stream and initialisation), ``length`` (training length as a
fraction of the student's budget: 1, and 0.25, 0.5 for the shorter copies of the convergence
verdict; ``train_steps`` says how many steps each student trained), then the inner ones ``step``
(evaluation steps), ``eval_batch`` (final test batches) and ``layer`` (hidden-state metrics).
Between ``replicate`` and ``length``: ``route`` (how the student started: ``scratch``, ``continuation``,
``smooth``; ``docs/design/certification.md``) and ``init`` (which draw of its route's start).  A route that
does not train some depth (continuation has no depth-1/2 parent) leaves those cells empty: NaN losses and
``train_steps`` 0 (:func:`trained_cells`).  :func:`best_start` gives the view readers of the trained
students use: per cell, the route and init whose full-length student reached the lowest loss.
Every variable has ``long_name`` and ``units``; the dataset attrs carry the provenance (config JSON,
seed, versions, commit, device).

Records of resflow 0.3 and earlier leave out ``student_groups`` (plain students only) and
``temperature`` (MSE runs), records before 0.5 ``route`` and ``init`` (one start: scratch, init 0);
:func:`upgrade_run` adds them as size-1 dimensions, and every reader goes through it (:func:`load_run`,
:func:`checked_run`), so no reader patches a missing dimension.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np
import xarray as xr

from ..errors import ConfigError, IncompatibleOptionsError
from .kinds import TOY_RUN

if TYPE_CHECKING:
    from ..store import RecordInfo, Store

__all__ = ["DIMS", "SERIES_DIMS", "START_DIMS", "SCHEMA", "build_dataset", "run_problems", "checked_run",
           "upgrade_run", "load_run", "merge_runs", "is_kl", "best_start", "trained_cells", "full_length",
           "one_structure"]

DIMS = ("target", "scheme", "student_groups", "temperature", "depth", "replicate", "route", "init", "length")
SERIES_DIMS = DIMS[:4]  # the dims that label one loss-vs-depth series
START_DIMS = ("route", "init")  # how a student started: several per (series, depth, replicate) cell
# What a record must hold to be read (older records lack student_groups and temperature: upgrade adds them).
SCHEMA = {"variables": TOY_RUN.variables, "dims": TOY_RUN.dims}
# the size-1 coordinate of a dim a run does not vary (and of a dim a record of an earlier version lacks)
UNUSED = {"student_groups": 0, "temperature": math.nan, "route": "scratch", "init": 0}
NO_TEMPERATURE = "NaN: an MSE run (no softmax, no temperature)"
COORD_ATTRS = {
    "target": {"long_name": "teacher (target function) family"},
    "scheme": {"long_name": "Runge-Kutta scheme of the student block"},
    "student_groups": {"long_name": "weight groups of the student (0: every layer its own weights; K: shared "
                                    "within K contiguous groups of layers)", "units": "1"},
    "temperature": {"long_name": "teacher softmax temperature T", "units": "1"},
    "depth": {"long_name": "student depth", "units": "layers"},
    "replicate": {"long_name": "replicate (own teacher, data stream and init)"},
    "route": {"long_name": "route of training: how the student started (scratch, continuation, smooth)"},
    "init": {"long_name": "initialisation: which independent draw of the route's start", "units": "1"},
    "length": {"long_name": "training length, fraction of the student's budget of steps", "units": "1"},
}


class StudentLabels(Protocol):
    """What a record needs of a student's spec (:class:`resflow.training.StudentSpec` is one)."""

    target: str
    scheme: str
    weight_groups: int
    temperature: float
    depth: int
    replicate: int
    route: str
    init: int
    length: float

    def steps(self, steps_done: int) -> int: ...


class RunResult(Protocol):
    """What a record needs of a finished run (:class:`resflow.training.TrainingResult` is one)."""

    specs: Sequence[StudentLabels]
    eval_steps: list[int]
    test_loss: np.ndarray
    final_batches: np.ndarray
    failed: np.ndarray
    fail_reason: list[str]
    hidden: dict[str, np.ndarray]
    wall_time: float
    device: str
    steps_done: int


def is_kl(ds: xr.Dataset) -> bool:
    """Whether a toy run trained on the KL loss (its ``temperature`` coordinate then holds real
    temperatures)."""
    return ds.attrs.get("loss") == "kl"


def build_dataset(result: RunResult, *, loss: str, targets: list[str], attrs: dict[str, str],
                  metric_labels: dict[str, tuple[str, str]] | None = None,
                  routes: Sequence[str] | None = None,
                  measured: Mapping[str, np.ndarray] | None = None) -> xr.Dataset:
    """Arrange a finished run (e.g. a :class:`resflow.training.TrainingResult`) on named dimensions.

    ``metric_labels`` maps each hidden-state metric in ``result.hidden`` to its ``(long_name, units)``
    (e.g. :data:`resflow.analysis.METRIC_LABELS`); metrics without a label are not stored.  ``routes`` is the
    order of the ``route`` coordinate (default: the order the students give).  ``measured`` holds further
    per-student metrics (the measures of trained students, :mod:`resflow.workflows.measures`), stored as the
    probes are.
    """
    metric_labels = metric_labels or {}
    metrics = {**result.hidden, **(measured or {})}
    specs = result.specs
    kl = loss == "kl"
    values = {
        "target": list(targets),
        "scheme": sorted({s.scheme for s in specs}),
        "student_groups": sorted({s.weight_groups for s in specs}),
        "temperature": sorted({s.temperature for s in specs}) if kl else [UNUSED["temperature"]],
        "depth": sorted({s.depth for s in specs}),
        "replicate": sorted({s.replicate for s in specs}),
        "route": list(routes) if routes is not None else list(dict.fromkeys(s.route for s in specs)),
        "init": sorted({s.init for s in specs}),
        "length": sorted({s.length for s in specs}),
    }
    dims = list(DIMS)
    shape = [len(values[d]) for d in dims]

    def index(spec):
        labels = (spec.target, spec.scheme, spec.weight_groups,
                  spec.temperature if kl else UNUSED["temperature"],
                  spec.depth, spec.replicate, spec.route, spec.init, spec.length)
        return tuple(0 if d == "temperature" and not kl else values[d].index(v)
                     for d, v in zip(dims, labels, strict=True))

    n_steps, n_batches = result.test_loss.shape[1], result.final_batches.shape[1]
    n_layers = max((v.shape[1] for v in metrics.values() if v.ndim == 2), default=1)
    curves = np.full(shape + [n_steps], np.nan)
    batches = np.full(shape + [n_batches], np.nan)
    failed = np.zeros(shape, dtype=np.int8)
    trained = np.zeros(shape, dtype=np.int64)
    reasons = np.full(shape, "", dtype=object)
    hidden = {name: np.full(shape + ([n_layers] if metrics[name].ndim == 2 else []), np.nan)
              for name in metric_labels if name in metrics}
    for i, spec in enumerate(specs):
        at = index(spec)
        curves[at] = result.test_loss[i]
        batches[at] = result.final_batches[i]
        failed[at] = int(result.failed[i])
        trained[at] = spec.steps(result.steps_done)
        reasons[at] = result.fail_reason[i]
        for name in hidden:
            hidden[name][at] = metrics[name][i]
    loss_name = ("mean squared error of the final normalised state" if not kl
                 else "KL(teacher || student) of the output distributions")
    loss_units = "1" if not kl else "nat"
    coords = {d: (d, values[d], COORD_ATTRS[d]) for d in dims}
    coords |= {
        "step": ("step", result.eval_steps,
                 {"long_name": "optimiser step of the evaluation", "units": "steps"}),
        "eval_batch": ("eval_batch", list(range(n_batches)), {"long_name": "final test batch"}),
        "layer": ("layer", list(range(n_layers)), {"long_name": "layer index l of the trained student"}),
    }
    ds = xr.Dataset(
        {
            "test_loss": (dims + ["step"], curves, {"long_name": f"test {loss_name}", "units": loss_units}),
            "final_loss_batch": (dims + ["eval_batch"], batches, {
                "long_name": f"final test loss per fresh batch ({loss_name})", "units": loss_units}),
            "final_loss": (dims, batches.mean(axis=-1) if n_batches else np.full(shape, np.nan), {
                "long_name": f"final test loss ({loss_name})", "units": loss_units}),
            "failed": (dims, failed, {"long_name": "1 if the student's loss or gradient became NaN/inf",
                                      "units": "1"}),
            "fail_reason": (dims, reasons.astype(str), {"long_name": "why the student failed", "units": "1"}),
            "train_steps": (dims, trained, {
                "long_name": "optimiser steps the student trained (its length x budget x the run's steps; "
                             "0: no such student)", "units": "steps"}),
        },
        coords=coords,
        attrs={**attrs, "loss": loss, "wall_time_s": f"{result.wall_time:.1f}", "device": result.device,
               "steps_done": str(result.steps_done)},
    )
    if not kl:
        ds["temperature"].attrs["comment"] = NO_TEMPERATURE
    for name, per_student in hidden.items():
        long_name, units = metric_labels[name]
        per_layer = per_student.ndim == len(dims) + 1
        ds[name] = (dims + (["layer"] if per_layer else []), per_student, {
            "long_name": f"{long_name} (trained student{', mean over inputs' if per_layer else ''})",
            "units": units})
    return ds


# ---------------------------------------------------------------------------------------------- reading


def run_problems(ds: xr.Dataset) -> list[str]:
    """What a Dataset lacks to be read as a toy run (empty when it is one, of this or an earlier version)."""
    return ([v for v in SCHEMA["variables"] if v not in ds.data_vars]
            + [f"dim {d}" for d in SCHEMA["dims"] if d not in ds.dims])


def upgrade_run(ds: xr.Dataset, *, promote: bool = True) -> xr.Dataset:
    """A toy run with every dimension of :data:`DIMS`, in that order: a record of an earlier version gets the
    ones it could leave out as size-1 dims (``student_groups`` 0, ``temperature`` NaN); a current one is
    returned as it is.  (A part of a record, e.g. one variable's Dataset, is upgraded the same way, and a dim
    reduced to a scalar coordinate by a selection becomes a dim of size 1 again -- but ``route`` and ``init``:
    a view of one start per cell, such as :func:`best_start`'s, keeps them as coordinates; ``promote=False``
    leaves every selected dim a coordinate and adds only the dims a record lacks altogether.)"""
    missing = [d for d in UNUSED if d not in ds.dims
               and not (d in ds.coords and (d in START_DIMS or ds[d].ndim > 0 or not promote))]
    if not missing:
        return ds
    out = ds
    for dim in missing:
        if dim in out.coords:  # one value selected (a scalar coordinate): promoted back to a dim of size 1
            out = out.expand_dims(dim)
        else:
            out = out.expand_dims({dim: [UNUSED[dim]]})
        out[dim].attrs = dict(COORD_ATTRS[dim])
    if "temperature" in missing:
        out["temperature"].attrs["comment"] = NO_TEMPERATURE
    order = [d for d in DIMS if d in out.dims] + [d for d in out.dims if d not in DIMS]
    out = out.transpose(*order)
    out.attrs = dict(ds.attrs)
    return out


def trained_cells(ds: xr.Dataset) -> xr.DataArray:
    """Which cells of a toy run hold a student (a route that does not train a depth leaves its cells
    empty)."""
    if "train_steps" not in ds:  # a record of before the field: every cell trained
        return xr.ones_like(ds["failed"], dtype=bool)
    return ds["train_steps"] > 0


def best_start(ds: xr.Dataset) -> xr.Dataset:
    """The run with ``route`` and ``init`` reduced to one student per cell: the start whose full-length
    student reached the lowest final loss (failed and absent students never; a cell with none keeps its first
    start).  Every length of a cell is that same student's; the coordinates ``route`` and ``init`` then say,
    per cell, which start it was (:func:`upgrade_run` leaves the view as it is).  A run of one start keeps
    them as scalar coordinates."""
    if "route" in ds.coords and "route" not in ds.dims:  # already one start per cell
        return ds
    # a record of an earlier version: the dims it lacks (selections stay)
    ds = upgrade_run(ds, promote=False)
    if ds.sizes["route"] * ds.sizes["init"] == 1:
        return ds.isel(route=0, init=0)
    if "final_loss" not in ds:
        raise ConfigError("best_start needs 'final_loss' to pick the best of several routes and inits; "
                          "pass the whole toy-run record.")
    longest = ds["length"].max()
    full = ds["final_loss"].sel(length=longest).where(trained_cells(ds).sel(length=longest))
    best = full.stack(start=START_DIMS).fillna(np.inf).argmin("start").reset_coords(drop=True)
    n_init = ds.sizes["init"]
    return ds.isel(route=best // n_init, init=best % n_init)


def checked_run(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` upgraded (:func:`upgrade_run`), or a clear error when it is not a toy run at all."""
    missing = run_problems(ds)
    if missing:
        record = ds.attrs.get("store_record", "the dataset")
        raise ConfigError(f"{record} is not a toy run this resflow can read: it lacks {', '.join(missing)}. "
                          "Use the records `resflow run` writes (schema: docs/design/store.md).")
    return upgrade_run(ds)


def load_run(store: Store, record: str | RecordInfo) -> xr.Dataset:
    """One toy-run record of ``store``, upgraded to the current shape."""
    return checked_run(store.load(record))


def merge_runs(store: Store, records: Sequence[str | RecordInfo]) -> xr.Dataset:
    """Several toy-run records of one experiment and loss (e.g. the cells of a sweep, or runs of other seeds)
    as one Dataset; records that hold the same cell are refused (one would be dropped silently)."""
    datasets = [load_run(store, r) for r in records]
    if not datasets:
        raise ConfigError("nothing to merge: pass at least one record.")
    experiments = {d.attrs.get("experiment") for d in datasets}
    losses = {d.attrs.get("loss") for d in datasets}
    if len(experiments) != 1 or len(losses) != 1:
        raise IncompatibleOptionsError(
            "only records of one experiment and loss can be merged; got experiments "
            f"{sorted(map(str, experiments))} and losses {sorted(map(str, losses))}.")
    names = [d.attrs.get("store_record", "?") for d in datasets]
    for i in range(len(datasets)):
        for j in range(i + 1, len(datasets)):
            x, y = xr.align(datasets[i]["final_loss_batch"], datasets[j]["final_loss_batch"], join="inner")
            if x.size and bool((x.notnull() & y.notnull()).any()):
                raise IncompatibleOptionsError(
                    f"records {names[i]} and {names[j]} both hold losses for the same cells (same target, "
                    "depth, replicate, ...); merge records of different cells, e.g. a sweep's cells or runs "
                    "of other seeds.")
    merged = xr.combine_by_coords(datasets, combine_attrs="drop_conflicts", data_vars="all", join="outer",
                                  compat="no_conflicts")
    merged.attrs["merged_records"] = json.dumps(names)
    config = _merged_config([d.attrs.get("config") for d in datasets], merged)
    if config is not None:
        merged.attrs["config"] = config
    return merged


_REPLICATE_KEYS = ("first_replicate", "replicates")


def _merged_config(configs: list, merged: xr.Dataset) -> str | None:
    """The configuration of runs that differ only in their replicates (a sweep's cells of one grid point,
    runs of other seeds): the first's, with ``first_replicate`` and ``replicates`` those of the merged run --
    so the fits still read the teacher's depth and the finite-teacher factor.  None when the runs differ in
    anything else (their configuration is then not one run's, and the merged run has none, as before)."""
    try:
        parsed = [json.loads(c) for c in configs]
    except (TypeError, ValueError):
        return None
    if not parsed or not all(isinstance(c, dict) for c in parsed):
        return None
    rest = [{k: v for k, v in c.items() if k not in _REPLICATE_KEYS} for c in parsed]
    if any(r != rest[0] for r in rest[1:]):
        return None
    replicates = [int(r) for r in merged["replicate"].values]
    return json.dumps(parsed[0] | {"first_replicate": min(replicates), "replicates": len(replicates)},
                      sort_keys=True)


def full_length(ds: xr.Dataset) -> xr.Dataset:
    """The students trained for the whole run (``length`` = its largest value)."""
    return ds.sel(length=ds["length"].max())


def one_structure(ds: xr.Dataset, groups: int = 0) -> xr.Dataset:
    """The students of one structure of a ``toy-run`` Dataset (``student_groups`` = ``groups``; 0: plain), the
    dim dropped (and, for an MSE run, its unused ``temperature``).  For analyses defined for one structure
    (the roughness law, the temperature figure, the compositional report); every route and init kept
    (:func:`resflow.records.best_start` reduces them)."""
    ds = upgrade_run(ds)
    have = [int(g) for g in ds["student_groups"].values]
    if groups not in have:
        raise ConfigError(f"the run has no students of student_groups={groups}; it has {have}.")
    one = ds.sel(student_groups=groups)
    # an MSE run: the unused temperature dim dropped too
    return one if is_kl(one) else one.isel(temperature=0)
