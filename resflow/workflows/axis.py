"""One swept key of a sweep as tables: the exponents, and the losses, at each of its values.

``resflow report STORE --axis KEY`` calls :func:`axis_report`.  The cells of a sweep (``resflow sweep``, one
``toy-run`` record per grid point and replicate) are grouped by the value of ``KEY``; each value's replicates
are merged (:func:`resflow.records.merge_runs`) and fitted as one run.  Two tables: per value and teacher, α
and law α with their intervals, as verdict v4 stands them (a bound unless the exponent is certified), and the
separation of the two teachers; per teacher and depth, the replicate-mean best loss at each value and the
slope :math:`-\\Delta\\log\\mathcal L/\\Delta\\log v` between neighbouring values ``v`` (for the width: how
much of the loss the width buys, beside how much the depth does).  Axes with a prediction of their own
(:data:`READINGS`) print it under the tables; the teacher's depth also gets the finite-teacher factor's own
shift of plain α (what F alone moves it by).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..fitting.fits import fit_dataset
from ..fitting.law_fit import finite_teacher_factor
from ..fitting.separation import separations
from ..presenting.axis_figure import plot_axis
from ..presenting.plots import save_figure
from ..provenance import git_commit, package_version
from ..records import merge_runs
from ..records.kinds import TOY_RUN
from ..store import Store
from .figures import DOCS_COLOURS
from .report import fit_markdown

__all__ = ["axis_cells", "axis_report", "axis_figure", "READINGS"]

#: what the readings predict along an axis, printed under its tables
READINGS = {
    "student_hidden": (
        "Readings. If a trained student discretised the teacher's flow (the procedural reading), a smooth "
        "teacher's students would gain nothing from a hidden width beyond the teacher's (64 at width 16): "
        "their loss flat in the width. If a student layer is a width-limited block fitting k steps of the "
        "flow (`resflow theory width-limited-block`), a wider block holds more of the flow's second-order "
        "term: the loss falls with the width and α rises, towards 5 − c (c: the coherence of the layers' "
        "errors). For the rough teacher the ensemble reading predicts a loss flat in the width (the block's "
        "fluctuations are noise whatever the width); a capacity limit (a loss set by the layers' total "
        "width ℓ·h) predicts a width slope equal to α."),
    "teacher_depth": (
        "Reading. If the finite-teacher factor F is the whole effect of the teacher's depth, law α is the "
        "same at every teacher depth while plain α moves by F's own shift."),
}


def axis_cells(store: Store, key: str, sweep: str | None = None) -> tuple[str, dict[str, list[str]]]:
    """The sweep (``sweep``, or the latest one that varies ``key``) and its records by value of ``key``."""
    found: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    order: list[str] = []
    for info in store.records(kind=TOY_RUN):
        attrs = store.attrs(info)
        if "sweep_point" not in attrs:
            continue
        point = json.loads(attrs["sweep_point"])
        if key in point and (sweep is None or attrs.get("sweep") == sweep):
            found[attrs["sweep"]][str(point[key])].append(info.id)
            order.append(attrs["sweep"])
    if not found:
        raise ConfigError(f"--axis {key}: no sweep cell in {store.path} varies {key}"
                          + (f" in sweep {sweep}" if sweep else "")
                          + f"; run e.g. `resflow sweep smooth-vs-rough --grid {key}=V1,V2 "
                            f"--out {store.path}`.")
    chosen = sweep or order[-1]
    return chosen, dict(found[chosen])


def _sorted_values(values) -> list[str]:
    try:
        return sorted(values, key=float)
    except ValueError:
        return sorted(values)


def _interval(value: float, low: float, high: float) -> str:
    return f"{value:.2f} [{low:.2f}, {high:.2f}]" if math.isfinite(value) else "—"


def _fits(store: Store, key: str, sweep: str | None) -> tuple[str, dict[str, list[str]], dict[str, list]]:
    sweep, cells = axis_cells(store, key, sweep)
    return sweep, cells, {v: fit_dataset(merge_runs(store, cells[v])) for v in _sorted_values(cells)}


def axis_figure(store: Path | str, key: str, path: Path | str, *, sweep: str | None = None,
                colours: int | None = DOCS_COLOURS) -> Path:
    """Draw α and law α against ``key`` (:func:`resflow.presenting.axis_figure.plot_axis`) into ``path``
    (never over an existing file), with the sweep's provenance: its id, its cells' records, this resflow's
    version; ``colours``: palette colours of the PNG (:func:`resflow.analysis.save_figure`); None keeps every
    colour."""
    path = Path(path)
    if path.exists():
        raise ConfigError(f"{str(path)!r} exists; choose a new file for the figure.")
    opened = Store.open(store)
    sweep, cells, fits_by_value = _fits(opened, key, sweep)
    first = opened.attrs(cells[next(iter(fits_by_value))][0])
    provenance = {**{k: str(v) for k, v in first.items() if k not in ("sweep_cell", "sweep_point")},
                  "store_record": sweep, "cells": str(sum(map(len, cells.values()))), "sweep": sweep,
                  "axis": key, "records": json.dumps(cells),
                  "drawn_by": f"resflow {package_version()} {(git_commit() or '?')[:12]}"}
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(plot_axis(key, fits_by_value), path, provenance, colours=colours)


def axis_report(store: Path | str, key: str, *, sweep: str | None = None, width: int | None = None) -> str:
    """Markdown tables of the sweep cells of ``store`` along ``key`` (module docstring); ``width``: no line
    longer (:func:`resflow.workflows.report.fit_markdown`), None: the Markdown as written."""
    store = Store.open(store)
    sweep, cells, fits_by_value = _fits(store, key, sweep)
    values = list(fits_by_value)
    lines = [f"## Along {key}: sweep {sweep}", "",
             f"{len(values)} values of {key}, {sum(map(len, cells.values()))} cells; each value's replicates "
             "merged and fitted as one run.", ""]
    shift = key == "teacher_depth"
    lines += [f"| {key} | teacher | α [95%] | law α [95%] | "
              + ("F's own plain shift | " if shift else "") + "standing | smooth − rough α [95%] |",
              "|---|---|---|---|" + ("---|" if shift else "") + "---|---|"]
    for v in values:
        fits = fits_by_value[v]
        gaps = {(s.scheme, s.temperature, s.student_groups): s for s in separations(fits)}
        for f in fits:
            gap = gaps.get((f.scheme, f.temperature, f.student_groups)) if f.target == "tied" else None
            cells_ = [v, f.target, _interval(f.exponent, f.ci_low, f.ci_high),
                      _interval(f.law_exponent, f.law_ci_low, f.law_ci_high)]
            if shift:
                cells_.append(_factor_shift(f))
            between = (_interval(gap.separation, gap.separation_ci_low, gap.separation_ci_high) if gap
                       else "")
            cells_ += ["certified" if f.exponent_certified else "bound", between]
            lines.append("| " + " | ".join(cells_) + " |")
    lines += ["", _loss_table(key, values, fits_by_value)]
    if key in READINGS:
        lines += ["", READINGS[key]]
    text = "\n".join(lines) + "\n"
    return text if width is None else fit_markdown(text, width)


def _factor_shift(f) -> str:
    """How much the finite-teacher factor alone moves plain α over the fit's depths (minus its slope)."""
    if f.law in (None, "none"):
        return "—"
    depths = np.asarray(f.depths, float)
    factor = finite_teacher_factor(f.law, depths, f.teacher_depth)
    return f"{-np.polyfit(np.log(depths), np.log(factor), 1)[0]:+.2f}"


