"""Labelled results: the one place a training run becomes an ``xarray.Dataset``.

Dimensions: ``target`` (teacher spec), ``scheme``, ``student_groups`` (runs with group-structured
students only: 0 for plain students, K for weights shared within K groups of layers),
``temperature`` (KL runs only), ``depth``,
``replicate`` (its own teacher, data stream and initialisation), ``length`` (training length as a
fraction of the student's budget: 1, and 0.25, 0.5 for the shorter copies of the convergence
verdict; ``train_steps`` says how many steps each student trained), plus
``step`` (evaluation steps), ``eval_batch`` (final test batches) and ``layer`` (hidden-state
metrics).  Every variable has ``long_name`` and ``units``; the dataset attrs carry the provenance
(config JSON, seed, versions, commit, device).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from .block import StudentSpec

__all__ = ["TrainingResult", "build_dataset"]


@dataclass
class TrainingResult:
    """Everything a run produced, students in the order of ``specs``."""

    specs: list[StudentSpec]
    eval_steps: list[int]
    test_loss: np.ndarray  # (n_students, n_evals)
    final_batches: np.ndarray  # (n_students, eval_batches)
    failed: np.ndarray  # (n_students,) bool
    fail_reason: list[str]
    # state metric -> (n_students, max_depth + 1), mean over inputs, NaN-padded; or (n_students,) for a
    # metric with one value per student (the early-stop fraction)
    hidden: dict[str, np.ndarray]
    wall_time: float
    device: str
    steps_done: int
    extra: dict[str, Any] = field(default_factory=dict)


def _coords(values):
    return sorted(set(values), key=lambda v: (isinstance(v, str), v))


def build_dataset(result: TrainingResult, *, loss: str, targets: list[str], attrs: dict[str, str],
                  metric_labels: dict[str, tuple[str, str]] | None = None) -> xr.Dataset:
    """Arrange a :class:`TrainingResult` on named dimensions.

    ``metric_labels`` maps each hidden-state metric in ``result.hidden`` to its ``(long_name, units)``
    (e.g. :data:`resflow.analysis.METRIC_LABELS`); metrics without a label are not stored.
    """
    metric_labels = metric_labels or {}
    specs = result.specs
    kl = loss == "kl"
    schemes = sorted({s.scheme for s in specs})
    depths = sorted({s.depth for s in specs})
    replicates = sorted({s.replicate for s in specs})
    lengths = sorted({s.length for s in specs})
    temps = sorted({s.temperature for s in specs}) if kl else []
    groups = sorted({s.groups for s in specs})
    grouped = groups != [0]
    dims = (["target", "scheme"] + (["student_groups"] if grouped else []) + (["temperature"] if kl else [])
            + ["depth", "replicate", "length"])
    shape = ([len(targets), len(schemes)] + ([len(groups)] if grouped else []) + ([len(temps)] if kl else [])
             + [len(depths), len(replicates), len(lengths)])

    def index(spec):
        idx = [targets.index(spec.target), schemes.index(spec.scheme)]
        if grouped:
            idx.append(groups.index(spec.groups))
        if kl:
            idx.append(temps.index(spec.temperature))
        return tuple(idx + [depths.index(spec.depth), replicates.index(spec.replicate), lengths.index(spec.length)])

    n_steps, n_batches = result.test_loss.shape[1], result.final_batches.shape[1]
    n_layers = max((v.shape[1] for v in result.hidden.values() if v.ndim == 2), default=1)
    curves = np.full(shape + [n_steps], np.nan)
    batches = np.full(shape + [n_batches], np.nan)
    failed = np.zeros(shape, dtype=np.int8)
    trained = np.zeros(shape, dtype=np.int64)
    reasons = np.full(shape, "", dtype=object)
    hidden = {name: np.full(shape + ([n_layers] if result.hidden[name].ndim == 2 else []), np.nan)
              for name in metric_labels if name in result.hidden}
    for i, spec in enumerate(specs):
        at = index(spec)
        curves[at] = result.test_loss[i]
        batches[at] = result.final_batches[i]
        failed[at] = int(result.failed[i])
        trained[at] = spec.steps(result.steps_done)
        reasons[at] = result.fail_reason[i]
        for name in hidden:
            hidden[name][at] = result.hidden[name][i]
    loss_name = ("mean squared error of the final normalised state" if not kl
                 else "KL(teacher || student) of the output distributions")
    loss_units = "1" if not kl else "nat"
    coords = {
        "target": ("target", targets, {"long_name": "teacher (target function) family"}),
        "scheme": ("scheme", schemes, {"long_name": "Runge-Kutta scheme of the student block"}),
        "depth": ("depth", depths, {"long_name": "student depth", "units": "layers"}),
        "replicate": ("replicate", replicates, {"long_name": "replicate (own teacher, data stream and init)"}),
        "length": ("length", lengths, {"long_name": "training length, fraction of the student's budget of steps",
                                       "units": "1"}),
        "step": ("step", result.eval_steps, {"long_name": "optimiser step of the evaluation", "units": "steps"}),
        "eval_batch": ("eval_batch", list(range(n_batches)), {"long_name": "final test batch"}),
        "layer": ("layer", list(range(n_layers)), {"long_name": "layer index l of the trained student"}),
    }
    if grouped:
        coords["student_groups"] = ("student_groups", groups, {
            "long_name": "weight groups of the student (0: every layer its own weights; K: shared within K "
                         "contiguous groups of layers)", "units": "1"})
    if kl:
        coords["temperature"] = ("temperature", temps, {"long_name": "teacher softmax temperature T", "units": "1"})
    ds = xr.Dataset(
        {
            "test_loss": (dims + ["step"], curves, {"long_name": f"test {loss_name}", "units": loss_units}),
            "final_loss_batch": (dims + ["eval_batch"], batches, {
                "long_name": f"final test loss per fresh batch ({loss_name})", "units": loss_units}),
            "final_loss": (dims, np.nanmean(batches, axis=-1) if n_batches else np.full(shape, np.nan), {
                "long_name": f"final test loss ({loss_name})", "units": loss_units}),
            "failed": (dims, failed, {"long_name": "1 if the student's loss or gradient became NaN/inf",
                                      "units": "1"}),
            "fail_reason": (dims, reasons.astype(str), {"long_name": "why the student failed", "units": "1"}),
            "train_steps": (dims, trained, {"long_name": "optimiser steps the student trained (its length x budget x "
                                                         "the run's steps)", "units": "steps"}),
        },
        coords=coords,
        attrs={**attrs, "loss": loss, "wall_time_s": f"{result.wall_time:.1f}", "device": result.device,
               "steps_done": str(result.steps_done)},
    )
    for name, values in hidden.items():
        long_name, units = metric_labels[name]
        per_layer = values.ndim == len(dims) + 1
        ds[name] = (dims + (["layer"] if per_layer else []), values, {
            "long_name": f"{long_name} (trained student{', mean over inputs' if per_layer else ''})", "units": units})
    return ds
