"""Every interval resflow prints, on planted data whose truth is known, at the sample sizes its presets use
(docs/design/intervals.md lists them with the function that makes each).

What each test checks, and how strictly:

* an interval meant to be exact (Student's t, the jackknife t, Fieller, the regression t) contains the truth
  at its nominal rate within three binomial standard errors of the draws, on both sides of the rate, and
  is not needlessly wide: its mean width is within ``WIDTH_FACTOR`` of the exact interval's expected
  width, :math:`2\\,t\\,c_4\\,\\mathrm{sd}`, with sd the spread of the estimate over the draws;
* an interval that combines parts (the replicates' t widened by the route spreads and the remaining drift)
  is conservative by construction: the rate is checked from below only, and its width against a stated
  factor of the interval that knew the truth's offset;
* a bound by design (a trained loss bounds the reachable one from above; the tail test's share still to
  lose) is checked on its side on planted cases that lie on each side of its assumption.
"""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

from resflow.analysis import certify_depths, route_error, separations, tail_test
from resflow.fitting.drift import remaining_drift
from resflow.fitting.extrapolation import TAIL_SLOWEST_GAMMA, asymptotic_interval
from resflow.fitting.fits import fit_dataset
from resflow.fitting.intervals import MIN_REPLICATES_BOOTSTRAP, exponent_interval, over_replicates
from resflow.loglog import power_law_fit, slopes
from test_fitting import certifiable, dataset, power

DEPTHS = np.array([2.0, 4.0, 8.0, 16.0])  # the main job's depths
LENGTHS = (0.0625, 0.125, 0.25, 0.5, 1.0)  # the presets' five lengths
REPLICATES = (2, 3, 5, 8)  # the presets' replicate counts (and 5, a user's)
BATCHES = (2, 4, 8, 16)  # the presets' evaluation batches
DRAWS = 400
WIDTH_FACTOR = 0.15  # an exact interval's mean width within 15% of its expected width


def within_rate(covered: int, draws: int = DRAWS, rate: float = 0.95) -> bool:
    """The share covered is within three binomial standard errors of ``rate``, either side."""
    return abs(covered / draws - rate) <= 3 * math.sqrt(rate * (1 - rate) / draws)


def at_least_rate(covered: int, draws: int = DRAWS, rate: float = 0.95) -> bool:
    """The share covered is at least ``rate`` less three binomial standard errors."""
    return covered / draws >= rate - 3 * math.sqrt(rate * (1 - rate) / draws)


def c4(dof: int) -> float:
    """E s / sigma for a standard deviation with ``dof`` degrees of freedom."""
    return math.sqrt(2 / dof) * math.exp(special.gammaln((dof + 1) / 2) - special.gammaln(dof / 2))


def exact_width(estimates, dof: int, confidence: float = 0.95) -> float:
    """The expected width of the exact t interval of an estimator spread as ``estimates`` over the draws."""
    return 2 * stats.t.ppf(1 - (1 - confidence) / 2, dof) * c4(dof) * float(np.std(estimates, ddof=1))


def assert_exact(draws, truth: float, dof: int, confidence: float = 0.95) -> None:
    """``draws`` of ``(low, high, estimate)``: the truth inside at the rate, the mean width the exact one's."""
    low, high, estimate = (np.array(v, float) for v in zip(*draws, strict=True))
    covered = int(np.sum((low <= truth) & (truth <= high)))
    assert within_rate(covered, draws=low.size, rate=confidence), covered
    assert np.mean(high - low) == pytest.approx(exact_width(estimate, dof, confidence), rel=WIDTH_FACTOR)


def planted_losses(rng, replicates: int, batches: int, *, alpha=1.2, teacher_spread=0.1, batch_noise=0.05):
    """Final losses ``(depth, replicate, batch)``: replicate r's teacher has its own exponent
    ``alpha + teacher_spread * z_r`` and amplitude, each evaluation batch its own relative noise."""
    own = alpha + teacher_spread * rng.standard_normal(replicates)
    amplitude = 0.5 * np.exp(0.3 * rng.standard_normal(replicates))
    mean = amplitude[None, :] * DEPTHS[:, None] ** -own[None, :]
    return mean[..., None] * (1 + batch_noise * rng.standard_normal((DEPTHS.size, replicates, batches)))