def _loss_table(key: str, values: list[str], fits_by_value: dict) -> str:
    """Best loss (replicate mean) per teacher and depth at each value, and the slope along ``key``."""
    numeric = all(_positive(v) for v in values)
    pairs = list(zip(values, values[1:], strict=False)) if numeric else []
    head = ["teacher", "ℓ", *[f"loss at {v}" for v in values], *[f"slope {a}→{b}" for a, b in pairs]]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    series = defaultdict(dict)  # (target, scheme) -> value -> {depth: loss}
    for v, fits in fits_by_value.items():
        for f in fits:
            series[(f.target, f.scheme)][v] = dict(zip(f.depths, f.losses, strict=True))
    for (target, scheme), by_value in series.items():
        depths = sorted({d for losses in by_value.values() for d in losses})
        for d in depths:
            loss = [by_value.get(v, {}).get(d, math.nan) for v in values]
            slopes = [-math.log(loss[i + 1] / loss[i]) / math.log(float(b) / float(a))
                      if loss[i] > 0 and loss[i + 1] > 0 else math.nan
                      for i, (a, b) in enumerate(pairs)]
            name = target if scheme == "euler" else f"{target} ({scheme})"
            rows.append("| " + " | ".join([name, str(d), *[f"{x:.3g}" for x in loss],
                                            *[f"{s:+.2f}" for s in slopes]]) + " |")
    return "\n".join(rows)


def _positive(value: str) -> bool:
    try:
        return float(value) > 0
    except ValueError:
        return False
