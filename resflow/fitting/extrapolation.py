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

**The tail test** (:func:`tail_test`; a diagnostic of verdict v4, ``docs/design/certification.md``) checks
that model on each student instead of assuming it.  It reads the **last four lengths** (the first ones are
the start of training, where a loss falls fastest, not its tail): their three falls :math:`d_1, d_2, d_3`
are fitted by a geometric sequence :math:`d_k = D\rho^{k-1}` (least squares of :math:`\log d_k` on
:math:`k`: two parameters, **one residual degree of freedom**); the tail's ratio is the one-sided 95% upper
bound of the fitted :math:`\rho` (t on the fit's own residual), never below the last observed ratio and
never above :math:`q^{-0.1}` (``TAIL_SLOWEST_GAMMA``), the slowest decay admitted; when a fall is within its
noise the ratio cannot be fitted and that slowest decay bounds the tail.  Capping the measured ratio at the
same assumption means a precise measurement is never penalised: a loss whose falls are measured to the
fifth digit is bounded as one whose falls are hidden in noise.  The remaining gain's bound is the geometric
tail of the last fall's ceiling; a student passes when it is below ``TAIL_TOLERANCE``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

__all__ = ["NOISE_P", "CEILING_P", "LossLimit", "loss_limit", "loss_limits", "geometric_ratio",
           "asymptotic_interval", "TailTest", "tail_test", "TAIL_TOLERANCE", "TAIL_SLOWEST_GAMMA",
           "TAIL_MIN_LENGTHS", "TAIL_CONFIDENCE"]

NOISE_P = 0.001  # a fall is real when noise alone would exceed it with at most this probability (one-sided t)
CEILING_P = 0.05  # the largest fall the noise allows: a one-sided 95% bound
TAIL_MIN_LENGTHS = 4  # the tail test reads the last 4 lengths: 3 falls for 2 parameters, 1 residual dof
TAIL_TOLERANCE = 0.05  # a student has stopped improving when at most this share of its loss is left to lose
TAIL_SLOWEST_GAMMA = 0.1  # the slowest power law t^-gamma the test admits where the falls cannot be fitted
TAIL_CONFIDENCE = 0.95  # the one-sided level of the fitted ratio's upper bound


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
        raise ConfigError(f"the loss limit needs at least three training lengths; got {steps.size}. "
                          "Train with lengths like (0.25, 0.5, 1).")
    a, b, c = steps[-3:]
    q = b / a
    if not (q > 1 and math.isclose(c / b, q, rel_tol=1e-3)):
        raise ConfigError("the last three training lengths must be a geometric progression "
                          f"(like 0.25, 0.5, 1); got steps {a:g}, {b:g}, {c:g}.")
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
    replicates with its interval (:func:`resflow.fitting.intervals.over_replicates`).

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

    # (replicate, depth, length, batch)
    data = np.asarray(batch_losses, float)[:, :, -3:].transpose(1, 0, 2, 3)
    return over_replicates(statistic, data, confidence=confidence, seed=seed)


@dataclass(frozen=True, kw_only=True)
class TailTest:
    """The tail test of one student (module docstring): ``passed`` when the bound ``gain_bound`` on the share
    of its final loss still to lose is below the tolerance.

    ``case``: ``"fitted"`` (every fall of the last four lengths measurable: the ratio from the fit, capped at
    the slowest admitted decay), ``"within noise"`` (a fall within its noise: the slowest admitted decay),
    ``"no limit"`` (a loss that is not positive, or a ``slowest_gamma`` of 0), ``"not checked"`` (fewer than
    ``TAIL_MIN_LENGTHS`` geometric lengths, or a missing loss).  ``ratio`` is the decay ratio the bound
    used, ``fitted_ratio`` the least-squares one (NaN unless fitted), ``residual`` the fit's residual standard
    deviation of log falls (its degrees of freedom ``dof``).
    """

    passed: bool
    case: str
    gain_bound: float
    ratio: float
    fitted_ratio: float = math.nan
    residual: float = math.nan
    dof: int = 0
    final: float = math.nan

    @property
    def text(self) -> str:
        if self.case == "not checked":
            return "tail not checked"
        if self.case == "no limit":
            return f"still falling without a limit in sight (decay ratio up to {self.ratio:.2f} per doubling)"
        return f"up to {self.gain_bound:.1%} left to lose ({self.case})"


def tail_test(batch_losses: np.ndarray, *, lengths=None, tolerance: float = TAIL_TOLERANCE,
              slowest_gamma: float = TAIL_SLOWEST_GAMMA, confidence: float = TAIL_CONFIDENCE) -> TailTest:
    """The tail test of one student from its final losses ``(length, eval_batch)`` at training lengths
    ``lengths`` (shortest first; default: a progression of ratio 2), the same evaluation batches at every
    length (module docstring)."""
    from scipy import stats

    values = np.asarray(batch_losses, float)
    unchecked = TailTest(passed=False, case="not checked", gain_bound=math.nan, ratio=math.nan)
    if values.shape[0] < TAIL_MIN_LENGTHS:
        return unchecked
    values = values[-TAIL_MIN_LENGTHS:]  # the tail: the first lengths are the start of training, not its tail
    n, n_batch = values.shape
    if not np.all(np.isfinite(values)):
        return unchecked
    try:
        q = geometric_ratio(lengths) if lengths is not None else 2.0
        tail_lengths = np.asarray(lengths, float)[-TAIL_MIN_LENGTHS:] if lengths is not None else None
        steps = None if tail_lengths is None else np.diff(np.log(tail_lengths))
        if steps is not None and not np.allclose(steps, math.log(q), rtol=1e-3):
            return unchecked
    except ConfigError:
        return unchecked
    means = values.mean(axis=-1)
    final = float(means[-1])
    batch_falls = values[:-1] - values[1:]  # (fall, batch), paired
    falls = batch_falls.mean(axis=-1)
    se = (batch_falls.std(axis=-1, ddof=1) / math.sqrt(n_batch)) if n_batch > 1 else np.zeros(n - 1)
    noise = stats.t.ppf(1 - NOISE_P, n_batch - 1) * se if n_batch > 1 else se
    ceilings = np.maximum(falls, 0.0) + (stats.t.ppf(1 - CEILING_P, n_batch - 1) * se if n_batch > 1 else se)
    last = float(ceilings[-1])
    if final <= 0:
        return TailTest(passed=False, case="no limit", gain_bound=math.inf, ratio=math.inf, final=final)
    fitted = residual = math.nan
    dof = 0
    slowest = q ** -slowest_gamma  # the cap: a measured ratio is never taken slower than the assumption
    if np.all(falls > noise) and np.all(falls > 0):
        k = np.arange(n - 1, dtype=float)
        y = np.log(falls)
        slope, intercept = np.polyfit(k, y, 1)
        dof = n - 3
        residual = float(np.sqrt(np.sum((y - (intercept + slope * k)) ** 2) / dof))
        se_slope = residual / math.sqrt(np.sum((k - k.mean()) ** 2))
        fitted = float(math.exp(slope))
        upper = math.exp(slope + stats.t.ppf(confidence, dof) * se_slope)
        ratio = min(max(upper, last / float(falls[-2])), slowest)
        case = "fitted"
    else:
        ratio = slowest
        case = "within noise"
    if ratio >= 1.0:
        return TailTest(passed=False, case="no limit", gain_bound=math.inf, ratio=ratio, fitted_ratio=fitted,
                        residual=residual, dof=dof, final=final)
    gain = last * ratio / (1.0 - ratio) / final
    return TailTest(passed=bool(gain < tolerance), case=case, gain_bound=float(gain), ratio=float(ratio),
                    fitted_ratio=fitted, residual=residual, dof=dof, final=final)
