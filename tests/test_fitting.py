"""Exponent fits on synthetic runs with known exponents: recovery, intervals, convergence, regimes."""

import math

import numpy as np
import pytest

from resflow.analysis.fits import bootstrap_exponent, fit_dataset, fit_exponent, fit_offset
from resflow.analysis.regimes import regime_predictions
from resflow.sim.block import StudentSpec
from resflow.sim.results import TrainingResult, build_dataset

DEPTHS = (2, 4, 8, 16)


def synthetic(alphas: dict, seeds=4, batches=8, noise=0.05, still_falling=0.0, fail=None, rng=0):
    """A TrainingResult whose final losses follow A * depth^-alpha with lognormal noise per seed and batch."""
    gen = np.random.default_rng(rng)
    specs, curves, finals = [], [], []
    steps = list(range(0, 1001, 100))
    for target, alpha in alphas.items():
        for d in DEPTHS:
            for s in range(seeds):
                level = 0.1 * d ** (-alpha) * math.exp(noise * gen.standard_normal())
                batch = level * np.exp(noise * gen.standard_normal(batches))
                # training curve: decays to the final level; `still_falling` = relative drop over the last 10%
                shape = np.array([(1 + 10 * math.exp(-t / 100)) for t in steps])
                shape[-1] = 1.0
                shape[-2] = 1.0 + still_falling
                specs.append(StudentSpec(target, "euler", d, s))
                curves.append(batch.mean() * shape)
                finals.append(batch)
    n = len(specs)
    failed = np.zeros(n, dtype=bool)
    reasons = [""] * n
    if fail is not None:
        failed[fail] = True
        reasons[fail] = "loss became nan at step 3"
    return TrainingResult(specs, steps, np.array(curves), np.array(finals), failed, reasons,
                          {"step_angle": np.zeros((n, 17))}, 1.0, "cpu", 1000)


def dataset(result, targets):
    return build_dataset(result, loss="mse", targets=targets, attrs={"config": "{}"})


def test_least_squares_exponent_of_an_exact_power_law():
    assert fit_exponent(DEPTHS, [3 * d**-1.7 for d in DEPTHS]) == pytest.approx(1.7)
    a, alpha, c = fit_offset(DEPTHS + (32, 64), [2 * d**-2.0 + 1e-4 for d in DEPTHS + (32, 64)])
    assert alpha == pytest.approx(2.0, abs=1e-3) and c == pytest.approx(1e-4, rel=1e-2)


def test_interval_covers_the_truth_at_its_nominal_rate():
    """Across 60 synthetic runs with 4 seeds the 95% interval must contain the true exponent at about
    its nominal rate: Binomial(60, 0.95) puts P(fewer than 52 covered) at 0.6%."""
    covered = 0
    for rng in range(60):
        ds = dataset(synthetic({"independent": 1.0}, rng=rng), ["independent"])
        (fit,) = fit_dataset(ds)
        covered += fit.ci_low <= 1.0 <= fit.ci_high
    assert covered >= 52, covered


def test_recovers_exponents_and_classifies_regimes():
    ds = dataset(synthetic({"independent": 1.0, "tied": 2.6}), ["independent", "tied"])
    fits = {f.target: f for f in fit_dataset(ds)}
    # interval coverage is tested above; here the point estimates (sd ~0.03 at this noise) and regimes
    assert abs(fits["independent"].exponent - 1.0) < 0.1 and abs(fits["tied"].exponent - 2.6) < 0.1
    assert fits["independent"].regime == "ensemble" and fits["tied"].regime == "procedural"
    assert all(f.converged for f in fits.values())


def test_unconverged_series_are_not_classified():
    ds = dataset(synthetic({"tied": 1.0}, still_falling=0.3), ["tied"])
    (fit,) = fit_dataset(ds)
    assert not fit.converged and fit.regime == "unconverged" and "still fell" in fit.note


def test_failed_students_make_the_series_failed():
    ds = dataset(synthetic({"independent": 1.0}, fail=0), ["independent"])
    (fit,) = fit_dataset(ds)
    assert fit.regime == "failed" and not fit.converged and not np.isfinite(fit.exponent)
    assert ds["fail_reason"].values.ravel()[0] == "loss became nan at step 3"


def test_regime_predictions_come_from_the_laws():
    assert regime_predictions("euler") == {"ensemble": (1.0, 1.0), "procedural": (2.0, 3.0)}
    assert regime_predictions("midpoint")["procedural"] == (4.0, 5.0)


def test_bootstrap_shape_and_spread_shrink_with_noise():
    quiet = synthetic({"independent": 1.0}, noise=0.01)
    loud = synthetic({"independent": 1.0}, noise=0.2)
    spreads = []
    for result in (quiet, loud):
        batches = np.array(result.final_batches).reshape(len(DEPTHS), 4, 8)
        spreads.append(np.std(bootstrap_exponent(batches, DEPTHS, samples=300)))
    assert spreads[0] < spreads[1] / 5


def test_dataset_is_labelled_and_carries_provenance():
    ds = dataset(synthetic({"independent": 1.0}), ["independent"])
    assert set(ds["test_loss"].dims) == {"target", "scheme", "depth", "seed", "step"}
    for name, var in ds.data_vars.items():
        assert "long_name" in var.attrs and "units" in var.attrs, name
