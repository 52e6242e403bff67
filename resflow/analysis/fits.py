r"""Depth exponents of a run, each with its interval, a law-aware twin, a convergence verdict and an
asymptotic estimate.

For one series (a target, scheme and temperature) with final test losses
:math:`\mathcal L(\ell, \text{replicate}, \text{length}, \text{batch})`:

* ``exponent``: each replicate's least-squares slope of :math:`-\log \mathcal L(\ell)` on
  :math:`\log \ell` at the longest training length, averaged over replicates -- *how fast the loss
  falls over these depths*; its interval is Student's t over the same per-replicate slopes
  (:mod:`resflow.analysis.intervals`: one estimator);
* ``law_exponent``: the same after dividing out the finite teacher's factor
  (:mod:`resflow.analysis.law_fit`) -- *the exponent against an infinitely deep teacher, if the
  finite-teacher law holds*; the number to hold against the asymptotic laws (ensemble 1,
  procedural 2-3), and the one the regime is read from; refused (NaN, law ``"none"``) for teachers
  without a derived factor;
* ``offset_exponent``/``offset_floor``: a fit :math:`A\ell^{-\alpha} + C` of the mean curve, a
  check for a floor;
* the verdict (:mod:`resflow.analysis.verdict`, version 2): converged only if the exponent's drift
  between the two longest lengths is within a fixed tolerance and no depth has much left to gain;
  an unconverged series is never classified (an unconverged procedural run imitates
  :math:`\alpha \approx 1`) and its exponents are bounds;
* ``asymptotic_exponent`` (and its law-aware twin): the exponent of the limits
  :math:`\mathcal L_\infty(\ell)` extrapolated from the training lengths
  (:mod:`resflow.analysis.extrapolation`) -- an **estimate** of where training is heading, always
  labelled so, never "converged"; ``asymptotic_regime`` is the regime that estimate points to.

Fits are data: :mod:`resflow.analysis.fit_records` makes a ``fit`` store record and reads it back.
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
from ..errors import ConfigError
from ..loglog import slopes
from ..records import SERIES_DIMS, checked_run, is_kl
from .extrapolation import asymptotic_interval, geometric_ratio
from .intervals import BOOTSTRAP_SAMPLES, CONFIDENCE, exponent_interval
from .law_fit import NO_LAW, finite_teacher_factor, law_for_target
from .regimes import classify
from .verdict import DRIFT_TOLERANCE, GAIN_TOLERANCE, convergence_verdict

__all__ = ["FitSettings", "SeriesFit", "fit_exponent", "fit_offset", "fit_dataset", "exponent_over_training",
           "fit_series"]


@dataclass(frozen=True, kw_only=True)
class FitSettings:
    """How a run's series are fitted."""

    confidence: float = CONFIDENCE
    bootstrap_samples: int = BOOTSTRAP_SAMPLES
    drift_tolerance: float = DRIFT_TOLERANCE
    gain_tolerance: float = GAIN_TOLERANCE

    def __post_init__(self) -> None:
        object.__setattr__(self, "confidence", check_real("confidence", self.confidence, low=0.0, high=1.0,
                                                          low_open=True, high_open=True))
        object.__setattr__(self, "bootstrap_samples", check_int("bootstrap_samples", self.bootstrap_samples,
                                                                minimum=10))
        for name in ("drift_tolerance", "gain_tolerance"):
            object.__setattr__(self, name, check_real(name, getattr(self, name), low=0.0, low_open=True))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


