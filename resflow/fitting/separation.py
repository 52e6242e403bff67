r"""The first answer of a smooth-vs-rough run: are the two readings separated?

For students of the smooth (``tied``) and the rough (``independent``) teacher with the same scheme,
temperature and structure, the **separation** is the difference of their depth exponents,
:math:`\Delta\alpha = \alpha_\text{tied} - \alpha_\text{independent}` (and its law-aware twin), each computed
from every depth's best loss over routes (:mod:`resflow.fitting.fits`).  It is paired by replicate:
replicate :math:`r` has teacher seed :math:`r` for both teachers and one data stream, so the per-replicate
differences are independent draws; the interval is Student's t over them (with one replicate, the two fits'
intervals combined in quadrature: evaluation noise only, and said so), widened by both series' route errors
(:func:`resflow.fitting.certification.route_error`: the tied exponent's room below and the independent one's
above widen it downwards, and the other way round upwards) so that uncertified depths widen it rather than
drop out.

The readings are **separated** when the whole interval (of the plain and, where the teachers have one, of
the law-aware difference) lies above ``SEPARATION_MARGIN`` = 1, the smallest
difference between their laws: the ensemble law's :math:`\alpha = 1` against the procedural law's
coherent :math:`\alpha = 2` (Euler; :mod:`resflow.fitting.regimes`).  The exponents themselves follow,
each labelled certified or a bound.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..labels import teacher_label
from .fits import SeriesFit

__all__ = ["Separation", "separations", "SEPARATION_MARGIN", "SMOOTH", "ROUGH"]

# the smallest gap between the readings' laws: procedural (coherent, Euler) 2 - ensemble 1
SEPARATION_MARGIN = 1.0
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
    method: str
    separated: bool
    certified: bool  # both exponents certified (otherwise the difference of two bounds, still an interval)

    @property
    def text(self) -> str:
        what = (f"{teacher_label(SMOOTH)} − {teacher_label(ROUGH)} α = {self.separation:.2f} "
                f"[{self.separation_ci_low:.2f}, {self.separation_ci_high:.2f}]")
        if math.isfinite(self.separation_law):
            what += (f", law α {self.separation_law:.2f} [{self.separation_law_ci_low:.2f}, "
                     f"{self.separation_law_ci_high:.2f}]")
        verdict = ("separated: the smooth and rough readings differ by more than the smallest gap between "
                   f"their laws ({SEPARATION_MARGIN:g})" if self.separated else
                   f"not separated: the interval reaches below {SEPARATION_MARGIN:g}, the smallest gap "
                   "between the readings' laws")
        return f"{verdict}; {what} ({self.method})"

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["target"] = "separation"
        out["text"] = self.text
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in out.items()}


def _paired(smooth: SeriesFit, rough: SeriesFit, law: bool) -> tuple[float, float, float, str, int]:
    from scipy import stats

    down = smooth.route_error_low + rough.route_error_high
    up = smooth.route_error_high + rough.route_error_low
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
        lows = ((smooth.law_ci_low, rough.law_ci_low) if law
                else (smooth.replicate_ci_low, rough.replicate_ci_low))
        highs = ((smooth.law_ci_high, rough.law_ci_high) if law
                 else (smooth.replicate_ci_high, rough.replicate_ci_high))
        if law:  # the law intervals already carry the route error: take it out before combining
            lows = tuple(v + f.route_error_low for v, f in zip(lows, (smooth, rough), strict=True))
            highs = tuple(v - f.route_error_high for v, f in zip(highs, (smooth, rough), strict=True))
        half = math.hypot(*((h - lo) / 2 for lo, h in zip(lows, highs, strict=True)))
        method = "1 replicate: the two intervals in quadrature (evaluation noise only)"
    if down + up > 0:
        method += f", widened by the route spreads (-{down:.3f}, +{up:.3f})"
    return centre, centre - half - down, centre + half + up, method, int(diffs.size)


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
        out.append(Separation(scheme=k[0], temperature=k[1], student_groups=k[2], n_replicates=n,
                              separation=value, separation_ci_low=low, separation_ci_high=high,
                              separation_law=lvalue, separation_law_ci_low=llow, separation_law_ci_high=lhigh,
                              route_error_low=s.route_error_low + r.route_error_high,
                              route_error_high=s.route_error_high + r.route_error_low, method=method,
                              separated=bool(low > SEPARATION_MARGIN
                                             and (not math.isfinite(lvalue) or llow > SEPARATION_MARGIN)),
                              certified=s.certified and r.certified))
    return out
