"""Verdict v4 on synthetic runs with known answers: the tail test (a diagnostic), route agreement over
replicates, the route error and the remaining drift in the intervals, and the separation of the readings
(docs/design/certification.md)."""

import math

import numpy as np
import pytest
from scipy import stats

from resflow.analysis import ROUTE_TOLERANCE, certify_depths, route_error, separations, tail_test
from resflow.fitting.certification import slope_weights
from resflow.fitting.extrapolation import TAIL_SLOWEST_GAMMA, TAIL_TOLERANCE
from resflow.fitting.fits import fit_dataset
from test_fitting import DEPTHS, LENGTHS4, certifiable, dataset, power, synthetic

STEPS = np.array([1, 2, 4, 8]) * 3000.0  # four lengths, ratio 2
PAIRED_NOISE = 0.002  # relative noise of an evaluation batch shared by the lengths (the same batches)
OWN_NOISE = 0.0005  # and each length's own


def batches(curve: np.ndarray, rng, n_batch=16) -> np.ndarray:
    """Final losses ``(length, eval_batch)`` of one student following ``curve`` along the lengths."""
    shared = rng.normal(0, PAIRED_NOISE, (1, n_batch))
    return curve[:, None] * (1 + shared + rng.normal(0, OWN_NOISE, (len(curve), n_batch)))


# ---------------------------------------------------------------------------------------------- the tail test

@pytest.mark.parametrize("gamma", [0.1, 0.3, 1.0])
def test_a_power_law_of_training_towards_zero_is_refused(gamma):
    """t^-gamma towards zero has all of itself still to lose, whatever gamma: t^-0.1 (the slowest the issue names)
    and faster ones alike, on every seed."""
    for seed in range(20):
        result = tail_test(batches(STEPS ** -gamma, np.random.default_rng(seed)), lengths=STEPS)
        assert not result.passed, (seed, result)


def test_a_slow_fall_hidden_in_noise_is_bounded_by_the_slowest_admitted_decay():
    """Falls within the noise: the ratio cannot be fitted; the bound is the tail of t^-0.1 on the last fall's
    ceiling (the falls of t^-0.01 to zero are 0.7% per doubling: refused on every seed)."""
    rho = 2.0 ** -TAIL_SLOWEST_GAMMA
    for seed in range(20):
        result = tail_test(batches(STEPS ** -0.01, np.random.default_rng(seed)), lengths=STEPS)
        assert not result.passed and result.gain_bound > TAIL_TOLERANCE
        if result.case == "within noise":
            assert result.ratio == pytest.approx(rho)


def test_falls_within_the_noise_are_bounded_by_the_slowest_admitted_tail_not_read_as_zero():
    """A flat loss with noisy batches: the falls are within their noise, the bound is the t^-0.1 tail of the last
    fall's ceiling (ratio 2^-0.1), computed exactly; a slow fall to zero hidden in that noise is refused by it."""
    rng = np.random.default_rng(7)
    flat = np.ones((4, 16)) * (1 + rng.normal(0, 0.01, (1, 16))) + rng.normal(0, 0.002, (4, 16))
    result = tail_test(flat, lengths=STEPS)
    falls = flat[:-1] - flat[1:]
    ceiling = max(falls[-1].mean(), 0) + stats.t.ppf(0.95, 15) * falls[-1].std(ddof=1) / 4
    rho = 2.0 ** -TAIL_SLOWEST_GAMMA
    assert result.case == "within noise" and result.ratio == pytest.approx(rho)
    assert result.gain_bound == pytest.approx(ceiling * rho / (1 - rho) / flat[-1].mean())
    hidden = (STEPS ** -0.004)[:, None] * (1 + rng.normal(0, 0.01, (1, 16))) + rng.normal(0, 0.004, (4, 16))
    assert not tail_test(hidden, lengths=STEPS).passed


def test_a_planted_loss_at_its_limit_is_accepted():
    """L(t) = L_inf (1 + 0.3 (t/t1)^-1): 2.5% left at the longest length; accepted on (nearly) every seed, and the
    bound is never below the truth when it is computed from a fit."""
    truth = 0.3 * 8.0 ** -1 / (1 + 0.3 * 8.0 ** -1)
    curve = 1.0 + 0.3 * (STEPS / STEPS[0]) ** -1.0
    results = [tail_test(batches(curve, np.random.default_rng(seed)), lengths=STEPS) for seed in range(40)]
    assert sum(r.passed for r in results) >= 36  # the bound is one-sided at 95%: a few refusals are its price
    assert all(r.gain_bound >= truth for r in results if r.case == "fitted")


