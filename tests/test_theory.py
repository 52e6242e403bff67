"""Each derived law against a simulation or an exact computation (and the theory command line)."""

import json
import math

import numpy as np
import pytest
import sympy as sp
import torch
from scipy.optimize import minimize_scalar
from typer.testing import CliRunner

from resflow import TABLEAUX, ButcherTableau, Equicorrelated, Fractional, LinearField, MLPField, Teacher, laws
from resflow.cli import app
from resflow.dynamics.convergence import empirical_order
from resflow.dynamics.reference import solve_reference
from resflow.dynamics.rooted_trees import tree_order, trees_of_order
from resflow.dynamics.stack import ResidualStack
from resflow.dynamics.stepper import rk_step, solve_fixed
from resflow.errors import ConfigError, UnknownNameError
from resflow.theory import LAWS, roughness
from resflow.theory import discretisation as disc
from resflow.theory import taylor_matching as oc

F64 = torch.float64
Z = 5.0  # standard errors allowed by statistical checks (false alarm ~6e-7 per check; seeds fixed)


# ---------------------------------------------------------------- 1. order conditions
@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_taylor_matching_spans_exactly_the_tree_conditions(order):
    a, b, _ = oc.tableau_symbols(4)
    symbols = [x for row in a for x in row if x != 0] + b
    equal, dim = oc.conditions_span_equal(oc.taylor_conditions(4, 4)[order], oc.tree_conditions(4, order), symbols)
    assert equal and dim == len(trees_of_order(order)) == [1, 1, 2, 4][order - 1]


@pytest.mark.parametrize("name", [n for n, t in TABLEAUX.items() if t.stages <= 4])
def test_registered_tableaux_meet_derived_conditions_and_fail_the_next(name):
    tab = TABLEAUX[name]
    conditions = oc.taylor_conditions(4, 4)
    for order in range(1, min(tab.order, 4) + 1):
        assert all(oc.substitute_tableau(c, tab) == 0 for c in conditions[order]), order
    if tab.order < 4:
        assert any(oc.substitute_tableau(c, tab) != 0 for c in conditions[tab.order + 1])
    else:  # order 5 needs the B-series form: the scalar problem merges trees from order 5 on
        assert not tab.satisfies_order(5)


def test_a_perturbed_rk4_fails_a_derived_condition():
    rk4 = TABLEAUX["rk4"]
    mutated = ButcherTableau("mut", a=rk4.a, b=["1/2", 0, 0, "1/2"], c=rk4.c, order=2)
    conditions = oc.taylor_conditions(4, 4)
    assert all(oc.substitute_tableau(c, mutated) == 0 for c in conditions[2])
    assert any(oc.substitute_tableau(c, mutated) != 0 for c in conditions[3])


# ---------------------------------------------------------------- 2. discretisation error
# The leading term is exact up to a relative O(|lambda T| / L) correction; at the depths below and
# |lambda T| <= 1.3 that is about 1%.  We allow 3% (and check the deviation shrinks with L).
LEADING_TERM_RTOL = 0.03
# Depths per order: deep enough for the O(1/L) correction to be small, shallow enough that the
# error (~ L^-p) stays far above float64 round-off accumulated over L steps (~ L * 1e-16).
DEPTHS_FOR_ORDER = {1: (256, 512), 2: (256, 512), 3: (128, 256), 4: (64, 128)}


@pytest.mark.parametrize("lam", [-0.7, 1.3])
@pytest.mark.parametrize("name", list(TABLEAUX))
def test_global_error_constant_matches_the_stack_on_a_scalar_linear_field(name, lam):
    tab = TABLEAUX[name]
    field = LinearField(torch.tensor([[lam]], dtype=F64))
    h0 = torch.tensor([[1.0]], dtype=F64)
    exact = field.exact_solution(h0, 1.0)
    deviations = []
    for depth in DEPTHS_FOR_ORDER[tab.order]:
        with torch.no_grad():
            measured = float((ResidualStack(field, depth, scheme=name)(h0) - exact).squeeze())
        predicted = laws.evaluate("discretisation-error", C=float(disc.error_constant(tab)), **{"lambda": lam},
                                  T=1.0, L=depth, p=tab.order)
        deviations.append(abs(measured / predicted - 1))
    assert deviations[1] <= LEADING_TERM_RTOL, deviations
    assert deviations[1] < 0.75 * deviations[0] or deviations[1] < 1e-6, deviations  # O(1/L) correction