# ------------------------------------------------------------------------------- intervals over replicates

@pytest.mark.parametrize("confidence", [0.95, 0.90])
@pytest.mark.parametrize("replicates", REPLICATES)
def test_the_exponent_interval_over_replicates_is_exact(replicates, confidence):
    """Student's t over the per-replicate exponents (resflow.fitting.intervals.exponent_interval, the plain
    and law-aware exponents, the ladder's plain α, every over_replicates of the measures and of verdict v2 at
    90%): the truth is the teachers' mean exponent."""
    rng = np.random.default_rng(replicates)
    fits = [exponent_interval(DEPTHS, planted_losses(rng, replicates, 8), confidence=confidence)
            for _ in range(DRAWS)]
    assert {f.method for f in fits} == {f"t over {replicates} replicates"}
    assert_exact([(f.low, f.high, f.value) for f in fits], 1.2, replicates - 1, confidence)


@pytest.mark.parametrize("batches", BATCHES)
def test_one_replicate_is_a_jackknife_over_evaluation_batches_at_its_rate(batches):
    """One replicate: the jackknife t over the evaluation batches, jointly across depths.  The truth is the
    exponent of the expected losses (evaluation noise is all there is).  The percentile bootstrap it
    replaced covered 49% at 2 batches, 84% at 4, 88% at 8 and 94% at 16 (benchmarks/coverage.py)."""
    rng = np.random.default_rng(100 + batches)
    fits = [exponent_interval(DEPTHS, planted_losses(rng, 1, batches, teacher_spread=0.0)) for _ in range(DRAWS)]
    assert fits[0].method.startswith(f"jackknife t over {batches} evaluation batches (1 replicate")
    assert_exact([(f.low, f.high, f.value) for f in fits], 1.2, batches - 1)


@pytest.mark.parametrize("replicates", [MIN_REPLICATES_BOOTSTRAP, 16])
def test_the_bootstrap_beside_the_t_interval_is_the_expanded_percentile_and_covers_from_ten(replicates):
    """From 10 replicates on, the bootstrap over replicates is reported beside the t interval; it is the
    expanded percentile interval (the plain percentiles covered 83% at 5 replicates and 88% at 8, and below
    10 no bootstrap is reported)."""
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(DRAWS):
        values = 1.0 + 0.1 * rng.standard_normal(replicates)
        fit = over_replicates(lambda one: float(one[0]), values[:, None], samples=1000,
                              seed=int(rng.integers(2**31)))
        covered += fit.boot_low <= 1.0 <= fit.boot_high
    assert within_rate(covered), covered
    below = over_replicates(lambda one: float(one[0]), np.arange(MIN_REPLICATES_BOOTSTRAP - 1.0)[:, None])
    assert math.isnan(below.boot_low) and math.isnan(below.boot_high)


# ----------------------------------------------------------------------------------------- the separation

@pytest.fixture(scope="module")
def template_fits():
    """One smooth and one rough fit, whose per-replicate exponents and widenings the tests replace."""
    ds = dataset(certifiable({"independent": power(1.0), "tied": power(2.8)}, noise=0.05, replicates=4),
                 ["independent", "tied"])
    fits = {f.target: f for f in fit_dataset(ds)}
    return fits["tied"], fits["independent"]


def _planted(fit, exponents, **widening):
    n = len(exponents)
    return dataclasses.replace(fit, replicates=tuple(range(n)), replicate_exponents=tuple(exponents),
                               replicate_law_exponents=tuple(exponents), **widening)


NO_WIDENING = dict(route_error_low=0.0, route_error_high=0.0, remaining_drift_low=0.0, remaining_drift_high=0.0)


@pytest.mark.parametrize("replicates", REPLICATES)
def test_the_separation_is_a_paired_t_interval_at_its_rate(template_fits, replicates):
    """The paired difference smooth − rough over replicates (one teacher seed for both: their exponents
    correlate), without widening: exact."""
    smooth, rough = template_fits
    rng = np.random.default_rng(200 + replicates)
    draws = []
    for _ in range(DRAWS):
        shared = 0.2 * rng.standard_normal(replicates)  # the replicate's data stream moves both
        s = 2.8 + shared + 0.1 * rng.standard_normal(replicates)
        r = 1.0 + shared + 0.1 * rng.standard_normal(replicates)
        (sep,) = separations([_planted(smooth, s, **NO_WIDENING), _planted(rough, r, **NO_WIDENING)])
        draws.append((sep.separation_ci_low, sep.separation_ci_high, sep.separation))
    assert_exact(draws, 1.8, replicates - 1)


