"""The third use of depth (issue 17): grouped teachers, the Random Hierarchy Model, and the
grouped-accumulation law against simulation.  Statistical tolerances come from the sample size."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import resflow
from resflow import ConfigError, laws
from resflow.noise import Equicorrelated, Grouped, group_of, parse_correlation
from resflow.training import HierarchyConfig, RandomHierarchyModel


# ---------------------------------------------------------------- grouped correlation and teachers
def test_groups_are_contiguous_and_near_equal():
    for n, k in [(7, 3), (16, 4), (5, 5), (9, 1)]:
        g = group_of(n, k).tolist()
        assert g == sorted(g) and set(g) == set(range(k))
        sizes = np.bincount(g)
        assert sizes.max() - sizes.min() <= 1
    with pytest.raises(ConfigError, match="groups"):
        group_of(3, 4)


@pytest.mark.parametrize(("k", "rho"), [(3, 1.0), (2, 0.5), (4, 0.0)])
def test_grouped_samples_have_the_stated_covariance(k, rho):
    corr = Grouped(k, rho)
    n_layers, draws = 8, 20_000
    z = corr.sample(n_layers, (draws,), seed=3)  # (layers, draws)
    empirical = torch.cov(z)
    expected = corr.covariance(n_layers)
    # each entry estimates E[z_i z_j] with variance (1 + C_ij^2) / draws for Gaussian pairs
    se = torch.sqrt((1 + expected**2) / draws)
    assert torch.all((empirical - expected).abs() < 5 * se)


def test_one_group_is_the_equicorrelated_law_and_the_spec_round_trips():
    a = Grouped(1, 0.3).sample(6, (4,), seed=11)
    assert torch.equal(a, Equicorrelated(0.3).sample(6, (4,), seed=11))
    assert parse_correlation("grouped:4") == Grouped(4, 1.0)
    assert parse_correlation(Grouped(2, 0.5).label) == Grouped(2, 0.5)


def test_a_grouped_teacher_repeats_a_map_within_a_group_and_changes_it_between():
    teacher = resflow.Teacher("grouped:4", width=8, depth=16, seed=0)
    w = torch.stack([layer.W1 for layer in teacher.stack.layers])  # (16, hidden, width)
    groups = group_of(16, 4)
    for i in range(16):
        for j in range(16):
            assert torch.equal(w[i], w[j]) == bool(groups[i] == groups[j])
    assert teacher.config.label == "grouped:4"
    with pytest.raises(ConfigError, match="groups"):
        resflow.TeacherConfig("grouped", depth=4, groups=8)
    with pytest.raises(ConfigError, match="grouped:K"):
        resflow.TeacherConfig.from_spec("grouped:four")


# ---------------------------------------------------------------- the Random Hierarchy Model
@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_the_hierarchy_parses_back_to_its_labels_in_exactly_k_levels(depth):
    rhm = RandomHierarchyModel(HierarchyConfig(vocab=6, classes=4, synonyms=3, branching=2, depth=depth, seed=depth))
    tokens, labels = rhm.sample(500, seed=0)
    assert tokens.shape == (500, 2**depth) and tokens.min() >= 0 and tokens.max() < 6
    parsed, levels = rhm.parse(tokens)
    assert levels == depth and torch.equal(parsed, labels)
    # another grammar of the same shape does not parse these sentences (beyond chance)
    other = RandomHierarchyModel(rhm.config, seed=depth + 100)
    assert (other.parse(tokens)[0] == labels).float().mean() < 0.6


def test_every_synonym_is_drawn_uniformly():
    # depth 1: each label's inputs are exactly its m rules, each drawn with probability 1/m
    rhm = RandomHierarchyModel(HierarchyConfig(vocab=6, classes=4, synonyms=3, branching=2, depth=1, seed=2))
    n = 24_000
    tokens, labels = rhm.sample(n, seed=5)
    for label in range(4):
        mine = tokens[labels == label]
        rules = {tuple(r.tolist()) for r in rhm.rules[0][label]}
        seen, counts = torch.unique(mine, dim=0, return_counts=True)
        assert {tuple(t.tolist()) for t in seen} == rules
        share, p = counts.double() / len(mine), 1 / 3
        assert torch.all((share - p).abs() < 5 * math.sqrt(p * (1 - p) / len(mine)))


def test_random_tokens_parse_at_the_rate_the_rules_allow():
    # depth 1: a random pair is a sentence with probability classes * synonyms / vocab^branching
    rhm = RandomHierarchyModel(HierarchyConfig(vocab=6, classes=4, synonyms=3, branching=2, depth=1, seed=7))
    n = 20_000
    tokens = torch.randint(6, (n, 2), generator=torch.Generator().manual_seed(1))
    rate = (rhm.parse(tokens)[0] >= 0).double().mean().item()
    p = 4 * 3 / 36
    assert abs(rate - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_the_hierarchy_is_reproducible_from_its_seeds():
    config = HierarchyConfig(vocab=8, classes=5, synonyms=2, branching=3, depth=2, seed=4)
    a, b = RandomHierarchyModel(config), RandomHierarchyModel(config)
    assert all(torch.equal(x, y) for x, y in zip(a.rules, b.rules, strict=True))
    assert all(torch.equal(x, y) for x, y in zip(a.sample(50, seed=9), b.sample(50, seed=9), strict=True))
    c = RandomHierarchyModel(config, seed=5)
    assert not all(torch.equal(x, y) for x, y in zip(a.rules, c.rules, strict=True))
    assert not torch.equal(a.sample(50, seed=9)[0], a.sample(50, seed=10)[0])


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"vocab": 2, "classes": 3, "synonyms": 2, "branching": 2}, "unambiguous"),
    ({"branching": 4, "depth": 9}, "tokens per input"),
    ({"depth": 0}, "depth"),
    ({"vocab": 1}, "vocab"),
])
def test_bad_hierarchy_configs_are_refused_by_name(kwargs, words):
    with pytest.raises(ConfigError, match=words):
        HierarchyConfig(**kwargs)


# ---------------------------------------------------------------- the laws against simulation
@pytest.mark.parametrize(("ell", "k", "rho", "q"), [(8, 2, 1.0, 2), (12, 3, 0.4, 1), (16, 4, 0.0, 2), (6, 6, 0.7, 1)])
def test_grouped_accumulation_matches_a_monte_carlo_sum_of_local_errors(ell, k, rho, q):
    draws = 40_000
    local = ell ** (-q) * Grouped(k, rho).sample(ell, (draws,), seed=ell + k)  # (ell, draws)
    squared = local.sum(0) ** 2
    mean, se = squared.mean().item(), squared.std().item() / math.sqrt(draws)
    assert abs(mean - float(laws.evaluate("accumulation-grouped", ell=ell, q=q, rho=rho, K=k))) < 5 * se


def test_euler_on_a_piecewise_linear_flow_has_the_grouped_amplitude_and_exponent():
    """A real discretisation, not the law's own assumptions: K random matrices, each the field for
    1/K of the time; Euler with l steps (K divides l) against the exact flow.  The law (rho = 1,
    q = 2) predicts loss ~ l^-2 with amplitude ~ 1/K: doubling K at fixed l halves the loss."""
    gen = torch.Generator().manual_seed(0)
    d, draws, sigma = 6, 600, 0.4

    def losses(k, ell):
        a = sigma * torch.randn(draws, k, d, d, generator=gen, dtype=torch.float64) / math.sqrt(d)
        h0 = torch.randn(draws, d, 1, generator=gen, dtype=torch.float64)
        exact, euler = h0.clone(), h0.clone()
        step = torch.eye(d, dtype=torch.float64) + a / ell
        for g in range(k):
            exact = torch.linalg.matrix_exp(a[:, g] / k) @ exact
            for _ in range(ell // k):
                euler = step[:, g] @ euler
        return ((euler - exact) ** 2).sum(dim=(1, 2))

    ell_values = (8, 16, 32)
    for k in (2, 4):
        means = [losses(k, ell).mean().item() for ell in ell_values]
        slope = -np.polyfit(np.log(ell_values), np.log(means), 1)[0]
        assert abs(slope - 2.0) < 0.1, (k, slope)
    # amplitude ratio at l = 16: same draws' statistics, tolerance from their standard errors
    two, four = losses(2, 16), losses(4, 16)
    ratio = two.mean() / four.mean()
    rel_se = math.sqrt((two.std() / two.mean()) ** 2 / draws + (four.std() / four.mean()) ** 2 / draws)
    assert abs(ratio.item() - 2.0) < 5 * 2.0 * rel_se


def test_the_hypotheses_are_marked_not_observed_with_their_evidence_and_listed():
    for name in ("compositional-threshold", "compositional-composition"):
        record = laws.describe(name)
        assert record.status == "not observed" and "resflow run hierarchy" in record.evidence
        assert "no run converged" in record.evidence  # the budget, said with the claim
        assert "docs/results.md" in record.evidence
    assert laws.describe("accumulation-grouped").status == "derived"
    flat, falling = laws.evaluate("compositional-threshold", ell=np.array([2.0, 8.0]), K=4, L_0=1.0, alpha_g=2)
    assert flat == 1.0 and falling == pytest.approx(0.25)


def test_the_compositional_experiment_runs_and_reports_every_k(tmp_path):
    from resflow.sims.compositional import groups_of
    from resflow.workflows import report_run, run_experiment

    config = resflow.preset("compositional", "cpu").with_overrides(
        ["train.steps=40", "train.eval_every=20", "train.eval_batches=2", "train.eval_batch_size=128",
         "train.batch=32", "width=8", "teacher_depth=8", "vocab=16", "depths=1,2,4,8", "train.device=cpu",
         "targets=tied,grouped:2,grouped:4"])
    result = run_experiment(config, out=tmp_path / "s")
    assert {f.target for f in result.fits} == {"tied", "grouped:2", "grouped:4"}
    text = report_run(str(tmp_path / "s"), experiment="compositional")  # the experiment's own report
    for target in ("tied", "grouped:2", "grouped:4"):
        assert f"| {target} | {groups_of(target)} |" in text
    assert "| grouped:4 | 0.250 |" in text  # the law's 1/K beside the measured ratios
    assert "teacher at a boundary" in text and text.count("\n| grouped:") == 6  # three tables, two grouped rows


def test_a_grouped_teachers_updates_turn_at_group_boundaries_only():
    from resflow.sims.compositional import teacher_signature

    sig = teacher_signature("grouped:4", {"width": 8, "teacher_depth": 32})
    assert sig["within"] < 0.2 and sig["boundary"] > 1.0  # nearly parallel within, nearly orthogonal across


def test_a_law_is_not_observed_only_with_evidence():
    import sympy as sp

    from resflow.theory._law import Derivation

    x = sp.Symbol("x")
    with pytest.raises(ValueError, match="evidence"):
        Derivation("t", "t", x, (x,), None, "", status="not observed")
    with pytest.raises(ValueError, match="evidence"):
        Derivation("t", "t", x, (x,), None, "", status="hypothesis", evidence="a run")
    with pytest.raises(ValueError, match="status"):
        Derivation("t", "t", x, (x,), None, "", status="disproved", evidence="a run")
