"""The record every derivation returns (private module of ``resflow.theory``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

__all__ = ["Derivation"]


@dataclass(frozen=True)
class Derivation:
    """A derived law: the expression, how to evaluate it, and what it assumes.

    Attributes
    ----------
    name : str
        Registry name (``resflow theory NAME``).
    title : str
        One line for listings.
    expression : sympy.Basic
        The derived result (an expression, or an ``Eq``/``Tuple`` of them).
    parameters : tuple of sympy.Symbol
        Arguments of the numeric evaluator, in order (``resflow.laws.evaluate``).
    exponent : sympy.Basic or None
        Loss-vs-depth exponent :math:`\\alpha` (loss :math:`\\propto \\ell^{-\\alpha}`) where one
        exists; it may depend on parameters (a local exponent).
    assumptions : str
        What the derivation assumes, in words.
    references : tuple of str
    steps : tuple of (str, sympy.Basic)
        Intermediate results, for the generated documentation.
    status : {"derived", "hypothesis"}
        ``"hypothesis"`` marks a law stated (to be tested) rather than derived.
    """

    name: str
    title: str
    expression: sp.Basic
    parameters: tuple[sp.Symbol, ...]
    exponent: sp.Basic | None
    assumptions: str
    references: tuple[str, ...] = ()
    steps: tuple[tuple[str, sp.Basic], ...] = field(default=())
    status: str = "derived"

    def __post_init__(self) -> None:
        if self.status not in ("derived", "hypothesis"):
            raise ValueError(f"status must be 'derived' or 'hypothesis'; got {self.status!r}")

    @property
    def target(self) -> sp.Basic:
        """The expression the numeric evaluator computes (right-hand side of an ``Eq``)."""
        return self.expression.rhs if isinstance(self.expression, sp.Eq) else self.expression