def test_the_tail_fit_has_residual_degrees_of_freedom_and_a_crooked_tail_is_capped():
    """Four lengths: three falls, two parameters, one residual degree of freedom.  Falls that are no geometric
    sequence (a plateau, then a drop) widen the ratio's bound, which the slowest admitted decay caps: refused."""
    smooth = tail_test(batches(1.0 + 0.5 * (STEPS / STEPS[0]) ** -1.0, np.random.default_rng(0)), lengths=STEPS)
    assert smooth.case == "fitted" and smooth.dof == 1 and smooth.residual < 0.2
    crooked = tail_test(batches(np.array([1.20, 1.15, 1.10, 1.00]), np.random.default_rng(0)), lengths=STEPS)
    assert not crooked.passed and crooked.case == "fitted"
    assert crooked.ratio == pytest.approx(2.0 ** -TAIL_SLOWEST_GAMMA)


def test_the_tail_test_reads_the_last_four_lengths():
    """Five lengths: the first (the start of training, ten times higher) is not read as the tail."""
    five = np.array([1, 2, 4, 8, 16]) * 1500.0
    curve = 1.0 + 0.3 * (five / five[1]) ** -1.0
    curve[0] = 10.0
    rng = np.random.default_rng(4)
    data = batches(curve, rng)
    assert tail_test(data, lengths=five) == tail_test(data[1:], lengths=five[1:])


def test_precision_is_never_penalised_by_the_tail_test():
    """A constant fall of 0.02% per doubling (a loss that never stops, at a rate below the assumption's): measured
    precisely it is bounded as it is when hidden in evaluation noise, never refused for being measured."""
    curve = 1.0 - 0.0002 * np.arange(4)

    def one(noise: float) -> object:
        rng = np.random.default_rng(8)
        data = curve[:, None] * (1 + rng.normal(0, noise, (1, 16))) + curve[:, None] * rng.normal(0, noise, (4, 16))
        return tail_test(data, lengths=STEPS)

    precise, noisy = one(1e-5), one(1e-3)
    assert precise.case == "fitted" and noisy.case == "within noise"
    assert precise.passed and precise.gain_bound <= noisy.gain_bound


def test_fewer_than_four_lengths_or_non_geometric_lengths_are_not_checked():
    rng = np.random.default_rng(0)
    assert tail_test(batches(np.ones(3), rng), lengths=STEPS[:3]).case == "not checked"
    assert tail_test(batches(np.ones(4), rng), lengths=[1, 2, 4, 9]).case == "not checked"
    missing = batches(np.ones(4), rng)
    missing[1, 0] = np.nan
    assert tail_test(missing, lengths=STEPS).case == "not checked"


# ---------------------------------------------------------------------------------------------- route agreement

def cell(levels: dict, rng, depths=(2, 4), replicates=2, inits=2) -> tuple[np.ndarray, np.ndarray]:
    """Losses ``(depth, replicate, route, init, length, batch)`` of students at their limits ``levels[route]``
    (flat along training), and which exist."""
    routes = list(levels)
    data = np.full((len(depths), replicates, len(routes), inits, 4, 16), np.nan)
    for i in range(len(depths)):
        for r in range(replicates):
            shared = rng.normal(0, PAIRED_NOISE, 16)
            for k, route in enumerate(routes):
                for j in range(inits):
                    data[i, r, k, j] = levels[route] * (1 + shared + rng.normal(0, OWN_NOISE, (4, 16)))
    return data, np.ones(data.shape[:4], bool)


def test_two_routes_that_disagree_by_20_percent_are_refused():
    data, trained = cell({"scratch": 1.2e-5, "continuation": 1.0e-5}, np.random.default_rng(1))
    for c in certify_depths((2, 4), STEPS, data, trained, ["scratch", "continuation"]):
        assert not c.certified and c.route_spread == pytest.approx(0.2, abs=0.01)
        assert any("routes disagree" in reason for reason in c.reasons)
        assert c.best_route == ("continuation", "continuation")


def test_routes_that_agree_within_the_tolerance_are_certified():
    data, trained = cell({"scratch": 1.02e-5, "continuation": 1.0e-5}, np.random.default_rng(2))
    for c in certify_depths((2, 4), STEPS, data, trained, ["scratch", "continuation"]):
        assert c.certified, c.reasons
        assert c.route_spread_high <= ROUTE_TOLERANCE and c.tail_passed == c.students == 8
        assert c.route_spread == pytest.approx(0.02, abs=0.005)


