"""The standard figure of a toy run (``figure.png`` of ``resflow run``): a headline, then four panels.

The **headline** says the answer in words and numbers -- first whether the smooth teacher's exponent is
steeper than the rough one's, then whether the gap reaches the readings' law gap at this run's depths
(:mod:`resflow.fitting.separation`: smooth minus rough exponent with its 95% interval) -- and each exponent
labelled certified (verdict v4: its routes agree and it has stopped moving) or a bound
(:mod:`resflow.fitting.certification`), beside a chart of the same intervals against the theory's exponents.
Below it, in a 2 × 2 grid: loss vs depth (every mark in a legend), training curves, the update angles and the
layer-skipping profile of the trained students (:mod:`resflow.presenting.plots`).  Teachers are named by
:mod:`resflow.labels` ("smooth (tied)", then "smooth").
"""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING

import numpy as np

from ..fitting.separation import ROUGH, SMOOTH, Separation, separations
from ..labels import Mentions, series_label, teacher_label
from ..records import checked_run
from .plots import (
    FOOTER_ROOM,
    colors,
    plot_lesion_profiles,
    plot_loss_vs_depth,
    plot_student_angles,
    plot_training_curves,
)

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure

__all__ = ["headline", "plot_headline", "plot_experiment", "standing_text"]

SEPARATED, NOT_SEPARATED, MIXED = "#1a7f37", "#b3261e", "#9a6700"  # green, red, amber: the headline's verdict
WRAP = {False: 80, True: 60}  # characters per headline line: normal, bold (the text column is about 6 inches)
# inches, the four panels; at save_figure's 130 dpi 1560 pixels wide (docs width: 1600)
FIGURE_SIZE = (12.0, 8.4)
# inches at least above them: a run of two teachers; more for more series (plot_experiment)
HEADLINE_HEIGHT = 3.1


