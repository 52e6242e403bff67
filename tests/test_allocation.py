"""The next run's budget goes to the depths verdict v3 did not certify (resflow.fitting.allocation): planted
certificates with known answers, the reasons certify_depths writes, and a plan that a preset accepts."""

import numpy as np
import pytest
from test_certification import STEPS, cell

import resflow
from resflow.analysis import certify_depths
from resflow.fitting.allocation import next_budgets, plan_next_run

DEPTHS = (2, 4, 8, 16)
DISAGREE = "the routes disagree: the worse is 21.0% above the better (up to 23.0% over the replicates; tolerance 5%)"


def test_the_uncertified_depths_get_a_doubling_and_the_certified_ones_keep_their_steps():
    plan = next_budgets(DEPTHS, 48000, (), {8: [DISAGREE], 16: [DISAGREE]})
    assert plan.longer == (8, 16) and plan.other == ()
    assert plan.steps == 96000 and plan.budgets == (0.5, 0.5, 1.0, 1.0)
    # cost ∝ depth × steps: (2 + 4) × 48k + (8 + 16) × 96k over 30 × 48k
    assert plan.cost_ratio == pytest.approx((6 + 48) / 30)
    assert plan.overrides == ("train.steps=96000", "budgets=0.5,0.5,1,1")
    assert "ℓ = 8, 16 twice as long" in plan.text and "1.80×" in plan.text


def test_a_run_with_budgets_keeps_each_certified_depth_at_the_steps_it_had():
    plan = next_budgets(DEPTHS, 48000, (1, 1, 0.5, 0.5), {2: [DISAGREE]})
    steps = {d: b * plan.steps for d, b in zip(DEPTHS, plan.budgets, strict=True)}
    assert steps == {2: 96000, 4: 48000, 8: 24000, 16: 24000}
    assert plan.cost_ratio == pytest.approx((2 * 96 + 4 * 48 + 8 * 24 + 16 * 24) / (2 * 48 + 4 * 48 + 8 * 24 + 16 * 24))


def test_when_no_depth_has_the_whole_run_the_steps_shrink_to_the_largest_share():
    plan = next_budgets(DEPTHS, 40000, (1, 1, 0.25, 0.25), {16: [DISAGREE]})
    assert plan.steps == 40000 and plan.budgets == (1.0, 1.0, 0.25, 0.5)


def test_everything_certified_or_nothing_steps_can_fix_plans_no_run():
    assert next_budgets(DEPTHS, 1000, (), {}).overrides == ()
    plan = next_budgets(DEPTHS, 1000, (), {2: ["one start: no second route or init to compare"],
                                           4: ["1 student failed"]})
    assert plan.longer == () and plan.other == (2, 4) and plan.overrides == () and plan.cost_ratio == 1.0
    assert "need another route or init" in plan.text


@pytest.mark.parametrize("kwargs, name", [
    (dict(depths=(), steps=10, budgets=(), reasons={}), "depths"),
    (dict(depths=DEPTHS, steps=10, budgets=(1, 1), reasons={}), "budgets"),
    (dict(depths=DEPTHS, steps=0, budgets=(), reasons={}), "steps"),
])
def test_bad_input_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        next_budgets(**kwargs)


def test_the_reasons_certify_depths_writes_are_the_ones_steps_answer():
    """Route disagreement gets more steps; one start does not; a failed student or a falling tail blocks nothing
    (verdict v4: a route's best student speaks for it): read from what certify_depths itself says, so a reworded
    reason cannot slip out of the plan unnoticed."""
    routes = ["scratch", "continuation"]
    disagree, trained = cell({"scratch": 1.2e-5, "continuation": 1.0e-5}, np.random.default_rng(1))
    one, one_trained = cell({"scratch": 1.0}, np.random.default_rng(4), inits=1)
    for data, known, routes_here, longer in [(disagree, trained, routes, True), (one, one_trained, ["scratch"], False)]:
        certificate = certify_depths((2, 4), STEPS, data, known, routes_here)[0]
        assert not certificate.certified
        plan = next_budgets((2, 4), 1000, (), {2: certificate.reasons})
        assert (plan.longer == (2,)) is longer, certificate.reasons
        assert (plan.other == (2,)) is not longer
    falling, _ = cell({"scratch": 1.0, "continuation": 1.0}, np.random.default_rng(3))
    falling *= (STEPS / STEPS[0])[:, None] ** -0.1
    failed, _ = cell({"scratch": 1.0, "continuation": 1.01}, np.random.default_rng(5))
    failed[0, 0, 1, 0] = np.nan
    for data in (falling, failed):
        certificate = certify_depths((2, 4), STEPS, data, trained, routes)[0]
        assert certificate.certified and certificate.notes


def test_an_exponent_still_moving_trains_every_depth_longer():
    """The exponent-level reason of verdict v4 (what certify_exponent writes) reaches every depth."""
    from resflow.fitting.certification import certify_exponent
    from resflow.fitting.drift import remaining_drift

    agree, trained = cell({"scratch": 1.0, "continuation": 1.01}, np.random.default_rng(5))
    certificates = certify_depths((2, 4), STEPS, agree, trained, ["scratch", "continuation"])
    steady = 1.0 + 0.05 * np.arange(4)[None, :] + 0.001 * np.random.default_rng(0).standard_normal((3, 4))
    exponent = certify_exponent(certificates, remaining_drift(steady, STEPS))
    assert not exponent.certified
    fit = Fit((2, 4, 8, 16), ("certified",) * 4)
    fit.certificate = exponent.text
    assert plan_next_run(DEPTHS, 3000, (), [fit]).longer == DEPTHS


class Fit:  # the parts of a SeriesFit the plan reads
    def __init__(self, certified, verdicts):
        self.depths, self.certified_depths, self.depth_verdicts = DEPTHS, certified, verdicts
        self.certificate = "certified"


def test_a_depth_uncertified_in_any_series_is_trained_longer():
    rough = Fit((2, 4, 8, 16), ("certified",) * 4)
    smooth = Fit((2, 4), ("certified", "certified", f"not certified: {DISAGREE}", f"not certified: {DISAGREE}"))
    plan = plan_next_run(DEPTHS, 3000, (), [rough, smooth])
    assert plan.longer == (8, 16)


def test_a_preset_takes_the_plan_and_trains_each_depth_the_planned_steps():
    plan = next_budgets(DEPTHS, 3000, (), {8: [DISAGREE], 16: [DISAGREE]})
    config = resflow.preset("smooth-vs-rough", "cpu").with_overrides(list(plan.overrides))
    assert {d: round(config.budget(d) * config.train.steps) for d in DEPTHS} == {2: 3000, 4: 3000, 8: 6000, 16: 6000}
