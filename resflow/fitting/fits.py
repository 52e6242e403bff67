r"""Depth exponents of a run, each with its interval, a law-aware twin, verdict v4 (the exponent certified
when its routes agree and it has stopped moving), verdict v2 and an asymptotic estimate.

For one series (a target, scheme, temperature and structure) with final test losses
:math:`\mathcal L(\ell, \text{replicate}, \text{route}, \text{init}, \text{length}, \text{batch})`:

* the **best loss** of a depth and replicate is the lowest full-length loss over its routes and inits (the
  student that sets it is the one every other statistic of the cell reads, at every length);
* ``exponent``: each replicate's least-squares slope of :math:`-\log \mathcal L(\ell)` on
  :math:`\log \ell` of the best losses, averaged over replicates -- *how fast the loss falls over these
  depths*; ``replicate_ci_low``/``replicate_ci_high`` is Student's t over the same per-replicate slopes
  (:mod:`resflow.fitting.intervals`: one estimator), and the reported interval ``ci_low``/``ci_high`` widens
  it so that it holds **where training goes**: by the **route error**
  (:func:`~resflow.fitting.certification.route_error`: down by the spreads of the shallow depths, up by those
  of the deep ones, since a trained loss bounds the reachable loss from above) and by the **remaining drift**
  (:mod:`resflow.fitting.drift`: how far the exponent may still move, from the geometric decay of its drift
  per doubling of training along the run's own lengths);
* verdict v4 (:mod:`resflow.fitting.certification`): the exponent is certified (``exponent_certified``) when
  every depth's routes agree -- their best students, tested over the replicates -- and the remaining drift's
  bound is within ``FitSettings.exponent_tolerance``; otherwise it is a bound and ``certificate`` says why;
  ``length_exponents``, ``drift_per_doubling``, ``remaining_drift`` say how it moves;
* ``law_exponent``: the same after dividing out the finite teacher's factor
  (:mod:`resflow.fitting.law_fit`) -- *the exponent against an infinitely deep teacher, if the finite-teacher
  law holds*; the number to hold against the asymptotic laws (ensemble 1, procedural 2-3), and the one the
  regime is read from; refused (NaN, law ``"none"``) for teachers without a derived factor;
* ``offset_exponent``/``offset_floor``: a fit :math:`A\ell^{-\alpha} + C` of the mean curve, a
  check for a floor;
* verdict v2 (:mod:`resflow.fitting.verdict`) of the best students: converged only if the exponent's
  drift between the two longest lengths is within a fixed tolerance and no depth has much left to gain --
  one route has stopped improving; the ``regime`` is assigned only to a certified series (an unconverged
  procedural run imitates :math:`\alpha \approx 1`);
* ``asymptotic_exponent`` (and its law-aware twin): the exponent of the limits
  :math:`\mathcal L_\infty(\ell)` extrapolated from the training lengths
  (:mod:`resflow.fitting.extrapolation`) -- an **estimate** of where training is heading, always
  labelled so, never "converged"; ``asymptotic_regime`` is the regime that estimate points to.

Fits are data: :mod:`resflow.fitting.fit_records` makes a ``fit`` store record and reads it back.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from ..errors import ConfigError
from ..loglog import slopes
from ..records import SERIES_DIMS, START_DIMS, best_start, checked_run, is_kl, trained_cells
from .certification import certify_depths, certify_exponent, route_error
from .drift import best_along_training, exponent_drift, exponents_along_training
from .extrapolation import asymptotic_interval, geometric_ratio
from .intervals import exponent_interval
from .law_fit import NO_LAW, finite_teacher_factor, law_for_target
from .power_law import fit_exponent, fit_offset
from .regimes import classify
from .settings import FitSettings
from .verdict import convergence_verdict

__all__ = ["FitSettings", "SeriesFit", "fit_exponent", "fit_offset", "fit_dataset", "exponent_over_training",
           "fit_series", "best_students"]


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
    # verdict v4 (resflow.fitting.certification, resflow.fitting.drift)
    exponent_certified: bool = False  # routes agree at every depth and the exponent has stopped moving
    certified_depths: tuple[int, ...] = ()  # the depths whose routes agree
    length_exponents: tuple[float, ...] = ()  # mean alpha at each training length (best start at each)
    drift_per_doubling: float = math.nan  # the last drift of alpha per doubling of training (paired, mean)
    drift_per_doubling_low: float = math.nan  # its 95% interval
    drift_per_doubling_high: float = math.nan
    drift_ratio: float = math.nan  # the drift's decay per doubling (point) and the one its bound used
    drift_ratio_high: float = math.nan
    drift_case: str = "not checked"  # decaying, not shrinking, within noise, not checked
    remaining_drift: float = math.nan  # alpha still to come with more training (signed estimate)
    remaining_drift_low: float = -math.inf  # its interval (signed ends)
    remaining_drift_high: float = math.inf
    # per depth: worst route's best loss / best - 1 (largest over replicates)
    route_spread: tuple[float, ...] = ()
    route_spread_high: tuple[float, ...] = ()  # its upper 95% end over the evaluation batches
    depth_verdicts: tuple[str, ...] = ()  # per depth: "certified" or "not certified: why"
    init_spread: tuple[float, ...] = ()  # per depth: pooled sd of log loss over inits (one route and teacher)
    teacher_spread: tuple[float, ...] = ()  # per depth: sd of the best log loss over replicates (teachers)
    routes: tuple[str, ...] = ()  # the routes that trained the series
    inits: int = 1  # initialisations per route
    route_error_low: float = 0.0  # what the route spreads add below the interval (both exponents)
    route_error_high: float = 0.0  # and above it
    replicate_ci_low: float = math.nan  # the interval over replicates alone (without the route error)
    replicate_ci_high: float = math.nan
    replicates: tuple[int, ...] = ()  # replicate ids, in the order of the per-replicate exponents
    replicate_exponents: tuple[float, ...] = ()  # alpha of each replicate's best losses
    replicate_law_exponents: tuple[float, ...] = ()  # law alpha of each replicate's best losses
    certificate: str = "not certified: verdict v4 not run"
    converged: bool
    verdict: str
    regime: str

    @property
    def remaining_gain(self) -> float:
        """The largest remaining gain over the depths (inf: a depth with no limit in sight)."""
        return max(self.gains, default=math.nan)

    @property
    def standing(self) -> str:
        """``"certified"`` or ``"bound"``: what the exponent is (verdict v4)."""
        return "certified" if self.exponent_certified else "bound"

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for name in ("depths", "losses", "lengths", "limits", "gains", "gain_highs", "route_spread",
                     "route_spread_high", "init_spread", "teacher_spread", "replicate_exponents",
                     "replicate_law_exponents", "certified_depths", "replicates", "routes", "depth_verdicts",
                     "length_exponents"):
            values = getattr(self, name)
            out[name] = [None if isinstance(v, float) and not np.isfinite(v) else v for v in values]
        out["remaining_gain"] = self.remaining_gain
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in out.items()}


def _teacher_depth(ds: xr.Dataset) -> float:
    return float(json.loads(ds.attrs.get("config", "{}")).get("teacher_depth", math.inf))


def _nan_fit(label: dict, loss: str, depths: list[int], n: int, law: str, teacher_depth: float,
             verdict: str, regime: str, lengths: tuple[float, ...]) -> SeriesFit:
    nan = math.nan
    return SeriesFit(
        target=str(label.get("target", "")), loss=loss, scheme=str(label.get("scheme", "")),
        student_groups=int(label.get("student_groups", 0)),
        temperature=float(label["temperature"]) if "temperature" in label else None, depths=tuple(depths),
        losses=(), n_replicates=n, exponent=nan, ci_low=nan, ci_high=nan, ci_method="none", boot_low=nan,
        boot_high=nan, law=law, teacher_depth=teacher_depth, law_exponent=nan, law_ci_low=nan,
        law_ci_high=nan, offset_exponent=None, offset_floor=None, lengths=lengths, converged=False,
        verdict=verdict, regime=regime)


def _geometric(lengths) -> bool:
    try:
        geometric_ratio(lengths)
    except ConfigError:
        return False
    return True


def best_students(batches: np.ndarray, trained: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The best start of every (depth, replicate) cell: ``(best, found)`` with ``best`` the losses
    ``(depth, replicate, length, eval_batch)`` of the student (route, init) whose full-length loss is lowest
    among the finished ones, and ``found`` ``(depth, replicate)`` False where none finished.  ``batches`` is
    ``(depth, replicate, route, init, length, eval_batch)``, ``trained``
    ``(depth, replicate, route, init)``."""
    final = np.asarray(batches, float)[..., -1, :].mean(axis=-1)
    usable = np.asarray(trained, bool) & np.all(np.isfinite(np.asarray(batches, float)), axis=(-2, -1))
    score = np.where(usable, final, np.inf).reshape(*final.shape[:2], -1)
    pick = score.argmin(axis=-1)
    starts = np.asarray(batches, float).reshape(*final.shape[:2], -1, *batches.shape[-2:])
    best = np.take_along_axis(starts, pick[:, :, None, None, None], axis=2)[:, :, 0]
    return best, np.isfinite(np.take_along_axis(score, pick[:, :, None], axis=2)[:, :, 0])


