r"""The convergence verdict (version 2): is the exponent still moving, and is any depth's loss still falling?

A decaying learning rate flattens every loss curve, so "the loss stopped falling" at the end of one
run says nothing.  Every student of a run therefore has copies trained for shorter lengths -- at
least three lengths in a geometric progression, by default 1/4, 1/2 and 1 of its steps, each with
the schedule compressed to its length (:mod:`resflow.training.engine`) -- and a series is **converged**
only if both hold:

* **the exponent has stopped moving.**  Each replicate's exponent at the longest length minus its
  exponent at the one before (paired: the same teacher, data and evaluation batches) is the
  *drift*; the 90% interval of the mean drift must lie inside :math:`\pm` ``DRIFT_TOLERANCE``
  (an equivalence test at 5% on each side).  The tolerance is fixed, not the spread between
  replicates: a run whose replicates agree closely is not failed for agreeing, and a noisy one
  is not passed for being noisy.
* **no depth has much left to gain.**  At every depth, the loss along the training lengths is
  extrapolated to its limit (:mod:`resflow.fitting.extrapolation`); the upper end of the 90%
  interval of the remaining gain :math:`(\mathcal L(T) - \mathcal L_\infty)/\mathcal L(T)` must be
  below ``GAIN_TOLERANCE``.  A loss falling as a slow power of the training length
  (:math:`t^{-0.1}`, say) loses only 7% per doubling, but nearly all of it is still to come:
  refused.

No student may have failed.  An unconverged series' exponents are bounds, and the verdict says
why; with fewer than three lengths the verdict is "not checked" (never converged).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..loglog import slopes
from .extrapolation import geometric_ratio, loss_limits
from .intervals import Interval, over_replicates

__all__ = ["Verdict", "convergence_verdict", "DRIFT_TOLERANCE", "GAIN_TOLERANCE", "VERDICT_CONFIDENCE",
           "remaining_gain"]

DRIFT_TOLERANCE = 0.10  # the exponent may move by at most this much when training is doubled
GAIN_TOLERANCE = 0.10  # and no depth's loss may have more than this share of itself still to lose
VERDICT_CONFIDENCE = 0.90  # two-sided 90% = one-sided 95% at each end: an equivalence test at 5%


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """The verdict and what it was judged on (per depth: ``gains``, ``gain_highs``, ``limits``)."""

    converged: bool
    text: str
    previous_exponent: float  # the exponent at the second-longest training length (mean over replicates)
    drift: float  # exponent at the longest length minus at the previous one (mean of paired differences)
    drift_low: float
    drift_high: float
    gains: tuple[float, ...] = ()  # remaining gain per depth (mean over replicates; inf: no limit)
    gain_highs: tuple[float, ...] = ()  # upper end of its 90% interval
    limits: tuple[float, ...] = ()  # extrapolated limit loss per depth (mean over replicates)

    @property
    def max_gain(self) -> float:
        return max(self.gains, default=math.nan)

    @property
    def max_gain_high(self) -> float:
        return max(self.gain_highs, default=math.nan)


def _unchecked(text: str) -> Verdict:
    nan = math.nan
    return Verdict(converged=False, text=text, previous_exponent=nan, drift=nan, drift_low=nan,
                   drift_high=nan)


def remaining_gain(one: np.ndarray) -> float:
    """Remaining gain of one student from its losses ``(length, eval_batch)`` (``inf``: no limit in sight)."""
    _, gain = loss_limits(one[None])
    return float(gain[0]) if np.isfinite(gain[0]) else math.inf


def _limit(one: np.ndarray) -> float:
    limit, _ = loss_limits(one[None])
    return float(limit[0])


def convergence_verdict(depths, lengths, batch_losses: np.ndarray, *, failed: bool = False,
                        drift_tolerance: float = DRIFT_TOLERANCE, gain_tolerance: float = GAIN_TOLERANCE,
                        confidence: float = VERDICT_CONFIDENCE) -> Verdict:
    """The verdict of one series from its final losses ``(depth, replicate, length, eval_batch)``.

    ``lengths`` are the training lengths (fractions of the run, shortest first); the last three must
    be a geometric progression.
    """
    if failed:
        return _unchecked("not converged: a student failed")
    lengths = [float(v) for v in lengths]
    if len(lengths) < 3:
        return _unchecked("not checked: fewer than three training lengths (train with lengths 0.25, 0.5, 1)")
    try:
        geometric_ratio(lengths)
    except ValueError as exc:
        return _unchecked(f"not checked: {exc}")
    data = np.asarray(batch_losses, float)
    if not np.all(np.isfinite(data[:, :, -3:])):
        return _unchecked("not converged: incomplete run (a loss is missing)")
    depths = np.asarray(depths, float)
    by_replicate = data.transpose(1, 0, 2, 3)  # (replicate, depth, length, batch)

    def drift_of(one: np.ndarray) -> float:
        return float(slopes(depths, one[:, -1].mean(axis=-1)) - slopes(depths, one[:, -2].mean(axis=-1)))

    drift = over_replicates(drift_of, by_replicate, confidence=confidence)
    previous = over_replicates(lambda one: float(slopes(depths, one[:, -2].mean(axis=-1))), by_replicate)
    gain_intervals: list[Interval] = [over_replicates(remaining_gain, data[i][:, -3:], confidence=confidence)
                                      for i in range(len(depths))]
    limits = tuple(float(np.mean([_limit(data[i, r, -3:]) for r in range(data.shape[1])]))
                   for i in range(len(depths)))
    gains = tuple(g.value for g in gain_intervals)
    highs = tuple(g.high if np.isfinite(g.high) else math.inf for g in gain_intervals)
    reasons = []
    if not (drift.low > -drift_tolerance and drift.high < drift_tolerance):
        where = "" if np.isfinite(drift.low) else " (interval undefined)"
        reasons.append(f"the exponent moved by {drift.value:+.2f} [{drift.low:+.2f}, {drift.high:+.2f}] "
                       f"between lengths {lengths[-2]:g} and {lengths[-1]:g}{where}: that interval is not "
                       f"inside ±{drift_tolerance:g}, the most a settled exponent may move")
    worst = int(np.argmax(highs))
    if not highs[worst] < gain_tolerance:
        if math.isinf(gains[worst]):
            reasons.append(f"the depth-{int(depths[worst])} loss is still falling without a limit in sight")
        else:
            reasons.append(f"the depth-{int(depths[worst])} loss has {gains[worst]:.0%} "
                           f"(up to {highs[worst]:.0%}) of itself still to lose "
                           f"(tolerance {gain_tolerance:.0%})")
    text = "converged" if not reasons else "not converged (the exponent is a bound): " + "; ".join(reasons)
    return Verdict(converged=not reasons, text=text, previous_exponent=previous.value, drift=drift.value,
                   drift_low=drift.low, drift_high=drift.high, gains=gains, gain_highs=highs, limits=limits)

