r"""Discretisation error of a smooth flow: local error (elementary differentials) and global error.

**Global error on a linear field.**  For :math:`h' = \lambda h` one RK step multiplies by the
stability polynomial :math:`R(z) = 1 + z\, b^\top (I - zA)^{-1} \mathbb 1`, :math:`z = \lambda T/L`.
An order-:math:`p` method has :math:`R(z) = e^z\,(1 - C z^{p+1} + O(z^{p+2}))` with the *error
constant* :math:`C = \frac{1}{(p+1)!} - b^\top A^p \mathbb 1`.  Then
:math:`L \log R(\lambda T/L) = \lambda T - C(\lambda T)^{p+1} L^{-p} + O(L^{-p-1})` and

.. math:: h_L - h(T) = -C\,(\lambda T)^{p+1} e^{\lambda T} h_0\, L^{-p} + O(L^{-p-1}),

and for a matrix field :math:`h' = Ah` (all powers of :math:`A` commute with :math:`e^{AT}`)
:math:`h_L - h(T) \approx -C\, (AT)^{p+1} e^{AT} h_0\, L^{-p}`.  The squared error falls as
:math:`L^{-2p}`: a fixed discretisation's local errors add *coherently* (see
:mod:`resflow.theory.accumulation`).

**Local error on a general autonomous field.**  With the B-series of the exact flow
(:math:`\sum_\tau h^{|\tau|} F(\tau) / (\sigma(\tau)\gamma(\tau))`) and of the method
(:math:`\sum_\tau h^{|\tau|} \Phi(\tau) F(\tau) / \sigma(\tau)`), the leading local error of an
order-:math:`p` method is

.. math:: y_1 - y(h) = h^{p+1} \sum_{|\tau| = p+1} \frac{\Phi(\tau) - 1/\gamma(\tau)}{\sigma(\tau)}
          F(\tau)(y_0) + O(h^{p+2}),

e.g. :math:`-\tfrac12 h^2 f'f` for Euler.
"""

from __future__ import annotations

import sympy as sp

from resflow.dynamics.rooted_trees import elementary_weight, tree_factorial, tree_symmetry, trees_of_order
from resflow.dynamics.tableau import ButcherTableau

from ._law import Derivation

__all__ = [
    "stability_polynomial",
    "error_constant",
    "differential_symbol",
    "local_error",
    "derive_global",
    "derive_local",
]

z = sp.Symbol("z")


def stability_polynomial(tableau: ButcherTableau) -> sp.Expr:
    r""":math:`R(z) = 1 + z\, b^\top (I - zA)^{-1}\mathbb 1` (a polynomial for explicit methods)."""
    s = tableau.stages
    A = sp.Matrix(s, s, lambda i, j: sp.Rational(tableau.a[i][j]))
    b = sp.Matrix([sp.Rational(x) for x in tableau.b])
    ones = sp.ones(s, 1)
    # (I - zA)^{-1} = sum_k (zA)^k, finite because A is nilpotent for explicit methods
    series = sum(((z * A) ** k for k in range(s)), sp.zeros(s, s))
    return sp.expand(1 + z * (b.T * series * ones)[0])


def error_constant(tableau: ButcherTableau) -> sp.Rational:
    r""":math:`C = [z^{p+1}]\,(e^z - R(z)) = \frac{1}{(p+1)!} - b^\top A^p \mathbb 1`, derived from
    :math:`R`."""
    p = tableau.order
    taylor = sp.series(sp.exp(z), z, 0, p + 2).removeO()
    return sp.Rational(sp.expand(taylor - stability_polynomial(tableau)).coeff(z, p + 1))


