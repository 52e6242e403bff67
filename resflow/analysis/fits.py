r"""Depth exponents with honest intervals, convergence checks, and the regime each result fits.

For one series (a target, loss, scheme and temperature) with final test losses
:math:`\mathcal L(\ell, \text{seed}, \text{batch})`:

* the exponent :math:`\alpha` is minus the least-squares slope of
  :math:`\log \overline{\mathcal L}(\ell)` on :math:`\log \ell` (:func:`resflow.loglog.slopes`);
* an offset fit :math:`A\ell^{-\alpha} + C` (scipy ``curve_fit`` on log-loss) checks for a floor;
* the 95% interval: with two or more seeds, a Student-t interval over the per-seed exponents (each
  seed's students form one loss-vs-depth curve); with one seed, a percentile bootstrap over the
  evaluation batches (which measures evaluation noise only, and says so in ``ci_method``).  The
  percentile bootstrap over seeds *and* batches is reported too (``boot_low``/``boot_high``), but
  is not the headline interval: with 4 seeds it covered the true exponent in only 32 of 40
  synthetic runs (``tests/test_fitting.py``), the known small-sample undercoverage of the
  percentile bootstrap;
* convergence: every student's test loss fell by less than ``convergence_tol`` (relative) over the
  last ``convergence_window`` of training, and the fitted exponent moved by less than
  ``exponent_drift_tol`` over that window; a failed student makes the series unconverged;
* regime: :mod:`resflow.analysis.regimes`.  An unconverged series is never classified (an
  unconverged procedural run imitates :math:`\alpha \approx 1`).

Fits are data: :func:`fits_to_dataset` makes a ``fit`` store record (settings and source record in
its attrs) and :func:`fits_from_dataset` reads one back, so comparisons never refit.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from .._validate import check_int, check_real
from ..loglog import slopes
from .regimes import classify

__all__ = ["FitSettings", "SeriesFit", "fit_exponent", "fit_offset", "bootstrap_exponent", "seed_interval",
           "fit_dataset", "fits_to_dataset", "fits_from_dataset", "exponent_over_training", "series_dims"]

BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True, kw_only=True)
class FitSettings:
    """How a run's series are fitted.  ``None`` convergence settings take the run's own config."""

    confidence: float = CONFIDENCE
    bootstrap_samples: int = BOOTSTRAP_SAMPLES
    convergence_window: float | None = None
    convergence_tol: float | None = None
    exponent_drift_tol: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "confidence", check_real("confidence", self.confidence, low=0.0, high=1.0,
                                                          low_open=True, high_open=True))
        object.__setattr__(self, "bootstrap_samples", check_int("bootstrap_samples", self.bootstrap_samples,
                                                                minimum=10))
        for name in ("convergence_window", "convergence_tol", "exponent_drift_tol"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_real(name, getattr(self, name), low=0.0, low_open=True))

    def resolved(self, ds: xr.Dataset) -> FitSettings:
        """These settings with every ``None`` replaced by the run's training config (or the defaults)."""
        train = json.loads(ds.attrs.get("config", "{}")).get("train", {})
        defaults = {"convergence_window": 0.1, "convergence_tol": 0.05, "exponent_drift_tol": 0.15}
        values = {k: getattr(self, k) if getattr(self, k) is not None else train.get(k, v) for k, v in defaults.items()}
        return dataclasses.replace(self, **values)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


@dataclass(frozen=True, kw_only=True)
class SeriesFit:
    """The fitted depth exponent of one loss-vs-depth series, with its interval and diagnostics."""

    target: str
    loss: str
    scheme: str
    temperature: float | None
    exponent: float
    ci_low: float
    ci_high: float
    ci_method: str
    offset_exponent: float | None
    offset_floor: float | None
    converged: bool
    regime: str
    depths: tuple[int, ...]
    losses: tuple[float, ...]
    n_seeds: int
    boot_low: float
    boot_high: float
    max_relative_drop: float
    exponent_drift: float
    note: str

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["depths"], out["losses"] = list(self.depths), list(self.losses)
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in out.items()}


