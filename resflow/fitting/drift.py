r"""Verdict v4's core: the depth exponent along training, and how far it has still to move.

Every student of a run is also trained at shorter lengths :math:`\lambda_1 < \dots < \lambda_n` (a
geometric progression of ratio :math:`q`, by default 1/16 ... 1 of the run, forked where the schedules
coincide).  At each length a run has an exponent of its own:

* :math:`\alpha_{r,k}`: replicate :math:`r`'s least-squares slope of :math:`-\log\mathcal L(\ell)` on
  :math:`\log\ell`, each depth's loss the **best over its starts** (routes and initialisations) *at that
  length* -- the exponent the run would report had it stopped there (:func:`exponents_along_training`);
* the **drift per doubling** :math:`d_{r,k} = (\alpha_{r,k+1} - \alpha_{r,k}) / \log_2 q`, paired by
  replicate (one teacher, one data stream, the same evaluation batches at every length).

**The model.**  Near its limit a loss approaches it as a power of the training length,
:math:`\mathcal L_\ell(t) = \mathcal L_\ell^*(1 + g_\ell(t))` with :math:`g_\ell \propto t^{-\gamma}`, so
the exponent approaches its limit as :math:`\alpha(t) = \alpha_\infty - \sum_\ell w_\ell\,
\log(1 + g_\ell(t))` (:math:`w_\ell` the slope's weights): at geometric lengths its drifts shrink
geometrically, :math:`d_{k+1} = \rho\,d_k` with :math:`\rho = q^{-\gamma}`, and what is still to come after
the longest length is the geometric tail (Aitken's :math:`\Delta^2`)

.. math:: R = \alpha_\infty - \alpha_n = d_{n-1}\,\frac{\rho}{1 - \rho}.

**The estimate** (:func:`remaining_drift`) uses the last two drifts, from the last three lengths, so a
ratio that grows along training (a slower mode taking over) is never extrapolated from its earlier,
faster part, and the first lengths, where training has barely begun, are not read as its tail:

* the noise: each exponent of the last three lengths is its length's mean, plus its replicate's own level
  (its teacher, which cancels in its drifts), plus noise of one variance, estimated from the residuals of
  that two-way table (:func:`pooled_noise`; :math:`2(n-1)` degrees of freedom for :math:`n` replicates,
  against :math:`n - 1` for the last drift alone: with three replicates, t = 2.78 instead of 4.30); two
  successive drifts share a length, so their means covary by :math:`-\sigma^2/n`;
* :math:`\bar d`, the mean last drift over replicates, with its one-sided upper end
  :math:`\bar d^{+}` at level :math:`1 - (1-c)/2` (Student's t);
* :math:`\rho` from the ratio of the mean last drift to the mean drift before it, and its upper end
  :math:`\rho^{+}` by **Fieller's theorem** for a ratio of means (their covariance included), at the
  same one-sided level, so the pair holds jointly at :math:`c` (Bonferroni);
* :math:`\rho` is capped at :math:`\rho_{\max} = q^{-\gamma_{\min}}`, :math:`\gamma_{\min}` =
  ``DRIFT_SLOWEST_GAMMA`` = 0.1: the slowest decay admitted, a stated assumption (the tail test's,
  :mod:`resflow.fitting.extrapolation`).  Where the ratio cannot be measured -- the drift before the last
  is within its noise or of the other sign, or Fieller's interval is unbounded -- the cap is the ratio.
  Applying the same cap where the ratio *is* measured means a precise measurement is never penalised: a
  constant drift measured to the fourth digit is bounded exactly as one hidden in noise;
* the **remaining drift**: :math:`\hat R = \bar d\,\hat\rho/(1-\hat\rho)` and its interval
  :math:`[\min(0, \bar d^{-}), \max(0, \bar d^{+})] \cdot \rho^{+}/(1-\rho^{+})` with
  :math:`[\bar d^{-}, \bar d^{+}]` the last drift's interval: in the direction of the drift; when the
  last drift is within its noise (its interval contains 0) the exponent may move either way, each way as
  far as its end of the drift's interval allows, at the slowest admitted decay.

With one replicate the same is done over the evaluation batches (an exponent per batch), and says that it
measures evaluation noise only.  An exponent is **certified** when its routes agree at every depth
(:mod:`resflow.fitting.certification`) and the remaining drift's bound is at most
``EXPONENT_TOLERANCE`` = 0.1 (``docs/design/certification.md`` gives the reasons for 0.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..loglog import slopes

__all__ = ["DRIFT_SLOWEST_GAMMA", "EXPONENT_TOLERANCE", "DRIFT_LENGTHS", "RemainingDrift",
           "exponents_along_training", "best_along_training", "remaining_drift", "fieller_interval",
           "pooled_noise", "exponent_drift"]

DRIFT_SLOWEST_GAMMA = 0.1  # the slowest decay of the drift admitted, t^-0.1 (the tail test's assumption)
EXPONENT_TOLERANCE = 0.1  # an exponent is settled when at most this much of it is still to come
DRIFT_LENGTHS = 3  # the remaining drift reads the last three lengths: the last two drifts


@dataclass(frozen=True, kw_only=True)
class RemainingDrift:
    """How far a series' exponent has still to move with more training (module docstring).

    Signed: ``remaining`` is :math:`\\alpha_\\infty - \\alpha_n` (positive: the exponent still rises),
    ``low``/``high`` the ends of its interval.  ``drift`` is the mean last drift per doubling,
    ``drift_low``/``drift_high`` its two-sided interval at the run's confidence; ``drifts`` every mean
    drift per doubling along the lengths; ``ratio`` the decay per doubling used for ``remaining`` and
    ``ratio_high`` the one for the bound; ``case``: ``"decaying"`` (the ratio measured),
    ``"not shrinking"`` (the ratio not measurable or not below 1: the cap), ``"within noise"`` (the last
    drift within its noise), ``"not checked"`` (fewer than three geometric lengths, or a missing loss).
    """

    remaining: float
    low: float
    high: float
    drift: float
    drift_low: float
    drift_high: float
    ratio: float
    ratio_high: float
    case: str
    method: str
    drifts: tuple[float, ...] = ()
    per_doubling: float = 1.0  # log2 of the lengths' ratio: the drifts are divided by it

    @property
    def bound(self) -> float:
        """The largest move the interval admits, either way (inf: none bounded)."""
        return max(abs(self.low), abs(self.high))

    def certifies(self, tolerance: float = EXPONENT_TOLERANCE) -> bool:
        return bool(self.bound <= tolerance)

    @property
    def text(self) -> str:
        if self.case == "not checked":
            return "drift not checked"
        return (f"drift {self.drift:+.3f} [{self.drift_low:+.3f}, {self.drift_high:+.3f}] per doubling, "
                f"ratio {self.ratio_high:.2f} ({self.case}): still to come {self.remaining:+.3f} "
                f"[{self.low:+.3f}, {self.high:+.3f}]")


def best_along_training(batches: np.ndarray, trained: np.ndarray) -> np.ndarray:
    """Per (depth, replicate, length) the evaluation-batch losses ``(..., eval_batch)`` of the best start at
    that length: the finished student (route, init) whose mean loss there is lowest (NaN where none is).

    ``batches`` is ``(depth, replicate, route, init, length, eval_batch)``, ``trained``
    ``(depth, replicate, route, init)``."""
    data = np.asarray(batches, float)
    usable = np.asarray(trained, bool)[..., None] & np.all(np.isfinite(data), axis=-1)
    means = np.where(usable, data.mean(axis=-1), np.inf)  # (depth, rep, route, init, length)
    d, r, n_route, n_init, n_len, n_batch = data.shape
    flat_means = means.reshape(d, r, n_route * n_init, n_len)
    pick = flat_means.argmin(axis=2)  # (depth, rep, length)
    flat = data.reshape(d, r, n_route * n_init, n_len, n_batch)
    best = np.take_along_axis(flat, pick[:, :, None, :, None], axis=2)[:, :, 0]
    found = np.isfinite(np.take_along_axis(flat_means, pick[:, :, None, :], axis=2)[:, :, 0])
    return np.where(found[..., None], best, np.nan)


def exponents_along_training(depths, best: np.ndarray) -> np.ndarray:
    """The exponent at every training length: ``(replicate, length)`` from the best losses ``best``
    ``(depth, replicate, length, eval_batch)`` (:func:`best_along_training`), each replicate's slope over
    the depths of its mean over evaluation batches (NaN where a depth has no loss)."""
    means = np.asarray(best, float).mean(axis=-1)  # (depth, rep, length)
    return np.asarray(slopes(np.asarray(depths, float), means.transpose(1, 2, 0)), float)


def fieller_interval(abar: float, bbar: float, cov: np.ndarray, quantile: float) -> tuple[float, float]:
    """Fieller's interval for the ratio :math:`\\mathbb E b / \\mathbb E a` of two estimated means ``abar``,
    ``bbar`` with the covariance matrix ``cov`` (2 x 2) of the two estimates, at the t ``quantile`` given;
    ``(-inf, inf)`` when :math:`\bar a` is within its noise (the interval is then unbounded).  Fieller,
    J. R. Stat. Soc. B 16, 175 (1954)."""
    t2 = quantile ** 2
    qa = abar ** 2 - t2 * cov[0, 0]
    if not qa > 0:
        return -math.inf, math.inf
    qb = abar * bbar - t2 * cov[0, 1]
    qc = bbar ** 2 - t2 * cov[1, 1]
    root = math.sqrt(max(qb ** 2 - qa * qc, 0.0))
    return (qb - root) / qa, (qb + root) / qa


def pooled_noise(values: np.ndarray) -> tuple[float, int]:
    """The variance of one exponent's noise and its degrees of freedom, from exponents ``(sample, length)``
    under the additive model :math:`\\alpha_{r,k} = \\mu_k + u_r + e_{r,k}` (a sample's own level :math:`u_r`
    -- its teacher -- cancels in its drifts): the residual mean square of the two-way table,
    :math:`(n - 1)(m - 1)` degrees of freedom (0 with one sample)."""
    values = np.asarray(values, float)
    n, m = values.shape
    dof = (n - 1) * (m - 1)
    if dof < 1:
        return math.nan, 0
    rows, columns = values.mean(axis=1, keepdims=True), values.mean(axis=0, keepdims=True)
    residual = values - rows - columns + values.mean()
    return float(np.sum(residual ** 2) / dof), dof


def _ratio_of_lengths(lengths) -> float:
    lengths = np.asarray(lengths, float)
    steps = np.diff(np.log(lengths))
    if lengths.size < 2 or not (np.all(steps > 0) and np.allclose(steps, steps[0], rtol=1e-3)):
        raise ConfigError("the exponent's drift needs training lengths in a geometric progression "
                          f"(like 0.25, 0.5, 1); got {lengths.tolist()}.")
    return float(math.exp(steps[0]))


def _not_checked(reason: str) -> RemainingDrift:
    nan = math.nan
    return RemainingDrift(remaining=nan, low=-math.inf, high=math.inf, drift=nan, drift_low=nan,
                          drift_high=nan, ratio=nan, ratio_high=nan, case="not checked", method=reason)


def remaining_drift(samples: np.ndarray, lengths, *, confidence: float = 0.95,
                    slowest_gamma: float = DRIFT_SLOWEST_GAMMA, method: str = "") -> RemainingDrift:
    """The :class:`RemainingDrift` of exponents ``samples`` ``(sample, length)``: one row per replicate (or,
    with one replicate, per evaluation batch), the lengths shortest first (module docstring).  ``method``
    names what the samples are."""
    from scipy import stats

    values = np.asarray(samples, float)
    lengths = [float(v) for v in lengths]
    if values.ndim != 2 or values.shape[1] != len(lengths):
        raise ValueError(f"samples must be (sample, length) with {len(lengths)} lengths; got {values.shape}")
    if len(lengths) < DRIFT_LENGTHS:
        return _not_checked(f"fewer than {DRIFT_LENGTHS} training lengths")
    try:
        q = _ratio_of_lengths(lengths)
    except ConfigError as exc:
        return _not_checked(str(exc))
    if not np.all(np.isfinite(values)):
        return _not_checked("a loss is missing at some length")
    per_doubling = math.log2(q)
    tail = values[:, -DRIFT_LENGTHS:]  # the last three lengths: the last two drifts
    drifts = np.diff(values, axis=1) / per_doubling  # (sample, drift)
    n = drifts.shape[0]
    abar, dbar = float(drifts[:, -2].mean()), float(drifts[:, -1].mean())
    variance, dof = pooled_noise(tail)
    level = 1 - (1 - confidence) / 2  # each of the drift's and the ratio's upper ends, one-sided
    if dof:
        t_two = float(stats.t.ppf(level, dof))  # two-sided c = one-sided (1 + c)/2
        unit = variance / n / per_doubling ** 2  # a drift's mean is a difference of two lengths' means
        cov = np.array([[2 * unit, -unit], [-unit, 2 * unit]])
        se = math.sqrt(2 * unit)
    else:
        t_two, se, cov = 0.0, 0.0, np.zeros((2, 2))
    d_low, d_high = dbar - t_two * se, dbar + t_two * se
    cap = q ** -slowest_gamma
    within = d_low <= 0 <= d_high and dof > 0
    sign = 1.0 if dbar >= 0 else -1.0
    point_ratio = cap
    bound_ratio = cap
    case = "not shrinking"
    if not within and sign * abar > 0:
        _, high_r = fieller_interval(sign * abar, sign * dbar, cov, t_two)
        if math.isfinite(high_r) and high_r < cap:
            bound_ratio = max(high_r, 0.0)
            case = "decaying"
        point_ratio = min(max(dbar / abar, 0.0), cap)
    # the drift may be anything in [d_low, d_high] and decays at most as fast as the bound's ratio allows
    tail = bound_ratio / (1 - bound_ratio)
    low, high = min(0.0, d_low) * tail, max(0.0, d_high) * tail
    remaining = dbar * point_ratio / (1 - point_ratio)
    if within:
        case = "within noise"
    pooled = f"noise pooled over the last {DRIFT_LENGTHS} lengths ({dof} degrees of freedom)"
    what = method or (f"over {n} replicates, {pooled}" if dof else "one sample: no interval")
    return RemainingDrift(remaining=float(remaining), low=float(low), high=float(high), drift=dbar,
                          drift_low=float(d_low), drift_high=float(d_high), ratio=float(point_ratio),
                          ratio_high=float(bound_ratio), case=case, method=what,
                          drifts=tuple(float(v) for v in drifts.mean(axis=0)), per_doubling=per_doubling)


def exponent_drift(depths, lengths, along: np.ndarray, *, confidence: float = 0.95) -> RemainingDrift:
    """The :class:`RemainingDrift` of a series from the best losses at every length ``along``
    ``(depth, replicate, length, eval_batch)`` (:func:`best_along_training`): over replicates, or with one
    replicate over its evaluation batches (evaluation noise only)."""
    along = np.asarray(along, float)
    if along.shape[1] >= 2:
        return remaining_drift(exponents_along_training(depths, along), lengths, confidence=confidence)
    one = along[:, 0]  # (depth, length, batch): an exponent per evaluation batch
    depths = np.asarray(depths, float)
    per_batch = np.asarray(slopes(depths, one.transpose(2, 1, 0)), float)  # (batch, length)
    return remaining_drift(per_batch, lengths, confidence=confidence,
                           method=f"over {per_batch.shape[0]} evaluation batches (1 replicate: evaluation "
                                  "noise only)")
