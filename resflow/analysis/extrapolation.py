r"""The loss along training: how much is left to gain, and the loss a student is heading for.

A student trained for :math:`t` steps (its schedule compressed to :math:`t`) ends at a loss
:math:`\mathcal L(t)`.  Near convergence the loss approaches its limit as a power of the training
length,

.. math:: \mathcal L(t) = \mathcal L_\infty + B\,t^{-\gamma}, \qquad B \ge 0,\ \gamma > 0,

so at training lengths in a geometric progression :math:`t, qt, q^2t` the successive falls
:math:`d_1 = \mathcal L(t) - \mathcal L(qt)` and :math:`d_2 = \mathcal L(qt) - \mathcal L(q^2t)`
shrink by the constant ratio :math:`\rho = d_2/d_1 = q^{-\gamma}`, and what is still to come after
the longest length is the geometric tail (Aitken's :math:`\Delta^2` extrapolation, exact for this
model)

.. math:: \mathcal L(q^2t) - \mathcal L_\infty = d_2\,\frac{\rho}{1 - \rho}.

The **remaining gain** :math:`g = (\mathcal L(q^2t) - \mathcal L_\infty)/\mathcal L(q^2t)` is the
share of the final loss that longer training would still remove.  Three cases, per student, with
the noise of a fall measured over the paired evaluation batches (a one-sided t bound at level
``NOISE_P``, :func:`loss_limits`):

* :math:`d_2` is above its noise and :math:`d_1 > d_2`: the fall decelerates; :math:`\mathcal L_\infty`
  and :math:`g` from the tail above (a tail that reaches below zero has no limit in sight);
* :math:`d_2` is within its noise (**flat**): the last fall may be anything up to its ceiling
  :math:`\bar d_2 = \max(d_2, 0) + \text{noise}` (a one-sided 95% bound, ``CEILING_P``), so
  :math:`g` is the tail of that ceiling, an upper bound, never zero by default.  If :math:`d_1`
  is a real fall the ratio is bounded by :math:`\bar d_2/d_1` (no bound, no limit, when that is
  not below 1); if :math:`d_1` is within its noise as well, the loss did not move measurably over
  two doublings and the ceiling is taken as the whole tail (falls at least halving per doubling,
  :math:`\gamma \ge 1`; a stated assumption);
* otherwise (:math:`d_1 \le d_2`, or a loss that is not finite): the loss falls at least as fast as
  before; no limit can be extrapolated (:math:`g` is not finite).

Only the final losses of the training lengths enter: a point of the evaluation curve in the middle
of a run is a loss at a learning rate that has not decayed yet, a different quantity (it carries the
optimiser's noise floor), so it is not mixed into the fit.  The model is an assumption; its
validation is a run long enough to converge (``docs/results.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

__all__ = ["NOISE_P", "CEILING_P", "LossLimit", "loss_limit", "loss_limits", "geometric_ratio", "asymptotic_interval"]

NOISE_P = 0.001  # a fall is real when noise alone would exceed it with at most this probability (one-sided t)
CEILING_P = 0.05  # the largest fall the noise allows: a one-sided 95% bound


@dataclass(frozen=True, kw_only=True)
class LossLimit:
    """The limit of one student's loss along training (module docstring).

    ``limit`` and ``gain`` are NaN when no limit can be extrapolated; ``case`` says which case held
    (``"flat"``, ``"decelerating"``, ``"no limit"``).
    """

    final: float
    limit: float
    gain: float
    ratio: float  # d2 / d1 (NaN when d1 <= 0)
    case: str


def geometric_ratio(steps) -> float:
    """The common ratio :math:`q` of the last three training lengths; an error if they are not geometric."""
    steps = np.asarray(steps, float)
    if steps.size < 3:
        raise ConfigError(f"the loss limit needs at least three training lengths; got {steps.size}. Train with "
                          "lengths like (0.25, 0.5, 1).")
    a, b, c = steps[-3:]
    q = b / a
    if not (q > 1 and math.isclose(c / b, q, rel_tol=1e-3)):
        raise ConfigError(f"the last three training lengths must be a geometric progression (like 0.25, 0.5, 1); "
                          f"got steps {a:g}, {b:g}, {c:g}.")
    return float(q)


def loss_limit(losses, fall_noise: float = 0.0, first_noise: float | None = None,
               ceiling_noise: float | None = None) -> LossLimit:
    """The :class:`LossLimit` of the final losses at three geometric training lengths (shortest first).

    ``fall_noise`` is the noise on the last fall :math:`d_2` (a fall below it is not measurable) and
    ``first_noise`` the one on :math:`d_1` (default: the same), both at level ``NOISE_P``;
    ``ceiling_noise`` the margin of the last fall's upper bound (level ``CEILING_P``; default
    ``fall_noise``).  All from the paired evaluation batches (:func:`loss_limits`); 0 treats any
    positive fall as real.
    """
    l1, l2, l3 = (float(v) for v in np.asarray(losses, float)[-3:])
    d1, d2 = l1 - l2, l2 - l3
    ratio = d2 / d1 if d1 > 0 else math.nan
    none = LossLimit(final=l3, limit=math.nan, gain=math.nan, ratio=ratio, case="no limit")
    first_noise = fall_noise if first_noise is None else first_noise
    ceiling_noise = fall_noise if ceiling_noise is None else ceiling_noise
    if not (math.isfinite(l1) and math.isfinite(l2) and math.isfinite(l3) and l3 > 0):
        return none
    if d2 > fall_noise:
        if d1 > d2:
            tail = d2 * ratio / (1.0 - ratio)
            if tail < l3:
                return LossLimit(final=l3, limit=l3 - tail, gain=tail / l3, ratio=ratio, case="decelerating")
        return none
    ceiling = max(d2, 0.0) + ceiling_noise  # the largest last fall the noise allows
    if ceiling == 0.0:
        return LossLimit(final=l3, limit=l3, gain=0.0, ratio=ratio, case="flat")
    if d1 > first_noise:  # a real first fall: the ratio is at most ceiling / d1
        bound = ceiling / d1
        if bound >= 1.0:
            return none
        tail = ceiling * bound / (1.0 - bound)
    else:  # neither fall measurable: the ceiling as the whole tail (falls halving per doubling)
        tail = ceiling
    if tail >= l3:
        return none
    return LossLimit(final=l3, limit=l3 - tail, gain=tail / l3, ratio=ratio, case="flat")


def loss_limits(batch_losses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Limits and remaining gains of many students at once.

    ``batch_losses`` is ``(..., length, eval_batch)``: the final losses of each student at its last
    three training lengths (shortest first) on the same evaluation batches, so the fall between two
    lengths is measured batch by batch (paired).  Returns ``(limit, gain)`` of shape ``(...)``.
    """
    from scipy import stats

    values = np.asarray(batch_losses, float)[..., -3:, :]
    means = values.mean(axis=-1)
    n = values.shape[-1]
    def noise(falls: np.ndarray, p: float) -> np.ndarray:
        if n < 2:
            return np.zeros(falls.shape[:-1])
        return stats.t.ppf(1 - p, n - 1) * falls.std(axis=-1, ddof=1) / math.sqrt(n)

    first = noise(values[..., 0, :] - values[..., 1, :], NOISE_P)
    last = noise(values[..., 1, :] - values[..., 2, :], NOISE_P)
    ceiling = noise(values[..., 1, :] - values[..., 2, :], CEILING_P)
    limit = np.empty(means.shape[:-1])
    gain = np.empty(means.shape[:-1])
    for index in np.ndindex(limit.shape):
        result = loss_limit(means[index], float(last[index]), float(first[index]), float(ceiling[index]))
        limit[index], gain[index] = result.limit, result.gain
    return limit, gain


