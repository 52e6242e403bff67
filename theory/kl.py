r"""Small-error expansion of the KL loss between softmax outputs at temperature :math:`T`.

Teacher logits :math:`z`, student logits :math:`z + \delta`, :math:`p = \mathrm{softmax}(z/T)`,
:math:`q = \mathrm{softmax}((z+\delta)/T)`.  Then
:math:`\mathrm{KL}(p\|q) = K(1/T) - \mathbb E_p[\delta]/T` where
:math:`K(s) = \log \mathbb E_p e^{s\delta}` is the cumulant generating function of :math:`\delta`
under :math:`p`.  Expanding :math:`K` in cumulants :math:`\kappa_n` of :math:`\delta` under :math:`p`,

.. math:: \mathrm{KL}(p\|q) = \frac{\mathrm{Var}_p(\delta)}{2T^2} + \frac{\kappa_3}{6T^3} + O(\delta^4/T^4).

So to leading order KL is a quadratic form in the logit error,
:math:`\frac{1}{2T^2}\delta^\top(\mathrm{diag}\,p - pp^\top)\delta`: a logit error that scales as
:math:`\ell^{-a}` gives a KL loss :math:`\propto \ell^{-2a}`, the same depth exponent as the MSE of
the logits (or of the final state, mapped through a fixed head).
"""

from __future__ import annotations

import sympy as sp

from ._law import Derivation

__all__ = ["derive", "kl_series_check"]

T = sp.Symbol("T", positive=True)
var = sp.Symbol("Var_p", nonnegative=True)  # variance of the logit error under p
kappa3 = sp.Symbol("kappa_3")


def kl_series_check(vocab: int = 3) -> sp.Expr:
    """Exact check on a symbolic distribution over ``vocab`` outcomes; returns the remainder (0 if the law
    holds).

    Computes the series of :math:`\\mathrm{KL}` in :math:`s = 1/T`-scaled errors to third order and
    subtracts :math:`s^2\\kappa_2/2 + s^3\\kappa_3/6`.
    """
    s = sp.Symbol("s")
    p = sp.symbols(f"p1:{vocab + 1}", positive=True)
    d = sp.symbols(f"d1:{vocab + 1}", real=True)
    # p is a distribution: p_V = 1 - sum of the others
    subs = {p[-1]: 1 - sum(p[:-1])}
    mean = sum(pi * di for pi, di in zip(p, d, strict=True))
    cgf = sp.log(sum(pi * sp.exp(s * di) for pi, di in zip(p, d, strict=True)))
    kl = cgf - s * mean  # KL(p || q) with delta = d and 1/T = s
    series = sp.series(kl.subs(subs), s, 0, 4).removeO()
    k2 = sum(pi * (di - mean) ** 2 for pi, di in zip(p, d, strict=True))
    k3 = sum(pi * (di - mean) ** 3 for pi, di in zip(p, d, strict=True))
    return sp.simplify(sp.expand(series - (s**2 * k2 / 2 + s**3 * k3 / 6)).subs(subs))


def derive() -> Derivation:
    assert kl_series_check(3) == 0
    leading = var / (2 * T**2)
    return Derivation(
        "kl-small-error",
        "KL(teacher || student) at temperature T ~ Var_p(logit error) / (2 T^2)",
        sp.Eq(sp.Symbol("KL"), leading), (var, T), None,
        "Small logit error delta relative to T; p = softmax(z/T) the teacher distribution. Next term "
        "kappa_3 / (6 T^3) (third cumulant of delta under p). "
        "Checked exactly on a symbolic 3-outcome distribution.",
        ("T. M. Cover & J. A. Thomas, Elements of Information Theory, 2nd ed. (2006) (cumulant expansions)",),
        steps=(("with the third-order term", sp.Eq(sp.Symbol("KL"), leading + kappa3 / (6 * T**3))),),
        relation="approximately",
    )