@pytest.mark.parametrize("name", ["euler", "midpoint", "rk3", "rk4"])
def test_global_error_leading_term_for_a_matrix_field(name):
    tab = TABLEAUX[name]
    g = torch.Generator().manual_seed(0)
    A = torch.randn(4, 4, generator=g, dtype=F64) / 2
    field, h0 = LinearField(A), torch.randn(3, 4, generator=g, dtype=F64)
    depth = DEPTHS_FOR_ORDER[tab.order][1]
    with torch.no_grad():
        measured = ResidualStack(field, depth, scheme=name)(h0) - field.exact_solution(h0, 1.0)
    C, p = float(disc.error_constant(tab)), tab.order
    predicted = -C * h0 @ (torch.linalg.matrix_power(A, p + 1) @ torch.linalg.matrix_exp(A)).T / depth**p
    assert float((measured - predicted).norm() / predicted.norm()) <= LEADING_TERM_RTOL


def elementary_differential(field, tree, y):
    """F(tree)(y) by nested forward-mode derivatives: f^(m)(y)[F(u_1), ..., F(u_m)]."""
    args = [elementary_differential(field, child, y) for child in tree]

    def deriv(fn, directions):
        if not directions:
            return fn
        inner = deriv(fn, directions[:-1])
        return lambda z: torch.func.jvp(inner, (z,), (directions[-1],))[1]

    return deriv(lambda z: field(0.0, z), args)(y)


# Local error: the leading term is exact up to a relative O(h) correction.
LOCAL_RTOL_PER_STEP = 3.0  # allowed |relative deviation| / h


@pytest.mark.parametrize("name", ["euler", "midpoint", "heun", "ralston", "rk3", "heun3", "ssprk3"])
def test_local_error_in_elementary_differentials(name):
    tab = TABLEAUX[name]
    field = MLPField(4, seed=0, activation="softplus2", dtype=F64)
    y = torch.randn(2, 4, generator=torch.Generator().manual_seed(3), dtype=F64)
    expr = sp.expand(disc.local_error(tab))
    step = 0.02
    with torch.no_grad():
        measured = rk_step(field, 0.0, step, y, tab) - solve_reference(field, y, step, rtol=1e-14, atol=1e-16)
    predicted = torch.zeros_like(y)
    for tree in trees_of_order(tab.order + 1):
        coefficient = float(expr.coeff(disc.differential_symbol(tree)).subs(sp.Symbol("h"), step))
        if coefficient:
            predicted += coefficient * elementary_differential(field, tree, y)
    rel = float((measured - predicted).detach().norm() / predicted.detach().norm())
    assert rel <= LOCAL_RTOL_PER_STEP * step, rel


def test_local_error_of_euler_is_minus_half_f_prime_f():
    assert sp.simplify(disc.local_error(TABLEAUX["euler"]) + sp.Symbol("h") ** 2 * sp.Symbol("f'f") / 2) == 0


# ---------------------------------------------------------------- 3. accumulation
N_MC = 20_000


def summed_errors(correlation, ell, q, seed):
    z = correlation.sample(ell, (N_MC,), seed=seed)  # (ell, N)
    return (ell ** (-q) * z).sum(dim=0)


@pytest.mark.parametrize(("law", "correlation", "extra"), [
    ("accumulation-incoherent", Equicorrelated(0.0), {}),
    ("accumulation-coherent", Equicorrelated(1.0), {}),
    ("accumulation-equicorrelated", Equicorrelated(0.2), {"rho": 0.2}),
    ("accumulation-fractional", Fractional(0.8), {"H": 0.8}),
    ("accumulation-fractional", Fractional(0.3), {"H": 0.3}),
])
@pytest.mark.parametrize("q", [1.0, 2.0])
def test_accumulated_error_matches_simulation(law, correlation, extra, q):
    for ell in (4, 16, 64):
        measured = float(summed_errors(correlation, ell, q, seed=ell).square().mean())
        predicted = laws.evaluate(law, ell=ell, q=q, **extra)
        assert abs(measured / predicted - 1) <= Z * math.sqrt(2 / N_MC), (ell, measured, predicted)


@pytest.mark.parametrize(("q", "coherent", "incoherent"), [(1, 0, 1), (2, 2, 3), (3, 4, 5)])
def test_exponent_instances(q, coherent, incoherent):
    assert laws.exponent("accumulation-coherent", ell=10, q=q) == coherent
    assert laws.exponent("accumulation-incoherent", ell=10, q=q) == incoherent


def test_equicorrelated_crossover_between_regimes():
    rho = 0.01
    ell_star = (1 - rho) / rho
    slow, fast = laws.exponent("accumulation-equicorrelated", ell=[ell_star / 100, ell_star * 100], q=2, rho=rho)
    assert abs(slow - 3) < 0.02 and abs(fast - 2) < 0.02
    assert abs(laws.exponent("accumulation-equicorrelated", ell=ell_star, q=2, rho=rho) - 2.5) < 1e-9