def derive_global() -> Derivation:
    lam, T, L, C, p = sp.symbols("lambda T L C p", positive=True)
    eps = sp.Symbol("epsilon", positive=True)  # 1/L
    # Generic order-p stability function around 0, p >= 1 kept symbolic via x^(p+1) with x = lam*T*eps
    x = lam * T * eps
    log_r = x - C * x ** (p + 1)  # log R(x) = x - C x^{p+1} + O(x^{p+2})  (log(e^x (1 - C x^{p+1})))
    total = sp.expand(log_r / eps)  # L log R(lam T / L)
    exponent_term = sp.powsimp(sp.expand(total - lam * T), force=True).subs(eps, 1 / L)
    # h_L / h(T) = exp(L log R - lam T); to leading order exp(u) - 1 = u, so e_L = u e^{lam T} h_0
    u = sp.Symbol("u")
    leading = sp.series(sp.exp(u) - 1, u, 0, 2).removeO()
    expression = sp.powsimp(leading.subs(u, exponent_term) * sp.exp(lam * T), force=True)
    return Derivation(
        name="discretisation-error",
        title="global error of an order-p RK stack on h' = lambda h: "
              "e_L = -C (lambda T)^(p+1) e^(lambda T) L^-p h_0",
        # the error is a scalar times the vector h_0: the evaluator computes that scalar
        expression=sp.Eq(sp.Symbol("e_L"), expression * sp.Symbol("h_0"), evaluate=False),
        value=expression,
        parameters=(C, lam, T, L, p),
        exponent=2 * p,
        assumptions=(
            "Linear field h' = lambda h (or A h: replace lambda T by A T), "
            "tied stack of depth L with step T/L, "
            "order-p explicit RK method with error constant C = 1/(p+1)! - b^T A^p 1 (exact per tableau: "
            "resflow.theory.discretisation.error_constant); leading order in 1/L. Squared error ~ L^(-2p)."
        ),
        references=("Hairer, Nørsett & Wanner, Solving ODEs I (2nd ed.), §II.3 and §IV.2 "
                    "(stability function)",),
        steps=(
            ("stability function of an order-p method",
             sp.Eq(sp.Symbol("R(z)"), sp.exp(z) * (1 - C * z ** (p + 1)))),
            ("L log R(lambda T / L) - lambda T", exponent_term.subs(eps, 1 / L)),
        ),
    )


def differential_symbol(tree) -> sp.Symbol:
    """Symbol for the elementary differential :math:`F(\\tau)`, e.g. ``f'f``, ``f''(f,f)``, ``f'f'f``."""
    return sp.Symbol(_differential_name(tree), commutative=True)


def _differential_name(tree) -> str:
    if not tree:
        return "f"
    primes = "'" * len(tree)
    inner = [_differential_name(child) for child in tree]
    if len(inner) == 1:
        return f"f{primes}{inner[0]}"
    return f"f{primes}({','.join(inner)})"


def local_error(tableau: ButcherTableau, order: int | None = None) -> sp.Expr:
    r"""Leading local error :math:`\sum_{|\tau|=p+1} (\Phi(\tau) - 1/\gamma(\tau))/\sigma(\tau)\, F(\tau)`
    (times :math:`h^{p+1}`)."""
    n = (tableau.order if order is None else order) + 1
    h = sp.Symbol("h")
    a = [[sp.Rational(x) for x in row] for row in tableau.a]
    b = [sp.Rational(x) for x in tableau.b]
    terms = [
        (sp.Rational(elementary_weight(tree, a, b)) - sp.Rational(1, tree_factorial(tree)))
        / tree_symmetry(tree) * differential_symbol(tree)
        for tree in trees_of_order(n)
    ]
    return h**n * sp.Add(*terms)


def derive_local() -> Derivation:
    from resflow.dynamics.tableau import TABLEAUX

    euler = local_error(TABLEAUX["euler"])
    return Derivation(
        name="local-error",
        title="leading local error of an RK step in elementary differentials (Euler: -h^2 f'f / 2)",
        expression=sp.Eq(sp.Symbol("y_1") - sp.Symbol("y(h)"), euler, evaluate=False),
        parameters=(),
        exponent=None,
        assumptions=(
            "Autonomous field f in C^(p+1) near the trajectory; "
            "B-series of the exact flow and of the method; "
            "leading term in h. Per tableau: resflow.theory.discretisation.local_error(tableau)."
        ),
        references=("Hairer, Nørsett & Wanner, Solving ODEs I (2nd ed.), §II.2, Thm. 2.11 and 2.13",),
        steps=tuple(
            (f"{name} (order {tab.order})", local_error(tab))
            for name, tab in TABLEAUX.items() if name in ("euler", "midpoint", "heun", "rk3", "rk4")
        ),
    )
