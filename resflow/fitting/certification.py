r"""Verdict v3: a depth is certified when independent training routes reach the same loss there.

``docs/design/certification.md`` is the design; in short, for one series (target, scheme, temperature,
structure) with final losses
:math:`\mathcal L(\ell, r, \text{route}, \text{init}, \text{length}, \text{batch})`:

* every student passes the **tail test** (:func:`resflow.fitting.extrapolation.tail_test`): at most
  ``TAIL_TOLERANCE`` of its loss left to lose, from a checked fit of its loss along :math:`\ge 4` lengths;
* per replicate :math:`r` (one teacher), a route's *best* loss is its best init's at full length, the depth's
  best loss the best route's; the **route spread** :math:`s = \text{worst}/\text{best} - 1` over routes (the
  upper end of its one-sided 95% interval over the paired evaluation batches) must be at most
  ``ROUTE_TOLERANCE`` -- a depth trained by one route compares its inits instead (and says so), a depth
  with one student cannot be certified;
* a depth is **certified** when both hold for every replicate.

Why 5%: over :math:`\ell = 2, 4, 8, 16` the least-squares slope weighs the depths' log-losses by
:math:`(-0.433, -0.144, 0.144, 0.433)`; an error of 5% at every depth moves it by at most
:math:`1.154 \ln 1.05 = 0.056`, half of verdict v2's drift tolerance and under a twentieth of the
separation of the two readings.

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

import math
from dataclasses import dataclass

import numpy as np

from .extrapolation import TAIL_TOLERANCE, TailTest, tail_test

__all__ = ["ROUTE_TOLERANCE", "AGREEMENT_CONFIDENCE", "DepthCertificate", "certify_depths", "route_error",
           "slope_weights"]

ROUTE_TOLERANCE = 0.05  # routes agree when the worst route's best loss is at most 5% above the best route's
AGREEMENT_CONFIDENCE = 0.95  # one-sided: the upper end of the spread's interval over evaluation batches


@dataclass(frozen=True, kw_only=True)
class DepthCertificate:
    """What verdict v3 found at one depth of a series (module docstring).

    ``best`` is the best loss per replicate (NaN where no student finished); ``route_spread`` and
    ``route_spread_high`` the largest spread over replicates (point and upper 95% end; NaN with one student);
    ``compared`` says what was compared (``"routes"``, ``"inits"`` when one route trained the depth,
    ``"none"``); ``reasons`` why the depth is not certified (empty when it is).
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
    tail_passed: int  # students of the depth that passed the tail test (a failed student does not)
    students: int  # students of the depth (every replicate, route and init)
    worst_tail: str  # the tail test of the student with the largest bound, in words
    init_spread: float  # pooled sd of log loss over the inits of one route and replicate (NaN with one init)
    teacher_spread: float  # sd of the best log loss over replicates (NaN with one replicate)
    reasons: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return "certified" if self.certified else "not certified: " + "; ".join(self.reasons)


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


def _spread(worst: np.ndarray, best: np.ndarray) -> tuple[float, float]:
    """Spread of two students' losses ``(batch,)`` on paired batches: mean ratio − 1 and its upper 95%
    end."""
    from scipy import stats

    point = float(worst.mean() / best.mean() - 1.0)
    ratios = worst / best
    if ratios.size < 2:
        return point, point
    half = stats.t.ppf(AGREEMENT_CONFIDENCE, ratios.size - 1) * ratios.std(ddof=1) / math.sqrt(ratios.size)
    return point, point + float(half)


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
        reasons: list[str] = []
        best = np.full(n_rep, np.nan)
        best_route = [""] * n_rep
        spreads, highs = [], []
        tails: list[TailTest] = []
        init_var, log_best = [], []
        here = [routes[k] for k in range(n_route) if trained[i, :, k].any()]
        inits = int(trained[i].any(axis=(0, 1)).sum())
        compared = "routes" if len(here) >= 2 else ("inits" if inits >= 2 else "none")
        failed = students = 0
        for r in range(n_rep):
            cells = [(k, j) for k in range(n_route) for j in range(n_init) if trained[i, r, k, j]]
            finals = {c: data[i, r, c[0], c[1], -1] for c in cells}
            done = {c: v for c, v in finals.items() if np.all(np.isfinite(v))}
            failed += len(cells) - len(done)
            students += len(cells)
            for c in done:  # a failed student is counted as failed, not as a tail that falls
                tails.append(tail_test(data[i, r, c[0], c[1]], lengths=lengths, tolerance=tail_tolerance))
            if not done:
                continue
            top = min(done, key=lambda c: done[c].mean())
            best[r], best_route[r] = float(done[top].mean()), routes[top[0]]
            log_best.append(math.log(best[r]))
            for k in {c[0] for c in done}:  # the spread over inits of one route
                logs = [math.log(done[c].mean()) for c in done if c[0] == k]
                if len(logs) >= 2:
                    init_var.append(float(np.var(logs, ddof=1)))
            groups: dict = {}
            # the best student of each route (or each init, when one route trained it)
            for c, v in done.items():
                key = c[0] if compared == "routes" else c
                if key not in groups or v.mean() < groups[key].mean():
                    groups[key] = v
            if len(groups) >= 2:
                worst = max(groups.values(), key=lambda v: v.mean())
                point, high = _spread(worst, done[top])
                spreads.append(point)
                highs.append(high)
        passed = sum(t.passed for t in tails)
        worst_tail = (max(tails, key=lambda t: -1.0 if math.isnan(t.gain_bound) else t.gain_bound).text
                      if tails else "")
        if compared == "none":
            reasons.append("one start: no second route or init to compare")
        if failed:
            reasons.append(f"{failed} student{'s' if failed > 1 else ''} failed")
        spread = max(spreads) if spreads else math.nan
        high = max(highs) if highs else math.nan
        if spreads and not high <= route_tolerance:
            what = "routes" if compared == "routes" else "inits (one route)"
            reasons.append(f"the {what} disagree: the worst is {spread:.1%} (up to {high:.1%}) above "
                           f"the best (tolerance {route_tolerance:.0%})")
        if passed < len(tails):
            reasons.append(f"{len(tails) - passed} of {len(tails)} students fail the tail test "
                           f"(worst: {worst_tail})")
        out.append(DepthCertificate(
            depth=int(depth), certified=not reasons, best=tuple(float(v) for v in best),
            best_route=tuple(best_route), route_spread=spread, route_spread_high=high, compared=compared,
            routes=tuple(here), inits=inits, tail_passed=passed, students=students, worst_tail=worst_tail,
            init_spread=math.sqrt(float(np.mean(init_var))) if init_var else math.nan,
            teacher_spread=float(np.std(log_best, ddof=1)) if len(log_best) >= 2 else math.nan,
            reasons=tuple(reasons)))
    return out
