"""Theory, toy simulations and trained LLMs side by side: one table of depth exponents, one figure.

Rows: the theory's predicted exponents (ensemble; procedural coherent and incoherent for Euler and
RK2 blocks, from :mod:`resflow.laws`), every fitted series of every ``toy-run`` record, and the
depth exponent :math:`\\alpha_\\ell` of every ``llm-fit`` record, each with its interval and the
regime it is consistent with.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from . import laws
from .fitting import classify, fit_dataset
from .llm_fit import PARAMS, predict
from .store import Store

__all__ = ["ComparisonRow", "comparison_rows", "comparison_figure"]


@dataclass
class ComparisonRow:
    source: str
    name: str
    loss: str
    scheme: str
    exponent: float
    ci_low: float
    ci_high: float
    converged: bool | None
    regime: str
    record: str

    def to_json(self) -> dict:
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in asdict(self).items()}


def theory_rows() -> list[ComparisonRow]:
    rows = []
    ensemble = laws.exponent("accumulation-incoherent", ell=1, q=1)
    rows.append(ComparisonRow("theory", "ensemble averaging (q = 1, incoherent)", "any", "any", ensemble, ensemble,
                              ensemble, None, "ensemble", "accumulation-incoherent"))
    for scheme, p in (("euler", 1), ("midpoint", 2)):
        for kind in ("coherent", "incoherent"):
            value = laws.exponent(f"accumulation-{kind}", ell=1, q=p + 1)
            rows.append(ComparisonRow("theory", f"procedural, {scheme} block (q = {p + 1}, {kind})", "any", scheme,
                                      value, value, value, None, "procedural", f"accumulation-{kind}"))
    return rows


def comparison_rows(stores: list[str | Path]) -> tuple[list[ComparisonRow], list[tuple]]:
    """All rows, and the (fit, data) Datasets of the LLM fits (for the figure)."""
    rows = theory_rows()
    llm = []
    for path in stores:
        store = Store.open(path)
        for info in store.records(kind="toy-run"):
            ds = store.load(info)
            for f in fit_dataset(ds):
                name = f"{ds.attrs.get('experiment', '?')}: {f.target}" + (
                    f" T={f.temperature:g}" if f.temperature is not None else "")
                rows.append(ComparisonRow("toy", name, f.loss, f.scheme, f.exponent, f.ci_low, f.ci_high,
                                          f.converged, f.regime, info.id))
        for info in store.records(kind="llm-fit"):
            fit = store.load(info)
            alpha = float(fit["value"].sel(param="alpha_l"))
            if "ci_low" in fit:
                lo, hi = float(fit["ci_low"].sel(param="alpha_l")), float(fit["ci_high"].sel(param="alpha_l"))
            else:
                se = float(fit["se"].sel(param="alpha_l"))
                lo, hi = alpha - 1.96 * se, alpha + 1.96 * se
            regime = classify(lo, hi, "euler", True) if np.isfinite([lo, hi]).all() else "no interval"
            rows.append(ComparisonRow("llm", f"{fit.attrs.get('data_record', '').split('--')[1] or 'table'} "
                                             f"({fit.attrs.get('n_points')} pts, {fit.attrs.get('excluded')} excluded)",
                                      "cross-entropy", "transformer", alpha, lo, hi, None, regime, info.id))
            data_id = fit.attrs.get("data_record")
            data = store.load(data_id) if data_id else None
            llm.append((fit, data))
    return rows, llm


def comparison_figure(rows: list[ComparisonRow], llm: list[tuple]):
    """Left: every exponent with its interval (theory as lines). Right: the LLM depth part vs depth."""
    fig, axes = plt.subplots(1, 2, figsize=(14, max(4.5, 0.32 * len(rows) + 1.5)), constrained_layout=True)
    fig.get_layout_engine().set(rect=(0, 0.03, 1, 0.97))
    ax = axes[0]
    shown = [r for r in rows if r.source != "theory"]
    for r in rows:
        if r.source == "theory":
            ax.axvline(r.exponent, color="0.6", ls=":" if "ensemble" in r.name else "--", lw=0.8)
    colors = {"toy": "tab:blue", "llm": "tab:red"}
    for y, r in enumerate(shown):
        if np.isfinite(r.exponent):
            ax.errorbar(r.exponent, y, xerr=[[r.exponent - r.ci_low], [r.ci_high - r.exponent]], fmt="o",
                        color=colors[r.source], capsize=3, mfc="white" if r.converged is False else None)
    ax.set_yticks(range(len(shown)), [f"{r.name} [{r.regime}]" for r in shown], fontsize=7)
    ax.set(xlabel="depth exponent α (loss ∝ ℓ^-α); grey: theory (1, 2, 3, 4, 5)",
           title="theory, toy models and trained LLMs")
    ax = axes[1]
    for fit, data in llm:
        if data is None:
            continue
        p = {name: float(fit["value"].sel(param=name)) for name in PARAMS}
        m, ell, D, L = (data[v].values for v in ("m", "ell", "D", "loss"))
        depth_part = L - p["c_m"] * m ** -p["alpha_m"] - p["c_D"] * D ** -p["alpha_D"] - p["L0"]
        ax.loglog(ell, np.where(depth_part > 0, depth_part, np.nan), "o", ms=3, alpha=0.6)
        grid = np.linspace(ell.min(), ell.max(), 100)
        ax.loglog(grid, predict(p, np.full_like(grid, np.inf), grid, np.full_like(grid, np.inf)) - p["L0"], "-",
                  label=f"c_l ℓ^-α_l, α_l = {p['alpha_l']:.2f}")
    ax.set(xlabel="layers ℓ", ylabel="L − c_m m^-α_m − c_D D^-α_D − L_0", title="LLM depth part (cf. study Fig. 2f)")
    if llm:
        ax.legend(fontsize=7)
    return fig
