"""Every law is written as mathematics: its LaTeX converts (latex2mathml, what the docs site uses) without an
unknown command, no multi-letter name is set as a product of italic letters, the relation says what the law
claims (=, ∝, ≈), and the terminal shows exponents as formulas."""

import re

import pytest
import sympy as sp
from typer.testing import CliRunner

from resflow import laws
from resflow.cli import app
from resflow.theory.typeset import latex, pretty

latex2mathml = pytest.importorskip("latex2mathml.converter")
UPRIGHT_GROUPS = re.compile(r"\\(?:mathrm|operatorname|text|mathbb|begin|end)\{[^{}]*\}")
COMMAND = re.compile(r"\\[A-Za-z]+")


def formulas(name):
    d = laws.derivation(name)
    yield "result", latex(d.expression, d.relation)
    for label, step in d.steps:
        yield label, latex(step)
    if d.exponent is not None:
        yield "exponent", latex(d.exponent)


def italic_words(tex: str) -> list[str]:
    """Runs of two or more letters that would be set in italic: what is left after commands and upright groups."""
    bare = COMMAND.sub(" ", UPRIGHT_GROUPS.sub(" ", tex))
    return re.findall(r"[A-Za-z]{2,}", bare)


@pytest.mark.parametrize("name", laws.names())
def test_every_formula_of_a_law_typesets(name):
    for label, tex in formulas(name):
        converted = latex2mathml.convert(tex)
        assert "<mi>\\" not in converted and "<mo>\\" not in converted, (name, label, tex)  # unknown command
        assert italic_words(tex) == [], (name, label, tex)


def test_the_checks_catch_what_sympy_writes_unaided():
    loss, mse, var_p = sp.symbols("loss MSE Var_p")
    assert italic_words(sp.latex(sp.Eq(loss, 1 / var_p))) == ["loss", "Var"]  # sympy alone: italic products
    assert italic_words(latex(sp.Eq(loss, mse / var_p))) == []
    assert latex(sp.Eq(loss, mse), "proportional") == r"\mathrm{loss} \propto \mathrm{MSE}"
    assert "<mi>\\" in latex2mathml.convert(r"\nosuchmacro x")  # the unknown-command check can fail


def test_relations_say_what_each_law_claims():
    assert r"\propto" in laws.describe("accumulation-coherent").latex  # constants dropped
    assert r"\approx" in laws.describe("kl-small-error").latex  # leading order
    assert r"\propto" not in laws.describe("finite-teacher-ensemble").latex  # A carried: exact
    assert laws.describe("discretisation-error").latex.startswith("e_{L} = ")  # no division by the vector h_0
    rough = laws.describe("roughness-correlated").latex  # the arranged form, not the expansion
    assert r"\ell \ell^{" not in rough and rough.count("A_{r}") == 1 and rough.count("A_{s}") == 1


def test_the_theory_table_shows_exponents_as_formulas():
    text = CliRunner().invoke(app, ["theory"], env={"COLUMNS": "220"}).output
    assert "Piecewise" not in text and "0 if K > ℓ else α_g" in text and "**" not in text
    assert pretty(sp.Symbol("ell") ** (2 * sp.Symbol("q"))) == "ℓ^(2·q)"
