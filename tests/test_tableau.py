"""Integrators as data: the registry, exact order conditions, and construction errors."""

from fractions import Fraction

import pytest

import resflow
from resflow import TABLEAUX, ButcherTableau, TableauError, UnknownNameError, get_tableau
from resflow.dynamics.rooted_trees import tree_factorial, trees_of_order

REQUIRED = ("euler", "midpoint", "heun", "ralston", "rk3", "rk4", "rk38")


def test_required_schemes_are_registered():
    assert set(REQUIRED) <= set(TABLEAUX)


def test_number_of_rooted_trees_matches_oeis_a000081():
    assert [len(trees_of_order(n)) for n in range(1, 8)] == [1, 1, 2, 4, 9, 20, 48]


def test_tree_factorials_of_order_four():
    assert sorted(tree_factorial(t) for t in trees_of_order(4)) == [4, 8, 12, 24]


@pytest.mark.parametrize("name", list(TABLEAUX))
class TestRegisteredTableau:
    def test_consistency(self, name):
        tab = TABLEAUX[name]
        assert sum(tab.b) == 1
        for row, ci in zip(tab.a, tab.c, strict=True):
            assert sum(row) == ci
        assert all(isinstance(x, Fraction) for row in tab.a for x in row)

    def test_meets_declared_order_and_not_the_next(self, name):
        tab = TABLEAUX[name]
        assert tab.satisfies_order(tab.order)
        assert not tab.satisfies_order(tab.order + 1)

    def test_has_reference_and_is_frozen(self, name):
        tab = TABLEAUX[name]
        assert tab.reference
        with pytest.raises(AttributeError):
            tab.order = 7  # type: ignore[misc]


def test_registry_is_read_only():
    with pytest.raises(TypeError):
        TABLEAUX["mine"] = TABLEAUX["euler"]  # type: ignore[index]


def test_user_tableau_accepts_strings_and_fractions():
    tab = ButcherTableau("mid", a=[[], [Fraction(1, 2)]], b=[0, 1], c=[0, "1/2"], order=2)
    assert tab.a == ((0, 0), (Fraction(1, 2), 0)) and tab.stages == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"a": [[], [1]], "b": ["1/2", "1/2"], "c": [0, "1/2"], "order": 2}, "row 1 of a sums to 1"),
        ({"a": [[], [1]], "b": ["1/2", "1/3"], "c": [0, 1], "order": 1}, "sum to 5/6"),
        ({"a": [[0, 1], [0, 0]], "b": ["1/2", "1/2"], "c": [1, 0], "order": 1}, "not an explicit method"),
        ({"a": [[], [1]], "b": ["1/2", "1/2"], "c": [0, 1], "order": 3}, "violates the order condition"),
        ({"a": [[], [0.5]], "b": [0, 1], "c": [0, 0.5], "order": 2}, "must be exact"),
        ({"a": [[]], "b": [1], "c": [0, 1], "order": 1}, "one node per stage"),
        ({"a": [[], [1, 2, 3]], "b": ["1/2", "1/2"], "c": [0, 1], "order": 1}, r"a\[1\] must list"),
        ({"a": [[]], "b": [1], "c": [0], "order": 0}, "order must be an integer"),
    ],
)
def test_inconsistent_tableaux_are_rejected(kwargs, message):
    with pytest.raises(TableauError, match=message):
        ButcherTableau("bad", **kwargs)


def test_get_tableau_names_the_choices():
    assert get_tableau("rk4") is TABLEAUX["rk4"]
    assert get_tableau(TABLEAUX["heun"]) is TABLEAUX["heun"]
    with pytest.raises(UnknownNameError, match=r"'rk44' is not registered; did you mean 'rk4'\? \(choose one of euler"):
        get_tableau("rk44")
    with pytest.raises(UnknownNameError, match="'zzz' is not registered; choose one of euler"):
        get_tableau("zzz")
    with pytest.raises(resflow.ConfigError, match="got 3"):
        get_tableau(3)
