r"""Runge--Kutta order conditions up to order 4, derived by Taylor matching.

Derivation.  Take a generic explicit :math:`s`-stage tableau (symbols :math:`a_{ij}, b_i`,
:math:`c_i = \sum_j a_{ij}`) and the non-autonomous scalar problem :math:`y' = f(t, y)` with
:math:`f` a generic polynomial of total degree 3 (symbolic coefficients :math:`p_{kl}`), at
:math:`(t_0, y_0) = (0, 0)`.  The exact solution's Taylor coefficients follow from the total
derivative :math:`D = \partial_t + f\,\partial_y` (:math:`y^{(n)} = D^{n-1} f`); the method's
from expanding the stages in :math:`h`.  Matching powers :math:`h^n`, :math:`n \le 4`, and asking
each coefficient of each monomial in the :math:`p_{kl}` to vanish gives polynomial conditions on
the tableau.  Up to order 4 the scalar non-autonomous problem separates all elementary
differentials (Butcher 1963; Hairer, Nørsett & Wanner, *Solving ODEs I*, §II.2), so these
conditions span exactly the rooted-tree conditions
:math:`\Phi(\tau) = 1/\gamma(\tau)`, :math:`|\tau| \le 4`: 1, 1, 2, 4 independent conditions at
orders 1–4 (verified by :func:`conditions_span_equal` in :func:`derive`).  From order 5 on the scalar
problem merges trees, which is why resflow checks higher orders with the B-series (rooted-tree) form in
:mod:`resflow.dynamics.rooted_trees`.
"""

from __future__ import annotations

from functools import cache
from itertools import product
from math import factorial

import sympy as sp
from sympy.polys.domains import QQ
from sympy.polys.rings import ring

from resflow.dynamics.rooted_trees import elementary_weight, tree_factorial, trees_of_order

from ._law import Derivation

__all__ = ["tableau_symbols", "taylor_conditions", "tree_conditions", "conditions_span_equal", "derive"]

def tableau_symbols(stages: int) -> tuple[list[list[sp.Expr]], list[sp.Symbol], list[sp.Expr]]:
    """Generic explicit tableau: ``a`` (strictly lower symbols), ``b``, and ``c`` = row sums."""
    a = [[sp.Symbol(f"a{i + 1}{j + 1}") if j < i else sp.Integer(0) for j in range(stages)]
         for i in range(stages)]
    b = [sp.Symbol(f"b{i + 1}") for i in range(stages)]
    c = [sum(row, sp.Integer(0)) for row in a]
    return a, b, c


@cache
def taylor_conditions(stages: int = 4, max_order: int = 4) -> dict[int, tuple[sp.Expr, ...]]:
    r"""Conditions (expressions that must vanish) at each order :math:`n \le` ``max_order``.

    Obtained by Taylor matching on :math:`y' = f(t, y)` with a generic cubic :math:`f`; see the
    module docstring.  Returned unreduced (possibly redundant); :func:`conditions_span_equal`
    compares spans.  Computed in a sparse polynomial ring (``sympy.polys.rings``) for speed.
    """
    a_sym, b_sym, _ = tableau_symbols(stages)
    degree = max_order - 1
    p_names = [f"p{k}{m}" for k in range(degree + 1) for m in range(degree + 1 - k)]
    a_names = [str(x) for row in a_sym for x in row if x != 0]
    b_names = [str(x) for x in b_sym]
    R, *gens = ring(["h", "t", "y", *p_names, *a_names, *b_names], QQ)
    H, T, Y = gens[:3]
    P = dict(zip(p_names, gens[3 : 3 + len(p_names)], strict=True))
    A = dict(zip(a_names, gens[3 + len(p_names) : 3 + len(p_names) + len(a_names)], strict=True))
    B = gens[3 + len(p_names) + len(a_names):]
    a = [[A.get(f"a{i + 1}{j + 1}", R(0)) for j in range(stages)] for i in range(stages)]
    c = [sum(row, R(0)) for row in a]
    f = sum((P[f"p{k}{m}"] * T**k * Y**m for k in range(degree + 1) for m in range(degree + 1 - k)), R(0))

    def truncate(poly, order):
        return R.from_dict({m: v for m, v in poly.terms() if m[0] <= order})

    def at_origin(poly):
        return poly.compose([(T, R(0)), (Y, R(0))])

    exact, g = R(0), f
    for n in range(1, max_order + 1):
        exact += H**n * at_origin(g) * QQ(1, factorial(n))
        g = g.diff(T) + f * g.diff(Y)

    stage_values = []
    for i in range(stages):
        yi = H * sum((a[i][j] * stage_values[j] for j in range(i)), R(0))
        stage_values.append(truncate(f.compose([(T, c[i] * H), (Y, yi)]), max_order - 1))
    method = truncate(H * sum((B[i] * stage_values[i] for i in range(stages)), R(0)), max_order)

    # group the difference by (power of h, monomial in the p's); each group must vanish
    n_p = len(p_names)
    groups: dict[tuple, dict] = {}
    for monom, coef in (method - exact).terms():
        key = (monom[0], monom[3 : 3 + n_p])
        groups.setdefault(key, {})[monom] = coef
    tab_syms = [*(sp.Symbol(n) for n in a_names), *b_sym]
    by_order: dict[int, set[sp.Expr]] = {n: set() for n in range(1, max_order + 1)}
    for (power, _), terms in groups.items():
        expr = sum(
            (sp.Rational(int(v.numerator), int(v.denominator))
             * sp.Mul(*(s**e for s, e in zip(tab_syms, m[3 + n_p:], strict=True))) for m, v in terms.items()),
            sp.Integer(0),
        )
        if expr != 0:
            by_order[power].add(sp.expand(expr))
    return {n: tuple(sorted(v, key=sp.default_sort_key)) for n, v in by_order.items()}