def test_agreeing_routes_still_falling_agree_and_the_tail_test_says_they_fall():
    """The depth's routes agree: the depth is certified (the exponent's drift decides whether training goes on
    moving it); the tail test, a diagnostic, names the students still falling."""
    data, trained = cell({"scratch": 1.0, "continuation": 1.0}, np.random.default_rng(3))
    data *= (STEPS / STEPS[0])[:, None] ** -0.1  # both routes fall as t^-0.1, in step
    (c, _) = certify_depths((2, 4), STEPS, data, trained, ["scratch", "continuation"])
    assert c.certified and c.route_spread < 0.01 and c.tail_passed == 0
    assert any("tail test" in note for note in c.notes)


def test_a_worse_second_initialisation_does_not_block():
    """Initialisations are starts, not witnesses: a route's best init is the route's loss."""
    data, trained = cell({"scratch": 1.0, "continuation": 1.01}, np.random.default_rng(6))
    data[:, :, 0, 1] *= 1.3  # the second scratch init settles 30% higher, in every replicate
    for c in certify_depths((2, 4), STEPS, data, trained, ["scratch", "continuation"]):
        assert c.certified, c.reasons


def test_routes_are_compared_over_replicates():
    """Three replicates, the routes agree in two and differ by 20% in the third: the mean's upper end over the
    replicates (t with 2 degrees of freedom) is far above 5%: refused; in all three within 1%: accepted."""
    data, trained = cell({"scratch": 1.0, "continuation": 1.0}, np.random.default_rng(7), replicates=3)
    (c, _) = certify_depths((2, 4), STEPS, data, trained, ["scratch", "continuation"])
    assert c.certified, c.reasons
    data[:, 2, 0] *= 1.2
    (c, _) = certify_depths((2, 4), STEPS, data, trained, ["scratch", "continuation"])
    assert not c.certified and c.route_spread == pytest.approx(0.2, abs=0.01)
    assert c.route_spread_high > ROUTE_TOLERANCE


def test_one_start_cannot_be_certified_and_one_route_compares_its_inits():
    data, trained = cell({"scratch": 1.0}, np.random.default_rng(4), inits=1)
    (c, _) = certify_depths((2, 4), STEPS, data, trained, ["scratch"])
    assert not c.certified and c.compared == "none" and "one start" in c.text
    data, trained = cell({"scratch": 1.0}, np.random.default_rng(4), inits=2)
    data[:, :, 0, 1] *= 1.3  # the second init settles 30% higher
    (c, _) = certify_depths((2, 4), STEPS, data, trained, ["scratch"])
    assert c.compared == "inits" and not c.certified and "inits (one route) disagree" in c.text


def test_a_failed_student_is_named_and_the_others_still_decide_the_best_loss():
    """A failed start is noted; the route's other init stands for it, so the routes can still agree."""
    data, trained = cell({"scratch": 1.0, "continuation": 1.01}, np.random.default_rng(5))
    data[0, 0, 1, 0] = np.nan
    (c, _) = certify_depths((2, 4), STEPS, data, trained, ["scratch", "continuation"])
    assert c.certified and "1 student failed" in c.notes and all(np.isfinite(c.best))


# ---------------------------------------------------------------------------------------------- the route error

def test_the_slope_weights_and_the_route_error_are_the_least_squares_propagation():
    np.testing.assert_allclose(slope_weights(DEPTHS), np.array([-1.5, -0.5, 0.5, 1.5]) / (5 * math.log(2)))
    down, up = route_error(DEPTHS, [0.05] * 4)
    assert down + up == pytest.approx(1.154 * math.log(1.05), rel=1e-3)  # the 0.056 of the design note
    assert route_error(DEPTHS, [0, 0, 0, 0.21]) == pytest.approx((0.0, 0.433 * math.log(1.21)), rel=1e-3)
    assert route_error(DEPTHS, [0.21, 0, 0, 0]) == pytest.approx((0.433 * math.log(1.21), 0.0), rel=1e-3)
    assert route_error(DEPTHS, [np.nan, 0, 0, 0]) == (0.0, 0.0)  # one start widens nothing (and is uncertified)


