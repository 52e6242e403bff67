"""Exponent fits on synthetic runs with known exponents: recovery, intervals, the law-aware fit, the verdict."""

import json
import math

import numpy as np
import pytest

from resflow import laws
from resflow.analysis.fits import fit_dataset, fit_exponent, fit_offset
from resflow.analysis.intervals import exponent_interval
from resflow.analysis.law_fit import finite_teacher_factor, law_for_target
from resflow.analysis.regimes import regime_predictions
from resflow.sim.block import StudentSpec
from resflow.sim.results import TrainingResult, build_dataset

DEPTHS = (2, 4, 8, 16)


def synthetic(curves: dict, replicates=4, batches=8, noise=0.05, half_gain=0.0, half_shift=0.0, fail=None, rng=0):
    """A TrainingResult whose full-length final losses are ``curves[target](depth)`` with lognormal noise
    per replicate and batch; its half-length students have losses higher by ``half_gain`` (relative)
    and exponent lower by ``half_shift``."""
    gen = np.random.default_rng(rng)
    specs, histories, finals = [], [], []
    steps = [0, 500, 1000]
    for target, curve in curves.items():
        for d in DEPTHS:
            for r in range(replicates):
                level = curve(d) * math.exp(noise * gen.standard_normal())
                for length in (0.5, 1.0):
                    value = level if length == 1.0 else level * (1 + half_gain) * (d / 2) ** half_shift
                    batch = value * np.exp(noise * gen.standard_normal(batches))
                    specs.append(StudentSpec(target, "euler", d, r, length=length))
                    histories.append([10 * value, 2 * value, batch.mean()])
                    finals.append(batch)
    n = len(specs)
    failed = np.zeros(n, dtype=bool)
    reasons = [""] * n
    if fail is not None:
        failed[fail] = True
        reasons[fail] = "loss became nan at step 3"
    return TrainingResult(specs, steps, np.array(histories), np.array(finals), failed, reasons, {}, 1.0, "cpu", 1000)


def dataset(result, targets, teacher_depth=1e9):
    return build_dataset(result, loss="mse", targets=targets,
                         attrs={"config": json.dumps({"teacher_depth": teacher_depth})})


def power(alpha, amplitude=0.1):
    return lambda d: amplitude * d ** -alpha


def test_least_squares_exponent_of_an_exact_power_law():
    assert fit_exponent(DEPTHS, [3 * d**-1.7 for d in DEPTHS]) == pytest.approx(1.7)
    a, alpha, c = fit_offset(DEPTHS + (32, 64), [2 * d**-2.0 + 1e-4 for d in DEPTHS + (32, 64)])
    assert alpha == pytest.approx(2.0, abs=1e-3) and c == pytest.approx(1e-4, rel=1e-2)


def test_interval_over_replicates_covers_the_truth_at_its_nominal_rate():
    """Across 60 synthetic runs of 4 replicates the 95% t-interval must contain the true exponent at
    about its nominal rate: Binomial(60, 0.95) puts P(fewer than 52 covered) at 0.6%."""
    covered = 0
    for rng in range(60):
        (fit,) = fit_dataset(dataset(synthetic({"independent": power(1.0)}, rng=rng), ["independent"]))
        covered += fit.ci_low <= 1.0 <= fit.ci_high
        assert fit.ci_method == "t over 4 replicates"
    assert covered >= 52, covered


def test_recovers_exponents_and_classifies_regimes():
    ds = dataset(synthetic({"independent": power(1.0), "tied": power(2.6)}), ["independent", "tied"])
    fits = {f.target: f for f in fit_dataset(ds)}
    assert abs(fits["independent"].exponent - 1.0) < 0.1 and abs(fits["tied"].exponent - 2.6) < 0.1
    assert fits["independent"].regime == "ensemble" and fits["tied"].regime == "procedural"
    assert all(f.converged and f.verdict == "converged" for f in fits.values())


