"""Verdict v4's remaining drift on planted exponents whose limit is known: a drift that stops is bounded and the
bound holds where training goes; one that does not stop is refused; precision is never penalised
(docs/design/certification.md)."""

import math

import numpy as np
import pytest
from scipy import stats

from resflow.fitting.drift import (
    DRIFT_SLOWEST_GAMMA,
    EXPONENT_TOLERANCE,
    fieller_interval,
    pooled_noise,
    remaining_drift,
)

LENGTHS = (0.0625, 0.125, 0.25, 0.5, 1.0)  # the presets' five lengths, ratio 2
CAP = 2.0 ** -DRIFT_SLOWEST_GAMMA
# coverage over many planted runs: the truth inside at least the nominal rate less three binomial standard errors
DRAWS = 300
COVERAGE = 0.95
LEAST_COVERED = COVERAGE - 3 * math.sqrt(COVERAGE * (1 - COVERAGE) / DRAWS)


def planted(rng, replicates: int, *, limit=1.3, amplitude=0.4, ratio=0.6, spread=0.05, noise=0.004,
            lengths=LENGTHS) -> tuple[np.ndarray, float]:
    """Exponents ``(replicate, length)`` approaching each replicate's own limit geometrically per doubling,
    ``alpha_k = limit_r - A_r ratio^k`` with the limits spread over replicates (teachers) by ``spread``, the
    amplitudes by 20%, and independent noise ``noise`` at every length; and the mean of the limits (the truth a
    run's interval must contain)."""
    k = np.arange(len(lengths))
    limits = limit + spread * rng.standard_normal(replicates)
    amplitudes = amplitude * (1 + 0.2 * rng.standard_normal(replicates))
    alphas = limits[:, None] - amplitudes[:, None] * ratio ** k + noise * rng.standard_normal((replicates, k.size))
    return alphas, float(limits.mean())


def interval_of_the_limit(alphas: np.ndarray, lengths=LENGTHS) -> tuple[float, float, object]:
    """What a fit reports for the exponent's limit: the replicate t interval of the last length's exponent,
    widened by the remaining drift's room on each side (resflow.fitting.fits)."""
    last = alphas[:, -1]
    n = last.size
    half = stats.t.ppf(0.975, n - 1) * last.std(ddof=1) / math.sqrt(n)
    drift = remaining_drift(alphas, lengths)
    return last.mean() - half - max(0.0, -drift.low), last.mean() + half + max(0.0, drift.high), drift


def test_aitken_is_exact_on_a_geometric_drift():
    """Without noise, d ratio / (1 - ratio) from the last two drifts is the distance to the limit."""
    k = np.arange(5)
    alphas = np.repeat((1.3 - 0.4 * 0.6 ** k)[None, :], 3, axis=0)  # identical replicates: no noise at all
    drift = remaining_drift(alphas, LENGTHS)
    assert drift.case == "decaying" and drift.ratio == pytest.approx(0.6)
    assert alphas[0, -1] + drift.remaining == pytest.approx(1.3)
    assert drift.drift == pytest.approx(0.4 * 0.6 ** 3 * 0.4) and drift.high == pytest.approx(drift.remaining)


@pytest.mark.parametrize("replicates", [2, 3, 5, 8])
def test_the_interval_of_a_stopping_drift_contains_the_limit_at_its_nominal_rate(replicates):
    """Over planted runs at the presets' replicate counts, the fit's interval (replicate t plus the remaining
    drift) contains the mean limit of the exponents at least at the nominal rate less three binomial standard
    errors; the combination of two 95% parts is conservative, so the rate is checked from one side."""
    rng = np.random.default_rng(replicates)
    covered = 0
    for _ in range(DRAWS):
        alphas, truth = planted(rng, replicates)
        low, high, _ = interval_of_the_limit(alphas)
        covered += low <= truth <= high
    assert covered / DRAWS >= LEAST_COVERED, covered


@pytest.mark.parametrize("replicates", [3, 5])
def test_an_uncertain_decay_ratio_is_bounded_by_its_upper_end_not_its_estimate(replicates):
    """Teachers that agree (the replicate interval narrow) and a decay ratio of 0.8 measured from noisy drifts:
    what is still to come dominates the interval, and only the ratio's upper end (Fieller) keeps the limit
    inside at the nominal rate; the point ratio in its place covers about 75-85% of these runs."""
    rng = np.random.default_rng(1)
    covered = 0
    for _ in range(DRAWS):
        alphas, truth = planted(rng, replicates, ratio=0.8, amplitude=0.4, noise=0.01, spread=0.005)
        low, high, _ = interval_of_the_limit(alphas)
        covered += low <= truth <= high
    assert covered / DRAWS >= LEAST_COVERED, covered


def test_the_bound_of_a_drift_decaying_at_the_slowest_admitted_rate_still_holds():
    """A drift decaying at the cap itself (t^-0.1, the stated assumption's edge): the interval still contains the
    limit at the nominal rate."""
    rng = np.random.default_rng(11)
    covered = 0
    for _ in range(DRAWS):
        alphas, truth = planted(rng, 5, amplitude=0.05, ratio=CAP)
        low, high, _ = interval_of_the_limit(alphas)
        covered += low <= truth <= high
    assert covered / DRAWS >= LEAST_COVERED, covered


