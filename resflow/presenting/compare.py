"""Theory, toy simulations and trained LLMs side by side: one table of depth exponents, one figure.

Rows: the theory's predicted exponents (ensemble; procedural coherent and incoherent for every
student block in use, orders from :data:`resflow.dynamics.TABLEAUX`, exponents from
:mod:`resflow.laws`), every fitted series of every ``fit`` record (no refitting), and the depth
exponent :math:`\\alpha_\\ell` of every ``llm-fit`` record, each with its interval and the regime it
is consistent with.  This module works on records (Datasets); reading them from stores is
:func:`resflow.workflows.compare_stores`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import laws
from ..dynamics.tableau import get_tableau
from ..fitting.fits import SeriesFit
from ..labels import series_label

__all__ = ["ComparisonRow", "DepthPart", "theory_rows", "toy_rows", "comparison_figure"]


@dataclass(frozen=True, kw_only=True)
class ComparisonRow:
    """One exponent in the comparison: where it comes from, its value and interval, its regime."""

    source: str  # "theory", "toy" or "llm"
    name: str
    loss: str
    scheme: str
    exponent: float
    ci_low: float
    ci_high: float
    converged: bool | None
    regime: str
    record: str

    def to_json(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                for k, v in dataclasses.asdict(self).items()}


@dataclass(frozen=True, kw_only=True)
class DepthPart:
    """The depth part of a fitted LLM scaling law: data points and the fitted curve, for the figure."""

    label: str
    ell: np.ndarray  # layers of each model
    measured: np.ndarray  # L - c_m m^-a_m - c_D D^-a_D - L0 (NaN where not positive)
    grid: np.ndarray
    fitted: np.ndarray  # c_l grid^-a_l


def theory_rows(schemes: tuple[str, ...] = ("euler",)) -> list[ComparisonRow]:
    """Predicted exponents: ensemble averaging, and procedural (coherent, incoherent) per student block."""
    ensemble = laws.exponent("accumulation-incoherent", ell=1, q=1)
    rows = [ComparisonRow(source="theory", name="ensemble averaging (q = 1, incoherent)",
                          loss="any", scheme="any",
                          exponent=ensemble, ci_low=ensemble, ci_high=ensemble,
                          converged=None, regime="ensemble", record="accumulation-incoherent")]
    for scheme in schemes:
        p = get_tableau(scheme).order
        for kind in ("coherent", "incoherent"):
            value = laws.exponent(f"accumulation-{kind}", ell=1, q=p + 1)
            rows.append(ComparisonRow(
                source="theory", name=f"procedural, {scheme} block (order {p}, q = {p + 1}, {kind})",
                loss="any", scheme=scheme, exponent=value, ci_low=value, ci_high=value,
                converged=None, regime="procedural", record=f"accumulation-{kind}"))
    return rows


def toy_rows(fits: list[SeriesFit], *, experiment: str, record: str) -> list[ComparisonRow]:
    """One row per fitted series of a toy run (``record`` names the ``fit`` record; the teacher by its
    reader's name, :func:`resflow.labels.series_label`)."""
    return [ComparisonRow(
        source="toy", name=f"{experiment}: {series_label(f)}",
        loss=f.loss, scheme=f.scheme, exponent=f.exponent, ci_low=f.ci_low, ci_high=f.ci_high,
        converged=f.converged, regime=f.regime, record=record) for f in fits]


def comparison_figure(rows: list[ComparisonRow], depth_parts: list[DepthPart]):
    """Left: every exponent with its interval (theory as lines). Right: the LLM depth part vs depth."""
    from .plots import new_figure

    fig, axes = new_figure(2, figsize=(14, max(4.5, 0.32 * len(rows) + 1.5)))
    ax = axes[0]
    shown = [r for r in rows if r.source != "theory"]
    for r in rows:
        if r.source == "theory":
            ax.axvline(r.exponent, color="0.6", ls=":" if "ensemble" in r.name else "--", lw=0.8)
    palette = {"toy": "tab:blue", "llm": "tab:red"}
    for y, r in enumerate(shown):
        if np.isfinite(r.exponent):
            below, above = max(r.exponent - r.ci_low, 0.0), max(r.ci_high - r.exponent, 0.0)
            ax.errorbar(r.exponent, y, xerr=[[below], [above]], fmt="o",
                        color=palette[r.source], capsize=3, mfc="white" if r.converged is False else None)
    ax.set_yticks(range(len(shown)), [f"{r.name} [{r.regime}]" for r in shown], fontsize=7)
    ax.set(xlabel="depth exponent α (loss ∝ ℓ^-α); grey: theory",
           title="theory, toy models and trained LLMs")
    ax = axes[1]
    for part in depth_parts:
        ax.loglog(part.ell, part.measured, "o", ms=3, alpha=0.6)
        ax.loglog(part.grid, part.fitted, "-", label=part.label)
    ax.set(xlabel="layers ℓ", ylabel="depth part: L − (width, data, constant parts)",
           title="LLM depth part (cf. study Fig. 2f)")
    if depth_parts:
        ax.legend(fontsize=7)
    return fig