def _widened(down: float, up: float, drift_down: float, drift_up: float) -> str:
    """How an exponent's interval over replicates was widened, in words (empty: not at all)."""
    parts = []
    if down + up > 0:
        parts.append(f"the route spreads (-{down:.3f}, +{up:.3f})")
    if drift_down + drift_up > 0:
        parts.append(f"the remaining drift (-{drift_down:.3f}, +{drift_up:.3f})")
    return ", widened by " + " and ".join(parts) if parts else ""


def fit_series(depths, lengths, batches: np.ndarray, *, target: str, scheme: str, teacher_depth: float,
               settings: FitSettings, trained: np.ndarray | None = None, routes=("scratch",),
               replicates=None, **label: Any) -> SeriesFit:
    """Fit one series from its final losses ``batches``
    ``(depth, replicate, route, init, length, eval_batch)`` (``trained``: which of those students exist,
    default all; ``routes`` names the route axis; a 4-d array ``(depth, replicate, length, eval_batch)`` is
    one start); every (depth, replicate) needs a finished student.  ``label`` holds ``loss``,
    ``temperature``, ``student_groups`` (module docstring)."""
    depths, lengths = [int(d) for d in depths], tuple(float(v) for v in lengths)
    batches = np.asarray(batches, float)
    if batches.ndim == 4:
        batches = batches[:, :, None, None]
    trained = np.ones(batches.shape[:4], bool) if trained is None else np.asarray(trained, bool)
    replicates = tuple(range(batches.shape[1])) if replicates is None else tuple(int(r) for r in replicates)
    best, found = best_students(batches, trained)
    if not found.all():
        raise ValueError("every (depth, replicate) needs a finished student")
    full = best[:, :, -1]  # (depth, replicate, batch)
    law = law_for_target(target, teacher_depth)
    conf, samples = settings.confidence, settings.bootstrap_samples
    plain = exponent_interval(depths, full, confidence=conf, samples=samples)
    factor = finite_teacher_factor(law, depths, teacher_depth) if law is not None else None
    lawful = (exponent_interval(depths, full, confidence=conf, samples=samples, transform=factor)
              if factor is not None and np.all(np.isfinite(factor)) else None)
    certificates = certify_depths(depths, lengths, batches, trained, routes,
                                  route_tolerance=settings.route_tolerance,
                                  tail_tolerance=settings.tail_tolerance)
    spreads = tuple(c.route_spread for c in certificates)
    down, up = route_error(depths, spreads)
    along = best_along_training(batches, trained)  # (depth, replicate, length, batch)
    drift = exponent_drift(depths, lengths, along, confidence=conf)
    exponent = certify_exponent(certificates, drift, tolerance=settings.exponent_tolerance)
    certified = exponent.certified
    # the interval holds where training goes: the remaining drift's room on each side
    drift_down, drift_up = max(0.0, -drift.low), max(0.0, drift.high)
    verdict = convergence_verdict(depths, lengths, best, drift_tolerance=settings.drift_tolerance,
                                  gain_tolerance=settings.gain_tolerance)
    nan_interval = dict(value=math.nan, low=math.nan, high=math.nan)
    asym = asym_law = nan_interval
    if len(lengths) >= 3 and _geometric(lengths):
        one = asymptotic_interval(depths, best, confidence=conf)
        asym = dict(value=one.value, low=one.low, high=one.high)
        if lawful is not None:
            two = asymptotic_interval(depths, best, transform=factor, confidence=conf)
            asym_law = dict(value=two.value, low=two.low, high=two.high)
    means = full.mean(axis=(1, 2))
    offset = fit_offset(depths, means)
    interval = lawful or plain
    read = asym_law if np.isfinite(asym_law["low"]) else asym
    asymptotic_regime = (classify(read["low"], read["high"], scheme, True) + " (estimate)"
                         if np.isfinite(read["low"]) and np.isfinite(read["high"]) else "none")
    certificate = exponent.text
    temperature = label.get("temperature")
    present = [str(r) for k, r in enumerate(routes) if trained[:, :, k].any()]
    return SeriesFit(
        target=target, loss=str(label.get("loss", "?")), scheme=scheme,
        student_groups=int(label.get("student_groups", 0)),
        temperature=None if temperature is None else float(temperature),
        depths=tuple(depths), losses=tuple(float(v) for v in means), n_replicates=int(full.shape[1]),
        exponent=plain.value, ci_low=plain.low - down - drift_down, ci_high=plain.high + up + drift_up,
        ci_method=plain.method + _widened(down, up, drift_down, drift_up),
        boot_low=plain.boot_low, boot_high=plain.boot_high, law=law or NO_LAW, teacher_depth=teacher_depth,
        law_exponent=lawful.value if lawful else math.nan,
        law_ci_low=lawful.low - down - drift_down if lawful else math.nan,
        law_ci_high=lawful.high + up + drift_up if lawful else math.nan,
        offset_exponent=None if offset is None else offset[1],
        offset_floor=None if offset is None else offset[2], lengths=lengths,
        previous_exponent=verdict.previous_exponent, drift=verdict.drift, drift_low=verdict.drift_low,
        drift_high=verdict.drift_high, limits=verdict.limits, gains=verdict.gains,
        gain_highs=verdict.gain_highs,
        asymptotic_exponent=asym["value"], asymptotic_ci_low=asym["low"], asymptotic_ci_high=asym["high"],
        asymptotic_law_exponent=asym_law["value"], asymptotic_law_ci_low=asym_law["low"],
        asymptotic_law_ci_high=asym_law["high"], asymptotic_regime=asymptotic_regime,
        exponent_certified=certified, certified_depths=exponent.agreeing_depths,
        length_exponents=tuple(float(v) for v in np.nanmean(exponents_along_training(depths, along), axis=0)),
        drift_per_doubling=drift.drift, drift_per_doubling_low=drift.drift_low,
        drift_per_doubling_high=drift.drift_high, drift_ratio=drift.ratio, drift_ratio_high=drift.ratio_high,
        drift_case=drift.case, remaining_drift=drift.remaining, remaining_drift_low=drift.low,
        remaining_drift_high=drift.high,
        route_spread=spreads, route_spread_high=tuple(c.route_spread_high for c in certificates),
        depth_verdicts=tuple(c.text for c in certificates),
        init_spread=tuple(c.init_spread for c in certificates),
        teacher_spread=tuple(c.teacher_spread for c in certificates), routes=tuple(present),
        inits=int(trained.any(axis=(0, 1, 2)).sum()), route_error_low=down, route_error_high=up,
        replicate_ci_low=plain.low,
        replicate_ci_high=plain.high, replicates=replicates, replicate_exponents=plain.per_replicate,
        replicate_law_exponents=lawful.per_replicate if lawful else (), certificate=certificate,
        converged=verdict.converged, verdict=verdict.text,
        regime=classify(interval.low - down - drift_down, interval.high + up + drift_up, scheme, certified),
    )


