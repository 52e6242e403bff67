r"""Explicit Runge--Kutta methods as data: the Butcher tableau and the registry of methods.

One step of an explicit :math:`s`-stage method with step :math:`h` for :math:`y' = f(t, y)` is

.. math::
    k_i = f\Big(t + c_i h,\; y + h \sum_{j<i} a_{ij} k_j\Big), \qquad
    y_{n+1} = y_n + h \sum_i b_i k_i .

A method is *only* its tableau: adding a method is adding one entry to :data:`TABLEAUX`; the
stepper (:mod:`resflow.stepper`) and every test pick it up from there.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from ..errors import ConfigError, TableauError, UnknownNameError, did_you_mean
from .rooted_trees import elementary_weight, tree_factorial, tree_order, trees_of_order

__all__ = ["ButcherTableau", "TABLEAUX", "get_tableau"]

MAX_CHECKED_ORDER = 6  # order conditions are checked exactly up to this order (48 trees)


def _exact(name: str, value: Any) -> Fraction:
    if isinstance(value, bool):
        raise TableauError(f"{name} must be a number; got {value!r} (bool).")
    if isinstance(value, str | numbers.Rational):
        try:
            return Fraction(value)
        except (ValueError, ZeroDivisionError) as exc:
            raise TableauError(f"{name} must be a rational number such as '1/3'; got {value!r}.") from exc
    if isinstance(value, numbers.Real):
        # A float like 1/3 is not exactly one third: the exact checks below would fail on it.
        raise TableauError(
            f"{name} must be exact (int, fractions.Fraction or a string such as '1/3'); "
            f"got {value!r} (float). Floats cannot satisfy the order conditions exactly."
        )
    raise TableauError(f"{name} must be a rational number; got {value!r} ({type(value).__name__}).")


@dataclass(frozen=True)
class ButcherTableau:
    r"""A validated, immutable Butcher tableau of an explicit Runge--Kutta method.

    Parameters
    ----------
    name : str
        Short name used in the registry and in results (e.g. ``"rk4"``).
    a : sequence of sequences, shape (s, s) or lower-triangular rows
        Stage coefficients :math:`a_{ij}`; row ``i`` may list only its first ``i`` entries.
        Entries must be exact (``int``, :class:`fractions.Fraction` or strings like ``"1/3"``).
    b : sequence, shape (s,)
        Weights :math:`b_i`, summing to 1.
    c : sequence, shape (s,)
        Nodes :math:`c_i = \sum_j a_{ij}`.
    order : int
        Declared order :math:`p`; checked exactly against the rooted-tree order conditions
        :math:`\Phi(\tau) = 1/\gamma(\tau)` for all trees with :math:`|\tau| \le p`.
    reference : str
        Literature reference for the method.

    Raises
    ------
    TableauError
        If the tableau is not explicit, its rows do not sum to ``c``, its weights do not sum to
        one, or it does not meet its declared order.

    References
    ----------
    J. C. Butcher, *Numerical Methods for Ordinary Differential Equations*, 3rd ed., Wiley 2016.
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, 2nd ed.,
    Springer 1993, §II.1–II.2.
    """

    name: str
    a: tuple[tuple[Fraction, ...], ...]
    b: tuple[Fraction, ...]
    c: tuple[Fraction, ...]
    order: int
    reference: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TableauError(f"name must be a non-empty string; got {self.name!r}.")
        if not isinstance(self.b, Sequence) or len(self.b) == 0:
            raise TableauError(f"b must be a non-empty sequence of weights; got {self.b!r}.")
        s = len(self.b)
        b = tuple(_exact(f"b[{i}]", v) for i, v in enumerate(self.b))
        if not isinstance(self.c, Sequence) or len(self.c) != s:
            raise TableauError(f"c must have one node per stage ({s}); got {self.c!r}.")
        c = tuple(_exact(f"c[{i}]", v) for i, v in enumerate(self.c))
        if not isinstance(self.a, Sequence) or len(self.a) != s:
            raise TableauError(f"a must have one row per stage ({s} rows); got {self.a!r}.")
        rows = []
        for i, row in enumerate(self.a):
            if not isinstance(row, Sequence) or len(row) not in (i, s):
                raise TableauError(
                    f"a[{i}] must list the {i} coefficients below the diagonal, or all {s}; got {row!r}."
                )
            full = [_exact(f"a[{i}][{j}]", v) for j, v in enumerate(row)] + [Fraction(0)] * (s - len(row))
            if any(full[j] != 0 for j in range(i, s)):
                raise TableauError(
                    f"a[{i}] has a non-zero entry on or above the diagonal: {self.name!r} is not an "
                    "explicit method. Only explicit Runge-Kutta methods can serve as residual blocks."
                )
            if sum(full, Fraction(0)) != c[i]:
                raise TableauError(
                    f"row {i} of a sums to {sum(full, Fraction(0))}, but c[{i}] = {c[i]}; "
                    "the nodes must equal the row sums (c_i = sum_j a_ij)."
                )
            rows.append(tuple(full))
        if sum(b, Fraction(0)) != 1:
            raise TableauError(f"the weights b sum to {sum(b, Fraction(0))}, not 1 (consistency).")
        if isinstance(self.order, bool) or not isinstance(self.order, numbers.Integral) or not (
            1 <= self.order <= MAX_CHECKED_ORDER
        ):
            raise TableauError(
                f"order must be an integer in [1, {MAX_CHECKED_ORDER}]; got {self.order!r}."
            )
        object.__setattr__(self, "a", tuple(rows))
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "order", int(self.order))
        failed = self.failed_conditions(self.order)
        if failed:
            tree, phi, target = failed[0]
            raise TableauError(
                f"{self.name!r} is declared order {self.order} but violates the order condition of "
                f"tree {tree} (order {tree_order(tree)}): Phi = {phi}, 1/gamma = {target}. "
                "Fix the coefficients or declare a lower order."
            )

    @property
    def stages(self) -> int:
        """Number of stages :math:`s` (evaluations of the field per step)."""
        return len(self.b)

    def failed_conditions(self, order: int) -> list[tuple[tuple, Fraction, Fraction]]:
        """Trees with :math:`|\\tau| \\le` ``order`` whose order condition fails.

        Returns a list of ``(tree, Phi(tree), 1/gamma(tree))``; empty when the method has at least
        this order.
        """
        failed = []
        for n in range(1, order + 1):
            for tree in trees_of_order(n):
                phi = elementary_weight(tree, self.a, self.b)
                target = Fraction(1, tree_factorial(tree))
                if phi != target:
                    failed.append((tree, phi, target))
        return failed

    def satisfies_order(self, order: int) -> bool:
        """Whether every order condition up to ``order`` holds exactly."""
        return not self.failed_conditions(order)

    def as_floats(self) -> tuple[tuple[tuple[float, ...], ...], tuple[float, ...], tuple[float, ...]]:
        """``(a, b, c)`` as Python floats, for the numeric stepper."""
        return (
            tuple(tuple(float(x) for x in row) for row in self.a),
            tuple(float(x) for x in self.b),
            tuple(float(x) for x in self.c),
        )


def _t(name: str, a, b, c, order: int, reference: str) -> ButcherTableau:
    return ButcherTableau(name=name, a=a, b=b, c=c, order=order, reference=reference)


_HNW = "Hairer, Nørsett & Wanner, Solving ODEs I (2nd ed., 1993), Table II.1.1"

TABLEAUX: Mapping[str, ButcherTableau] = MappingProxyType(
    {
        t.name: t
        for t in (
            _t("euler", [[]], [1], [0], 1,
               "L. Euler, Institutionum calculi integralis (1768); " + _HNW),
            _t("midpoint", [[], ["1/2"]], [0, 1], [0, "1/2"], 2,
               "C. Runge, Math. Ann. 46 (1895) 167-178 (explicit midpoint); " + _HNW),
            _t("heun", [[], [1]], ["1/2", "1/2"], [0, 1], 2,
               "K. Heun, Z. Math. Phys. 45 (1900) 23-38 (explicit trapezoidal rule)"),
            _t("ralston", [[], ["2/3"]], ["1/4", "3/4"], [0, "2/3"], 2,
               "A. Ralston, Math. Comp. 16 (1962) 431-437 (minimum error bound RK2)"),
            _t("heun3", [[], ["1/3"], [0, "2/3"]], ["1/4", 0, "3/4"], [0, "1/3", "2/3"], 3,
               "K. Heun, Z. Math. Phys. 45 (1900) 23-38 (third-order method)"),
            _t("rk3", [[], ["1/2"], [-1, 2]], ["1/6", "2/3", "1/6"], [0, "1/2", 1], 3,
               "W. Kutta, Z. Math. Phys. 46 (1901) 435-453 (Kutta's third-order method)"),
            _t("ssprk3", [[], [1], ["1/4", "1/4"]], ["1/6", "1/6", "2/3"], [0, 1, "1/2"], 3,
               "C.-W. Shu & S. Osher, J. Comput. Phys. 77 (1988) 439-471 (SSP RK3)"),
            _t("rk4", [[], ["1/2"], [0, "1/2"], [0, 0, 1]], ["1/6", "1/3", "1/3", "1/6"],
               [0, "1/2", "1/2", 1], 4,
               "W. Kutta, Z. Math. Phys. 46 (1901) 435-453 (classical RK4); " + _HNW),
            _t("rk38", [[], ["1/3"], ["-1/3", 1], [1, -1, 1]], ["1/8", "3/8", "3/8", "1/8"],
               [0, "1/3", "2/3", 1], 4,
               "W. Kutta, Z. Math. Phys. 46 (1901) 435-453 (3/8 rule); " + _HNW),
        )
    }
)
"""Registry of explicit Runge--Kutta methods, name → :class:`ButcherTableau`."""


def get_tableau(scheme: str | ButcherTableau) -> ButcherTableau:
    """Look up a scheme by name, or pass a :class:`ButcherTableau` through unchanged."""
    if isinstance(scheme, ButcherTableau):
        return scheme
    if isinstance(scheme, str) and scheme in TABLEAUX:
        return TABLEAUX[scheme]
    if isinstance(scheme, str):
        raise UnknownNameError(f"scheme {scheme!r} is not registered{did_you_mean(scheme, TABLEAUX)}; "
                               "or pass a resflow.ButcherTableau (resflow tableaux lists them).")
    raise ConfigError(
        f"scheme must be a registered name or a ButcherTableau; got {scheme!r} ({type(scheme).__name__})."
    )