def tree_conditions(stages: int, order: int) -> tuple[sp.Expr, ...]:
    r""":math:`\Phi(\tau) - 1/\gamma(\tau)` for every tree with :math:`|\tau| =` ``order`` (B-series form)."""
    a, b, _ = tableau_symbols(stages)
    return tuple(
        sp.expand(elementary_weight(tree, a, b) - sp.Rational(1, tree_factorial(tree)))
        for tree in trees_of_order(order)
    )


def _coefficient_matrix(exprs, symbols) -> sp.Matrix:
    polys = [sp.Poly(e, *symbols) for e in exprs]
    monomials = sorted({m for p in polys for m in p.monoms()})
    return sp.Matrix([[p.coeff_monomial(m) for m in monomials] for p in polys])


def conditions_span_equal(first, second, symbols) -> tuple[bool, int]:
    """Whether two lists of polynomial conditions span the same space; returns (equal, dimension)."""
    both = _coefficient_matrix(list(first) + list(second), symbols)
    r_all = both.rank()
    r_first = both[: len(first), :].rank()
    r_second = both[len(first):, :].rank()
    return (r_all == r_first == r_second), r_all


def _matrix_form(tree) -> sp.Expr:
    """Elementary weight in matrix notation: b^T g(tau), g = Hadamard product of A g(child)."""
    s = sp.Symbol("s", integer=True, positive=True)
    A = sp.MatrixSymbol("A", s, s)
    b = sp.MatrixSymbol("b", s, 1)
    c = sp.MatrixSymbol("c", s, 1)
    one = sp.MatrixSymbol(r"\mathbb{1}", s, 1)

    def g(node):
        if not node:
            return one
        factors = [c if not child else A * g(child) for child in node]
        return factors[0] if len(factors) == 1 else sp.HadamardProduct(*factors)

    return b.T * g(tree)


def derive(max_order: int = 4) -> Derivation:
    """The order conditions up to ``max_order`` as equations :math:`b^T g(\\tau) = 1/\\gamma(\\tau)`."""
    eqs = []
    for n in range(1, max_order + 1):
        for tree in trees_of_order(n):
            eqs.append(sp.Eq(_matrix_form(tree), sp.Rational(1, tree_factorial(tree)), evaluate=False))
    a, b, _ = tableau_symbols(4)
    symbols = [x for row in a for x in row if x != 0] + b
    steps = []
    for n in range(1, max_order + 1):
        equal, dim = conditions_span_equal(taylor_conditions(4, max_order)[n], tree_conditions(4, n), symbols)
        steps.append((f"order {n}: Taylor matching spans the {dim} tree condition(s): {equal}",
                      sp.Tuple(*tree_conditions(4, n))))
    return Derivation(
        name="order-conditions",
        title="Runge-Kutta order conditions up to order 4 (Taylor matching = rooted trees)",
        expression=sp.Tuple(*eqs),
        parameters=(),
        exponent=None,
        assumptions=(
            "Explicit RK method with c_i = sum_j a_ij; f smooth (C^p). Taylor matching on the generic "
            "scalar non-autonomous problem, which separates all elementary differentials up to order 4."
        ),
        references=(
            "J. C. Butcher, J. Austral. Math. Soc. 3 (1963) 185-201",
            "Hairer, Nørsett & Wanner, Solving ODEs I (2nd ed., 1993), §II.2",
        ),
        steps=tuple(steps),
    )


def substitute_tableau(expr: sp.Expr, tableau, stages: int = 4) -> sp.Expr:
    """Evaluate a condition exactly on a registered tableau (padded with zero stages to ``stages``)."""
    if tableau.stages > stages:
        raise ValueError(f"tableau has {tableau.stages} stages > {stages}")
    a, b, _ = tableau_symbols(stages)
    values = {}
    for i, j in product(range(stages), range(stages)):
        if j < i:
            inside = i < tableau.stages and j < tableau.stages
            values[a[i][j]] = sp.Rational(tableau.a[i][j]) if inside else 0
    for i in range(stages):
        values[b[i]] = sp.Rational(tableau.b[i]) if i < tableau.stages else 0
    return sp.nsimplify(expr.subs(values))