@pytest.mark.parametrize("replicates", [2, 3, 8])
def test_the_separation_widened_by_what_may_still_come_holds_where_training_goes(template_fits, replicates):
    """Both exponents still rising (each replicate's limit above its exponent by a planted remaining drift
    whose bound the widening carries): the widened interval contains the limits' difference at least at its
    rate; the widening is what the interval that knew the offsets would not need."""
    smooth, rough = template_fits
    rng = np.random.default_rng(300 + replicates)
    covered = 0
    for _ in range(DRAWS):
        shared = 0.2 * rng.standard_normal(replicates)
        s = 2.6 + shared + 0.1 * rng.standard_normal(replicates)  # limit 2.8: 0.2 still to come
        r = 0.95 + shared + 0.1 * rng.standard_normal(replicates)  # limit 1.0: 0.05 still to come
        smooth_room = dict(NO_WIDENING, remaining_drift_low=0.0, remaining_drift_high=0.25)
        rough_room = dict(NO_WIDENING, remaining_drift_low=0.0, remaining_drift_high=0.08)
        (sep,) = separations([_planted(smooth, s, **smooth_room), _planted(rough, r, **rough_room)])
        covered += sep.separation_ci_low <= 1.8 <= sep.separation_ci_high
    assert at_least_rate(covered), covered