def test_a_fixed_euler_discretisation_accumulates_coherently():
    """Tie to the dynamics core: a tied Euler stack's local errors (q = 2) add coherently: alpha = 2."""
    field = MLPField(8, seed=0, dtype=F64)
    h0 = torch.randn(16, 8, generator=torch.Generator().manual_seed(1), dtype=F64)
    with torch.no_grad():
        ref = solve_reference(field, h0, 1.0)
        depths = [16, 32, 64, 128]
        loss = [float((solve_fixed(field, h0, n_steps=d) - ref).square().mean()) for d in depths]
    assert abs(empirical_order(depths, loss) - laws.exponent("accumulation-coherent", ell=1, q=2)) < 0.1


# ---------------------------------------------------------------- 4. ensemble (see also tests/properties)
def test_ensemble_law_is_the_textbook_formula():
    d = laws.derivation("ensemble-equicorrelated")
    L, sigma, rho = d.parameters
    assert sp.simplify(d.target - sigma**2 * (rho + (1 - rho) / L)) == 0
    f = laws.derivation("ensemble-fractional")
    assert sp.simplify(f.exponent - (2 - 2 * f.parameters[2])) == 0


# ---------------------------------------------------------------- 5. roughness
def within_block_fraction(teacher, k):
    """Share of the W1 variance in fluctuations about block means over blocks of k layers."""
    w = torch.stack([f.W1 for f in teacher.stack.layer_fields]).double()  # (L, hidden, d)
    blocks = w.reshape(teacher.depth // k, k, -1)
    return float((blocks - blocks.mean(dim=1, keepdim=True)).square().mean() / w.square().mean())


@pytest.mark.parametrize(("spec", "expr", "values"), [
    ("correlated:0.3", roughness.rough_fraction_correlated(), {"rho": 0.3}),
    ("correlated:0.9", roughness.rough_fraction_correlated(), {"rho": 0.9}),
    ("fractional:0.75", roughness.rough_fraction_fractional(), {"H": 0.75}),
    ("fractional:0.3", roughness.rough_fraction_fractional(), {"H": 0.3}),
])
@pytest.mark.parametrize("k", [4, 16])
def test_rough_share_matches_teacher_weights(spec, expr, values, k):
    teacher = Teacher(spec, width=16, depth=64, seed=7)
    subs = {sp.Symbol(n, nonnegative=True) if n == "rho" else sp.Symbol(n, positive=True): v for n, v in values.items()}
    predicted = float(expr.subs(subs).subs(roughness.k, k))
    measured = within_block_fraction(teacher, k)
    # entries are independent: each of the 16*64 W1 entries gives one estimate of the share
    n_eff = 16 * 64
    assert abs(measured - predicted) <= Z * math.sqrt(2 / n_eff) * max(predicted, 0.05) + 0.01, (measured, predicted)


def test_roughness_limits():
    kw = {"L_T": 128, "A_r": 2.0, "A_s": 5.0, "alpha_s": 3.0}
    ells = np.array([4.0, 8.0, 16.0])
    # first version: the smooth part in proportion to its variance share
    assert np.allclose(laws.evaluate("roughness-correlated-linear", ell=ells, rho=1.0, **kw), 5.0 * ells**-3)
    # i.i.d. weights: the block mean carries 1/k = ell/L_T of the variance (learnable), the rest is rough
    expected = 2.0 * (1 - ells / 128) / ells + 5.0 * (ells / 128) * ells**-3
    assert np.allclose(laws.evaluate("roughness-correlated-linear", ell=ells, rho=0.0, **kw), expected)
    assert np.isclose(laws.evaluate("roughness-correlated-linear", ell=128.0, rho=0.0, **kw), 5.0 * 128.0**-3)
    # refined: the extremes are the finite-teacher procedural and ensemble laws themselves
    tied = laws.evaluate("finite-teacher-procedural-incoherent", ell=ells, L_T=128, A=5.0)
    iid = laws.evaluate("finite-teacher-ensemble", ell=ells, L_T=128, A=2.0)
    assert np.allclose(laws.evaluate("roughness-correlated", ell=ells, rho=1.0, **kw), tied)
    assert np.allclose(laws.evaluate("roughness-correlated", ell=ells, rho=0.0, **kw), iid)
    assert np.allclose(laws.evaluate("roughness-fractional", ell=ells, H=0.5, **kw), iid + 5.0 * (ells / 128) ** 2
                       * ells**-3 * (1 - ells / 128) ** 2)
    # the smooth part goes as the fourth power of the shared field's amplitude: rho^2
    half = laws.evaluate("roughness-correlated", ell=ells, rho=0.5, **kw)
    np.testing.assert_allclose(half, 0.5 * iid + 0.25 * tied)
    # local exponent from the derivation equals the numerical log-derivative of the law
    for law, extra in (("roughness-correlated", {"rho": 0.9}), ("roughness-fractional", {"H": 0.8})):
        e = 1e-5
        lo, hi = (laws.evaluate(law, ell=10 * (1 + s), **extra, **kw) for s in (-e, e))
        numeric = -(math.log(hi) - math.log(lo)) / (math.log(1 + e) - math.log(1 - e))
        assert abs(laws.exponent(law, ell=10.0, **extra, **kw) - numeric) < 1e-5


# ---------------------------------------------------------------- 6. KL
@pytest.mark.parametrize("temperature", [0.1, 0.3, 1.0])
def test_kl_small_error_expansion(temperature):
    g = torch.Generator().manual_seed(0)
    z = torch.randn(64, 128, generator=g, dtype=F64)
    direction = torch.randn(64, 128, generator=g, dtype=F64)
    errors = []
    for scale in (1e-2, 1e-3):
        delta = scale * temperature * direction
        p = torch.softmax(z / temperature, -1)
        logq = torch.log_softmax((z + delta) / temperature, -1)
        kl = (p * (torch.log(p) - logq)).sum(-1)
        var = (p * delta**2).sum(-1) - (p * delta).sum(-1) ** 2
        predicted = torch.from_numpy(np.asarray(laws.evaluate("kl-small-error", Var_p=var.numpy(), T=temperature)))
        errors.append(float(((kl - predicted) / kl).abs().max()))
    # relative error of the leading term is O(|delta| / T): ten times smaller delta -> ~ten times smaller error
    assert errors[0] < 0.05 and errors[1] < 0.2 * errors[0], errors


def test_kl_series_is_exact_on_a_symbolic_distribution():
    from resflow.theory.kl import kl_series_check

    assert kl_series_check(3) == 0


# ---------------------------------------------------------------- 7. LLM depth/width
def test_optimal_width_and_depth_match_numerical_minimisation():
    params = {"c_m": 40.0, "alpha_m": 0.6, "c_l": 3.0, "alpha_l": 1.0}
    d = laws.derivation("llm-depth-width")
    m_star = sp.lambdify([sp.Symbol("N", positive=True)], d.steps[0][1].rhs.subs(
        {sp.Symbol(k, positive=True): v for k, v in params.items()}))
    losses, ns = [], [1e7, 1e8, 1e9, 1e10]
    for n in ns:
        def loss(logm, n=n):
            m = math.exp(logm)
            return params["c_m"] * m ** -params["alpha_m"] + params["c_l"] * (n / (12 * m * m)) ** -params["alpha_l"]
        res = minimize_scalar(loss, bounds=(0, 20), method="bounded", options={"xatol": 1e-10})
        assert abs(math.exp(res.x) / m_star(n) - 1) < 1e-4
        assert abs(res.fun / laws.evaluate("llm-depth-width", N=n, **params) - 1) < 1e-8
        losses.append(res.fun)
    alpha_n = params["alpha_m"] * params["alpha_l"] / (params["alpha_m"] + 2 * params["alpha_l"])
    assert abs(empirical_order(ns, losses) - alpha_n) < 1e-6


# ---------------------------------------------------------------- registry, CLI, docs
def test_every_law_has_the_required_parts():
    for name in laws.names():
        d = laws.derivation(name)
        assert d.name == name and d.title and d.assumptions and d.references
        assert sp.latex(d.expression)
        if d.parameters:
            assert callable(laws.evaluator(name))


def test_evaluate_rejects_bad_parameters():
    with pytest.raises(ConfigError, match=r"missing \['q'\]"):
        laws.evaluate("accumulation-coherent", ell=3)
    with pytest.raises(UnknownNameError, match="unknown law name 'nope'"):
        laws.evaluate("nope")


runner = CliRunner()


def test_theory_cli_list_latex_and_json():
    listing = runner.invoke(app, ["theory"])
    assert listing.exit_code == 0 and all(n[:20] in listing.output for n in LAWS)
    latex = runner.invoke(app, ["theory", "ensemble-fractional", "--latex"])
    assert latex.exit_code == 0 and r"\sigma^{2}" in latex.output
    records = json.loads(runner.invoke(app, ["theory", "--json"]).output)
    assert [r["name"] for r in records] == list(LAWS)
    for r in records:
        assert {"name", "expression", "exponent", "assumptions"} <= set(r)
        assert r["expression"] and isinstance(r["assumptions"], str)
    incoherent = next(r for r in records if r["name"] == "accumulation-incoherent")
    assert incoherent["exponent"] == "2*q - 1"
    assert runner.invoke(app, ["theory", "nope"]).exit_code == 2


def test_tree_order_helper():
    assert [tree_order(t) for t in trees_of_order(4)] == [4, 4, 4, 4]