@dataclass(frozen=True, kw_only=True)
class SeriesFit:
    """The fitted depth exponents of one loss-vs-depth series (see the module docstring)."""

    target: str
    loss: str
    scheme: str
    temperature: float | None
    depths: tuple[int, ...]
    student_groups: int = 0  # 0: plain students; K: weights shared within K groups of layers
    losses: tuple[float, ...]  # replicate-mean final losses of the full-length students
    n_replicates: int
    exponent: float
    ci_low: float
    ci_high: float
    ci_method: str
    boot_low: float
    boot_high: float
    law: str
    teacher_depth: float
    law_exponent: float
    law_ci_low: float
    law_ci_high: float
    offset_exponent: float | None
    offset_floor: float | None
    lengths: tuple[float, ...] = (1.0,)  # training lengths of the run (fractions of each student's steps)
    previous_exponent: float = math.nan  # the exponent at the second-longest length
    drift: float = math.nan  # exponent at the longest length minus at the previous one (paired, mean)
    drift_low: float = math.nan  # its 90% interval (the verdict's equivalence test)
    drift_high: float = math.nan
    limits: tuple[float, ...] = ()  # extrapolated limit of the loss per depth (replicate mean; NaN: none)
    gains: tuple[float, ...] = ()  # remaining gain per depth (replicate mean; inf: no limit in sight)
    gain_highs: tuple[float, ...] = ()  # upper end of its 90% interval
    asymptotic_exponent: float = math.nan  # the exponent of the limits: an estimate, never "converged"
    asymptotic_ci_low: float = math.nan
    asymptotic_ci_high: float = math.nan
    asymptotic_law_exponent: float = math.nan  # its law-aware twin (finite-teacher factor divided out)
    asymptotic_law_ci_low: float = math.nan
    asymptotic_law_ci_high: float = math.nan
    asymptotic_regime: str = "none"  # the regime the asymptotic estimate points to (an estimate)
    converged: bool
    verdict: str
    regime: str

    @property
    def remaining_gain(self) -> float:
        """The largest remaining gain over the depths (inf: a depth with no limit in sight)."""
        return max(self.gains, default=math.nan)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for name in ("depths", "losses", "lengths", "limits", "gains", "gain_highs"):
            out[name] = [None if isinstance(v, float) and not np.isfinite(v) else v for v in getattr(self, name)]
        out["remaining_gain"] = self.remaining_gain
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in out.items()}


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


def _teacher_depth(ds: xr.Dataset) -> float:
    return float(json.loads(ds.attrs.get("config", "{}")).get("teacher_depth", math.inf))


def _nan_fit(label: dict, loss: str, depths: list[int], n: int, law: str, teacher_depth: float,
             verdict: str, regime: str, lengths: tuple[float, ...]) -> SeriesFit:
    nan = math.nan
    return SeriesFit(
        target=str(label.get("target", "")), loss=loss, scheme=str(label.get("scheme", "")),
        student_groups=int(label.get("student_groups", 0)),
        temperature=float(label["temperature"]) if "temperature" in label else None, depths=tuple(depths), losses=(),
        n_replicates=n, exponent=nan, ci_low=nan, ci_high=nan, ci_method="none", boot_low=nan, boot_high=nan,
        law=law, teacher_depth=teacher_depth, law_exponent=nan, law_ci_low=nan, law_ci_high=nan,
        offset_exponent=None, offset_floor=None, lengths=lengths, converged=False, verdict=verdict, regime=regime)


def _geometric(lengths) -> bool:
    try:
        geometric_ratio(lengths)
    except ConfigError:
        return False
    return True