@pytest.mark.parametrize("batches", [8, 16])
def test_one_replicates_separation_combines_the_two_jackknife_intervals_at_its_rate(template_fits, batches):
    """One replicate: each exponent's jackknife interval over its own evaluation batches, the difference's
    half-width the two half-widths in quadrature (evaluation noise only, said so)."""
    smooth, rough = template_fits
    rng = np.random.default_rng(250 + batches)
    covered = 0
    for _ in range(DRAWS // 2):
        fits = []
        for template, alpha in ((smooth, 2.8), (rough, 1.0)):
            one = exponent_interval(DEPTHS, planted_losses(rng, 1, batches, alpha=alpha, teacher_spread=0.0))
            fits.append(dataclasses.replace(_planted(template, [one.value], **NO_WIDENING),
                                            replicate_ci_low=one.low, replicate_ci_high=one.high))
        (sep,) = separations(fits)
        covered += sep.separation_ci_low <= 1.8 <= sep.separation_ci_high
    assert sep.method.startswith("1 replicate: the two intervals in quadrature")
    assert within_rate(covered, draws=DRAWS // 2), covered


# --------------------------------------------------------------------------------- the remaining drift

def planted_exponents(rng, replicates, *, limit=1.3, amplitude=0.4, ratio=0.6, spread=0.05, noise=0.004):
    """Exponents ``(replicate, length)`` approaching each replicate's own limit geometrically (as
    tests/test_drift.py), the mean limit, and the true mean last drift per doubling."""
    k = np.arange(len(LENGTHS))
    limits = limit + spread * rng.standard_normal(replicates)
    amplitudes = amplitude * (1 + 0.2 * rng.standard_normal(replicates))
    alphas = limits[:, None] - amplitudes[:, None] * ratio ** k + noise * rng.standard_normal((replicates, k.size))
    last_drift = amplitude * (ratio ** (k[-2]) - ratio ** k[-1])
    return alphas, float(limits.mean()), last_drift


@pytest.mark.parametrize("replicates", REPLICATES)
def test_the_drift_per_doubling_interval_is_exact(replicates):
    """The last drift's interval (t on the noise pooled over the last three lengths' two-way table) contains
    the true mean last drift at its rate.  Its amplitude spread over replicates is a replicate level the
    pooled noise does not see, so it is planted at zero here; tests/test_drift.py covers the limit with it."""
    rng = np.random.default_rng(400 + replicates)
    covered = 0
    for _ in range(DRAWS):
        k = np.arange(len(LENGTHS))
        alphas = (1.3 + 0.05 * rng.standard_normal(replicates))[:, None] - 0.4 * 0.6 ** k \
            + 0.004 * rng.standard_normal((replicates, k.size))
        truth = 0.4 * (0.6 ** 3 - 0.6 ** 4)
        drift = remaining_drift(alphas, LENGTHS)
        covered += drift.drift_low <= truth <= drift.drift_high
    assert within_rate(covered), covered


@pytest.mark.parametrize("replicates", REPLICATES)
def test_the_drift_widened_interval_is_conservative_and_its_width_is_bounded(replicates):
    """The limit's interval (replicate t widened by the remaining drift's bound) against the interval that
    knew what is still to come (the replicate t shifted by the true remaining drift, as wide as the replicate
    part): conservative by construction (the drift's and the ratio's one-sided ends, each at 97.5%, and the
    ratio's end through the convex rho/(1 - rho)), so its width is guarded, not matched.  Measured at these
    seeds (planted ratio 0.6, noise 0.004): the median width 2.6, 4.4, 5.9 and 5.8 times the oracle's at
    2, 3, 5 and 8 replicates, the limit covered in every draw; a median above 8 fails."""
    rng = np.random.default_rng(500 + replicates)
    ratios, covered = [], 0
    for _ in range(DRAWS):
        alphas, truth, _ = planted_exponents(rng, replicates)
        last = alphas[:, -1]
        half = stats.t.ppf(0.975, replicates - 1) * last.std(ddof=1) / math.sqrt(replicates)
        drift = remaining_drift(alphas, LENGTHS)
        low, high = last.mean() - half - max(0.0, -drift.low), last.mean() + half + max(0.0, drift.high)
        covered += low <= truth <= high
        ratios.append((high - low) / (2 * half))
    assert at_least_rate(covered), covered
    assert 1.0 <= np.median(ratios) <= 8.0, np.median(ratios)


# -------------------------------------------------------------------------------- the asymptotic estimate

@pytest.mark.parametrize("replicates", (1,) + REPLICATES)
def test_the_asymptotic_interval_covers_the_limits_exponent(replicates):
    """The exponent of each depth's extrapolated limit (Aitken on the last three lengths): the truth is the
    teachers' mean exponent of the limits; losses L_inf (1 + B t^-1) with evaluation noise.  With one replicate
    (16 batches) it is the jackknife over batches.  Where a replicate's limit cannot be extrapolated the
    interval is undefined (NaN, printed so), never a wrong number: coverage is of the defined intervals, and
    at the presets' noise at most 5% are undefined."""
    rng = np.random.default_rng(600 + replicates)
    lam = np.asarray(LENGTHS)
    covered = defined = 0
    for _ in range(DRAWS // 2):
        limits = planted_losses(rng, replicates, 1, batch_noise=0.0, teacher_spread=0.0 if replicates == 1
                                else 0.1)[..., 0]
        curve = limits[:, :, None] * (1 + 0.3 / lam)[None, None, :]  # (depth, replicate, length)
        batches = 16 if replicates == 1 else 8
        losses = curve[..., None] * (1 + 0.01 * rng.standard_normal(curve.shape + (batches,)))
        fit = asymptotic_interval(DEPTHS, losses)
        if math.isfinite(fit.low):
            defined += 1
            covered += fit.low <= 1.2 <= fit.high
    assert defined >= 0.95 * (DRAWS // 2), defined
    assert within_rate(covered, draws=defined), (covered, defined)


# ------------------------------------------------------------------------------------- the route agreement

ROUTE_DRAWS = 2000


@pytest.mark.parametrize("replicates", (1,) + REPLICATES)
def test_the_route_spreads_upper_end_is_a_one_sided_bound_at_its_rate(replicates):
    """The agreement test reads the upper one-sided 95% end of the spread between two routes' best losses
    (over replicates, or over the paired evaluation batches with one): it lies above the true spread (3%) at
    its rate, within three binomial standard errors of 2000 draws (enough to tell 95% from 97.5%)."""
    rng = np.random.default_rng(700 + replicates)
    covered = 0
    truth = 0.03
    batches = 16 if replicates == 1 else 8
    for _ in range(ROUTE_DRAWS):
        base = 0.1 * np.exp(0.3 * rng.standard_normal(replicates))
        noise = 0.02 if replicates > 1 else 0.0
        second = base * (1 + truth) * np.exp(noise * rng.standard_normal(replicates))
        cell = np.stack([base, second], axis=1)[None, :, :, None, None, None]  # depth, rep, route, init, length
        losses = cell * (1 + 0.01 * rng.standard_normal((1, replicates, 2, 1, 1, batches)))
        (cert,) = certify_depths([4], (1.0,), losses, np.ones((1, replicates, 2, 1), bool),
                                 ("scratch", "continuation"))
        covered += cert.route_spread_high >= truth
    assert within_rate(covered, draws=ROUTE_DRAWS), covered


def test_the_route_error_is_a_bound_on_its_side_only():
    """A trained loss bounds the reachable one from above: when each depth's reachable loss is up to its
    route spread *below* the best loss, the reachable losses' exponent lies inside the widened interval in
    every draw; planted *above* the best loss (the assumption's other side) it falls outside in some."""
    rng = np.random.default_rng(8)
    spreads = np.array([0.02, 0.05, 0.1, 0.3])
    down, up = route_error(DEPTHS, spreads)
    best = 0.5 * DEPTHS ** -1.2
    alpha = float(slopes(DEPTHS, best))
    inside = outside = 0
    for _ in range(DRAWS):
        share = rng.random(DEPTHS.size)
        below = best / (1 + spreads) ** share
        above = best * (1 + spreads) ** share
        inside += alpha - down - 1e-12 <= slopes(DEPTHS, below) <= alpha + up + 1e-12
        outside += not alpha - down <= slopes(DEPTHS, above) <= alpha + up
    assert inside == DRAWS and outside > DRAWS // 4, (inside, outside)


# ------------------------------------------------------------------------------------- the tail test

@pytest.mark.parametrize("n_lengths", [4, 5])
@pytest.mark.parametrize(("gamma", "holds"), [(1.0, True), (TAIL_SLOWEST_GAMMA, True), (0.03, False)])
def test_the_tail_tests_share_still_to_lose_is_a_bound_on_its_assumptions_side(n_lengths, gamma, holds):
    """L(t) = L_inf + B t^-gamma with evaluation noise: for a decay at least as fast as the slowest admitted
    (t^-0.1) the bound on the share still to lose is above the truth at least at 95%; slower than the
    assumption (t^-0.03) it is below the truth in most draws, which is what 'assumption' means."""
    rng = np.random.default_rng(int(gamma * 100) + n_lengths)
    steps = 3000.0 * 2.0 ** np.arange(n_lengths)
    curve = 1.0 + 0.2 * (steps / steps[-1]) ** -gamma
    truth = (curve[-1] - 1.0) / curve[-1]
    covered = 0
    for _ in range(DRAWS // 2):
        shared = rng.normal(0, 0.002, (1, 16))
        losses = curve[:, None] * (1 + shared + rng.normal(0, 0.0005, (n_lengths, 16)))
        covered += tail_test(losses, lengths=steps).gain_bound >= truth
    if holds:
        assert at_least_rate(covered, draws=DRAWS // 2), covered
    else:
        assert covered < DRAWS // 4, covered


# ------------------------------------------------------------------------------------ other intervals

@pytest.mark.parametrize("points", [4, 5])
def test_the_power_law_fits_regression_interval_is_exact(points):
    """power_law_fit's t interval (n − 2 degrees of freedom), the figures' fitted lines, at four and five
    points with lognormal noise."""
    rng = np.random.default_rng(900 + points)
    x = 2.0 ** np.arange(1, points + 1)
    fits = [power_law_fit(x, 3 * x ** -1.5 * np.exp(0.05 * rng.standard_normal(points))) for _ in range(DRAWS)]
    assert_exact([(f.ci_low, f.ci_high, f.exponent) for f in fits], 1.5, points - 2)


@pytest.mark.parametrize("pairs", [3, 5, 8])
def test_fieller_covers_a_ratio_of_means_at_the_drifts_sample_sizes(pairs):
    """Fieller's interval for E b / E a (the drift's decay ratio) from ``pairs`` correlated pairs."""
    from resflow.fitting.drift import fieller_interval

    rng = np.random.default_rng(1000 + pairs)
    quantile = stats.t.ppf(0.975, pairs - 1)
    covered = 0
    for _ in range(DRAWS):
        a = 1.0 + 0.2 * rng.standard_normal(pairs)
        b = 0.7 + 0.5 * (a - 1.0) + 0.15 * rng.standard_normal(pairs)
        low, high = fieller_interval(a.mean(), b.mean(), np.cov(np.stack([a, b])) / pairs, quantile)
        covered += low <= 0.7 <= high
    assert within_rate(covered), covered


@pytest.mark.slow
def test_the_ladders_profile_interval_covers_with_errors_from_two_seeds():
    """The offset law's profile interval (the LM ladder's α_ℓ) with standard errors from two seeds, the cpu
    preset's count (tests/test_profile.py checks three)."""
    from resflow.fitting.profile import profile_offset_fit, seed_standard_errors

    depths = np.array([2, 3, 4, 6, 8.0])
    rng = np.random.default_rng(1300)
    covered = 0
    for _ in range(300):
        seeds = 0.8 * depths ** -1.0 + 2.4 + rng.normal(0, 0.01, (2, depths.size))
        means, errors, dof = seed_standard_errors(seeds)
        fit = profile_offset_fit(depths, means, errors, dof=dof, limit_range=(1.5, 10))
        covered += fit.alpha_low <= 1.0 <= fit.alpha_high
    assert within_rate(covered, draws=300), covered


def chinchilla_like(rng):
    """A planted table on a Chinchilla-like grid (widths, depths, tokens; a quarter of the cells dropped)
    with lognormal noise of 1%, and the law's true parameters."""
    truth = dict(c_m=40.0, alpha_m=0.6, c_l=1.5, alpha_l=0.7, c_D=400.0, alpha_D=0.3, L0=1.8)
    grid = np.meshgrid([256, 512, 768, 1024, 1536, 2048, 3072, 4096.0], [4, 8, 12, 16, 24, 32, 48.0],
                       [1e9, 3e9, 1e10, 3e10, 1e11], indexing="ij")
    m, ell, tokens = (g.ravel() for g in grid)
    keep = np.random.default_rng(0).random(m.size) < 0.75
    m, ell, tokens = m[keep], ell[keep], tokens[keep]
    mean = (truth["c_m"] * m ** -truth["alpha_m"] + truth["c_l"] * ell ** -truth["alpha_l"]
            + truth["c_D"] * tokens ** -truth["alpha_D"] + truth["L0"])
    table = pd.DataFrame(dict(d_model=m, n_layers=ell, num_tokens=tokens,
                              loss=mean * np.exp(0.01 * rng.standard_normal(m.size))))
    theta = np.array([math.log(40.0), 0.6, math.log(1.5), 0.7, math.log(400.0), 0.3, math.log(1.8)])
    return table, truth, theta


@pytest.mark.parametrize(("loss", "draws"), [
    ("squared", 100), ("huber", 100),
    pytest.param("squared", 400, marks=pytest.mark.slow), pytest.param("huber", 400, marks=pytest.mark.slow),
])
def test_the_scaling_laws_standard_errors_cover_at_their_rate(loss, draws):
    """±1.96 standard errors of the Chinchilla-form fit (the depth exponent, and the width and data ones):
    for the squared loss the least-squares covariance, for the Huber loss the M-estimator's sandwich (the
    least-squares formula it replaced covered 89-93%).  Two starts per fit: the truth and one random."""
    from resflow.llm.table.scaling_fit import ScalingFitSettings, fit_scaling_law

    rng = np.random.default_rng(1100 if loss == "squared" else 1200)
    covered = dict.fromkeys(("alpha_m", "alpha_l", "alpha_D"), 0)
    for _ in range(draws):
        table, truth, theta = chinchilla_like(rng)
        fit = fit_scaling_law(table, ScalingFitSettings(loss=loss, n_starts=1, exclude_top=0,
                                                        seed=int(rng.integers(2**31))), extra_starts=[theta])
        for name in covered:
            covered[name] += abs(fit.params[name] - truth[name]) <= 1.96 * fit.se[name]
    assert all(within_rate(c, draws=draws) for c in covered.values()), covered