def test_a_fit_carries_the_route_spread_in_its_interval_and_marks_the_depth_a_bound():
    """Depth 16's scratch route 20% above continuation: depth 16 uncertified, the exponent from the best loss (the
    planted law), its interval widened upwards by 0.433 ln 1.2 (the reachable loss is below the best, never above),
    the series a bound."""
    gap = lambda route, d: 1.2 if (route == "scratch" and d == 16) else 1.0  # noqa: E731
    (fit,) = fit_dataset(dataset(certifiable({"tied": power(2.6)}, route_factor=gap), ["tied"]))
    assert fit.certified_depths == (2, 4, 8) and not fit.exponent_certified and fit.standing == "bound"
    assert fit.route_spread[-1] == pytest.approx(0.2, abs=0.01) and all(s < 0.02 for s in fit.route_spread[1:3])
    assert abs(fit.exponent - 2.6) < 0.05
    down, up = route_error(fit.depths, fit.route_spread)
    assert (fit.route_error_low, fit.route_error_high) == pytest.approx((down, up))
    assert up > 0.433 * math.log(1.19) and down < 0.01
    drift_down, drift_up = max(0.0, -fit.remaining_drift_low), max(0.0, fit.remaining_drift_high)
    assert fit.ci_low == pytest.approx(fit.replicate_ci_low - down - drift_down)
    assert fit.ci_high == pytest.approx(fit.replicate_ci_high + up + drift_up)
    assert fit.regime == "uncertified" and "ℓ = 16" in fit.certificate and "ℓ = 8" not in fit.certificate


def test_an_exponent_whose_drift_stops_is_certified_and_one_that_keeps_moving_is_refused():
    """Two routes that agree at every depth; the deeper a depth, the more it has left at the shorter lengths.
    Left to lose ∝ t^-3 (the drift shrinks 8× per doubling): at most 0.1 still to come, certified, and the
    planted limit inside the interval.  The exponent lower by 0.05 per halving of training at every length
    (a drift that does not shrink): refused, with the reason, and the interval widened upwards by what may
    still come, past the planted limit's neighbourhood."""
    stops = lambda d, lam: 2e-3 * (d / 2) ** 0.5 * (lam ** -3.0 - 1.0)  # noqa: E731
    (fit,) = fit_dataset(dataset(certifiable({"tied": power(2.0)}, gain=stops), ["tied"]))
    assert fit.exponent_certified and fit.standing == "certified", fit.certificate
    assert fit.drift_per_doubling > 0 and fit.drift_case == "decaying"
    assert max(abs(fit.remaining_drift_low), abs(fit.remaining_drift_high)) <= 0.1
    assert fit.ci_low <= 2.0 <= fit.ci_high
    (moving,) = fit_dataset(dataset(certifiable({"tied": power(2.0)}, drift=0.05), ["tied"]))
    assert not moving.exponent_certified and moving.standing == "bound"
    assert moving.drift_per_doubling == pytest.approx(0.05, abs=0.01) and moving.drift_case == "not shrinking"
    assert "the exponent still moves" in moving.certificate and moving.remaining_drift_high > 0.1
    assert moving.ci_high >= moving.replicate_ci_high + moving.remaining_drift_high - 1e-9
    assert moving.ci_low == pytest.approx(moving.replicate_ci_low - moving.route_error_low)


def test_init_spread_is_measured_apart_from_teacher_spread():
    (fit,) = fit_dataset(dataset(certifiable({"tied": power(2.6)}, noise=0.2, init_noise=0.01), ["tied"]))
    ratios = np.array(fit.init_spread) / np.array(fit.teacher_spread)
    assert np.all(ratios < 0.3)  # teachers spread by 20%, inits by 1%: the ratio says which dominates


# ---------------------------------------------------------------------------------------------- the separation

def test_the_separation_is_paired_by_replicate_with_a_t_interval_from_the_sample_size():
    ds = dataset(certifiable({"independent": power(1.0), "tied": power(2.8)}, noise=0.05, replicates=4),
                 ["independent", "tied"])
    fits = fit_dataset(ds)
    (sep,) = separations(fits)
    tied, independent = ({f.target: f for f in fits}[t] for t in ("tied", "independent"))
    diffs = np.array(tied.replicate_exponents) - np.array(independent.replicate_exponents)
    half = stats.t.ppf(0.975, diffs.size - 1) * diffs.std(ddof=1) / math.sqrt(diffs.size)
    down = tied.route_error_low + independent.route_error_high
    up = tied.route_error_high + independent.route_error_low
    down += max(0.0, -tied.remaining_drift_low) + max(0.0, independent.remaining_drift_high)
    up += max(0.0, tied.remaining_drift_high) + max(0.0, -independent.remaining_drift_low)
    assert sep.separation == pytest.approx(diffs.mean())
    assert sep.separation_ci_low == pytest.approx(diffs.mean() - half - down)
    assert sep.separation_ci_high == pytest.approx(diffs.mean() + half + up)
    assert sep.steeper and sep.separated and sep.certified and sep.n_replicates == 4
    assert sep.text.startswith("smooth is steeper than rough; by more than the readings' laws differ here")
    assert abs(sep.separation - 1.8) < 0.1 and abs(sep.separation_law - 1.8) < 0.1
    assert sep.law_gap == pytest.approx(1.0, abs=1e-6)  # an (almost) infinitely deep teacher: 2 - 1
    row = sep.to_json()
    assert row["target"] == "separation" and row["separated"] is True and row["steeper"] is True
    assert row["law_gap"] == pytest.approx(sep.law_gap)


