r"""The first answer of a smooth-vs-rough run: is the smooth teacher's exponent steeper, and by as much as the
readings' laws say?

For students of the smooth (``tied``) and the rough (``independent``) teacher with the same scheme,
temperature and structure, the **separation** is the difference of their depth exponents,
:math:`\Delta\alpha = \alpha_\text{tied} - \alpha_\text{independent}` (and its law-aware twin), each computed
from every depth's best loss over routes (:mod:`resflow.fitting.fits`).  It is paired by replicate:
replicate :math:`r` has teacher seed :math:`r` for both teachers and one data stream, so the per-replicate
differences are independent draws; the interval is Student's t over them (with one replicate, the two fits'
intervals combined in quadrature: evaluation noise only, and said so), widened by both series' route errors
(:func:`resflow.fitting.certification.route_error`) and remaining drifts (:mod:`resflow.fitting.drift`): the
smooth exponent's room below and the rough one's above widen it downwards, and the other way round upwards,
so that the interval holds where training goes.

Two questions, in the order a reader asks them, both decided by the plain :math:`\Delta\alpha` (the
law-aware one rests on the finite-teacher laws' premise and is reported beside it, gating nothing):

1. **steeper**: is the smooth teacher's exponent larger than the rough one's?  The interval's lower end is
   above 0.
2. **separated**: does the gap reach what the readings' laws predict for *this* run?  The interval's lower
   end is above the **law gap** (:func:`resflow.fitting.regimes.law_gap`): the plain slope of the procedural
   law (coherent, the smaller of its two) minus that of the ensemble law, both with the finite teacher's
   factor, over the run's depths against its teacher depth -- 1.29 for depths 2-16 against
   :math:`L_T = 32` (and for 1-8 against 16), 1 against an infinitely deep teacher.

The exponents themselves follow, each labelled certified or a bound.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..labels import teacher_label
from .fits import SeriesFit
from .regimes import law_gap

__all__ = ["Separation", "separations", "SMOOTH", "ROUGH"]

SMOOTH, ROUGH = "tied", "independent"  # the teachers whose students the separation compares


@dataclass(frozen=True, kw_only=True)
class Separation:
    """Tied minus independent depth exponents of one scheme/temperature/structure (module docstring)."""

    scheme: str
    temperature: float | None
    student_groups: int
    n_replicates: int
    separation: float
    separation_ci_low: float
    separation_ci_high: float
    separation_law: float
    separation_law_ci_low: float
    separation_law_ci_high: float
    route_error_low: float  # what both series' route spreads add below the interval
    route_error_high: float  # and above it
    drift_error_low: float  # what both series' remaining drifts add below the interval
    drift_error_high: float  # and above it
    method: str
    steeper: bool  # the interval's lower end is above 0: the smooth teacher's exponent is the larger
    law_gap: float  # the gap between the readings' laws at this run's depths and teacher depth
    separated: bool  # the interval's lower end is above law_gap
    certified: bool  # both exponents certified (otherwise the difference of two bounds, still an interval)

    @property
    def answer(self) -> str:
        """The first question's answer, in words."""
        if self.steeper:
            return "smooth is steeper than rough"
        if not math.isfinite(self.separation_ci_low):
            return "undecided: the interval is not bounded below"
        if self.separation_ci_high < 0:
            return "rough is steeper than smooth"
        return "undecided: the interval reaches below 0"

    @property
    def gap_text(self) -> str:
        """The second question's answer, in words."""
        if not math.isfinite(self.law_gap):
            return "no law gap for this run (no finite-teacher law at its depths)"
        if self.separated:
            return f"by more than the readings' laws differ here ({self.law_gap:.2f})"
        if self.separation_ci_high < self.law_gap:
            return f"by less than the readings' laws differ here ({self.law_gap:.2f})"
        return f"not yet shown to reach the readings' law gap here ({self.law_gap:.2f})"

    @property
    def text(self) -> str:
        what = (f"{teacher_label(SMOOTH)} − {teacher_label(ROUGH)} α = {self.separation:.2f} "
                f"[{_end(self.separation_ci_low)}, {_end(self.separation_ci_high)}]")
        if math.isfinite(self.separation_law):
            what += (f"; law α {self.separation_law:.2f} [{_end(self.separation_law_ci_low)}, "
                     f"{_end(self.separation_law_ci_high)}], reported, gating nothing")
        return f"{self.answer}; {self.gap_text}: {what} ({self.method})"

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["target"] = "separation"
        out["answer"] = self.answer
        out["text"] = self.text
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in out.items()}