def series_dims(ds: xr.Dataset) -> list[str]:
    """Dimensions that label one loss-vs-depth series (all but depth, seed and the inner ones)."""
    return [d for d in ("target", "scheme", "temperature") if d in ds.dims]


def fit_exponent(depths, losses) -> float:
    """:math:`\\alpha` = minus the least-squares slope of log loss on log depth."""
    return slopes(depths, losses)


def fit_offset(depths, losses) -> tuple[float, float, float] | None:
    """Fit :math:`A\\ell^{-\\alpha} + C` (C >= 0) on log-loss; ``(A, alpha, C)`` or None if it fails."""
    from scipy.optimize import OptimizeWarning, curve_fit

    d, y = np.asarray(depths, float), np.asarray(losses, float)
    if d.size < 4:
        return None

    def model(x, log_a, alpha, log_c):
        return np.log(np.exp(log_a) * x ** (-alpha) + np.exp(log_c))

    alpha0 = fit_exponent(d, y)
    p0 = (np.log(y[0]) + alpha0 * np.log(d[0]), alpha0, np.log(y.min()) - 3)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)  # covariance unused; only the point estimate
            (log_a, alpha, log_c), _ = curve_fit(model, d, np.log(y), p0=p0, maxfev=20000)
    except (RuntimeError, ValueError):
        return None
    return float(np.exp(log_a)), float(alpha), float(np.exp(log_c))


def bootstrap_exponent(batch_losses: np.ndarray, depths, *, samples: int = BOOTSTRAP_SAMPLES,
                       seed: int = 0) -> np.ndarray:
    """Bootstrap distribution of :math:`\\alpha` from losses of shape ``(depth, seed, batch)``
    (seeds and batches resampled with replacement)."""
    rng = np.random.default_rng(seed)
    _, n_seeds, n_batches = batch_losses.shape
    means = np.empty((samples, batch_losses.shape[0]))
    for b in range(samples):
        s = rng.integers(0, n_seeds, n_seeds)
        k = rng.integers(0, n_batches, n_batches)
        means[b] = batch_losses[:, s][:, :, k].mean(axis=(1, 2))
    return slopes(depths, means)


