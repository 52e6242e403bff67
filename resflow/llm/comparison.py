"""An ``llm-fit`` record in the theory--toy--LLM comparison: its exponent row and its depth part."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..analysis.compare import ComparisonRow, DepthPart
from ..analysis.regimes import classify
from .scaling_fit import PARAMS

__all__ = ["llm_row", "depth_part"]


def llm_row(fit: xr.Dataset, *, record: str) -> ComparisonRow:
    """The depth exponent of an ``llm-fit`` record, with its bootstrap interval (or ±1.96 SE without one)."""
    alpha = float(fit["value"].sel(param="alpha_l"))
    if "ci_low" in fit:
        lo, hi = float(fit["ci_low"].sel(param="alpha_l")), float(fit["ci_high"].sel(param="alpha_l"))
    else:
        se = float(fit["se"].sel(param="alpha_l"))
        lo, hi = alpha - 1.96 * se, alpha + 1.96 * se
    regime = classify(lo, hi, "euler", True) if np.isfinite([lo, hi]).all() else "no interval"
    parts = fit.attrs.get("data_record", "").split("--")
    table = parts[1] if len(parts) > 1 else "table"
    return ComparisonRow(source="llm", name=f"{table} ({fit.attrs.get('n_points')} pts, "
                                            f"{fit.attrs.get('excluded')} excluded)",
                         loss="cross-entropy", scheme="transformer", exponent=alpha, ci_low=lo, ci_high=hi,
                         converged=None, regime=regime, record=record)


def depth_part(fit: xr.Dataset, data: xr.Dataset) -> DepthPart:
    """Each model's loss minus the fitted width, data and constant parts, against its depth."""
    p = {name: float(fit["value"].sel(param=name)) for name in PARAMS}
    m, ell, D, L = (data[v].values for v in ("m", "ell", "D", "loss"))
    measured = L - p["c_m"] * m ** -p["alpha_m"] - p["c_D"] * D ** -p["alpha_D"] - p["L0"]
    grid = np.linspace(ell.min(), ell.max(), 100)
    return DepthPart(label=f"c_l ℓ^-α_l, α_l = {p['alpha_l']:.2f}", ell=ell,
                     measured=np.where(measured > 0, measured, np.nan), grid=grid,
                     fitted=p["c_l"] * grid ** -p["alpha_l"])