@pytest.mark.parametrize(("target", "alpha"), [("independent", 1.0), ("tied", 3.0)])
def test_the_law_aware_fit_recovers_the_exponent_of_a_finite_teacher(target, alpha):
    """Losses from the finite-teacher law itself (L_T = 32): the plain slope is biased up, the
    law-aware one recovers the asymptotic exponent."""
    law = law_for_target(target)
    curve = lambda d: float(laws.evaluate(law, ell=float(d), L_T=32.0, A=0.1))  # noqa: E731
    (fit,) = fit_dataset(dataset(synthetic({target: curve}, noise=0.02), [target], teacher_depth=32))
    assert fit.law == law and fit.teacher_depth == 32
    assert fit.exponent > alpha + 0.2  # the finite teacher steepens the plain slope
    assert fit.law_ci_low <= alpha <= fit.law_ci_high and abs(fit.law_exponent - alpha) < 0.05


def test_finite_teacher_factor_comes_from_the_derivation():
    ell = np.array([2.0, 4.0, 8.0])
    np.testing.assert_allclose(finite_teacher_factor("finite-teacher-ensemble", ell, 16), 1 - ell / 16)
    np.testing.assert_allclose(finite_teacher_factor("finite-teacher-procedural-incoherent", ell, 16),
                               (1 - ell / 16) ** 2)
    assert np.isnan(finite_teacher_factor("finite-teacher-ensemble", [16.0], 16)).all()


def test_a_series_still_moving_with_training_length_is_not_converged():
    moving = dataset(synthetic({"tied": power(2.6)}, half_shift=0.4), ["tied"])  # exponent 2.2 at half length
    (fit,) = fit_dataset(moving)
    assert not fit.converged and fit.regime == "unconverged" and "exponent moved" in fit.verdict
    assert fit.exponent_shift == pytest.approx(0.4, abs=0.05) and "bound" in fit.verdict


def test_a_series_whose_loss_still_falls_is_not_converged_even_if_its_exponent_is_stable():
    falling = dataset(synthetic({"tied": power(2.0)}, half_gain=0.3), ["tied"])  # every loss 30% higher at half
    (fit,) = fit_dataset(falling)
    assert not fit.converged and abs(fit.exponent_shift) < 0.05 and "still fell 2" in fit.verdict


def test_without_half_length_students_the_verdict_is_not_checked():
    result = synthetic({"independent": power(1.0)})
    keep = [i for i, s in enumerate(result.specs) if s.length == 1.0]
    full = TrainingResult([result.specs[i] for i in keep], result.eval_steps, result.test_loss[keep],
                          result.final_batches[keep], result.failed[keep], [""] * len(keep), {}, 1.0, "cpu", 1000)
    (fit,) = fit_dataset(dataset(full, ["independent"]))
    assert not fit.converged and fit.verdict.startswith("not checked")


def test_failed_students_make_the_series_failed():
    ds = dataset(synthetic({"independent": power(1.0)}, fail=0), ["independent"])
    (fit,) = fit_dataset(ds)
    assert fit.regime == "failed" and not fit.converged and not np.isfinite(fit.exponent)
    assert "loss became nan at step 3" in ds["fail_reason"].values.ravel().tolist()


def test_one_replicate_falls_back_to_a_labelled_batch_bootstrap():
    batches = np.array([[[0.1 * d**-1.0 * (1 + 0.01 * k) for k in range(8)]] for d in DEPTHS])
    interval = exponent_interval(DEPTHS, batches)
    assert "evaluation noise only" in interval.method and interval.low <= interval.value <= interval.high


def test_regime_predictions_come_from_the_laws():
    assert regime_predictions("euler") == {"ensemble": (1.0, 1.0), "procedural": (2.0, 3.0)}
    assert regime_predictions("midpoint")["procedural"] == (4.0, 5.0)


def test_dataset_is_labelled_and_carries_provenance():
    ds = dataset(synthetic({"independent": power(1.0)}), ["independent"])
    assert set(ds["test_loss"].dims) == {"target", "scheme", "depth", "replicate", "length", "step"}
    for name, var in ds.data_vars.items():
        assert "long_name" in var.attrs and "units" in var.attrs, name
