"""The record every derivation returns (private module of ``resflow.theory``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from .typeset import RELATIONS

__all__ = ["Derivation"]


STATUSES = ("derived", "hypothesis", "not observed")


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
    status : {"derived", "hypothesis", "not observed"}
        ``"hypothesis"`` marks a law stated (to be tested) rather than derived; ``"not observed"`` a
        hypothesis whose prediction the measurements so far do not show (``evidence`` says which, where they
        are reported, and for which architecture and budget: a run of another kind could still show it).
    relation : {"=", "proportional", "approximately"}
        How the two sides of ``expression`` relate: exactly, up to a dropped constant (written
        :math:`\\propto`), or to leading order (:math:`\\approx`).
    value : sympy.Basic or None
        What the numeric evaluator computes when it is not the right-hand side of ``expression`` (e.g. the
        scalar factor of an error that is that factor times a vector).
    evidence : str
        For a law not observed: the measurements that do not show it, with the command and where they are
        reported.
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
    relation: str = "="
    value: sp.Basic | None = None
    evidence: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}; got {self.status!r}")
        if (self.status == "not observed") != bool(self.evidence):
            raise ValueError("a law not observed states its evidence (and only such a law): the measurements "
                             "that do not show it and where they are reported")
        if self.relation not in RELATIONS:
            raise ValueError(f"relation must be one of {', '.join(RELATIONS)}; got {self.relation!r}")

    @property
    def target(self) -> sp.Basic:
        """The expression the numeric evaluator computes (``value``, else the right-hand side of an
        ``Eq``)."""
        if self.value is not None:
            return self.value
        return self.expression.rhs if isinstance(self.expression, sp.Eq) else self.expression
