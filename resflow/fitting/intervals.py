r"""Intervals from independent replicates: one estimator, its interval, and how the interval was made.

A replicate has its own teacher, data stream and initialisation, so any statistic computed from one
replicate's students (its depth exponent, the drift of that exponent with training, a depth's
remaining gain) is an independent draw.  The estimate is the **mean of the per-replicate values**
and its interval is Student's t over them, centred on that same mean (one estimator).  With one
replicate there is nothing to average over but the evaluation batches: the interval is the
**jackknife** over batches with Student's t at :math:`b - 1` degrees of freedom (each batch left out in
turn, jointly across depths and training lengths, so paired differences stay paired; for a mean it is
exactly the t interval), and its label says that it measures evaluation noise only.  Until issue 53 it
was a percentile bootstrap over batches, which covered the truth 49%, 84%, 88% and 94% of the time at
2, 4, 8 and 16 batches (``docs/design/intervals.md``).

A bootstrap *over replicates* is reported beside the t-interval only from ``MIN_REPLICATES_BOOTSTRAP``
= 10 replicates on, as Hesterberg's **expanded percentile** interval (the percentiles at
:math:`\Phi(\pm\sqrt{n/(n-1)}\,t_{n-1})`, which corrects the plain percentiles' narrowness at small
:math:`n`; Hesterberg, *The American Statistician* 69, 371 (2015)).  Below 10 replicates no bootstrap
covers at its rate for certain (the plain percentiles covered 83% at 5 replicates and 88% at 8, the
expanded ones 91% at 5), so none is reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..loglog import slopes

__all__ = ["Interval", "ExponentInterval", "over_replicates", "exponent_interval", "BOOTSTRAP_SAMPLES",
           "CONFIDENCE", "MIN_REPLICATES_BOOTSTRAP"]

BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95
MIN_REPLICATES_BOOTSTRAP = 10  # below it no bootstrap over replicates covers at its rate (module docstring)


@dataclass(frozen=True, kw_only=True)
class Interval:
    """An estimate (mean of the per-replicate values), its interval and how it was made.

    ``boot_low``/``boot_high``: the expanded percentile bootstrap over replicates (NaN below
    ``MIN_REPLICATES_BOOTSTRAP`` replicates).
    """

    value: float
    low: float
    high: float
    method: str
    boot_low: float
    boot_high: float
    per_replicate: tuple[float, ...]

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


ExponentInterval = Interval  # the name the exponent fits have always used


def _t_interval(values: np.ndarray, confidence: float) -> tuple[float, float, float]:
    from scipy import stats

    centre = float(values.mean())
    if not np.all(np.isfinite(values)):
        return centre, math.nan, math.nan
    quantile = stats.t.ppf(1 - (1 - confidence) / 2, values.size - 1)
    half = quantile * values.std(ddof=1) / math.sqrt(values.size)
    return centre, centre - float(half), centre + float(half)


def _expanded_levels(n: int, confidence: float) -> tuple[float, float]:
    """The percentile levels of Hesterberg's expanded percentile interval for ``n`` values."""
    from scipy import stats

    z = math.sqrt(n / (n - 1)) * stats.t.ppf(1 - (1 - confidence) / 2, n - 1)
    return float(stats.norm.cdf(-z)), float(stats.norm.cdf(z))


def _jackknife_interval(statistic: Callable[[np.ndarray], float], one: np.ndarray, value: float,
                        confidence: float) -> tuple[float, float]:
    """The jackknife t interval of ``statistic`` over the last axis (evaluation batches) of ``one``."""
    from scipy import stats

    n = one.shape[-1]
    if n < 2 or not math.isfinite(value):
        return math.nan, math.nan
    keep = ~np.eye(n, dtype=bool)
    leave_out = np.array([statistic(one[..., keep[i]]) for i in range(n)], float)
    if not np.all(np.isfinite(leave_out)):
        return math.nan, math.nan
    se = math.sqrt((n - 1) / n * float(np.sum((leave_out - leave_out.mean()) ** 2)))
    half = float(stats.t.ppf(1 - (1 - confidence) / 2, n - 1)) * se
    return value - half, value + half


def over_replicates(statistic: Callable[[np.ndarray], float], data: np.ndarray, *,
                    confidence: float = CONFIDENCE, samples: int = BOOTSTRAP_SAMPLES,
                    seed: int = 0) -> Interval:
    """The mean over replicates of ``statistic`` and its interval (module docstring).

    ``data`` is ``(replicate, ..., eval_batch)``; ``statistic`` maps one replicate's ``(..., eval_batch)``
    array to a number (NaN: undefined; ``inf`` allowed, e.g. an unbounded remaining gain: its interval is
    then NaN, not bounded).
    """
    data = np.asarray(data, float)
    n_rep = data.shape[0]
    per_replicate = np.array([statistic(data[r]) for r in range(n_rep)], float)
    boot_low = boot_high = math.nan
    if n_rep >= 2:
        value, low, high = _t_interval(per_replicate, confidence)
        method = f"t over {n_rep} replicates"
        if n_rep >= MIN_REPLICATES_BOOTSTRAP and np.all(np.isfinite(per_replicate)):
            picks = np.random.default_rng(seed).integers(0, n_rep, (samples, n_rep))
            boot_low, boot_high = (float(v) for v in np.quantile(per_replicate[picks].mean(axis=1),
                                                                 _expanded_levels(n_rep, confidence)))
    else:
        value = float(per_replicate[0])
        low, high = _jackknife_interval(statistic, data[0], value, confidence)
        method = (f"jackknife t over {data.shape[-1]} evaluation batches (1 replicate: evaluation noise "
                  "only)")
    return Interval(value=float(value), low=float(low), high=float(high), method=method, boot_low=boot_low,
                    boot_high=boot_high, per_replicate=tuple(float(v) for v in per_replicate))


def exponent_interval(depths, batch_losses: np.ndarray, *, confidence: float = CONFIDENCE,
                      samples: int = BOOTSTRAP_SAMPLES, seed: int = 0,
                      transform: np.ndarray | None = None) -> Interval:
    """The depth exponent of losses ``(depth, replicate, batch)``: the mean over replicates of each
    replicate's least-squares slope of log loss on log depth, with its interval.

    ``transform`` (one value per depth) divides the losses first: the law-aware fit passes the
    finite-teacher factor :math:`F(\\ell, L_T)` here.
    """
    losses = np.asarray(batch_losses, float)
    if transform is not None:
        losses = losses / np.asarray(transform, float)[:, None, None]
    depths = np.asarray(depths, float)
    return over_replicates(lambda one: float(slopes(depths, one.mean(axis=-1))), losses.transpose(1, 0, 2),
                           confidence=confidence, samples=samples, seed=seed)