def fit_series(depths, lengths, batches: np.ndarray, *, target: str, scheme: str, teacher_depth: float,
               settings: FitSettings, **label: Any) -> SeriesFit:
    """Fit one series from its final losses ``batches`` ``(depth, replicate, length, eval_batch)`` (every
    student finished); ``label`` holds ``loss``, ``temperature``, ``student_groups`` (module docstring)."""
    depths, lengths = [int(d) for d in depths], tuple(float(v) for v in lengths)
    batches = np.asarray(batches, float)
    full = batches[:, :, -1]  # (depth, replicate, batch)
    law = law_for_target(target, teacher_depth)
    conf, samples = settings.confidence, settings.bootstrap_samples
    plain = exponent_interval(depths, full, confidence=conf, samples=samples)
    factor = finite_teacher_factor(law, depths, teacher_depth) if law is not None else None
    lawful = (exponent_interval(depths, full, confidence=conf, samples=samples, transform=factor)
              if factor is not None and np.all(np.isfinite(factor)) else None)
    verdict = convergence_verdict(depths, lengths, batches, drift_tolerance=settings.drift_tolerance,
                                  gain_tolerance=settings.gain_tolerance)
    nan_interval = dict(value=math.nan, low=math.nan, high=math.nan)
    asym = asym_law = nan_interval
    if len(lengths) >= 3 and _geometric(lengths):
        one = asymptotic_interval(depths, batches, confidence=conf)
        asym = dict(value=one.value, low=one.low, high=one.high)
        if lawful is not None:
            two = asymptotic_interval(depths, batches, transform=factor, confidence=conf)
            asym_law = dict(value=two.value, low=two.low, high=two.high)
    means = full.mean(axis=(1, 2))
    offset = fit_offset(depths, means)
    interval = lawful or plain
    read = asym_law if np.isfinite(asym_law["low"]) else asym
    asymptotic_regime = (classify(read["low"], read["high"], scheme, True) + " (estimate)"
                         if np.isfinite(read["low"]) and np.isfinite(read["high"]) else "none")
    temperature = label.get("temperature")
    return SeriesFit(
        target=target, loss=str(label.get("loss", "?")), scheme=scheme,
        student_groups=int(label.get("student_groups", 0)),
        temperature=None if temperature is None else float(temperature),
        depths=tuple(depths), losses=tuple(float(v) for v in means), n_replicates=int(full.shape[1]),
        exponent=plain.value, ci_low=plain.low, ci_high=plain.high, ci_method=plain.method,
        boot_low=plain.boot_low, boot_high=plain.boot_high, law=law or NO_LAW, teacher_depth=teacher_depth,
        law_exponent=lawful.value if lawful else math.nan, law_ci_low=lawful.low if lawful else math.nan,
        law_ci_high=lawful.high if lawful else math.nan,
        offset_exponent=None if offset is None else offset[1], offset_floor=None if offset is None else offset[2],
        lengths=lengths, previous_exponent=verdict.previous_exponent, drift=verdict.drift,
        drift_low=verdict.drift_low, drift_high=verdict.drift_high, limits=verdict.limits, gains=verdict.gains,
        gain_highs=verdict.gain_highs,
        asymptotic_exponent=asym["value"], asymptotic_ci_low=asym["low"], asymptotic_ci_high=asym["high"],
        asymptotic_law_exponent=asym_law["value"], asymptotic_law_ci_low=asym_law["low"],
        asymptotic_law_ci_high=asym_law["high"], asymptotic_regime=asymptotic_regime,
        converged=verdict.converged, verdict=verdict.text,
        regime=classify(interval.low, interval.high, scheme, verdict.converged),
    )


def fit_dataset(ds: xr.Dataset, settings: FitSettings | None = None) -> list[SeriesFit]:
    """Fit every series of a ``toy-run`` Dataset (see the module docstring)."""
    settings = settings or FitSettings()
    ds = checked_run(ds)
    loss = ds.attrs.get("loss", "?")
    teacher_depth = _teacher_depth(ds)
    dims = list(SERIES_DIMS)
    stacked = ds.stack(series=dims)
    lengths = tuple(sorted(float(v) for v in ds["length"].values))
    fits = []
    for i in range(stacked.sizes["series"]):
        one = stacked.isel(series=i)
        label = {d: one[d].item() for d in dims}
        if not is_kl(ds):
            del label["temperature"]  # NaN: an MSE run
        target, scheme = str(label.get("target", "")), str(label.get("scheme", "euler"))
        law = law_for_target(target, teacher_depth) or NO_LAW
        depths = [int(d) for d in one["depth"].values]
        batches = one["final_loss_batch"].sel(length=list(lengths)).transpose(
            "depth", "replicate", "length", "eval_batch").values
        n_rep = int(one.sizes["replicate"])
        if bool(one["failed"].sum() > 0):
            fits.append(_nan_fit(label, loss, depths, n_rep, law, teacher_depth, "not converged: a student failed",
                                 "failed", lengths))
            continue
        if not np.all(np.isfinite(batches[:, :, -1])) or len(depths) < 2:
            fits.append(_nan_fit(label, loss, depths, n_rep, law, teacher_depth, "not converged: incomplete run",
                                 "unconverged", lengths))
            continue
        fits.append(fit_series(depths, lengths, batches, target=target, scheme=scheme, teacher_depth=teacher_depth,
                               settings=settings, loss=loss, temperature=label.get("temperature"),
                               student_groups=label.get("student_groups", 0)))
    return fits


def exponent_over_training(ds: xr.Dataset) -> xr.DataArray:
    """Fitted exponent of the replicate-mean test loss of the full-length students at every evaluation step."""
    mean = ds["test_loss"].sel(length=ds["length"].max()).mean("replicate")
    depth = mean["depth"].values.astype(float)
    alpha = xr.apply_ufunc(lambda values: slopes(depth, values), mean, input_core_dims=[["depth"]])
    alpha.attrs = {"long_name": "depth exponent of the test loss during training", "units": "1"}
    return alpha