def fit_dataset(ds: xr.Dataset | Any, settings: FitSettings | None = None) -> list[SeriesFit]:
    """Fit every series of a toy run (see the module docstring): one :class:`SeriesFit` per target, scheme,
    structure and temperature.

    Parameters
    ----------
    ds : xarray.Dataset or TrainingResult
        A ``toy-run`` record, or what :func:`resflow.train` returned: fitted as its
        :meth:`~resflow.training.TrainingResult.to_dataset`, the same arrangement a record holds.
    settings : FitSettings, optional
    """
    settings = settings or FitSettings()
    if not isinstance(ds, xr.Dataset):
        to_dataset = getattr(ds, "to_dataset", None)
        if isinstance(ds, xr.DataArray) or not callable(to_dataset):
            raise ConfigError("fit_dataset fits a toy run: a toy-run Dataset (a record) or the "
                              f"TrainingResult resflow.train returns; got {type(ds).__name__}. "
                              "Pass the record or the result itself.")
        ds = to_dataset()
    ds = checked_run(ds)
    for dim in START_DIMS:  # one route or init selected: a dim of size 1 again
        if dim not in ds.dims:
            if ds[dim].ndim > 0:
                raise ConfigError("fit_dataset fits a whole toy run (every route and init), not a view of "
                                  "one start per cell (resflow.records.best_start); pass the record itself.")
            ds = ds.expand_dims(dim)
    loss = ds.attrs.get("loss", "?")
    teacher_depth = _teacher_depth(ds)
    dims = list(SERIES_DIMS)
    present = trained_cells(ds).isel(length=-1)
    stacked = ds.assign(trained=present).stack(series=dims)
    lengths = tuple(sorted(float(v) for v in ds["length"].values))
    routes = [str(r) for r in ds["route"].values]
    replicates = [int(r) for r in ds["replicate"].values]
    order = ("depth", "replicate", *START_DIMS)
    fits = []
    for i in range(stacked.sizes["series"]):
        one = stacked.isel(series=i)
        label = {d: one[d].item() for d in dims}
        if not is_kl(ds):
            del label["temperature"]  # NaN: an MSE run
        target, scheme = str(label.get("target", "")), str(label.get("scheme", "euler"))
        law = law_for_target(target, teacher_depth) or NO_LAW
        depths = [int(d) for d in one["depth"].values]
        batches = (one["final_loss_batch"].sel(length=list(lengths))
                   .transpose(*order, "length", "eval_batch").values)
        trained = one["trained"].transpose(*order).values
        failed = (one["failed"] > 0).any("length").transpose(*order).values
        # a student failed at any length: none of it
        batches = np.where(failed[..., None, None], np.nan, batches)
        n_rep = int(one.sizes["replicate"])
        _, found = best_students(batches, trained)
        if not found.all():
            reason = "a student failed" if failed.any() else "incomplete run"
            fits.append(_nan_fit(label, loss, depths, n_rep, law, teacher_depth,
                                 f"not converged: {reason} (no student finished some depth and replicate)",
                                 "failed" if failed.any() else "incomplete", lengths))
            continue
        if len(depths) < 2:
            fits.append(_nan_fit(label, loss, depths, n_rep, law, teacher_depth,
                                 "not converged: incomplete run", "incomplete", lengths))
            continue
        fits.append(fit_series(depths, lengths, batches, target=target, scheme=scheme,
                               teacher_depth=teacher_depth, settings=settings, trained=trained, routes=routes,
                               replicates=replicates, loss=loss, temperature=label.get("temperature"),
                               student_groups=label.get("student_groups", 0)))
    return fits


def exponent_over_training(ds: xr.Dataset) -> xr.DataArray:
    """Fitted exponent of the replicate-mean test loss of the full-length students at every evaluation step
    (the best start of each cell, :func:`resflow.records.best_start`)."""
    ds = best_start(ds)
    mean = ds["test_loss"].sel(length=ds["length"].max()).mean("replicate")
    depth = mean["depth"].values.astype(float)
    alpha = xr.apply_ufunc(lambda values: slopes(depth, values), mean, input_core_dims=[["depth"]])
    alpha.attrs = {"long_name": "depth exponent of the test loss during training", "units": "1"}
    return alpha
