r"""Depth exponents of a run, each with its interval, a law-aware twin and a convergence verdict.

For one series (a target, scheme and temperature) with final test losses
:math:`\mathcal L(\ell, \text{replicate}, \text{batch})` of the full-length students:

* ``exponent``: minus the least-squares slope of :math:`\log \overline{\mathcal L}(\ell)` on
  :math:`\log \ell` (the replicate-mean curve) -- *how fast the loss falls over these depths*;
  its interval from independent replicates (:mod:`resflow.analysis.intervals`);
* ``law_exponent``: the same after dividing out the finite teacher's factor
  (:mod:`resflow.analysis.law_fit`) -- *the exponent against an infinitely deep teacher, if the
  finite-teacher law holds*; this is the number to hold against the asymptotic laws
  (ensemble 1, procedural 2-3), and the one the regime is read from;
* ``offset_exponent``/``offset_floor``: a fit :math:`A\ell^{-\alpha} + C` of the mean curve, a
  check for a floor;
* the verdict (:mod:`resflow.analysis.verdict`): converged only if the exponent does not move
  between students trained half as long and the full length; an unconverged series is never
  classified (an unconverged procedural run imitates :math:`\alpha \approx 1`) and its exponents
  are bounds.

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
from .intervals import BOOTSTRAP_SAMPLES, CONFIDENCE, exponent_interval
from .law_fit import finite_teacher_factor, law_for_target
from .regimes import classify
from .verdict import LOSS_TOLERANCE, convergence_verdict

__all__ = ["FitSettings", "SeriesFit", "fit_exponent", "fit_offset", "fit_dataset", "exponent_over_training",
           "series_dims"]


@dataclass(frozen=True, kw_only=True)
class FitSettings:
    """How a run's series are fitted."""

    confidence: float = CONFIDENCE
    bootstrap_samples: int = BOOTSTRAP_SAMPLES
    loss_tolerance: float = LOSS_TOLERANCE

    def __post_init__(self) -> None:
        object.__setattr__(self, "confidence", check_real("confidence", self.confidence, low=0.0, high=1.0,
                                                          low_open=True, high_open=True))
        object.__setattr__(self, "bootstrap_samples", check_int("bootstrap_samples", self.bootstrap_samples,
                                                                minimum=10))
        object.__setattr__(self, "loss_tolerance", check_real("loss_tolerance", self.loss_tolerance, low=0.0))

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
    half_exponent: float
    exponent_shift: float
    loss_improvement: float
    converged: bool
    verdict: str
    regime: str

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["depths"], out["losses"] = list(self.depths), list(self.losses)
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in out.items()}


def series_dims(ds: xr.Dataset) -> list[str]:
    """Dimensions that label one loss-vs-depth series (all but depth, replicate, length and the inner ones)."""
    return [d for d in ("target", "scheme", "student_groups", "temperature") if d in ds.dims]


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
             verdict: str, regime: str) -> SeriesFit:
    nan = math.nan
    return SeriesFit(
        target=str(label.get("target", "")), loss=loss, scheme=str(label.get("scheme", "")),
        student_groups=int(label.get("student_groups", 0)),
        temperature=float(label["temperature"]) if "temperature" in label else None, depths=tuple(depths), losses=(),
        n_replicates=n, exponent=nan, ci_low=nan, ci_high=nan, ci_method="none", boot_low=nan, boot_high=nan,
        law=law, teacher_depth=teacher_depth, law_exponent=nan, law_ci_low=nan, law_ci_high=nan,
        offset_exponent=None, offset_floor=None, half_exponent=nan, exponent_shift=nan, loss_improvement=nan,
        converged=False, verdict=verdict, regime=regime)


def _require_toy_run(ds: xr.Dataset) -> None:
    """A clear error for a Dataset that is not a toy run of this resflow (a foreign or damaged record)."""
    from ..store import schema_problems

    missing = schema_problems(ds, "toy-run")
    if missing:
        record = ds.attrs.get("store_record", "the dataset")
        raise ConfigError(f"{record} is not a toy run this resflow can fit: it lacks {', '.join(missing)}. Fit the "
                          "records `resflow run` writes (schema: docs/design/store.md).")


