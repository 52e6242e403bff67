r"""Rooted trees and the Butcher order conditions of Runge--Kutta methods.

A Runge--Kutta method with tableau :math:`(A, b, c)` has order :math:`p` if and only if

.. math:: \Phi(\tau) = \frac{1}{\gamma(\tau)} \quad \text{for every rooted tree } \tau
          \text{ with } |\tau| \le p,

where :math:`\Phi` is the elementary weight and :math:`\gamma` the tree factorial
(Butcher 1963; Hairer, Nørsett & Wanner, *Solving ODEs I*, 2nd ed., §II.2, Thm. 2.13).

Trees are canonical nested tuples: a tree is the sorted tuple of its children, so the single
node is ``()``, the two-node tree is ``((),)`` and the "bushy" order-3 tree is ``((), ())``.
Everything here is exact (``fractions.Fraction``); the sympy derivation in
``resflow.theory.taylor_matching`` derives the same conditions by Taylor matching and is tested
against this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from functools import cache
from itertools import combinations_with_replacement

__all__ = ["Tree", "trees_of_order", "tree_order", "tree_factorial", "tree_symmetry", "elementary_weight"]

Tree = tuple  # a tree is the sorted tuple of its child trees


def tree_order(tree: Tree) -> int:
    """Number of nodes :math:`|\\tau|`."""
    return 1 + sum(tree_order(child) for child in tree)


def tree_factorial(tree: Tree) -> int:
    r""":math:`\gamma(\tau) = |\tau| \prod_{\text{children } u} \gamma(u)`."""
    result = tree_order(tree)
    for child in tree:
        result *= tree_factorial(child)
    return result


def tree_symmetry(tree: Tree) -> int:
    r"""Symmetry factor :math:`\sigma(\tau)`: the order of the tree's automorphism group.

    :math:`\sigma(\bullet) = 1`; for children :math:`u_j` repeated :math:`k_j` times,
    :math:`\sigma = \prod_j k_j!\, \sigma(u_j)^{k_j}`.  With it the exact flow's B-series reads
    :math:`y(h) = y_0 + \sum_\tau \frac{h^{|\tau|}}{\sigma(\tau)\gamma(\tau)} F(\tau)(y_0)`.
    """
    from math import factorial

    result = 1
    for child in set(tree):
        count = tree.count(child)
        result *= factorial(count) * tree_symmetry(child) ** count
    return result


@cache
def trees_of_order(n: int) -> tuple[Tree, ...]:
    """All rooted trees with ``n`` nodes, each once (1, 1, 2, 4, 9, 20, ... of them)."""
    if n < 1:
        raise ValueError(f"tree order must be >= 1, got {n}")
    if n == 1:
        return ((),)
    found: set[Tree] = set()
    for partition in _partitions(n - 1):
        # one child tree per part; children of equal size are chosen as multisets
        pools = [trees_of_order(size) for size in partition]
        for children in _product_of_multisets(partition, pools):
            found.add(tuple(sorted(children)))
    return tuple(sorted(found, key=lambda t: (repr(t).count("("), repr(t))))


def _partitions(n: int, largest: int | None = None) -> list[tuple[int, ...]]:
    largest = n if largest is None else largest
    if n == 0:
        return [()]
    out = []
    for first in range(min(n, largest), 0, -1):
        out += [(first, *rest) for rest in _partitions(n - first, first)]
    return out


def _product_of_multisets(partition: tuple[int, ...], pools: list[tuple[Tree, ...]]):
    groups: dict[int, int] = {}
    for size in partition:
        groups[size] = groups.get(size, 0) + 1
    choices = [
        list(combinations_with_replacement(trees_of_order(size), count))
        for size, count in groups.items()
    ]

    def rec(i: int):
        if i == len(choices):
            yield ()
            return
        for pick in choices[i]:
            for rest in rec(i + 1):
                yield pick + rest

    yield from rec(0)


def elementary_weight(
    tree: Tree, a: Sequence[Sequence[Fraction]], b: Sequence[Fraction]
) -> Fraction:
    # Works on any ring: Fractions here, sympy symbols in resflow.theory.
    r"""Elementary weight :math:`\Phi(\tau) = \sum_i b_i\, g_i(\tau)`.

    With :math:`g(\bullet) = \mathbf 1` and, for a tree with children :math:`u_1, \dots, u_m`,
    :math:`g_i(\tau) = \prod_k (A\, g(u_k))_i`.
    """
    g = _stage_weights(tree, a)
    return sum((bi * gi for bi, gi in zip(b, g, strict=True)), 0)


def _stage_weights(tree: Tree, a: Sequence[Sequence[Fraction]]) -> list[Fraction]:
    s = len(a)
    g = [1] * s
    for child in tree:
        gc = _stage_weights(child, a)
        ag = [sum((a[i][j] * gc[j] for j in range(s)), 0) for i in range(s)]
        g = [gi * agi for gi, agi in zip(g, ag, strict=True)]
    return g
