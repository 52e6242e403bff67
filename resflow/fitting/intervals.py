r"""Intervals from independent replicates: one estimator, its interval, and how the interval was made.

A replicate has its own teacher, data stream and initialisation, so any statistic computed from one
replicate's students (its depth exponent, the drift of that exponent with training, a depth's
remaining gain) is an independent draw.  The estimate is the **mean of the per-replicate values**
and its interval is Student's t over them, centred on that same mean (one estimator).  With one
replicate there is nothing to average over but the evaluation batches: the interval is a
percentile bootstrap over batches (resampled jointly across depths and training lengths, so paired
differences stay paired), and its label says that it measures evaluation noise only.

A percentile bootstrap *over replicates* is reported beside the t-interval only from
``MIN_REPLICATES_BOOTSTRAP`` replicates on: three replicates have 10 distinct resamples, too few
for percentiles.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..loglog import slopes

__all__ = ["Interval", "ExponentInterval", "over_replicates", "exponent_interval", "BOOTSTRAP_SAMPLES",
           "CONFIDENCE", "MIN_REPLICATES_BOOTSTRAP", "distinct_resamples"]

BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95
MIN_REPLICATES_BOOTSTRAP = 5  # C(9, 5) = 126 distinct resamples; 3 replicates have only 10


def distinct_resamples(n: int) -> int:
    """Distinct multisets of size ``n`` drawn with replacement from ``n`` items: :math:`\\binom{2n-1}{n}`."""
    return math.comb(2 * n - 1, n)


@dataclass(frozen=True, kw_only=True)
class Interval:
    """An estimate (mean of the per-replicate values), its interval and how it was made.

    ``boot_low``/``boot_high``: the percentile bootstrap over replicates (NaN below
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


def over_replicates(statistic: Callable[[np.ndarray], float], data: np.ndarray, *,
                    confidence: float = CONFIDENCE, samples: int = BOOTSTRAP_SAMPLES,
                    seed: int = 0) -> Interval:
    """The mean over replicates of ``statistic`` and its interval (module docstring).

    ``data`` is ``(replicate, ..., eval_batch)``; ``statistic`` maps one replicate's ``(..., eval_batch)``
    array to a number (NaN: undefined; ``inf`` allowed, e.g. an unbounded remaining gain).
    """
    data = np.asarray(data, float)
    n_rep, n_batch = data.shape[0], data.shape[-1]
    per_replicate = np.array([statistic(data[r]) for r in range(n_rep)], float)
    tail = (1 - confidence) / 2
    rng = np.random.default_rng(seed)
    boot_low = boot_high = math.nan
    if n_rep >= 2:
        value, low, high = _t_interval(per_replicate, confidence)
        method = f"t over {n_rep} replicates"
        if n_rep >= MIN_REPLICATES_BOOTSTRAP and np.all(np.isfinite(per_replicate)):
            picks = rng.integers(0, n_rep, (samples, n_rep))
            boot_low, boot_high = (float(v) for v in np.quantile(per_replicate[picks].mean(axis=1),
                                                                 [tail, 1 - tail]))
    else:
        value = float(per_replicate[0])
        picks = rng.integers(0, n_batch, (samples, n_batch))
        boot = np.array([statistic(data[0][..., pick]) for pick in picks], float)
        if math.isnan(value) or np.isnan(boot).mean() > tail:
            low, high = math.nan, math.nan
        else:
            with np.errstate(invalid="ignore"):  # an unbounded value (inf) at a quantile's edge
                low, high = (float(v) for v in np.nanquantile(boot, [tail, 1 - tail]))
        method = "bootstrap over evaluation batches (1 replicate: evaluation noise only)"
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
