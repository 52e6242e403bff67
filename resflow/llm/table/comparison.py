"""An ``llm-fit`` record in the theory--toy--LLM comparison: its exponent row and its depth part."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ...fitting.regimes import classify
from ...presenting.compare import ComparisonRow, DepthPart
from .scaling_fit import MIN_AGREE, PARAMS

__all__ = ["fit_failure", "llm_row", "depth_part"]


def fit_failure(fit: xr.Dataset) -> str | None:
    """Why an ``llm-fit`` record is not a result (kept with ``--keep-failed``), or None.

    Records written before the checks existed carry no ``failure`` attribute; for them the checks that the
    record itself allows are redone: finite standard errors and enough agreeing starts."""
    if fit.attrs.get("failure"):
        return str(fit.attrs["failure"])
    reasons = []
    agree, _, starts = str(fit.attrs.get("starts_agree", "")).partition("/")
    if agree.isdigit() and int(agree) < MIN_AGREE:
        reasons.append(f"only {agree} of {starts} starts reached the best optimum")
    if not np.isfinite(fit["se"].values).all():
        reasons.append("the standard errors are not finite")
    return "; ".join(reasons) or None


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