def _end(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else ("∞" if value > 0 else "−∞")


def _interval(value: float, low: float, high: float) -> str:
    return "–" if not math.isfinite(value) else f"{value:.2f} [{_end(low)}, {_end(high)}]"


def standing_text(fit) -> str:
    """What a fitted exponent is, in words (verdict v4): certified, or a bound and why -- which depths' routes
    disagree, and how much of the exponent may still be to come."""
    bound = max(abs(fit.remaining_drift_low), abs(fit.remaining_drift_high))
    still = ("no bound on what is still to come" if not math.isfinite(bound)
             else f"up to {bound:.2f} still to come")
    if fit.exponent_certified:
        return f"certified (routes agree at every depth; {still})"
    agree = len(fit.certified_depths)
    routes = ("routes agree at every depth" if agree == len(fit.depths) else
              "routes agree at no depth" if agree == 0 else
              f"routes agree at {agree} of {len(fit.depths)} depths")
    return f"a bound ({routes}; {still}, drift {fit.drift_per_doubling:+.3f} per doubling)"


def _where(sep: Separation) -> str:
    parts = [sep.scheme] if sep.scheme != "euler" else []
    parts += [f"students of {sep.student_groups} weight groups"] if sep.student_groups else []
    parts += [f"T = {sep.temperature:g}"] if sep.temperature is not None else []
    return f" ({', '.join(parts)})" if parts else ""


def headline(fits) -> tuple[str, list[str], str]:
    """The headline of a run: ``(title, lines, colour)``.  With a smooth and a rough teacher the title is the
    verdict ("separated" or not) and the lines give each separation, then every exponent with what it is
    (:func:`standing_text`); without the pair, the exponents alone."""
    fits = list(fits)
    seps = separations(fits)
    smooth, rough = teacher_label(SMOOTH, first=False), teacher_label(ROUGH, first=False)
    lines = []
    if seps:
        n_steeper = sum(s.steeper for s in seps)
        verdict = (f"{smooth} is steeper" if n_steeper == len(seps) else "undecided" if n_steeper == 0 else
                   f"{smooth} is steeper in {n_steeper} of {len(seps)}")
        title = f"{smooth.capitalize()} vs {rough} teacher: {verdict}"
        colour = SEPARATED if n_steeper == len(seps) else NOT_SEPARATED if n_steeper == 0 else MIXED
        for sep in seps:
            lines.append(f"α({smooth}) − α({rough}){_where(sep)} = "
                         f"{_interval(sep.separation, sep.separation_ci_low, sep.separation_ci_high)} (95%)")
            lines.append(f"{sep.answer} (the interval {'lies above' if sep.steeper else 'reaches below'} 0); "
                         f"{sep.gap_text}")
            law_aware = _interval(sep.separation_law, sep.separation_law_ci_low, sep.separation_law_ci_high)
            lines.append(f"law-aware (finite-teacher factor divided out): {law_aware}, reported, "
                         "gating nothing")
        lines.append(f"{seps[0].method}")
    else:
        title, colour = "Depth exponents", "0.15"
        lines.append(f"no {smooth}–{rough} pair in this run: no separation to state")
    lines.append("")
    mentions = Mentions()
    for fit in fits:
        lines.append(f"{mentions.series(fit)}: α = {_interval(fit.exponent, fit.ci_low, fit.ci_high)}, "
                     f"law α = {_interval(fit.law_exponent, fit.law_ci_low, fit.law_ci_high)}")
        lines.append(f"      {standing_text(fit)}")  # indented: it belongs to the line above
    return title, lines, colour


def _run_note(ds: xr.Dataset) -> str:
    n = ds.sizes["replicate"]
    routes = " + ".join(str(r) for r in ds["route"].values)
    steps = ds.attrs.get("steps_done")
    steps = f", {int(steps) / 1000:g}k steps per route" if steps else ""
    inits = ds.sizes["init"]
    plural = "s" if n > 1 else ""
    return (f"{n} replicate{plural} (teacher seed{plural}), routes {routes} × {inits} init"
            f"{'s' if inits > 1 else ''}{steps}")


def _headline_layout(fits, note: str = "") -> tuple[list[tuple[str, float, dict]], float]:
    """The headline's lines as ``(text, points below the top, text style)``, wrapped to the text column, and
    the height they take (points)."""
    title, lines, colour = headline(fits)
    placed = [(title, 0.0, {"fontsize": 14, "fontweight": "bold", "color": colour})]
    down = 24.0
    for line in lines:
        bold = line.startswith("α(")
        size = 11.5 if bold else 9.5
        indent = "      " if line.startswith(" ") else "   "
        for part in textwrap.wrap(line, WRAP[bold], subsequent_indent=indent) or [""]:
            placed.append((part, down, {"fontsize": size, "fontweight": "bold" if bold else "normal",
                                        "color": colour if bold else "0.1"}))
            down += 1.45 * size if part else 0.6 * size
    if note:
        placed.append((note, down + 2, {"fontsize": 8, "color": "0.4"}))
        down += 2 + 1.3 * 8 * (note.count("\n") + 1)
    return placed, down


def plot_headline(fits, text_ax, chart_ax=None, *, note: str = "") -> None:
    """The headline (:func:`headline`) as text in ``text_ax`` and, in ``chart_ax``, every exponent and
    separation with its 95% interval against the theory's exponents (filled: certified, hollow: a bound)."""
    from matplotlib.lines import Line2D

    from ..fitting.regimes import regime_predictions

    fits = list(fits)
    text_ax.set_axis_off()
    placed, _ = _headline_layout(fits, note)
    for text, down, style in placed:  # each line ``down`` points below the top of the panel
        text_ax.annotate(text, (0.0, 1.0), xycoords="axes fraction", xytext=(0, -down),
                         textcoords="offset points", va="top", ha="left", annotation_clip=False, **style)
    if chart_ax is None:
        return
    seps = separations(fits)
    rows = []  # (label, value, low, high, colour, marker, filled)
    smooth, rough = teacher_label(SMOOTH, first=False), teacher_label(ROUGH, first=False)
    for sep in seps:
        c = SEPARATED if sep.steeper else NOT_SEPARATED
        rows.append((f"Δα = {smooth} − {rough}{_where(sep)}", sep.separation, sep.separation_ci_low,
                     sep.separation_ci_high, c, "D", sep.certified))
        rows.append(("law-aware Δα", sep.separation_law, sep.separation_law_ci_low,
                     sep.separation_law_ci_high, c, "s", sep.certified))
    for color, fit in zip(colors("tab10", len(fits)), fits, strict=True):
        rows.append((f"α, {series_label(fit, first=False)}", fit.exponent, fit.ci_low, fit.ci_high,
                     color, "o", fit.exponent_certified))
        rows.append(("law α", fit.law_exponent, fit.law_ci_low, fit.law_ci_high, color, "s",
                     fit.exponent_certified))
    rows = [r for r in rows if math.isfinite(r[1])]
    left = min([r[2] for r in rows if math.isfinite(r[2])] + [0.0]) - 0.1
    right = max([r[3] for r in rows if math.isfinite(r[3])] + [3.5]) + 0.3
    for y, (_, value, low, high, color, marker, filled) in enumerate(rows):
        low, high = max(low, left), min(high, right)  # an unbounded end runs to the chart's edge
        chart_ax.errorbar(value, y, xerr=[[max(value - low, 0.0)], [max(high - value, 0.0)]],
                          fmt=marker, color=color, mfc=color if filled else "white", ms=6, capsize=3, lw=1.4)
    gaps = [s.law_gap for s in seps if math.isfinite(s.law_gap)]
    if seps:  # the Δα rows: steeper right of 0, past the readings' law gap beyond it
        top = 2 * len(seps) - 0.5
        chart_ax.fill_betweenx([-0.5, top], 0.0, right, color=SEPARATED, alpha=0.06, lw=0)
        if gaps:
            chart_ax.fill_betweenx([-0.5, top], min(gaps), right, color=SEPARATED, alpha=0.08, lw=0)
        chart_ax.axhline(top, color="0.7", lw=0.8)
    pred = regime_predictions(fits[0].scheme if fits else "euler")
    key = []
    for alpha, style, text in ((pred["ensemble"][0], ":", "ensemble law α = {:g}"),
                               (pred["procedural"][0], "--", "procedural, coherent α = {:g}"),
                               (pred["procedural"][1], "-.", "procedural, incoherent α = {:g}")):
        chart_ax.axvline(alpha, color="0.55", ls=style, lw=0.9)
        key.append(Line2D([], [], color="0.55", ls=style, lw=0.9, label=text.format(alpha)))
    key += [Line2D([], [], marker="o", color="0.3", lw=0, label="certified (an estimate)"),
            Line2D([], [], marker="o", color="0.3", mfc="white", lw=0, label="a bound")]
    if seps:
        key.append(Line2D([], [], color=SEPARATED, alpha=0.15, lw=6, label="Δα > 0: smooth is steeper"))
        if gaps:
            key.append(Line2D([], [], color=SEPARATED, alpha=0.3, lw=6,
                              label=f"Δα > {min(gaps):.2f}: the readings' law gap here"))
    chart_ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    chart_ax.set_ylim(len(rows) - 0.5, -0.5)
    chart_ax.set_xlim(left, right)
    chart_ax.set(xlabel="depth exponent (loss ∝ ℓ^-α), 95% intervals",
                 title="exponents and their difference")
    chart_ax.legend(handles=key, fontsize=7.5, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)


def plot_experiment(ds: xr.Dataset, fits) -> Figure:
    """The standard figure of a run: the headline (:func:`plot_headline`), then loss vs depth, training
    curves, the students' update angles and (when the record has them) their layer-skipping profiles,
    2 × 2."""
    from .figure import InlineFigure

    ds = checked_run(ds)
    fits = list(fits)
    lesions = "lesion" in ds and int(ds["depth"].max()) >= 2 and bool(np.isfinite(ds["lesion"].values).any())
    record = ds.attrs.get("store_record")
    note = _run_note(ds) + (f"\nrecord {record}" if record else "")
    _, text_height = _headline_layout(fits, note)
    rows = 2 * (len(fits) + len(separations(fits)))  # the chart's rows: exponent and law exponent of each
    # inches: room for every line and row, and for the chart's title and axis label (which shorten both
    # panels)
    top = max(text_height / 72 + 1.2, 0.22 * rows + 1.0, HEADLINE_HEIGHT)
    width, height = FIGURE_SIZE
    fig = InlineFigure(figsize=(width, height + top), layout="constrained")
    fig.get_layout_engine().set(rect=(0, FOOTER_ROOM, 1, 1 - FOOTER_ROOM))
    grid = fig.add_gridspec(3, 2, height_ratios=(top, height / 2, height / 2))
    head = grid[0, :].subgridspec(1, 2, width_ratios=(1.15, 1))
    plot_headline(fits, fig.add_subplot(head[0]), fig.add_subplot(head[1]), note=note)
    plot_loss_vs_depth(ds, fits, fig.add_subplot(grid[1, 0]))
    plot_training_curves(ds, fig.add_subplot(grid[1, 1]))
    plot_student_angles(ds, fig.add_subplot(grid[2, 0] if lesions else grid[2, :]))
    if lesions:
        plot_lesion_profiles(ds, fig.add_subplot(grid[2, 1]))
    return fig