def asymptotic_interval(depths, batch_losses: np.ndarray, *, transform: np.ndarray | None = None,
                        confidence: float = 0.95, seed: int = 0):
    """The depth exponent of the extrapolated limits :math:`\\mathcal L_\\infty(\\ell)`: per replicate, the
    least-squares slope of :math:`\\log \\mathcal L_\\infty` on :math:`\\log \\ell` (after dividing by
    ``transform``, one value per depth: the finite-teacher factor for the law-aware twin); the mean over
    replicates with its interval (:func:`resflow.analysis.intervals.over_replicates`).

    ``batch_losses`` is ``(depth, replicate, length, eval_batch)``.  A replicate whose limit is not finite
    at some depth gives NaN, and so does the estimate: it is an *estimate* of where training is heading,
    never a converged result.
    """
    from ..loglog import slopes
    from .intervals import over_replicates

    depths = np.asarray(depths, float)
    divide = np.ones(depths.size) if transform is None else np.asarray(transform, float)

    def statistic(one: np.ndarray) -> float:
        limit, _ = loss_limits(one)
        if not np.all(np.isfinite(limit) & (limit > 0)):
            return math.nan
        return float(slopes(depths, limit / divide))

    data = np.asarray(batch_losses, float)[:, :, -3:].transpose(1, 0, 2, 3)  # (replicate, depth, length, batch)
    return over_replicates(statistic, data, confidence=confidence, seed=seed)
