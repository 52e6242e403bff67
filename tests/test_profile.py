"""The offset law's profile-likelihood fit (coverage, the offset/exponent trade-off said, bad input refused), and
the ladder's equal-parameter pairs."""

import math

import numpy as np
import pytest
import xarray as xr

from resflow import ConfigError
from resflow.fitting.profile import WILKS_95, profile_offset_fit, seed_standard_errors
from resflow.llm.ladder.fit import equal_parameter_pairs, ladder_fits

DEPTHS = np.array([2, 3, 4, 6, 8.0])


def law(depths, c=0.8, alpha=1.0, limit=2.4):
    return c * np.asarray(depths, float) ** -alpha + limit


def test_the_interval_covers_the_true_exponent_at_its_level_with_errors_from_three_seeds():
    rng = np.random.default_rng(7)
    n, hits, limit_hits = 300, 0, 0
    for _ in range(n):
        seeds = law(DEPTHS) + rng.normal(0, 0.01, (3, DEPTHS.size))
        means, errors, dof = seed_standard_errors(seeds)
        fit = profile_offset_fit(DEPTHS, means, errors, dof=dof, limit_range=(1.5, 10))
        hits += fit.alpha_low <= 1.0 <= fit.alpha_high
        limit_hits += fit.limit_low <= 2.4 <= fit.limit_high
    # 95% intervals: the tolerance is three binomial standard errors of n draws
    tolerance = 3 * math.sqrt(0.95 * 0.05 / n)
    assert abs(hits / n - 0.95) < tolerance and abs(limit_hits / n - 0.95) < tolerance


def test_known_errors_use_wilks_threshold_and_estimated_ones_a_wider_one():
    means = law(DEPTHS)
    known = profile_offset_fit(DEPTHS, means, np.full(5, 0.01))
    estimated = profile_offset_fit(DEPTHS, means, np.full(5, 0.01), dof=4)
    assert known.threshold == pytest.approx(WILKS_95) and estimated.threshold > 7  # F(1, 4) = 7.71
    assert estimated.alpha_high - estimated.alpha_low > known.alpha_high - known.alpha_low


def test_precise_losses_identify_the_law_and_pin_both_offset_and_exponent():
    fit = profile_offset_fit(DEPTHS, law(DEPTHS), np.full(5, 1e-4))
    assert fit.identified and fit.alpha_low <= 1.0 <= fit.alpha_high and fit.alpha_high - fit.alpha_low < 0.05
    assert fit.limit_low <= 2.4 <= fit.limit_high and fit.verdict.startswith("α 1.0")


def test_a_flat_profile_is_not_identified_and_shows_the_trade_off():
    """Errors as large as the depth effect: the offset is not determined, and α runs with it."""
    fit = profile_offset_fit(DEPTHS, law(DEPTHS), np.full(5, 0.03))
    assert not fit.identified and fit.span < fit.threshold
    assert fit.alpha_low < 0.5 and fit.alpha_high > 2  # any of these exponents, with its own offset
    assert fit.verdict.startswith("not identified") and "L∞ goes from" in fit.verdict


@pytest.mark.parametrize(("depths", "means", "errors", "words"), [
    ([2, 4, 8], [3.0, 2.9, 2.8], [0.01] * 3, "four depths"),
    ([2, 3, 4, 8], [3.0, 2.9, 2.8, 2.7], [0.01, 0.0, 0.01, 0.01], "positive"),
    ([2, 3, 4, 8], [3.0, 2.9, 2.8], [0.01] * 3, "one length"),
])
def test_bad_input_is_refused_naming_the_argument(depths, means, errors, words):
    with pytest.raises(ConfigError, match=words):
        profile_offset_fit(depths, means, errors)


def test_seed_errors_need_two_seeds_and_pool_over_depths():
    with pytest.raises(ConfigError, match="seeds >= 2"):
        seed_standard_errors(np.ones((1, 5)))
    means, errors, dof = seed_standard_errors(np.array([[1.0, 2.0], [3.0, 2.0]]))
    assert dof == 2 and np.allclose(means, [2.0, 2.0]) and np.allclose(errors, math.sqrt(1.0 / 2))


def ladder_record(depths, seeds, noise, rng):
    """A minimal lm-ladder Dataset: the variables ladder_fits reads."""
    depths = list(depths)
    loss = law(depths)[None, :, None, None, None] + rng.normal(0, noise, (1, len(depths), seeds, 3, 4))
    dims = ("width", "depth", "seed", "length", "batch")
    coords = {"width": [64], "depth": depths, "seed": list(range(seeds)), "length": [0.25, 0.5, 1.0],
              "batch": list(range(4))}
    lesion = xr.DataArray(np.full((1, len(depths), seeds, 2), 0.1), dims=("width", "depth", "seed", "layer"),
                          coords={k: coords[k] for k in ("width", "depth", "seed")} | {"layer": [0, 1]})
    return xr.Dataset({"val_loss": xr.DataArray(loss, dims=dims, coords=coords), "lesion": lesion})


def test_the_ladder_fit_profiles_depths_from_two_and_says_when_it_cannot():
    rng = np.random.default_rng(0)
    fit = ladder_fits(ladder_record([1, 2, 3, 4, 6, 8], 3, 1e-4, rng))[0]
    assert fit.law_depths == (2, 3, 4, 6, 8) and fit.identified
    assert fit.profile_low <= 1.0 <= fit.profile_high
    short = ladder_fits(ladder_record([1, 2, 4], 2, 1e-4, rng))[0]
    assert not short.identified and "needs four depths >= 2" in short.profile


def test_equal_parameter_pairs_set_depth_beside_width_at_one_size():
    rng = np.random.default_rng(3)
    depths, widths, seeds = [2, 4, 8], [32, 64], 3
    loss = np.empty((2, 3, seeds, 1, 4))
    loss[0] = 3.0 + rng.normal(0, 0.01, (3, seeds, 1, 4))  # width 32
    loss[1] = 3.1 + rng.normal(0, 0.01, (3, seeds, 1, 4))  # width 64: worse by 0.1 at every depth
    params = xr.DataArray(np.array([[25248, 50464, 100896], [100672, 201344, 402688]]), dims=("width", "depth"),
                          coords={"width": widths, "depth": depths})
    ds = xr.Dataset({"val_loss": xr.DataArray(loss, dims=("width", "depth", "seed", "length", "batch"),
                                              coords={"width": widths, "depth": depths, "seed": range(seeds),
                                                      "length": [1.0], "batch": range(4)}),
                     "parameters": params})
    (pair,) = equal_parameter_pairs(ds)  # (32, 8) beside (64, 2): 0.2% apart; (32, 4) / (64, 2) is 50% off
    assert (pair.deep, pair.wide) == ((32, 8), (64, 2))
    assert pair.low <= -0.1 <= pair.high and pair.difference == pytest.approx(-0.1, abs=0.02)
    assert equal_parameter_pairs(ds, tolerance=0.001) == []
