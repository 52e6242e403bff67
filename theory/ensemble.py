r"""Ensemble averaging: the MSE of the mean of :math:`L` noisy members.

Members :math:`m_i = \mu + \sigma z_i` with unit-variance :math:`z_i`, correlation :math:`C`:

.. math:: \mathbb E(\bar m - \mu)^2 = \frac{\sigma^2}{L^2}\, \mathbf 1^\top C\, \mathbf 1 .

* equicorrelated :math:`\rho`: :math:`\sigma^2\big(\rho + (1-\rho)/L\big)` (exact for every
  :math:`L`); i.i.d. (:math:`\rho = 0`) gives the central-limit :math:`\sigma^2/L`, :math:`\alpha = 1`;
  any :math:`\rho > 0` floors the loss at :math:`\sigma^2\rho`;
* fractional :math:`H`: :math:`\sigma^2 L^{2H-2}` exactly for every :math:`L` (the fGn double sum
  telescopes to :math:`L^{2H}`), :math:`\alpha = 2 - 2H`.
"""

from __future__ import annotations

import sympy as sp

from ._law import Derivation
from .accumulation import fgn_double_sum, ones_quadratic_form

__all__ = ["derive_equicorrelated", "derive_fractional"]

L, sigma = sp.symbols("L sigma", positive=True)
rho = sp.Symbol("rho", nonnegative=True)
H = sp.Symbol("H", positive=True)
REFERENCES = (
    "Veit, Wilber & Belongie, NeurIPS 2016 (residual networks as ensembles)",
    "Liu, Kangaslahti, Liu & Gore, arXiv:2602.05970 (2026) (ensemble averaging, loss ~ 1/depth)",
)


def _mse(all_ones_weight: sp.Expr, identity_weight: sp.Expr) -> sp.Expr:
    r""":math:`\sigma^2 \mathbf 1^\top C \mathbf 1 / L^2` for :math:`C = w_J J + w_I I`."""
    return sp.expand(sigma**2 * ones_quadratic_form(all_ones_weight, identity_weight, L) / L**2)


def _exponent(mse: sp.Expr) -> sp.Expr:
    return sp.simplify(-L * sp.diff(mse, L) / mse)


def derive_equicorrelated() -> Derivation:
    mse = sp.factor_terms(sp.collect(_mse(rho, 1 - rho), [sigma**2, 1 / L]))
    return Derivation(
        "ensemble-equicorrelated",
        "MSE of the mean of L members with equicorrelated noise: sigma^2 (rho + (1-rho)/L)",
        sp.Eq(sp.Symbol("MSE"), mse), (L, sigma, rho), _exponent(mse),
        "Members = truth + sigma z_i, z unit-variance with Corr(z_i, z_j) = rho (i != j); "
        "output = member mean. "
        "Exact for every L (no Gaussianity needed for the mean).",
        REFERENCES,
    )


def derive_fractional() -> Derivation:
    for n in range(1, 9):  # exact finite-L identity, checked symbolically in H
        assert sp.simplify(fgn_double_sum(n, H) - sp.Integer(n) ** (2 * H)) == 0
    mse = sp.powsimp(sigma**2 * L ** (2 * H) / L**2, force=True)
    return Derivation(
        "ensemble-fractional",
        "MSE of the mean of L members with fGn(H) noise: sigma^2 L^(2H-2), exact",
        sp.Eq(sp.Symbol("MSE"), mse), (L, sigma, H), _exponent(mse),
        "Members = truth + sigma z_i, z fractional Gaussian noise with Hurst H along the member index. "
        "Exact for every L: sum_{i,j} gamma_H(i - j) = L^(2H).",
        REFERENCES,
    )
