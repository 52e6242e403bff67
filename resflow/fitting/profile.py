r"""The offset law :math:`L(\ell) = c\,\ell^{-\alpha} + L_\infty` with an interval that tells the truth.

Fitted to a few depths, the offset :math:`L_\infty` and the exponent :math:`\alpha` trade off: a lower offset
and a smaller exponent can describe the same losses as a higher offset and a larger one.  A t interval over
seeds of each seed's best :math:`\alpha` hides that: every seed lands on the same corner of a flat valley.
:func:`profile_offset_fit` measures the valley instead.  With the seed means :math:`\bar y_d` and their
standard errors :math:`s_d` (spread over seeds), the deviance

.. math:: D(L_\infty, \alpha) = \min_{c \ge 0}
          \sum_d \big(\bar y_d - L_\infty - c\,\ell_d^{-\alpha}\big)^2 / s_d^2

(:math:`c` in closed form) is evaluated on a grid of the plausible offsets (from ``limit_range[0]``,
default 0,
to just under the smallest loss) and of exponents :math:`[0, \alpha_{\max}]`.  Profiles: over the offset,
:math:`D(L_\infty) = \min_\alpha D`; over the exponent, :math:`D(\alpha) = \min_{L_\infty} D`.  The intervals
are the values within :math:`\chi^2_1(0.95) = 3.84` of the minimum (Wilks), or within
:math:`F_{1,\nu}(0.95)` when the standard errors are estimated from seeds with :math:`\nu` degrees of
freedom.  The law is **identified** only
when the offset's profile rises by at least that much somewhere across the plausible offsets; otherwise the
losses do not determine :math:`L_\infty`, and :math:`\alpha` is reported as the range the flat valley spans,
"not identified".  An interval that reaches the edge of the exponent grid is open there (``alpha_open``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import chi2, f

from .._validate import check_int
from ..errors import ConfigError

__all__ = ["ProfileFit", "profile_offset_fit", "seed_standard_errors", "WILKS_95", "MAX_PROFILE_EXPONENT"]

WILKS_95 = float(chi2.ppf(0.95, 1))  # 3.84: twice the log-likelihood drop of a 95% profile interval
MAX_PROFILE_EXPONENT = 10.0  # the exponent grid's upper end: beyond it a term has run off


@dataclass(frozen=True, kw_only=True)
class ProfileFit:
    """The offset law's profile-likelihood fit (module docstring)."""

    alpha: float  # at the joint minimum
    alpha_low: float  # the 95% profile interval over alpha (offset and c profiled out)
    alpha_high: float
    limit: float  # L_inf at the joint minimum
    limit_low: float
    limit_high: float
    deviance: float  # at the minimum (a chi-square with depths - 3 degrees of freedom if the law holds)
    span: float  # how far the offset's profile rises across the plausible offsets
    threshold: float  # the deviance drop bounding the intervals (3.84; F_{1,dof}(0.95) with estimated errors)
    identified: bool  # span >= threshold and the alpha interval closed
    alpha_open: bool  # the alpha interval reaches the edge of the grid
    limits: np.ndarray = field(repr=False)  # the offset grid
    limit_profile: np.ndarray = field(repr=False)  # D(L_inf) - min D
    alphas: np.ndarray = field(repr=False)  # the exponent grid
    alpha_profile: np.ndarray = field(repr=False)  # D(alpha) - min D

    @property
    def verdict(self) -> str:
        """One phrase for tables: the interval, or why there is none."""
        if self.identified:
            return f"α {self.alpha:.2f} [{self.alpha_low:.2f}, {self.alpha_high:.2f}]"
        reach = ("" if not self.alpha_open else " or more")
        return (f"not identified: α from {self.alpha_low:.2f} to {self.alpha_high:.2f}{reach} "
                f"as L∞ goes from "
                f"{self.limits[0]:.3g} to {self.limits[-1]:.3g} (2Δlog-likelihood {self.span:.2f} < "
                f"{self.threshold:.2f})" if self.span < self.threshold else
                f"not identified: α {self.alpha_low:.2f} or more (the interval reaches the grid's end)")


