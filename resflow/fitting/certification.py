r"""Verdict v4: an exponent is certified when its routes agree at every depth and it has stopped moving.

``docs/design/certification.md`` is the design; in short, for one series (target, scheme, temperature,
structure) with final losses
:math:`\mathcal L(\ell, r, \text{route}, \text{init}, \text{length}, \text{batch})`:

* **the routes agree at a depth** (:func:`certify_depths`) when their *best* students agree: per replicate
  :math:`r` (one teacher) each route's best loss is its best initialisation's at full length
  (initialisations are starts, not witnesses that must all pass); the log ratio of two routes' best losses
  is paired by replicate, and the routes agree when the upper end of the one-sided 95% interval of its mean
  over replicates (Student's t; with one replicate, over the paired evaluation batches) is within
  ``ROUTE_TOLERANCE`` = 5% -- a depth trained by one route compares its initialisations instead (and says
  so), a depth with one start cannot agree with anything;
* **the exponent has stopped moving** (:mod:`resflow.fitting.drift`): the bound on its remaining drift,
  from the geometric decay of its drift per doubling of training, is at most ``EXPONENT_TOLERANCE``;
* the exponent is **certified** (:func:`certify_exponent`) when both hold; otherwise it is a bound, and
  the reasons say which part failed.

The tail test of every student (:func:`resflow.fitting.extrapolation.tail_test`) stays beside it as a
diagnostic -- how much of each student's own loss is left to lose -- and gates nothing: the exponent, not
every student, is what a run reports.

Why 5%: over :math:`\ell = 2, 4, 8, 16` the least-squares slope weighs the depths' log-losses by
:math:`(-0.433, -0.144, 0.144, 0.433)`; an error of 5% at every depth moves it by at most
:math:`1.154 \ln 1.05 = 0.056`, half of the exponent's tolerance.

:func:`route_error` propagates the spreads into an exponent's interval.  A trained student's loss bounds
the loss its architecture can reach from above, so the truth at a depth lies within :math:`\ln(1 + s_\ell)`
*below* the best loss, never above it: a spread at a deep depth (positive weight) can only raise the
exponent, one at a shallow depth only lower it.  The interval widens downwards by
:math:`\sum_{w_\ell < 0} |w_\ell| \ln(1+s_\ell)` and upwards by
:math:`\sum_{w_\ell > 0} w_\ell \ln(1+s_\ell)`.

Also per depth: the spread over initialisations (pooled standard deviation of log loss over the inits of
one route and teacher) and over teachers (standard deviation of the best log loss over replicates), so a
run says which of the two dominates.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from .drift import EXPONENT_TOLERANCE, RemainingDrift
from .extrapolation import TAIL_TOLERANCE, TailTest, tail_test

__all__ = ["ROUTE_TOLERANCE", "AGREEMENT_CONFIDENCE", "DepthCertificate", "certify_depths", "route_error",
           "slope_weights", "ExponentCertificate", "certify_exponent"]

ROUTE_TOLERANCE = 0.05  # routes agree when the worse route's best loss is at most 5% above the better one's
AGREEMENT_CONFIDENCE = 0.95  # one-sided: the upper end of the spread's interval (over replicates or batches)


@dataclass(frozen=True, kw_only=True)
class DepthCertificate:
    """Whether the routes agree at one depth of a series (module docstring).

    ``best`` is the best loss per replicate (NaN where no student finished); ``route_spread`` the largest
    spread over replicates (worst route's best / best route's best - 1) and ``route_spread_high`` the upper
    one-sided 95% end of the spread the agreement test used (over replicates; NaN with one start);
    ``compared`` says what was compared (``"routes"``, ``"inits"`` when one route trained the depth,
    ``"none"``); ``reasons`` why the routes do not agree (empty when they do); ``notes`` what was seen and
    gates nothing (failed students, the tail test's diagnostic).
    """

    depth: int
    certified: bool
    best: tuple[float, ...]
    best_route: tuple[str, ...]
    route_spread: float
    route_spread_high: float
    compared: str
    routes: tuple[str, ...]
    inits: int
    tail_passed: int  # students of the depth that pass the tail test (a diagnostic)
    students: int  # students of the depth (every replicate, route and init)
    worst_tail: str  # the tail test of the student with the largest bound, in words
    init_spread: float  # pooled sd of log loss over the inits of one route and replicate (NaN with one init)
    teacher_spread: float  # sd of the best log loss over replicates (NaN with one replicate)
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return ("the routes agree" if self.compared == "routes" else "the inits agree (one route)") \
            if self.certified else "not certified: " + "; ".join(self.reasons)


def slope_weights(depths) -> np.ndarray:
    """The weights :math:`w_\\ell` of the least-squares slope of log loss on log depth: the slope is
    :math:`\\sum_\\ell w_\\ell \\log \\mathcal L(\\ell)`."""
    x = np.log(np.asarray(depths, float))
    centred = x - x.mean()
    return centred / np.sum(centred**2)


def route_error(depths, spreads) -> tuple[float, float]:
    """How far the exponent of the depths' best losses may lie from the exponent of the losses their
    architectures can reach, down and up, when each of those is up to :math:`\\ln(1 + s_\\ell)` below the best
    loss (module docstring):
    :math:`(\\sum_{w<0} |w_\\ell| \\ln(1+s_\\ell), \\sum_{w>0} w_\\ell \\ln(1+s_\\ell))`.
    NaN spreads count as 0 (the depth is then uncertified and says so)."""
    s = np.log1p(np.maximum(np.nan_to_num(np.asarray(spreads, float), nan=0.0, posinf=np.inf), 0.0))
    w = slope_weights(depths)
    return float(np.sum(-w[w < 0] * s[w < 0])), float(np.sum(w[w > 0] * s[w > 0]))


def _upper_mean(values: np.ndarray) -> float:
    """The upper end of the one-sided ``AGREEMENT_CONFIDENCE`` t interval of the mean of ``values``."""
    from scipy import stats

    if values.size < 2:
        return float(values.mean())
    half = stats.t.ppf(AGREEMENT_CONFIDENCE, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size)
    return float(values.mean() + half)


def _pair_spread(first: np.ndarray, second: np.ndarray) -> float:
    """The upper end of the spread between two starts, as a ratio - 1: ``first``, ``second`` are their losses
    ``(replicate, eval_batch)``.  Over replicates: the log ratio of their mean losses, paired by replicate,
    oriented so that its mean is positive; with one replicate: the worse start's ratio to the better one over
    the paired evaluation batches."""
    if first.shape[0] >= 2:
        logs = np.log(first.mean(axis=1) / second.mean(axis=1))
        sign = 1.0 if logs.mean() >= 0 else -1.0
        return math.expm1(_upper_mean(sign * logs))
    ratios = first[0] / second[0]
    if ratios.mean() < 1:
        ratios = second[0] / first[0]
    return _upper_mean(ratios) - 1.0


def certify_depths(depths, lengths, batch_losses: np.ndarray, trained: np.ndarray, routes, *,
                   route_tolerance: float = ROUTE_TOLERANCE, tail_tolerance: float = TAIL_TOLERANCE
                   ) -> list[DepthCertificate]:
    """The :class:`DepthCertificate` of every depth of one series.

    ``batch_losses`` is ``(depth, replicate, route, init, length, eval_batch)`` (NaN where a student failed or
    does not exist), ``trained`` ``(depth, replicate, route, init)`` says which students exist, ``routes``
    names the route axis, ``lengths`` the training lengths (shortest first).
    """
    data = np.asarray(batch_losses, float)
    trained = np.asarray(trained, bool)
    routes = [str(r) for r in routes]
    out = []
    for i, depth in enumerate(depths):
        n_rep, n_route, n_init = trained[i].shape
        final = data[i, ..., -1, :]  # (rep, route, init, batch)
        done = trained[i] & np.all(np.isfinite(final), axis=-1) & np.all(np.isfinite(data[i]), axis=(-2, -1))
        means = np.where(done, final.mean(axis=-1), np.inf)  # (rep, route, init)
        here = [routes[k] for k in range(n_route) if trained[i, :, k].any()]
        inits = int(trained[i].any(axis=(0, 1)).sum())
        compared = "routes" if len(here) >= 2 else ("inits" if inits >= 2 else "none")
        # the starts compared: each route's best init, or (one route) each init
        if compared == "routes":
            keys = [(k,) for k in range(n_route) if trained[i, :, k].any()]
        else:
            keys = [(k, j) for k in range(n_route) for j in range(n_init) if trained[i, :, k, j].any()]
        per_key = {}  # key -> (rep, batch) losses of that start's best student per replicate
        for key in keys:
            sub = means[:, key[0]] if len(key) == 1 else means[:, key[0], key[1]][:, None]
            cols = np.arange(n_init) if len(key) == 1 else np.array([key[1]])
            pick = sub.argmin(axis=1)
            finished = np.isfinite(np.take_along_axis(sub, pick[:, None], axis=1)[:, 0])
            losses = final[np.arange(n_rep), key[0], cols[pick]]
            per_key[key] = np.where(finished[:, None], losses, np.nan)
        best = np.full(n_rep, np.nan)
        best_route = [""] * n_rep
        spreads, log_best, init_var = [], [], []
        tails: list[TailTest] = []
        for r in range(n_rep):
            cells = [(k, j) for k in range(n_route) for j in range(n_init) if done[r, k, j]]
            for k, j in cells:
                tails.append(tail_test(data[i, r, k, j], lengths=lengths, tolerance=tail_tolerance))
            if not cells:
                continue
            top = min(cells, key=lambda c: means[r, c[0], c[1]])
            best[r], best_route[r] = float(means[r, top[0], top[1]]), routes[top[0]]
            log_best.append(math.log(best[r]))
            for k in {c[0] for c in cells}:  # the spread over inits of one route
                logs = [math.log(means[r, k, j]) for k2, j in cells if k2 == k]
                if len(logs) >= 2:
                    init_var.append(float(np.var(logs, ddof=1)))
            values = [float(v[r].mean()) for v in per_key.values() if np.all(np.isfinite(v[r]))]
            if len(values) >= 2:
                spreads.append(max(values) / min(values) - 1.0)
        failed = int((trained[i] & ~done).sum())
        students = int(trained[i].sum())
        usable = {k: v for k, v in per_key.items() if np.all(np.isfinite(v))}
        highs = [_pair_spread(usable[a], usable[b]) for a, b in itertools.combinations(usable, 2)]
        high = max(highs) if highs else math.nan
        spread = max(spreads) if spreads else math.nan
        reasons: list[str] = []
        notes: list[str] = []
        if compared == "none":
            reasons.append("one start: no second route or init to compare")
        elif len(usable) < 2:
            reasons.append("fewer than two starts finished in every replicate")
        elif not high <= route_tolerance:
            what = "routes" if compared == "routes" else "inits (one route)"
            reasons.append(f"the {what} disagree: the worse is {spread:.1%} above the better "
                           f"(up to {high:.1%} over the replicates; tolerance {route_tolerance:.0%})")
        if failed:
            notes.append(f"{failed} student{'s' if failed > 1 else ''} failed")
        passed = sum(t.passed for t in tails)
        worst_tail = (max(tails, key=lambda t: -1.0 if math.isnan(t.gain_bound) else t.gain_bound).text
                      if tails else "")
        if passed < len(tails):
            notes.append(f"tail test (a diagnostic): {len(tails) - passed} of {len(tails)} students have "
                         f"more than {tail_tolerance:.0%} of their loss left (worst: {worst_tail})")
        out.append(DepthCertificate(
            depth=int(depth), certified=not reasons, best=tuple(float(v) for v in best),
            best_route=tuple(best_route), route_spread=spread, route_spread_high=high, compared=compared,
            routes=tuple(here), inits=inits, tail_passed=passed, students=students, worst_tail=worst_tail,
            init_spread=math.sqrt(float(np.mean(init_var))) if init_var else math.nan,
            teacher_spread=float(np.std(log_best, ddof=1)) if len(log_best) >= 2 else math.nan,
            reasons=tuple(reasons), notes=tuple(notes)))
    return out


@dataclass(frozen=True, kw_only=True)
class ExponentCertificate:
    """Verdict v4 of one series' exponent: ``certified`` when every depth's routes agree and the remaining
    drift's bound is within ``tolerance``; ``reasons`` say what failed."""

    certified: bool
    drift: RemainingDrift
    tolerance: float
    agreeing_depths: tuple[int, ...]
    reasons: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        if self.certified:
            return (f"certified: the routes agree at every depth and at most {self.drift.bound:.3f} of the "
                    f"exponent is still to come (tolerance {self.tolerance:g})")
        return "not certified (the exponent is a bound): " + "; ".join(self.reasons)


def certify_exponent(certificates: list[DepthCertificate], drift: RemainingDrift, *,
                     tolerance: float = EXPONENT_TOLERANCE) -> ExponentCertificate:
    """Verdict v4 from the depths' certificates and the exponent's :class:`RemainingDrift`."""
    reasons = [f"ℓ = {c.depth}: {'; '.join(c.reasons)}" for c in certificates if not c.certified]
    if drift.case == "not checked":
        reasons.append(f"the exponent's drift is not checked ({drift.method})")
    elif not drift.certifies(tolerance):
        bound = "no bound" if not math.isfinite(drift.bound) else f"up to {drift.bound:.3f}"
        reasons.append(f"the exponent still moves: {drift.drift:+.3f} per doubling of training, {bound} "
                       f"still to come (tolerance {tolerance:g}; {drift.case})")
    return ExponentCertificate(certified=not reasons, drift=drift, tolerance=tolerance,
                               agreeing_depths=tuple(c.depth for c in certificates if c.certified),
                               reasons=tuple(reasons))
