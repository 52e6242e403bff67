r"""The three readings of depth side by side by their signatures, not their exponents.

A row per stack: a toy run's deepest full-length students of one target (replicate mean), or a
probed model (``probe`` record: transformers, teachers).  Columns, each ``NaN`` where it does not
apply:

* ``update_angle`` -- the mean angle between successive updates over the middle layers (procedural:
  small; ensemble of independent layers: about 90 degrees);
* ``early_stop`` -- the probes' early-stop fraction (2-means clustering of update-size profiles);
* ``exit_early`` and ``exit_depth`` -- early exit (:mod:`resflow.probing.early_exit`): the fraction of
  inputs whose readout is final in the first half of the layers, and the mean exit layer over depth;
* ``angle_within`` and ``angle_boundary`` -- for a teacher of K functional groups (``grouped:K``), the
  update angles inside a group and across a boundary (:mod:`resflow.probing.groups`), stored in the
  record per student;
* ``drop_depth`` -- for students of Random Hierarchy Model data, the depth at which the loss drops
  (:mod:`resflow.fitting.hierarchy`), replicate mean (``inf`` if a replicate's never does).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from .._specs import is_class_target
from ..labels import teacher_label
from ..probing.groups import GROUP_LABELS, student_group_angles
from ..probing.probes import middle_layers
from ..records import best_start

__all__ = ["SignatureRow", "GROUP_LABELS", "student_group_angles", "toy_signature_rows",
           "probe_signature_rows"]

@dataclass(frozen=True, kw_only=True)
class SignatureRow:
    source: str  # "toy" or "probe"
    name: str
    record: str
    depth: int
    update_angle: float
    early_stop: float
    exit_early: float = math.nan
    exit_depth: float = math.nan
    angle_within: float = math.nan
    angle_boundary: float = math.nan
    drop_depth: float = math.nan

    def to_json(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                for k, v in dataclasses.asdict(self).items()}


def _middle(values: np.ndarray, depth: int) -> float:
    """Mean over the middle layers (:func:`resflow.probing.probes.middle_layers`) of per-layer values (NaN
    ignored)."""
    values = np.asarray(values, float)[: max(depth - 1, 1)]
    part = values[middle_layers(len(values))]
    return float(np.nanmean(part)) if np.isfinite(part).any() else math.nan


def toy_signature_rows(ds: xr.Dataset, record: str, experiment: str) -> list[SignatureRow]:
    """One row per target of a ``toy-run`` record: its plain students (or, in a run of structured students
    only, those) at the deepest depth and full length."""
    from ..fitting.hierarchy import hierarchy_table

    ds = best_start(ds)  # one student per cell: the best route and init
    depth = int(ds["depth"].max())
    groups = [int(g) for g in ds["student_groups"].values]
    structure = 0 if 0 in groups else groups[0]  # plain students, or a run of structured ones only
    one = ds.sel(depth=depth, length=ds["length"].max(),
                 student_groups=structure).isel(scheme=0, temperature=0)
    label = "" if structure == 0 else f", students of {structure} weight groups"
    drops = {}
    if all(is_class_target(str(t)) for t in ds["target"].values):
        table = hierarchy_table(ds)
        drops = {str(t): float(table["drop_depth"].sel(target=t).mean()) for t in table["target"].values}

    def mean(name: str) -> float:
        if name not in student:
            return math.nan
        values = student[name].values
        return float(np.nanmean(values)) if np.isfinite(values).any() else math.nan

    rows = []
    for target in ds["target"].values:
        student = one.sel(target=target)
        angle = (_middle(student["update_angle"].mean("replicate").values, depth) if "update_angle" in student
                 else math.nan)
        rows.append(SignatureRow(
            source="toy", name=f"{experiment}: {teacher_label(target)}{label}", record=record, depth=depth,
            update_angle=angle,
            early_stop=mean("early_stop_fraction"), exit_early=mean("exit_early_fraction"),
            exit_depth=mean("exit_depth"), angle_within=mean("angle_within"),
            angle_boundary=mean("angle_boundary"), drop_depth=drops.get(str(target), math.nan)))
    return rows


def probe_signature_rows(ds: xr.Dataset, record: str) -> list[SignatureRow]:
    """One row per model of a ``probe`` record."""
    rows = []
    for model in ds["model"].values:
        one = ds.sel(model=model)
        depth = int(one["n_layers"])
        rows.append(SignatureRow(source="probe", name=str(model), record=record, depth=depth,
                                 update_angle=_middle(one["update_angle_mean"].values, depth),
                                 early_stop=float(one["early_stop_fraction"])))
    return rows