def _end(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else ("∞" if value > 0 else "−∞")


def _rooms(fit: SeriesFit) -> tuple[float, float]:
    """How far the series' exponent may still move down and up with more training."""
    return max(0.0, -fit.remaining_drift_low), max(0.0, fit.remaining_drift_high)


def _widening(smooth: SeriesFit, rough: SeriesFit) -> tuple[float, float, float, float]:
    """What the difference smooth - rough may be off by, ``(route_down, route_up, drift_down, drift_up)``:
    the smooth exponent's room below and the rough one's above widen it downwards, and the other way up."""
    s_down, s_up = _rooms(smooth)
    r_down, r_up = _rooms(rough)
    return (smooth.route_error_low + rough.route_error_high, smooth.route_error_high + rough.route_error_low,
            s_down + r_up, s_up + r_down)


def _paired(smooth: SeriesFit, rough: SeriesFit, law: bool) -> tuple[float, float, float, str, int]:
    from scipy import stats

    route_down, route_up, drift_down, drift_up = _widening(smooth, rough)
    a = dict(zip(smooth.replicates, smooth.replicate_law_exponents if law else smooth.replicate_exponents,
                 strict=False))
    b = dict(zip(rough.replicates, rough.replicate_law_exponents if law else rough.replicate_exponents,
                 strict=False))
    common = [r for r in a if r in b]
    diffs = np.array([a[r] - b[r] for r in common], float)
    if diffs.size == 0 or not np.all(np.isfinite(diffs)):
        return math.nan, math.nan, math.nan, "no paired replicates", 0
    centre = float(diffs.mean())
    if diffs.size >= 2:
        half = float(stats.t.ppf(0.975, diffs.size - 1) * diffs.std(ddof=1) / math.sqrt(diffs.size))
        method = f"paired t over {diffs.size} replicates"
    else:
        fits = (smooth, rough)
        if law:  # the law intervals carry the route error and the drift: take both out before combining
            lows = tuple(f.law_ci_low + f.route_error_low + _rooms(f)[0] for f in fits)
            highs = tuple(f.law_ci_high - f.route_error_high - _rooms(f)[1] for f in fits)
        else:
            lows = tuple(f.replicate_ci_low for f in fits)
            highs = tuple(f.replicate_ci_high for f in fits)
        half = math.hypot(*((h - lo) / 2 for lo, h in zip(lows, highs, strict=True)))
        method = "1 replicate: the two intervals in quadrature (evaluation noise only)"
    widened = []
    if route_down + route_up > 0:
        widened.append(f"the route spreads (-{route_down:.3f}, +{route_up:.3f})")
    if drift_down + drift_up > 0:
        widened.append(f"the remaining drifts (-{drift_down:.3f}, +{drift_up:.3f})")
    if widened:
        method += ", widened by " + " and ".join(widened)
    return (centre, centre - half - route_down - drift_down, centre + half + route_up + drift_up, method,
            int(diffs.size))


def separations(fits: list[SeriesFit]) -> list[Separation]:
    """The :class:`Separation` of every scheme/temperature/structure with both a tied and an independent
    series (none for a run without both teachers)."""
    def key(f: SeriesFit) -> tuple:
        return f.scheme, f.temperature, f.student_groups

    smooth = {key(f): f for f in fits if f.target == SMOOTH and math.isfinite(f.exponent)}
    rough = {key(f): f for f in fits if f.target == ROUGH and math.isfinite(f.exponent)}
    out = []
    for k in smooth:
        if k not in rough:
            continue
        s, r = smooth[k], rough[k]
        value, low, high, method, n = _paired(s, r, law=False)
        lvalue, llow, lhigh, _, _ = _paired(s, r, law=True)
        gap = law_gap(s.depths, s.teacher_depth, s.scheme)
        route_down, route_up, drift_down, drift_up = _widening(s, r)
        out.append(Separation(scheme=k[0], temperature=k[1], student_groups=k[2], n_replicates=n,
                              separation=value, separation_ci_low=low, separation_ci_high=high,
                              separation_law=lvalue, separation_law_ci_low=llow, separation_law_ci_high=lhigh,
                              route_error_low=route_down, route_error_high=route_up,
                              drift_error_low=drift_down, drift_error_high=drift_up, method=method,
                              steeper=bool(low > 0), law_gap=gap,
                              separated=bool(math.isfinite(gap) and low > gap),
                              certified=s.exponent_certified and r.exponent_certified))
    return out
