r"""Accumulation of local errors across depth: the unifying law.

Let a depth-:math:`\ell` network leave a local error :math:`e_l` at each layer, of typical size
:math:`\ell^{-q}` (:math:`\mathbb E\, e_l e_m = \ell^{-2q} C_{lm}` with a correlation matrix
:math:`C`).  To leading order the output error is their sum, so

.. math:: \mathbb E \Big(\sum_{l=1}^{\ell} e_l\Big)^2 = \ell^{-2q}\, \mathbf 1^\top C\, \mathbf 1 .

* coherent (:math:`C_{lm} = 1`): :math:`\ell^{2-2q}`, loss exponent :math:`\alpha = 2q - 2`;
* incoherent (:math:`C = I`): :math:`\ell^{1-2q}`, :math:`\alpha = 2q - 1`;
* equicorrelated (:math:`C_{lm} = \rho` off the diagonal):
  :math:`\ell^{-2q}\,\big((1-\rho)\ell + \rho\ell^2\big)`: incoherent below the crossover depth
  :math:`\ell^* = (1-\rho)/\rho`, coherent above it;
* fractional (fGn with Hurst :math:`H`): :math:`\mathbf 1^\top C \mathbf 1 = \ell^{2H}` exactly
  (the double sum telescopes), so :math:`\ell^{2H-2q}` and :math:`\alpha = 2q - 2H`.

Instances: a rough target leaves :math:`q = 1` errors that add incoherently (:math:`\alpha = 1`,
the ensemble regime); Euler on a smooth target has :math:`q = 2` (:math:`\alpha = 3` incoherent,
:math:`2` coherent); an RK2 (midpoint) block on a smooth target :math:`q = 3` (:math:`5` / :math:`4`).
"""

from __future__ import annotations

import sympy as sp

from ._law import Derivation

__all__ = ["derive_coherent", "derive_incoherent", "derive_equicorrelated", "derive_fractional", "INSTANCES"]

ell, q = sp.symbols("ell q", positive=True)
rho = sp.Symbol("rho", nonnegative=True)
H = sp.Symbol("H", positive=True)
l, m = sp.symbols("l m", integer=True, positive=True)

ASSUMPTIONS = (
    "Output error = sum of the l local errors (first order: no amplification or damping between layers); "
    "each local error has variance l^(-2q) and correlation C between layers. "
    "Loss = mean squared output error."
)
REFERENCES = (
    "Liu, Kangaslahti, Liu & Gore, arXiv:2602.05970 (2026), sec. on procedural vs ensemble regimes",
    "Hairer, Nørsett & Wanner, Solving ODEs I, §II.3 "
    "(Lady Windermere's fan: global error = sum of local errors)",
)

INSTANCES = {
    # name: (q, correlation) -> loss exponent
    "rough target (ensemble)": (1, "incoherent"),
    "Euler, smooth target, incoherent": (2, "incoherent"),
    "Euler, smooth target, coherent": (2, "coherent"),
    "RK2, smooth target, incoherent": (3, "incoherent"),
    "RK2, smooth target, coherent": (3, "coherent"),
}


def ones_quadratic_form(all_ones_weight: sp.Expr, identity_weight: sp.Expr, n: sp.Symbol) -> sp.Expr:
    r""":math:`\mathbf 1^\top C\, \mathbf 1` for the :math:`n \times n` matrix :math:`C = w_J J + w_I I`
    (:math:`J` all ones), by summing its entries: :math:`w_J n^2 + w_I n`."""
    ones = sp.summation(sp.summation(sp.Integer(1), (m, 1, n)), (l, 1, n))  # 1^T J 1
    trace = sp.summation(sp.Integer(1), (l, 1, n))  # 1^T I 1
    return all_ones_weight * ones + identity_weight * trace


def _loss(all_ones_weight: sp.Expr, identity_weight: sp.Expr) -> sp.Expr:
    total = ones_quadratic_form(all_ones_weight, identity_weight, ell)
    return sp.powsimp(sp.expand(ell ** (-2 * q) * total), force=True)


def _exponent(loss: sp.Expr) -> sp.Expr:
    """Local exponent -d log(loss) / d log(ell)."""
    return sp.simplify(-ell * sp.diff(loss, ell) / loss)


def derive_coherent() -> Derivation:
    loss = _loss(sp.Integer(1), sp.Integer(0))
    return Derivation("accumulation-coherent", "local errors ~ l^-q added coherently: loss ~ l^(2-2q)",
                      sp.Eq(sp.Symbol("loss"), loss), (ell, q), _exponent(loss),
                      ASSUMPTIONS + " C = all ones.", REFERENCES, relation="proportional")


def derive_incoherent() -> Derivation:
    loss = _loss(sp.Integer(0), sp.Integer(1))
    return Derivation("accumulation-incoherent", "local errors ~ l^-q added incoherently: loss ~ l^(1-2q)",
                      sp.Eq(sp.Symbol("loss"), loss), (ell, q), _exponent(loss),
                      ASSUMPTIONS + " C = identity.", REFERENCES, relation="proportional")


def derive_equicorrelated() -> Derivation:
    loss = sp.collect(_loss(rho, 1 - rho), rho)
    crossover = sp.solve(sp.Eq((1 - rho) * ell, rho * ell**2), ell)
    crossover = [c for c in crossover if c != 0][0]
    return Derivation(
        "accumulation-equicorrelated",
        "local errors correlated with rho: incoherent below l* = (1-rho)/rho, coherent above",
        sp.Eq(sp.Symbol("loss"), loss), (ell, q, rho), _exponent(loss),
        ASSUMPTIONS + " C_lm = rho (l != m), 1 (l = m).", REFERENCES,
        steps=(("crossover depth l* where the incoherent and coherent parts are equal",
                sp.Eq(sp.Symbol("ell^*"), crossover)),),
        relation="proportional",
    )


def fgn_double_sum(n: int, hurst: sp.Expr = H) -> sp.Expr:
    """:math:`\\sum_{l,m<n} \\gamma_H(l-m)` for a concrete ``n`` (symbolic ``H``)."""
    def gamma(k):
        k = abs(k)
        return sp.Rational(1, 2) * ((k + 1) ** (2 * hurst) - 2 * sp.Integer(k) ** (2 * hurst)
                                    + abs(k - 1) ** (2 * hurst))
    return sum(gamma(i - j) for i in range(n) for j in range(n))


def derive_fractional() -> Derivation:
    # The double sum of the fGn autocovariance telescopes to n^{2H}; verified exactly for n = 1..8.
    for n in range(1, 9):
        assert sp.simplify(fgn_double_sum(n) - sp.Integer(n) ** (2 * H)) == 0, n
    loss = ell ** (-2 * q) * ell ** (2 * H)
    loss = sp.powsimp(loss, force=True)
    return Derivation(
        "accumulation-fractional",
        "local errors correlated as fGn(H): loss ~ l^(2H-2q), alpha = 2q - 2H",
        sp.Eq(sp.Symbol("loss"), loss), (ell, q, H), _exponent(loss),
        ASSUMPTIONS + " C = fGn autocovariance with Hurst H (H = 1/2 incoherent, H -> 1 coherent).",
        REFERENCES,
        steps=(("sum over l, m < n of gamma_H(l - m) (telescoping; checked for n = 1..8)",
                sp.Eq(sp.Symbol("S_n"), sp.Symbol("n") ** (2 * H))),),
        relation="proportional",
    )
