"""How a derivation is written as mathematics: one function for the docs, ``resflow theory`` and the records.

``sympy.latex`` alone writes a multi-letter symbol such as ``loss`` or ``Var_p`` as a product of italic
letters and every relation as ``=``.  :func:`latex` writes multi-letter names upright (``\\mathrm{loss}``,
``\\mathrm{Var}_{p}``), a law whose constants were dropped with ``\\propto`` and a leading-order one with
``\\approx`` (:attr:`Derivation.relation`); piecewise laws come out as ``cases``.  :func:`pretty` is the
terminal's one-line form of the same expression.
"""

from __future__ import annotations

import re

import sympy as sp

__all__ = ["RELATIONS", "latex", "pretty", "upright_names"]

#: the relation of a law's two sides, as LaTeX: exact, constants dropped, leading order
RELATIONS = {"=": "=", "proportional": r"\propto", "approximately": r"\approx"}
_GREEK = {"alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "iota", "kappa",
          "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi",
          "omega", "ell"}
_WORD = re.compile(r"[A-Za-z]{2,}")
_ACCENTS = ("bar", "hat", "tilde", "dot")


def _upright(name: str) -> str | None:
    """``\\mathrm{...}`` for a symbol whose base name is a word (not a Greek letter), else None."""
    base, _, sub = name.partition("_")
    if not _WORD.fullmatch(base) or base.lower() in _GREEK:
        return None
    accent = next((mod for mod in _ACCENTS if base.endswith(mod)), None)
    if accent and (len(base) == len(accent) + 1 or base[:-len(accent)].lower() in _GREEK):
        return None  # "abar", "sigmahat": sympy writes the accent (\bar{a})
    return rf"\mathrm{{{base}}}" + (f"_{{{sub}}}" if sub else "")


def upright_names(expr: sp.Basic) -> dict[sp.Symbol, str]:
    """``symbol_names`` for :func:`sympy.latex`: every multi-letter symbol of ``expr`` set upright."""
    names = {}
    for symbol in expr.free_symbols:
        upright = _upright(symbol.name)
        if upright is not None:
            names[symbol] = upright
    return names


def latex(expr: sp.Basic, relation: str = "=") -> str:
    """LaTeX of ``expr``; an ``Eq`` is written with ``relation`` (a key of :data:`RELATIONS`)."""
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {', '.join(RELATIONS)}; got {relation!r}")
    names = upright_names(expr)
    if isinstance(expr, sp.Eq):
        return (f"{sp.latex(expr.lhs, symbol_names=names)} {RELATIONS[relation]} "
                f"{sp.latex(expr.rhs, symbol_names=names)}")
    return sp.latex(expr, symbol_names=names)


_UNICODE = {"alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "kappa": "κ",
            "lambda": "λ", "rho": "ρ", "sigma": "σ", "ell": "ℓ"}


def pretty(expr: sp.Basic) -> str:
    """One line of unicode for a terminal table: ``ℓ``, Greek letters, ``^`` and ``·``; a piecewise law
    as ``a if condition else b``."""
    if isinstance(expr, sp.Piecewise):
        return " else ".join(pretty(value) if cond is sp.true else f"{pretty(value)} if {pretty(cond)}"
                             for value, cond in expr.args)
    text = sp.sstr(expr).replace("**", "^").replace("*", "·")
    return re.sub(r"\b(" + "|".join(_UNICODE) + r")(?=\b|_)", lambda m: _UNICODE[m.group(1)], text)
