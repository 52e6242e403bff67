"""One curve of loss against depth: the plain exponent (the least-squares slope on log-log axes) and the
offset law :math:`A\\ell^{-\\alpha} + C` (a check for a floor; the LM ladder's depth law)."""

from __future__ import annotations

import warnings

import numpy as np

from ..loglog import slopes

__all__ = ["fit_exponent", "fit_offset"]


def fit_exponent(depths, losses) -> float:
    """:math:`\\alpha` = minus the least-squares slope of log loss on log depth."""
    return slopes(depths, losses)


def fit_offset(depths, losses) -> tuple[float, float, float] | None:
    """Fit :math:`A\\ell^{-\\alpha} + C` (C >= 0) on log-loss; ``(A, alpha, C)`` or None if it fails."""
    from scipy.optimize import OptimizeWarning, curve_fit

    d, y = np.asarray(depths, float), np.asarray(losses, float)
    if d.size < 4:
        return None

    def model(x, log_a, alpha, log_c):
        return np.log(np.exp(log_a) * x ** (-alpha) + np.exp(log_c))

    alpha0 = fit_exponent(d, y)
    p0 = (np.log(y[0]) + alpha0 * np.log(d[0]), alpha0, np.log(y.min()) - 3)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)  # covariance unused; only the point estimate
            (log_a, alpha, log_c), _ = curve_fit(model, d, np.log(y), p0=p0, maxfev=20000)
    except (RuntimeError, ValueError):
        return None
    return float(np.exp(log_a)), float(alpha), float(np.exp(log_c))
