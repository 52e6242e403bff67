r"""Signatures by functional group: a model's update angles inside a group of layers and across a boundary.

A teacher of K functional groups (``grouped:K``) changes its map at K - 1 boundaries.  A model of
depth :math:`\ell` that integrates it over unit time puts its layer :math:`l` at time :math:`l/\ell`, so
layer :math:`l` belongs to group :math:`\lfloor lK/\ell\rfloor` (:func:`resflow.noise.group_of` when
:math:`\ell \ge K`; every layer is its own group below).  The angle between successive updates
:math:`\theta(\Delta h_l, \Delta h_{l+1})` (``update_angle``, index :math:`l = 0..\ell-2`) is then a
pair *within* a group when layers :math:`l` and :math:`l+1` share a group, and a pair *at a boundary*
otherwise.  The functional-group picture predicts small angles within (a smooth flow) and a turn at
each boundary.  Reference: Liu, Kangaslahti, Liu & Gore, arXiv:2602.05970 (2026), on causal tracing.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .._specs import is_class_target
from .._validate import check_int
from ..errors import ConfigError
from ..fitting.intervals import exponent_interval
from ..noise import group_of, parse_correlation
from ..records import best_start, one_structure

__all__ = ["GROUP_LABELS", "student_group_angles", "boundary_pairs", "split_update_angles", "group_signature",
           "states_group_signature", "one_structure", "exponent_difference"]

GROUP_LABELS = {
    "angle_within": ("mean update angle between successive layers inside one of the teacher's K groups",
                     "rad"),
    "angle_boundary": ("mean update angle between successive layers across a boundary of the "
                       "teacher's K groups", "rad"),
}


def boundary_pairs(depth: int, groups: int) -> np.ndarray:
    """For each pair of successive layers ``(l, l + 1)``, ``l = 0..depth - 2``: True when the pair straddles
    a boundary of ``groups`` contiguous groups of unit time (:func:`resflow.noise.group_of`; with more groups
    than layers, every layer is its own group)."""
    depth = check_int("depth", depth, minimum=1)
    groups = check_int("groups", groups, minimum=1)
    group = group_of(depth, min(groups, depth)).numpy()
    return group[1:] != group[:-1]


def split_update_angles(angles, depth: int, groups: int) -> tuple[float, float]:
    """Mean of the successive-update angles ``angles[..., l]`` (``l = 0..depth - 2`` on the last axis; longer
    arrays are cut, NaN ignored) over the pairs within a group and over the pairs at a boundary (NaN where
    there are none)."""
    angles = np.asarray(angles, float)[..., : max(depth - 1, 0)]
    boundary = boundary_pairs(depth, groups)[: angles.shape[-1]]

    def mean(mask):
        values = angles[..., mask]
        return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")

    return mean(~boundary), mean(boundary)


def group_signature(ds: xr.Dataset, groups: int) -> xr.Dataset:
    """The trained students' mean update angle within the ``groups`` functional groups of their teacher and
    at the boundaries, for every student of a ``toy-run`` Dataset (every training length and replicate).

    Returns a Dataset with ``angle_within`` and ``angle_boundary`` (rad) on the run's dims but ``layer``.
    """
    groups = check_int("groups", groups, minimum=1)
    if "update_angle" not in ds:
        raise KeyError("the dataset has no 'update_angle': pass a toy-run record written by `resflow run`.")
    angles = ds["update_angle"]

    def split(values, depth):
        return np.array(split_update_angles(values, int(depth), groups))

    pairs = xr.apply_ufunc(split, angles, angles["depth"], input_core_dims=[["layer"], []],
                           output_core_dims=[["part"]], vectorize=True)
    units = {"units": "rad"}
    return xr.Dataset({
        "angle_within": pairs.isel(part=0).assign_attrs(
            long_name=f"mean update angle between successive layers of one of {groups} groups", **units),
        "angle_boundary": pairs.isel(part=1).assign_attrs(
            long_name=f"mean update angle across a boundary of {groups} groups", **units),
    }, attrs={"groups": groups, "store_record": ds.attrs.get("store_record", "")})


def states_group_signature(states, groups: int, *, seed: int = 0) -> dict[str, float]:
    """Mean update angle between successive layers of a stack's hidden ``states`` ``(depth + 1, n, d)`` (e.g.
    a teacher's, :meth:`resflow.training.Teacher.hidden_states`), within each of ``groups`` contiguous groups
    and across their boundaries, and its early-stop fraction: the probes' metrics (``resflow probe``)."""
    from .probes import probe_states

    depth = int(states.shape[0]) - 1
    probe = probe_states([states], "states", kind="teacher", seed=seed)
    within, boundary = split_update_angles(probe.mean["update_angle"], depth, groups)
    return {"within": within, "boundary": boundary, "early_stop": float(probe.early_stop_fraction)}


def exponent_difference(ds, target: str, groups: int, depths=None):
    """Δα = α(students of ``groups`` weight groups) − α(plain students) on ``target``, paired: the
    exponent of the ratio of their final losses on the same evaluation batches (same teacher, data and
    batches), with the interval of :func:`resflow.analysis.exponent_interval` (t over replicates; with one
    replicate, a bootstrap over the evaluation batches, labelled so).  ``depths`` restricts the fit.  The
    value is the exponent of the replicate-mean ratio, close to (not exactly) the difference of the two
    series' α.  One student per cell: the best route and init of each structure."""
    ds = best_start(ds)
    if ds.sizes["temperature"] != 1:
        raise ConfigError("exponent_difference compares one series per structure: select a temperature "
                          "first, ds.sel(temperature=[T]).")
    ds = ds.isel(temperature=0)
    if ds.sizes.get("scheme", 1) != 1:
        raise ConfigError("exponent_difference compares one series per structure: select a scheme first, "
                          "ds.sel(scheme='euler').")
    batches = ds["final_loss_batch"].sel(length=ds["length"].max(), target=target).isel(scheme=0)
    if depths is not None:
        batches = batches.sel(depth=list(depths))
    ratio = (batches.sel(student_groups=groups) / batches.sel(student_groups=0)).transpose(
        "depth", "replicate", "eval_batch")
    return exponent_interval([int(d) for d in ratio["depth"].values], ratio.values)


def _groups(target: str) -> int | None:
    """K of a ``grouped:K`` target; None for every other target (no functional groups to split by)."""
    if is_class_target(target):
        return None
    return getattr(parse_correlation(target), "groups", None)


def student_group_angles(specs, update_angle: np.ndarray) -> dict[str, np.ndarray]:
    """Per student (``specs`` order): its update angles (``(n, layers)``, as the record's ``update_angle``)
    within and across its teacher's groups, for students of ``grouped:K`` teachers (NaN for the others)."""
    out = {name: np.full(len(specs), np.nan) for name in GROUP_LABELS}
    for i, spec in enumerate(specs):
        groups = _groups(spec.target)
        if groups is not None and spec.depth >= 2:
            within, boundary = split_update_angles(update_angle[i], spec.depth, groups)
            out["angle_within"][i], out["angle_boundary"][i] = within, boundary
    return out