def seed_interval(batch_losses: np.ndarray, depths, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Student-t interval of the mean of per-seed exponents (needs at least two seeds)."""
    from scipy import stats

    per_seed = slopes(depths, batch_losses.mean(axis=-1).T)
    half = stats.t.ppf((1 + confidence) / 2, per_seed.size - 1) * per_seed.std(ddof=1) / np.sqrt(per_seed.size)
    centre = per_seed.mean()
    return float(centre - half), float(centre + half)


def _failed_fit(label: dict, loss: str, depths: list[int], n_seeds: int, failed: bool) -> SeriesFit:
    return SeriesFit(
        target=str(label.get("target", "")), loss=loss, scheme=str(label.get("scheme", "")),
        temperature=float(label["temperature"]) if "temperature" in label else None,
        exponent=math.nan, ci_low=math.nan, ci_high=math.nan, ci_method="none", offset_exponent=None,
        offset_floor=None, converged=False, regime="failed" if failed else "unconverged", depths=tuple(depths),
        losses=(), n_seeds=n_seeds, boot_low=math.nan, boot_high=math.nan, max_relative_drop=math.nan,
        exponent_drift=math.nan, note="a student failed" if failed else "incomplete run")


def fit_dataset(ds: xr.Dataset, settings: FitSettings | None = None) -> list[SeriesFit]:
    """Fit every series of a ``toy-run`` Dataset (see the module docstring)."""
    settings = (settings or FitSettings()).resolved(ds)
    loss = ds.attrs.get("loss", "?")
    dims = series_dims(ds)
    stacked = ds.stack(series=dims) if dims else ds.expand_dims(series=[0])
    fits = []
    for i in range(stacked.sizes["series"]):
        one = stacked.isel(series=i)
        label = {d: one[d].item() for d in dims}
        failed = bool(one["failed"].sum() > 0)
        depths = [int(d) for d in one["depth"].values]
        batches = one["final_loss_batch"].transpose("depth", "seed", "eval_batch").values
        curves = one["test_loss"].transpose("depth", "seed", "step").values
        if failed or not np.all(np.isfinite(batches)) or len(depths) < 2:
            fits.append(_failed_fit(label, loss, depths, int(one.sizes["seed"]), failed))
            continue
        means = batches.mean(axis=(1, 2))
        alpha = fit_exponent(depths, means)
        boot = bootstrap_exponent(batches, depths, samples=settings.bootstrap_samples)
        tail = (1 - settings.confidence) / 2
        boot_lo, boot_hi = np.quantile(boot, [tail, 1 - tail])
        if batches.shape[1] >= 2:
            lo, hi = seed_interval(batches, depths, settings.confidence)
            method = f"t over {batches.shape[1]} seeds"
        else:
            lo, hi = boot_lo, boot_hi
            method = "bootstrap over evaluation batches (1 seed: evaluation noise only)"
        offset = fit_offset(depths, means)
        steps = np.asarray(one["step"].values, float)
        window = settings.convergence_window
        back = min(int(np.searchsorted(steps, steps[-1] * (1 - window))), len(steps) - 2)
        drops = (curves[:, :, back] - curves[:, :, -1]) / curves[:, :, -1]
        max_drop = float(np.max(drops))
        drift = abs(alpha - fit_exponent(depths, curves[:, :, back].mean(axis=1)))
        converged = max_drop <= settings.convergence_tol and drift <= settings.exponent_drift_tol
        note = "" if converged else (
            f"test loss still fell {max_drop:.1%} over the last {window:.0%} of training"
            if max_drop > settings.convergence_tol
            else f"exponent moved {drift:.2f} over the last {window:.0%} of training")
        scheme = str(label.get("scheme", "euler"))
        fits.append(SeriesFit(
            target=str(label.get("target", "")), loss=loss, scheme=scheme,
            temperature=float(label["temperature"]) if "temperature" in label else None,
            exponent=alpha, ci_low=float(lo), ci_high=float(hi), ci_method=method,
            offset_exponent=None if offset is None else offset[1], offset_floor=None if offset is None else offset[2],
            converged=converged, regime=classify(lo, hi, scheme, converged),
            depths=tuple(depths), losses=tuple(float(v) for v in means), n_seeds=int(one.sizes["seed"]),
            boot_low=float(boot_lo), boot_high=float(boot_hi), max_relative_drop=max_drop,
            exponent_drift=float(drift), note=note,
        ))
    return fits


# ---------------------------------------------------------------------------------------------- records
_SCALARS = {  # SeriesFit field -> (long_name, units) of its variable in a fit record
    "exponent": ("depth exponent alpha (loss ~ depth^-alpha), least squares", "1"),
    "ci_low": ("lower end of the interval of alpha", "1"),
    "ci_high": ("upper end of the interval of alpha", "1"),
    "ci_method": ("how the interval was obtained", "1"),
    "offset_exponent": ("alpha of the offset fit A depth^-alpha + C", "1"),
    "offset_floor": ("floor C of the offset fit", "loss"),
    "converged": ("whether the series passed the convergence check", "1"),
    "regime": ("regime the interval is consistent with", "1"),
    "n_seeds": ("seeds per depth", "1"),
    "boot_low": ("lower end of the percentile bootstrap over seeds and batches", "1"),
    "boot_high": ("upper end of the percentile bootstrap over seeds and batches", "1"),
    "max_relative_drop": ("largest relative drop of a test loss over the convergence window", "1"),
    "exponent_drift": ("change of alpha over the convergence window", "1"),
    "note": ("why the series is not converged (empty if it is)", "1"),
}


def fits_to_dataset(fits: list[SeriesFit], *, source_record: str, settings: FitSettings) -> xr.Dataset:
    """A ``fit`` store record: one entry per series on dim ``series``, losses on ``(series, depth)``."""
    if not fits:
        raise ValueError("no fits to store")
    depths = sorted({d for f in fits for d in f.depths})
    losses = np.full((len(fits), len(depths)), np.nan)
    for i, f in enumerate(fits):
        for d, v in zip(f.depths, f.losses, strict=False):
            losses[i, depths.index(d)] = v
    data: dict[str, Any] = {}
    for name, (long_name, units) in _SCALARS.items():
        values = [getattr(f, name) for f in fits]
        if name in ("offset_exponent", "offset_floor"):
            values = [math.nan if v is None else v for v in values]
        data[name] = (("series",), np.asarray(values), {"long_name": long_name, "units": units})
    data["loss_by_depth"] = (("series", "depth"), losses, {"long_name": "seed-mean final test loss", "units": "loss"})
    data["n_depths"] = (("series",), [len(f.depths) for f in fits], {"long_name": "depths fitted", "units": "1"})
    coords = {
        "series": ("series", np.arange(len(fits)), {"long_name": "fitted series"}),
        "target": ("series", [f.target for f in fits], {"long_name": "teacher (target function)"}),
        "scheme": ("series", [f.scheme for f in fits], {"long_name": "Runge-Kutta scheme of the student block"}),
        "temperature": ("series", [math.nan if f.temperature is None else f.temperature for f in fits],
                        {"long_name": "teacher temperature (NaN for MSE)", "units": "1"}),
        "depth": ("depth", depths, {"long_name": "student depth", "units": "layers"}),
    }
    attrs = {"loss": fits[0].loss, "source_record": source_record, "fit_settings": settings.to_json()}
    return xr.Dataset(data, coords=coords, attrs=attrs)


def fits_from_dataset(ds: xr.Dataset) -> list[SeriesFit]:
    """The :class:`SeriesFit` list a ``fit`` record holds (the inverse of :func:`fits_to_dataset`)."""
    out = []
    depths = [int(d) for d in ds["depth"].values]
    for i in range(ds.sizes["series"]):
        row = ds.isel(series=i)
        values = {name: row[name].item() for name in _SCALARS}
        for name in ("offset_exponent", "offset_floor"):
            values[name] = None if not np.isfinite(values[name]) else float(values[name])
        values.update(converged=bool(values["converged"]), n_seeds=int(values["n_seeds"]),
                      ci_method=str(values["ci_method"]), regime=str(values["regime"]), note=str(values["note"]))
        temperature = float(row["temperature"])
        used = [(d, float(v)) for d, v in zip(depths, row["loss_by_depth"].values, strict=True) if np.isfinite(v)]
        out.append(SeriesFit(
            target=str(row["target"].item()), loss=str(ds.attrs.get("loss", "?")), scheme=str(row["scheme"].item()),
            temperature=None if math.isnan(temperature) else temperature,
            depths=tuple(d for d, _ in used) if used else tuple(depths[: int(row["n_depths"])]),
            losses=tuple(v for _, v in used), **values,
        ))
    return out


def exponent_over_training(ds: xr.Dataset) -> xr.DataArray:
    """Fitted exponent of the seed-mean test loss at every evaluation step, per series."""
    mean = ds["test_loss"].mean("seed")
    depth = mean["depth"].values.astype(float)
    alpha = xr.apply_ufunc(lambda values: slopes(depth, values), mean, input_core_dims=[["depth"]])
    alpha.attrs = {"long_name": "depth exponent of the test loss during training", "units": "1"}
    return alpha
