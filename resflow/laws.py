"""Numeric evaluation of the derived laws, built from the sympy expressions in ``resflow.theory``.

>>> from resflow import laws
>>> laws.evaluate("ensemble-equicorrelated", L=16, sigma=1.0, rho=0.0)
0.0625
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from .errors import ConfigError, UnknownNameError

__all__ = ["names", "derivation", "evaluate", "exponent", "evaluator", "parameters", "LawRecord", "describe",
           "exponent_text"]


def _registry():
    import importlib

    # imported on first use: the derivations need sympy, which importing resflow does not load
    return importlib.import_module("resflow.theory").LAWS


def names() -> list[str]:
    """Registered law names."""
    return list(_registry())


@cache
def derivation(name: str):
    """The :class:`~resflow.theory.Derivation` of a law (derived once per process)."""
    registry = _registry()
    if name not in registry:
        raise UnknownNameError.of("law name", name, registry, listing="`resflow theory`")
    return registry[name]()


def _keyword(symbol) -> str:
    return str(symbol).replace("(", "").replace(")", "").replace("^", "").replace("*", "star")


@cache
def evaluator(name: str, what: str = "law") -> Callable[..., Any]:
    """A numpy function of the law's parameters (keywords as in :func:`parameters`), lambdified from the
    derivation."""
    import sympy as sp

    d = derivation(name)
    expr = d.target if what == "law" else d.exponent
    if expr is None or not d.parameters:
        raise ConfigError(f"law {name!r} has no numeric {'exponent' if what != 'law' else 'evaluator'}.")
    return sp.lambdify(d.parameters, expr, modules="numpy")


def parameters(name: str) -> list[str]:
    """Keyword names accepted by :func:`evaluate` for a law."""
    return [_keyword(s) for s in derivation(name).parameters]


def _call(name: str, what: str, values: dict[str, Any]):
    keys = parameters(name)
    missing = [k for k in keys if k not in values]
    unknown = sorted(set(values) - set(keys))
    if missing or unknown:
        raise ConfigError(
            f"law {name!r} takes parameters {keys}; missing {missing}, unknown {unknown}."
        )
    arrays = [_checked_value(name, k, values[k]) for k in keys]
    out = evaluator(name, what)(*arrays)
    return float(out) if np.ndim(out) == 0 else np.asarray(out, dtype=float)


# The domains of parameters that are sizes, scales or fractions, by name (a law's other parameters,
# e.g. an exponent or an eigenvalue, may take any real value).  (low, high, low allowed, high allowed)
DOMAINS = {
    "L": (0.0, np.inf, False, True), "ell": (0.0, np.inf, False, True), "L_T": (0.0, np.inf, False, True),
    "sigma": (0.0, np.inf, False, True), "N": (0.0, np.inf, False, True), "T": (0.0, np.inf, False, True),
    "rho": (0.0, 1.0, True, True), "H": (0.0, 1.0, False, False), "K": (0.0, np.inf, False, True),
}


def _checked_value(law: str, key: str, value: Any) -> np.ndarray:
    """A parameter value as a float array: real, not NaN, inside the parameter's domain (``DOMAINS``)."""
    try:
        if isinstance(value, str | bytes) or np.asarray(value).dtype.kind in "USO":
            raise TypeError(value)  # numpy would read "1" as 1.0
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(f"law {law!r}: parameter {key} must be a real number or an array of them; got "
                          f"{value!r} ({type(value).__name__}).") from None
    # +inf is a limit the laws use (an infinitely deep teacher: L_T = inf); NaN and -inf are not
    if isinstance(value, bool) or np.any(np.isnan(array)) or np.any(array == -np.inf):
        raise ConfigError(f"law {law!r}: parameter {key} must be real numbers (+inf allowed as a limit, "
                          f"not NaN or -inf); got {value!r}.")
    if key in DOMAINS:
        low, high, low_ok, high_ok = DOMAINS[key]
        inside = (array >= low if low_ok else array > low) & (array <= high if high_ok else array < high)
        if not np.all(inside):
            interval = f"{'[' if low_ok else '('}{low:g}, {high:g}{']' if high_ok else ')'}"
            raise ConfigError(f"law {law!r}: parameter {key} must lie in {interval}; got {value!r}.")
    return array


def evaluate(name: str, **values: Any):
    """Evaluate a law at the given parameter values (scalars or broadcastable arrays)."""
    return _call(name, "law", values)


def exponent(name: str, **values: Any):
    """Evaluate the law's loss-vs-depth exponent (possibly a local exponent depending on parameters)."""
    return _call(name, "exponent", values)


@dataclass(frozen=True, kw_only=True)
class LawRecord:
    """A derived law in words and symbols: what ``resflow theory NAME --json`` prints."""

    name: str
    title: str
    expression: str  # sympy string
    latex: str
    exponent: str | None
    parameters: tuple[str, ...]
    assumptions: str
    references: tuple[str, ...]
    # "hypothesis": stated to be tested, not derived; "not observed": runs so far lack it
    status: str = "derived"
    evidence: str = ""  # for a law not observed: the measurements, their commands, where they are reported

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["parameters"], out["references"] = list(self.parameters), list(self.references)
        return out


def describe(name: str) -> LawRecord:
    """The :class:`LawRecord` of a registered law (``names()`` lists them)."""
    import importlib

    import sympy as sp

    latex = importlib.import_module("resflow.theory.typeset").latex  # as _registry(): sympy on first use
    d = derivation(name)
    return LawRecord(
        name=d.name, title=d.title, expression=sp.sstr(d.expression), latex=latex(d.expression, d.relation),
        exponent=None if d.exponent is None else sp.sstr(d.exponent), parameters=tuple(parameters(name)),
        assumptions=d.assumptions, references=tuple(d.references), status=d.status, evidence=d.evidence,
    )


def exponent_text(name: str) -> str | None:
    """The law's loss-vs-depth exponent in one line of unicode (``2·q - 2``; a piecewise one as
    ``0 if K > ℓ else α_g``), or None for a law without one."""
    import importlib

    d = derivation(name)
    return (None if d.exponent is None
            else importlib.import_module("resflow.theory.typeset").pretty(d.exponent))
