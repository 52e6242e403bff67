r"""Power laws on log--log axes: the one place resflow fits :math:`y = A x^{-\alpha}`.

Every depth exponent, empirical convergence order and step-size slope in resflow is a least-squares
line through :math:`(\log x, \log y)`; this module is that line, so they all share one definition:

* :func:`slopes` -- the exponent :math:`\alpha = -\,d\log y / d\log x` only, vectorised over any
  leading axes of ``y`` (bootstrap resamples, seeds, training steps);
* :func:`power_law_fit` -- exponent, prefactor, standard error and a Student-t interval from the
  regression residuals (:math:`n - 2` degrees of freedom), as a :class:`PowerLawFit`;
* :func:`power_law` -- the fitted line evaluated at new points (for plots);

The regression interval treats the points as independent with equal log-scale noise; the
experiment fits (:mod:`resflow.fitting.fits`) use intervals over independent replicates instead,
and say which in their ``ci_method``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError, ShapeError

__all__ = ["PowerLawFit", "slopes", "power_law_fit", "power_law"]


def _log_axes(x, y) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 1 or x.size < 2 or y.shape[-1:] != x.shape:
        raise ShapeError(
            "x must be 1-D with at least two points and y's last axis must match it; "
            f"got x {x.shape}, y {y.shape}."
        )
    if np.any(x <= 0) or not np.all(np.isfinite(x)):
        raise ConfigError(f"x must be positive and finite to take logarithms; got {x.tolist()}.")
    return np.log(x), y


def slopes(x, y) -> np.ndarray | float:
    r"""Least-squares exponents :math:`\alpha` of :math:`y \propto x^{-\alpha}` along the last axis of ``y``.

    Parameters
    ----------
    x : array_like, shape (n,)
        Positive abscissae (depths, step counts).
    y : array_like, shape (..., n)
        Positive values; a non-positive or non-finite entry gives NaN for its row.

    Returns
    -------
    float or numpy.ndarray of shape ``y.shape[:-1]``
    """
    logx, y = _log_axes(x, y)
    centred = logx - logx.mean()
    with np.errstate(divide="ignore", invalid="ignore"):  # an infinite entry: NaN for its row, silently
        logy = np.where(y > 0, np.log(np.where(y > 0, y, 1.0)), np.nan)
        slope = (logy - logy.mean(axis=-1, keepdims=True)) @ centred / (centred @ centred)
    return float(-slope) if np.ndim(slope) == 0 else -slope


@dataclass(frozen=True, kw_only=True)
class PowerLawFit:
    r"""A fitted :math:`y = A\,x^{-\alpha}`.

    Attributes
    ----------
    exponent : float
        :math:`\alpha`.
    prefactor : float
        :math:`A`.
    stderr : float
        Standard error of :math:`\alpha` from the residuals (NaN with two points).
    ci_low, ci_high : float
        Student-t interval of :math:`\alpha` at ``confidence`` (NaN with two points).
    confidence : float
    n_points : int
    """

    exponent: float
    prefactor: float
    stderr: float
    ci_low: float
    ci_high: float
    confidence: float
    n_points: int


def power_law_fit(x, y, *, confidence: float = 0.95) -> PowerLawFit:
    """Fit :math:`y = A x^{-\\alpha}` by least squares on log--log axes, with a regression interval."""
    logx, y = _log_axes(x, y)
    if y.ndim != 1:
        raise ShapeError(f"power_law_fit takes one series (1-D y); got shape {y.shape}. "
                         "Use slopes() for many.")
    if np.any(y <= 0) or not np.all(np.isfinite(y)):
        raise ConfigError(f"y must be positive and finite to fit a power law; got {y.tolist()}.")
    logy = np.log(y)
    slope, intercept = np.polyfit(logx, logy, 1)
    n = logx.size
    stderr = ci_low = ci_high = math.nan
    if n > 2:
        from scipy import stats

        resid = logy - (slope * logx + intercept)
        s2 = float(resid @ resid) / (n - 2)
        stderr = math.sqrt(s2 / float(((logx - logx.mean()) ** 2).sum()))
        half = float(stats.t.ppf((1 + confidence) / 2, n - 2)) * stderr
        ci_low, ci_high = -slope - half, -slope + half
    return PowerLawFit(exponent=float(-slope), prefactor=float(math.exp(intercept)), stderr=stderr,
                       ci_low=float(ci_low), ci_high=float(ci_high), confidence=confidence, n_points=n)


def power_law(fit: PowerLawFit, x) -> np.ndarray:
    """:math:`A x^{-\\alpha}` of a fit at new points ``x``."""
    return fit.prefactor * np.asarray(x, dtype=float) ** (-fit.exponent)