def profile_offset_fit(depths, means, standard_errors, *, dof: int | None = None,
                       limit_range: tuple[float, float] | None = None, points: int = 241,
                       alpha_points: int = 2000) -> ProfileFit:
    """Profile the deviance of :math:`c\\,\\ell^{-\\alpha} + L_\\infty` over the offset and the exponent.

    ``means`` are the seed-mean losses at ``depths``, ``standard_errors`` their standard errors and ``dof``
    the degrees of freedom of those (:func:`seed_standard_errors`; None: known, the threshold is
    :math:`\\chi^2_1(0.95)` = 3.84; else :math:`F_{1,\\mathrm{dof}}(0.95)`, wider, as a t interval is wider
    than a normal one); ``limit_range`` the plausible offsets (default: 0 to the smallest loss).
    """
    ell = np.asarray(depths, float)
    y = np.asarray(means, float)
    se = np.asarray(standard_errors, float)
    if not (ell.shape == y.shape == se.shape and ell.ndim == 1):
        raise ConfigError("depths, means and standard_errors must be 1-d and of one length; got shapes "
                          f"{ell.shape}, {y.shape}, {se.shape}.")
    if ell.size < 4:
        raise ConfigError("the offset law has three unknowns; profile it on four depths or more "
                          f"(got {ell.size}).")
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(se)) and np.all(se > 0) and np.all(ell > 0)):
        raise ConfigError("depths and standard errors must be positive and every loss finite; "
                          "a standard error needs two seeds or more.")
    low, high = (0.0, float(y.min())) if limit_range is None else map(float, limit_range)
    high = min(high, float(y.min()))
    if not low < high:
        raise ConfigError(f"limit_range must run from a lower to a higher offset below the smallest loss "
                          f"{y.min():.4g}; got {limit_range}.")
    # offsets up to just under the smallest loss (at it, the deepest point would have to be fitted exactly)
    top = high - 1e-6 * max(abs(high), 1e-12)
    alphas = np.linspace(MAX_PROFILE_EXPONENT / (alpha_points - 1), MAX_PROFILE_EXPONENT, alpha_points)
    w = 1.0 / se**2
    x = ell[None, :] ** -alphas[:, None]  # (alpha, depth)
    # the exponent's profile: for every alpha the best (offset, c) exactly (a line in x, offset in range)
    alpha_dev, alpha_limit = _line_fits(x, y, w, low, top)
    # the offset grid: even over the range, and dense at every scale around the best offset (a precise fit's
    # interval may be far narrower than the range's step)
    best_limit = float(alpha_limit[int(np.argmin(alpha_dev))])
    near = (top - low) * np.logspace(-9, 0, points // 2)
    limits = np.unique(np.clip(np.concatenate([np.linspace(low, top, points), best_limit - near,
                                               best_limit + near, [best_limit]]), low, top))
    # the offset's profile: for every (offset, alpha) the best c >= 0 in closed form, then the best alpha
    r = y[None, :] - limits[:, None]  # (limit, depth)
    num = np.einsum("d,ld,ad->la", w, r, x)
    den = np.einsum("d,ad->a", w, x * x)[None, :]
    c = np.clip(num / den, 0.0, None)
    grid_dev = np.maximum(np.einsum("d,ld->l", w, r * r)[:, None] - 2 * c * num + c * c * den, 0.0)
    d_min = min(float(grid_dev.min()), float(alpha_dev.min()))
    limit_profile = grid_dev.min(axis=1) - d_min
    alpha_profile = alpha_dev - d_min
    best = int(np.argmin(alpha_dev))
    span = float(limit_profile.max())
    threshold = WILKS_95 if dof is None else float(f.ppf(0.95, 1, check_int("dof", dof, minimum=1)))
    alpha_open = bool(alpha_profile[-1] <= threshold or alpha_profile[0] <= threshold)
    a_low, a_high = _interval(alphas, alpha_profile, threshold)
    l_low, l_high = _interval(limits, limit_profile, threshold)
    return ProfileFit(
        alpha=float(alphas[best]), alpha_low=a_low, alpha_high=a_high, limit=float(alpha_limit[best]),
        limit_low=l_low, limit_high=l_high, deviance=d_min, span=span, threshold=threshold,
        identified=bool(span >= threshold and not alpha_open), alpha_open=alpha_open,
        limits=limits, limit_profile=limit_profile, alphas=alphas, alpha_profile=alpha_profile)


def _line_fits(x: np.ndarray, y: np.ndarray, w: np.ndarray, low: float, high: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """For every row of ``x`` (alpha, depth): the weighted least-squares ``y = L + c x`` with ``c >= 0`` and
    ``low <= L <= high``; its deviance and its ``L``."""
    sw, sx, sxx = w.sum(), x @ w, (x * x) @ w
    sy, sxy = float(w @ y), (x * y) @ w
    with np.errstate(divide="ignore", invalid="ignore"):
        c = (sw * sxy - sx * sy) / (sw * sxx - sx * sx)
    limit = (sy - c * sx) / sw
    flat = ~np.isfinite(c) | (c < 0)  # no decreasing line: a constant
    c, limit = np.where(flat, 0.0, c), np.where(flat, sy / sw, limit)
    clamped = np.clip(limit, low, high)
    moved = clamped != limit
    # an offset held at an end of its range: c refitted for that offset (still >= 0)
    c = np.where(moved, np.clip((sxy - clamped * sx) / sxx, 0.0, None), c)
    residual = y[None, :] - clamped[:, None] - c[:, None] * x
    return (residual * residual) @ w, clamped


def _interval(grid: np.ndarray, profile: np.ndarray, threshold: float) -> tuple[float, float]:
    """The ends of ``{profile <= threshold}`` on ``grid``, each interpolated to where the profile crosses."""
    inside = np.flatnonzero(profile <= threshold)
    first, last = int(inside[0]), int(inside[-1])

    def cross(i: int, j: int) -> float:  # between grid[i] (inside) and grid[j] (outside)
        t = (threshold - profile[i]) / (profile[j] - profile[i])
        return float(grid[i] + t * (grid[j] - grid[i]))

    return (cross(first, first - 1) if first > 0 else float(grid[0]),
            cross(last, last + 1) if last < grid.size - 1 else float(grid[-1]))


def seed_standard_errors(losses: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Seed means of ``losses`` (seed, depth), their standard errors and the degrees of freedom of those: the
    spread over seeds pooled over depths (one variance: the seeds' spread is about the same at every depth,
    and two or three seeds per depth could not estimate one each), over sqrt(seeds)."""
    losses = np.asarray(losses, float)
    if losses.ndim != 2 or losses.shape[0] < 2:
        raise ConfigError("a standard error over seeds needs losses of shape (seeds >= 2, depths); "
                          f"got {losses.shape}.")
    n, depths = losses.shape
    pooled = float(np.mean(losses.var(axis=0, ddof=1)))
    return losses.mean(axis=0), np.full(depths, math.sqrt(pooled / n)), (n - 1) * depths