def fit_dataset(ds: xr.Dataset, settings: FitSettings | None = None) -> list[SeriesFit]:
    """Fit every series of a ``toy-run`` Dataset (see the module docstring)."""
    settings = settings or FitSettings()
    _require_toy_run(ds)
    loss = ds.attrs.get("loss", "?")
    teacher_depth = _teacher_depth(ds)
    dims = series_dims(ds)
    stacked = ds.stack(series=dims) if dims else ds.expand_dims(series=[0])
    lengths = [float(v) for v in ds["length"].values]
    fits = []
    for i in range(stacked.sizes["series"]):
        one = stacked.isel(series=i)
        label = {d: one[d].item() for d in dims}
        target, scheme = str(label.get("target", "")), str(label.get("scheme", "euler"))
        law = law_for_target(target)
        depths = [int(d) for d in one["depth"].values]
        full = one.sel(length=max(lengths))
        batches = full["final_loss_batch"].transpose("depth", "replicate", "eval_batch").values
        n_rep = int(one.sizes["replicate"])
        if bool(one["failed"].sum() > 0):
            fits.append(_nan_fit(label, loss, depths, n_rep, law, teacher_depth, "not converged: a student failed",
                                 "failed"))
            continue
        if not np.all(np.isfinite(batches)) or len(depths) < 2:
            fits.append(_nan_fit(label, loss, depths, n_rep, law, teacher_depth, "not converged: incomplete run",
                                 "unconverged"))
            continue
        plain = exponent_interval(depths, batches, confidence=settings.confidence, samples=settings.bootstrap_samples)
        factor = finite_teacher_factor(law, depths, teacher_depth)
        lawful = (exponent_interval(depths, batches, confidence=settings.confidence,
                                    samples=settings.bootstrap_samples, transform=factor)
                  if np.all(np.isfinite(factor)) else None)
        means = batches.mean(axis=(1, 2))
        half = (one.sel(length=0.5)["final_loss_batch"].mean(("replicate", "eval_batch")).transpose("depth").values
                if 0.5 in lengths and max(lengths) == 1.0 else None)
        verdict = convergence_verdict(depths, means, half, plain.value, plain.half_width,
                                      loss_tolerance=settings.loss_tolerance)
        offset = fit_offset(depths, means)
        interval = lawful or plain
        fits.append(SeriesFit(
            target=target, loss=loss, scheme=scheme, student_groups=int(label.get("student_groups", 0)),
            temperature=float(label["temperature"]) if "temperature" in label else None,
            depths=tuple(depths), losses=tuple(float(v) for v in means), n_replicates=n_rep,
            exponent=plain.value, ci_low=plain.low, ci_high=plain.high, ci_method=plain.method,
            boot_low=plain.boot_low, boot_high=plain.boot_high, law=law, teacher_depth=teacher_depth,
            law_exponent=lawful.value if lawful else math.nan, law_ci_low=lawful.low if lawful else math.nan,
            law_ci_high=lawful.high if lawful else math.nan,
            offset_exponent=None if offset is None else offset[1], offset_floor=None if offset is None else offset[2],
            half_exponent=verdict.half_exponent, exponent_shift=verdict.exponent_shift,
            loss_improvement=verdict.loss_improvement, converged=verdict.converged, verdict=verdict.text,
            regime=classify(interval.low, interval.high, scheme, verdict.converged),
        ))
    return fits


def exponent_over_training(ds: xr.Dataset) -> xr.DataArray:
    """Fitted exponent of the replicate-mean test loss of the full-length students at every evaluation step."""
    mean = ds["test_loss"].sel(length=ds["length"].max()).mean("replicate")
    depth = mean["depth"].values.astype(float)
    alpha = xr.apply_ufunc(lambda values: slopes(depth, values), mean, input_core_dims=[["depth"]])
    alpha.attrs = {"long_name": "depth exponent of the test loss during training", "units": "1"}
    return alpha
