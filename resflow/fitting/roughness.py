r"""The roughness laws against a run of correlated and fractional teachers.

``resflow theory roughness-correlated`` / ``roughness-fractional`` (and their first versions,
``...-linear``) need two amplitudes and the procedural exponent.  They are taken from the two
extreme teachers of the same run, with no further fitting:

* ``correlated:1`` (tied): :math:`A_s \ell^{-\alpha_s}(1-\ell/L_T)^2` -- :math:`\alpha_s, A_s` from the
  law-aware line through its losses;
* ``correlated:0`` (independent): :math:`A_r(1/\ell - 1/L_T)` -- :math:`A_r` the geometric mean of
  loss / :math:`(1/\ell - 1/L_T)`.

The crossover depth :math:`\ell^*` of a correlated teacher is where the rough and the smooth terms
are equal.  Predicted: from the law's two terms.  Measured: the same two terms
(:math:`a_r(1/\ell - 1/L_T) + a_s\ell^{-\alpha_s}(1-\ell/L_T)^2`, :math:`\alpha_s` of the tied
teacher) with their amplitudes fitted to that teacher's own losses (non-negative least squares on
relative residuals).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import xarray as xr

from .. import laws
from ..loglog import power_law_fit
from ..noise import Equicorrelated, Fractional, parse_correlation
from ..records import best_start, full_length, one_structure
from .law_fit import finite_teacher_factor

__all__ = ["RoughnessAmplitudes", "roughness_amplitudes", "roughness_predictions", "crossover_depths",
           "roughness_report"]


@dataclass(frozen=True, kw_only=True)
class RoughnessAmplitudes:
    A_r: float
    A_s: float
    alpha_s: float
    teacher_depth: float


def _mean_losses(ds: xr.Dataset) -> xr.DataArray:
    one = one_structure(best_start(ds))  # plain students, the best route and init of each cell
    return full_length(one)["final_loss"].isel(scheme=0).mean("replicate")


def roughness_amplitudes(ds: xr.Dataset) -> RoughnessAmplitudes | None:
    """The amplitudes from the run's extremes (None if ``correlated:0`` or ``correlated:1`` is missing or
    failed)."""
    targets = [str(t) for t in ds["target"].values]
    if "correlated:0" not in targets or "correlated:1" not in targets:
        return None
    final = _mean_losses(ds)
    depth = final["depth"].values.astype(float)
    teacher_depth = float(json.loads(ds.attrs["config"])["teacher_depth"])
    factor = finite_teacher_factor("finite-teacher-procedural-incoherent", depth, teacher_depth)
    smooth = power_law_fit(depth, final.sel(target="correlated:1").values / factor)
    rough = final.sel(target="correlated:0").values / (1 / depth - 1 / teacher_depth)
    amps = RoughnessAmplitudes(A_r=float(np.exp(np.mean(np.log(rough)))), A_s=smooth.prefactor,
                               alpha_s=smooth.exponent, teacher_depth=teacher_depth)
    if not all(np.isfinite([amps.A_r, amps.A_s, amps.alpha_s])):  # a failed (NaN) extreme: nothing to predict
        return None
    return amps


def roughness_predictions(ds: xr.Dataset, *, version: str = "") -> dict[str, np.ndarray]:
    """Predicted final loss vs depth for every target of a run (empty if an extreme is missing).

    ``version=""`` is the refined law, ``"-linear"`` the first version."""
    amps = roughness_amplitudes(ds)
    if amps is None:
        return {}
    depth = ds["depth"].values.astype(float)
    kw = dict(ell=depth, L_T=amps.teacher_depth, A_r=amps.A_r, A_s=amps.A_s, alpha_s=amps.alpha_s)
    out = {}
    for target in (str(t) for t in ds["target"].values):
        correlation = _correlation(target)
        if isinstance(correlation, Equicorrelated):
            out[target] = np.asarray(laws.evaluate(f"roughness-correlated{version}",
                                                   rho=correlation.rho, **kw))
        elif isinstance(correlation, Fractional):
            out[target] = np.asarray(laws.evaluate(f"roughness-fractional{version}",
                                                   H=correlation.hurst, **kw))
    return out


def _correlation(target: str):
    """The correlation of a ``correlated:RHO`` or ``fractional:H`` teacher (the one spec parser), else
    None."""
    return parse_correlation(target) if target.startswith(("correlated:", "fractional:")) else None


def _crossing(depth: np.ndarray, rough: np.ndarray, smooth: np.ndarray) -> float:
    """Depth where the rough term overtakes the smooth one (log-linear interpolation; NaN if it does not)."""
    gap = np.log(rough) - np.log(smooth)
    for i in range(len(depth) - 1):
        if gap[i] <= 0 < gap[i + 1] or gap[i] < 0 <= gap[i + 1]:
            t = -gap[i] / (gap[i + 1] - gap[i])
            return float(np.exp(np.log(depth[i]) + t * (np.log(depth[i + 1]) - np.log(depth[i]))))
    if gap[0] > 0:
        return float("-inf")  # rough already at the shallowest depth
    return float("inf")  # smooth everywhere in range


def crossover_depths(ds: xr.Dataset) -> dict[str, tuple[float, float]]:
    """``{target: (predicted l*, measured l*)}`` for the correlated teachers strictly between the extremes."""
    amps = roughness_amplitudes(ds)
    if amps is None:
        return {}
    final = _mean_losses(ds)
    depth = np.geomspace(1.0, amps.teacher_depth / 2, 400)
    fine_rough = 1 / depth - 1 / amps.teacher_depth
    fine_smooth = depth ** (-amps.alpha_s) * (1 - depth / amps.teacher_depth) ** 2
    d = final["depth"].values.astype(float)
    basis = np.stack([1 / d - 1 / amps.teacher_depth,
                      d ** (-amps.alpha_s) * (1 - d / amps.teacher_depth) ** 2], 1)
    out = {}
    for target in (str(t) for t in ds["target"].values):
        correlation = _correlation(target)
        if not isinstance(correlation, Equicorrelated) or correlation.rho in (0.0, 1.0):
            continue
        rho = correlation.rho
        predicted = _crossing(depth, amps.A_r * (1 - rho) * fine_rough, amps.A_s * rho**2 * fine_smooth)
        from scipy.optimize import nnls

        y = final.sel(target=target).values
        (a_r, a_s), _ = nnls(basis / y[:, None], np.ones_like(y))  # relative residuals
        measured = (_crossing(depth, a_r * fine_rough, a_s * fine_smooth) if a_r > 0 and a_s > 0
                    else float("-inf") if a_s == 0 else float("inf"))
        out[target] = (predicted, measured)
    return out


def roughness_report(ds: xr.Dataset, fits) -> list[dict]:
    """One row per target: the measured exponent (plain, with its interval) against the exponents of the
    predicted curves (refined and first-version law, least squares over the run's depths)."""
    from ..loglog import slopes

    depth = ds["depth"].values.astype(float)
    refined, linear = roughness_predictions(ds), roughness_predictions(ds, version="-linear")
    rows = []
    for fit in fits:
        pred = slopes(depth, refined[fit.target]) if fit.target in refined else float("nan")
        first = slopes(depth, linear[fit.target]) if fit.target in linear else float("nan")
        inside = fit.ci_low <= pred <= fit.ci_high
        rows.append({"target": fit.target, "exponent": fit.exponent, "ci_low": fit.ci_low,
                     "ci_high": fit.ci_high, "converged": fit.converged, "predicted": pred,
                     "predicted_first_version": first, "difference": pred - fit.exponent,
                     "verdict": "in the interval" if inside else f"off by {pred - fit.exponent:+.2f}"})
    return rows