def test_a_drift_that_stops_is_certified_and_one_that_does_not_is_refused():
    rng = np.random.default_rng(3)
    stopping, truth = planted(rng, 3, amplitude=0.2, ratio=0.5, noise=0.0003)
    drift = remaining_drift(stopping, LENGTHS)
    assert drift.case == "decaying" and drift.certifies(EXPONENT_TOLERANCE), drift.text
    # stopped so far that its last drift is within the evaluation noise: bounded by the cap on the ceiling
    stopped, _ = planted(rng, 5, amplitude=0.2, ratio=0.3, noise=0.0003)
    drift = remaining_drift(stopped, LENGTHS)
    assert drift.certifies(EXPONENT_TOLERANCE), drift.text
    # a constant drift of 0.05 per doubling: the ratio is 1 (measured), the cap bounds it, far above 0.1
    steady = 1.0 + 0.05 * np.arange(5)[None, :] + 0.001 * rng.standard_normal((3, 5))
    drift = remaining_drift(steady, LENGTHS)
    assert drift.case == "not shrinking" and not drift.certifies(EXPONENT_TOLERANCE)
    assert drift.high == pytest.approx(drift.drift_high * CAP / (1 - CAP), rel=1e-9) and drift.low == 0.0
    # a falling exponent: the room is below
    falling = 2.0 + 0.3 * 0.5 ** np.arange(5)[None, :] + 0.0005 * rng.standard_normal((3, 5))
    drift = remaining_drift(falling, LENGTHS)
    assert drift.remaining < 0 and drift.high == 0.0 and drift.low < 0


def test_precision_is_never_penalised():
    """The same constant drift of 0.004 per doubling, measured precisely (the ratio measurable: 1, capped) and
    hidden in noise (within noise: the cap on its ceiling): the precise bound is never the larger."""
    rng = np.random.default_rng(5)
    base = 1.0 + 0.004 * np.arange(5)[None, :]
    precise = remaining_drift(base + 1e-5 * rng.standard_normal((5, 5)), LENGTHS)
    noisy = remaining_drift(base + 1e-2 * rng.standard_normal((5, 5)), LENGTHS)
    assert noisy.case == "within noise"
    assert precise.bound <= noisy.bound
    assert precise.certifies(EXPONENT_TOLERANCE)  # 0.004 x 13.9 = 0.055: settled, as precisely as measured


def test_a_drift_within_its_noise_may_go_either_way():
    rng = np.random.default_rng(7)
    flat = 1.5 + 0.01 * rng.standard_normal((4, 5))
    drift = remaining_drift(flat, LENGTHS)
    assert drift.case == "within noise" and drift.low < 0 < drift.high
    tail = CAP / (1 - CAP)  # each way as far as its end of the drift's interval, at the slowest decay
    assert (drift.low, drift.high) == pytest.approx((drift.drift_low * tail, drift.drift_high * tail))


def test_only_the_last_three_lengths_are_read():
    """The start of training (the first lengths) may do anything: it does not enter the estimate."""
    rng = np.random.default_rng(9)
    alphas, _ = planted(rng, 3)
    moved = alphas.copy()
    moved[:, :2] += np.array([5.0, -3.0])
    a, b = remaining_drift(alphas, LENGTHS), remaining_drift(moved, LENGTHS)
    assert (a.remaining, a.low, a.high) == (b.remaining, b.low, b.high)


def test_not_checked_without_three_geometric_lengths_or_with_a_missing_loss():
    rng = np.random.default_rng(0)
    assert remaining_drift(rng.normal(size=(3, 2)), (0.5, 1.0)).case == "not checked"
    assert remaining_drift(rng.normal(size=(3, 3)), (0.25, 0.5, 0.9)).case == "not checked"
    missing = rng.normal(size=(3, 5))
    missing[1, 2] = np.nan
    drift = remaining_drift(missing, LENGTHS)
    assert drift.case == "not checked" and not drift.certifies()


def test_fieller_covers_a_ratio_of_means_at_its_nominal_rate():
    """Fieller's interval for E b / E a from paired samples' means and their covariance: coverage of the true
    ratio 0.7 within three binomial standard errors of 95% (8 pairs, correlated); unbounded when the
    denominator is within its noise."""
    rng = np.random.default_rng(2)
    quantile = stats.t.ppf(0.975, 7)
    covered = 0
    for _ in range(DRAWS):
        a = 1.0 + 0.3 * rng.standard_normal(8)
        b = 0.7 + 0.5 * (a - 1.0) + 0.2 * rng.standard_normal(8)
        low, high = fieller_interval(a.mean(), b.mean(), np.cov(np.stack([a, b])) / 8, quantile)
        covered += low <= 0.7 <= high
    assert abs(covered / DRAWS - COVERAGE) <= 3 * math.sqrt(COVERAGE * (1 - COVERAGE) / DRAWS), covered
    assert fieller_interval(0.01, 1.0, np.eye(2) * 0.01, 4.3) == (-math.inf, math.inf)


def test_the_pooled_noise_is_the_two_way_residual_variance():
    """Exponents = length mean + replicate level + noise of sd 0.02: the pooled variance recovers 0.02^2 (within
    its chi-square spread at 2 x 199 degrees of freedom), whatever the replicates' levels."""
    rng = np.random.default_rng(4)
    values = np.linspace(1, 2, 3)[None, :] + 5 * rng.standard_normal((200, 1)) + 0.02 * rng.standard_normal((200, 3))
    variance, dof = pooled_noise(values)
    assert dof == 2 * 199
    assert abs(variance / 0.02 ** 2 - 1) < 3 * math.sqrt(2 / dof)
