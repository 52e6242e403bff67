r"""Depth in the LLM scaling law: the loss-optimal width/depth split at fixed parameter count.

With :math:`\mathcal L(m, \ell, D) = c_m m^{-\alpha_m} + c_\ell \ell^{-\alpha_\ell} + c_D D^{-\alpha_D} + L_0`
and :math:`N \approx 12 m^2 \ell` non-embedding parameters (width :math:`m`, depth :math:`\ell`),
minimise over :math:`m` with :math:`\ell = N/(12m^2)`:

.. math:: m^* = \Big(\frac{\alpha_m c_m}{2\alpha_\ell c_\ell}\Big)^{\frac{1}{\alpha_m + 2\alpha_\ell}}
          \Big(\frac{N}{12}\Big)^{\frac{\alpha_\ell}{\alpha_m + 2\alpha_\ell}}, \qquad
          \ell^* = \frac{N}{12 m^{*2}} \propto N^{\frac{\alpha_m}{\alpha_m + 2\alpha_\ell}},

so :math:`m^*/\ell^* \propto N^{(\alpha_\ell - \alpha_m)/(\alpha_m + 2\alpha_\ell)}` and the
model-size part of the loss falls as :math:`N^{-\alpha_N}` with
:math:`\alpha_N = \alpha_m\alpha_\ell / (\alpha_m + 2\alpha_\ell)`.
"""

from __future__ import annotations

import sympy as sp

from ._law import Derivation

__all__ = ["derive", "optimal_width", "optimal_depth"]

m, ell, N = sp.symbols("m ell N", positive=True)
c_m, c_l, alpha_m, alpha_l = sp.symbols("c_m c_l alpha_m alpha_l", positive=True)


def _model_loss(width: sp.Expr) -> sp.Expr:
    return c_m * width ** (-alpha_m) + c_l * (N / (12 * width**2)) ** (-alpha_l)


def optimal_width() -> sp.Expr:
    solutions = sp.solve(sp.Eq(sp.diff(_model_loss(m), m), 0), m)
    assert len(solutions) == 1, solutions
    return sp.powsimp(sp.simplify(solutions[0]), force=True)


def optimal_depth() -> sp.Expr:
    return sp.simplify(N / (12 * optimal_width() ** 2))


def derive() -> Derivation:
    m_star, l_star = optimal_width(), optimal_depth()
    loss = sp.simplify(_model_loss(m_star))
    alpha_N = sp.simplify(-N * sp.diff(sp.log(loss), N))
    # the optimal model-size loss is a pure power of N: its prefactor (the value at N = 1)
    prefactor = sp.simplify(loss.subs(N, 1))
    check = {c_m: 3.1, c_l: 0.7, alpha_m: 0.8, alpha_l: 1.3, N: 7.5e8}
    assert abs(float(((prefactor * N ** -alpha_N) / loss).subs(check)) - 1) < 1e-9
    K = sp.Symbol("K")
    model_loss = sp.Function("L^{*}")(N)  # the width and depth parts of the loss at the optimal split
    return Derivation(
        "llm-depth-width",
        "loss-optimal width and depth at fixed N = 12 m^2 l; "
        "N-exponent alpha_m alpha_l / (alpha_m + 2 alpha_l)",
        sp.Eq(model_loss, prefactor * N ** -alpha_N), (N, c_m, alpha_m, c_l, alpha_l), None,
        "Additive power laws in width m and depth ell "
        "(plus data and irreducible terms that do not depend on the split); "
        "N = 12 m^2 ell; interior optimum.",
        ("Kaplan et al., arXiv:2001.08361 (2020) (N ~ 12 d_model^2 n_layer)",
         "Liu, Kangaslahti, Liu & Gore, arXiv:2602.05970 (2026) (the decomposition)"),
        steps=(
            ("optimal width", sp.Eq(sp.Symbol("m^*"), m_star)),
            ("optimal depth", sp.Eq(sp.Symbol("ell^*"), l_star)),
            ("parameter-count exponent", sp.Eq(sp.Symbol("alpha_N"), alpha_N)),
            ("prefactor K of L^*(N) = K N^(-alpha_N) (its value at N = 1)", sp.Eq(K, prefactor)),
        ),
    )
