"""Random explicit Butcher tableaux with rational entries: resflow's exact order check (rooted
trees, Fractions) agrees with sympy's Taylor-series matching (``theory/taylor_matching.py``)."""

from fractions import Fraction

import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from resflow.dynamics import TABLEAUX, ButcherTableau
from resflow.errors import TableauError
from resflow.theory.taylor_matching import tableau_symbols, taylor_conditions

from .strategies import examples

STAGES, MAX_ORDER = 4, 4  # sympy's conditions for every explicit method of up to 4 stages, orders 1-4
small = st.fractions(min_value=-3, max_value=3, max_denominator=4)
nonzero = small.filter(lambda q: q != 0)


def lower(a_rows):
    return [[Fraction(x) for x in row] for row in a_rows]


@st.composite
def random_tableau(draw):
    s = draw(st.integers(1, STAGES))
    a = [[draw(small) for _ in range(i)] for i in range(s)]
    b = [draw(small) for _ in range(s)]
    if draw(st.integers(0, 3)) > 0:  # consistent (order >= 1) most of the time
        b[-1] = 1 - sum(b[:-1])
    return a, b


@st.composite
def second_order_family(draw):
    """Every 2-stage method of order 2: b2 = r, a21 = 1/(2r)."""
    r = draw(nonzero)
    return [[], [1 / (2 * r)]], [1 - r, r]


@st.composite
def third_order_family(draw):
    """Kutta's two-parameter family of 3-stage third-order methods (c2 = u, c3 = v)."""
    u = draw(nonzero.filter(lambda q: q != Fraction(2, 3)))
    v = draw(nonzero.filter(lambda q: q != u))
    b2 = (2 - 3 * v) / (6 * u * (u - v))
    b3 = (2 - 3 * u) / (6 * v * (v - u))
    a32 = v * (v - u) / (u * (2 - 3 * u))
    return [[], [u], [v - a32, a32]], [1 - b2 - b3, b2, b3]


def registered():
    return st.sampled_from([([list(t.a[i][:i]) for i in range(t.stages)], list(t.b))
                            for t in TABLEAUX.values() if t.stages <= STAGES])


@st.composite
def tableaux(draw):
    a, b = draw(st.one_of(registered(), third_order_family(), second_order_family(), random_tableau()))
    a, b = lower(a), [Fraction(x) for x in b]
    if draw(st.integers(0, 2)) == 0:  # perturb one coefficient: orders must drop together in both checks
        entries = [("b", i, None) for i in range(len(b))] + [("a", i, j) for i in range(len(a)) for j in range(i)]
        kind, i, j = draw(st.sampled_from(entries))
        delta = draw(nonzero) / 16
        if kind == "b":
            b[i] += delta
        else:
            a[i][j] += delta
    return a, b


def numeric_order(a, b) -> int:
    """resflow's check: the highest p <= MAX_ORDER whose rooted-tree conditions hold exactly."""
    c = [sum(row, Fraction(0)) for row in a]
    try:
        tableau = ButcherTableau("random", a, b, c, order=1, reference="hypothesis")
    except TableauError:
        return 0
    return max(p for p in range(1, MAX_ORDER + 1) if tableau.satisfies_order(p) or p == 1)


def taylor_order(a, b) -> int:
    """sympy's check: the highest p whose Taylor-matching conditions all vanish on (a, b)."""
    a_sym, b_sym, _ = tableau_symbols(STAGES)
    values = {b_sym[i]: (sp.Rational(b[i].numerator, b[i].denominator) if i < len(b) else 0) for i in range(STAGES)}
    for i in range(STAGES):
        for j in range(i):
            q = a[i][j] if i < len(a) else Fraction(0)
            values[a_sym[i][j]] = sp.Rational(q.numerator, q.denominator)
    conditions = taylor_conditions(STAGES, MAX_ORDER)
    order = 0
    for p in range(1, MAX_ORDER + 1):
        if any(sp.expand(expr.subs(values)) != 0 for expr in conditions[p]):
            break
        order = p
    return order


@settings(max_examples=examples(100))
@given(tableaux())
def test_exact_order_check_agrees_with_taylor_matching(tableau):
    a, b = tableau
    assert numeric_order(a, b) == taylor_order(a, b)


def test_the_generator_reaches_every_order():
    """The strategy is not vacuous: the registered and family tableaux cover orders 0-4."""
    found = {numeric_order(lower([list(t.a[i][:i]) for i in range(t.stages)]), list(t.b))
             for t in TABLEAUX.values() if t.stages <= STAGES}
    assert {1, 2, 3, 4} <= found
    assert numeric_order([[]], [Fraction(1, 2)]) == 0 == taylor_order([[]], [Fraction(1, 2)])