def test_the_law_gap_is_the_readings_slopes_at_the_runs_depths():
    """Over depths 2-16 against a teacher of depth 32 the finite-teacher laws' plain slopes are 1.29 (ensemble)
    and 2.59 (procedural, coherent): the gap is 1.29, not 1; depths 1-8 against 16 give the same (only l/L_T
    enters); an infinitely deep teacher gives the asymptotic 2 - 1."""
    from resflow.fitting.regimes import law_gap

    x = np.log([2.0, 4, 8, 16])
    w = (x - x.mean()) / np.sum((x - x.mean()) ** 2)
    ell = np.array([2.0, 4, 8, 16])
    ensemble = -np.sum(w * np.log(1 / ell - 1 / 32))
    coherent = -np.sum(w * np.log((1 / ell - 1 / 32) ** 2))
    assert law_gap(ell, 32) == pytest.approx(coherent - ensemble) == pytest.approx(1.2943, abs=1e-4)
    assert law_gap([1, 2, 4, 8], 16) == pytest.approx(law_gap(ell, 32))
    assert law_gap(ell, math.inf) == pytest.approx(1.0)
    assert math.isnan(law_gap([2, 4, 8, 16, 32], 32))


def test_steeper_is_answered_apart_from_the_law_gap():
    """A planted difference of 1.0 (smooth 2.0, rough 1.0) against a teacher of depth 32 over depths 2-16: smooth
    is steeper (the interval lies above 0), but the gap stays below the readings' 1.29 there: not separated --
    the quick look's case, answered as a decided "steeper" and a gap not reached."""
    ds = dataset(certifiable({"independent": power(1.0), "tied": power(2.0)}, noise=0.02, replicates=4),
                 ["independent", "tied"], teacher_depth=32)
    (sep,) = separations(fit_dataset(ds))
    assert sep.steeper and not sep.separated and sep.law_gap == pytest.approx(1.2943, abs=1e-4)
    assert sep.answer == "smooth is steeper than rough" and "by less than the readings' laws differ" in sep.text


def test_readings_closer_than_the_smallest_gap_between_their_laws_are_not_separated():
    ds = dataset(certifiable({"independent": power(1.0), "tied": power(1.5)}), ["independent", "tied"])
    (sep,) = separations(fit_dataset(ds))
    assert sep.steeper and not sep.separated and "by less than the readings' laws differ here (1.00)" in sep.text


def test_rough_steeper_than_smooth_is_said_so():
    ds = dataset(certifiable({"independent": power(2.0), "tied": power(1.0)}), ["independent", "tied"])
    (sep,) = separations(fit_dataset(ds))
    assert not sep.steeper and sep.answer == "rough is steeper than smooth"


def test_uncertified_depths_widen_the_separation_rather_than_drop_out():
    gap = lambda route, d: 1.5 if (route == "scratch" and d >= 8) else 1.0  # noqa: E731
    wide = separations(fit_dataset(dataset(certifiable({"independent": power(1.0), "tied": power(2.8)},
                                                        route_factor=gap), ["independent", "tied"])))[0]
    narrow = separations(fit_dataset(dataset(certifiable({"independent": power(1.0), "tied": power(2.8)}),
                                             ["independent", "tied"])))[0]
    # deep spreads raise the tied exponent's room (up) and the independent one's, which lowers the difference's
    assert wide.route_error_high > 0.577 * math.log(1.45) and wide.route_error_low > 0.577 * math.log(1.45)
    assert (wide.separation_ci_high - wide.separation_ci_low) > (narrow.separation_ci_high - narrow.separation_ci_low)
    assert not wide.certified and narrow.certified


def test_a_run_without_both_teachers_has_no_separation_and_one_replicate_says_how_its_interval_was_made():
    assert separations(fit_dataset(dataset(certifiable({"tied": power(2.6)}), ["tied"]))) == []
    ds = dataset(synthetic({"independent": power(1.0), "tied": power(2.6)}, replicates=1, lengths=LENGTHS4,
                           routes=("scratch", "continuation"), inits=2), ["independent", "tied"])
    (sep,) = separations(fit_dataset(ds))
    assert "evaluation noise only" in sep.method and sep.separation_ci_low < sep.separation < sep.separation_ci_high
