r"""Intervals for a depth exponent from independent replicates.

A replicate has its own teacher, data stream and initialisation, so the exponents of different
replicates are independent draws: the headline interval is Student's t over the per-replicate
exponents (each replicate's students form one loss-vs-depth curve), and a percentile bootstrap
over replicates (resampled with replacement; the exponent of the resampled mean curve) is reported
beside it.  With one replicate there is nothing to resample but the evaluation batches, and the
interval says so (it measures evaluation noise only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..loglog import slopes

__all__ = ["ExponentInterval", "exponent_interval", "BOOTSTRAP_SAMPLES", "CONFIDENCE"]

BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True, kw_only=True)
class ExponentInterval:
    """An exponent (of the replicate-mean curve), its interval, and how the interval was made."""

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


def exponent_interval(depths, batch_losses: np.ndarray, *, confidence: float = CONFIDENCE,
                      samples: int = BOOTSTRAP_SAMPLES, seed: int = 0,
                      transform: np.ndarray | None = None) -> ExponentInterval:
    """The exponent of losses ``(depth, replicate, batch)`` with its intervals.

    ``transform`` (one value per depth) divides the losses first: the law-aware fit passes the
    finite-teacher factor :math:`F(\\ell, L_T)` here.
    """
    from scipy import stats

    losses = np.asarray(batch_losses, float)
    if transform is not None:
        losses = losses / np.asarray(transform, float)[:, None, None]
    curves = losses.mean(axis=-1)  # (depth, replicate)
    value = slopes(depths, curves.mean(axis=1))
    per_replicate = np.atleast_1d(slopes(depths, curves.T))
    rng = np.random.default_rng(seed)
    n_rep, n_batch = losses.shape[1], losses.shape[2]
    tail = (1 - confidence) / 2
    if n_rep >= 2:
        picks = rng.integers(0, n_rep, (samples, n_rep))
        boot = slopes(depths, curves[:, picks].mean(axis=2).T)
        half = stats.t.ppf(1 - tail, n_rep - 1) * per_replicate.std(ddof=1) / np.sqrt(n_rep)
        centre = per_replicate.mean()
        low, high = centre - half, centre + half
        method = f"t over {n_rep} replicates"
    else:
        picks = rng.integers(0, n_batch, (samples, n_batch))
        boot = slopes(depths, losses[:, 0][:, picks].mean(axis=2).T)
        low, high = np.quantile(boot, [tail, 1 - tail])
        method = "bootstrap over evaluation batches (1 replicate: evaluation noise only)"
    boot_low, boot_high = np.quantile(boot, [tail, 1 - tail])
    return ExponentInterval(value=float(value), low=float(low), high=float(high), method=method,
                            boot_low=float(boot_low), boot_high=float(boot_high),
                            per_replicate=tuple(float(v) for v in per_replicate))
