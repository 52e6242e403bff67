"""The roughness comparison on a synthetic run drawn from the refined law itself: the amplitudes, the
predicted curves and the crossover depths come back."""

import numpy as np
import pytest

from resflow import laws
from resflow.fitting.fits import fit_dataset
from resflow.fitting.roughness import crossover_depths, roughness_amplitudes, roughness_predictions, roughness_report
from test_fitting import dataset, synthetic

L_T, A_R, A_S, ALPHA_S = 32.0, 4e-3, 0.2, 3.0


def law(rho):
    return lambda d: float(laws.evaluate("roughness-correlated", ell=float(d), L_T=L_T, rho=rho, A_r=A_R, A_s=A_S,
                                         alpha_s=ALPHA_S))


@pytest.fixture(scope="module")
def run():
    targets = ["correlated:0", "correlated:0.5", "correlated:0.9", "correlated:1"]
    result = synthetic({t: law(float(t.split(":")[1])) for t in targets}, noise=0.002)
    return dataset(result, targets, teacher_depth=L_T)


def test_amplitudes_come_from_the_extremes(run):
    amps = roughness_amplitudes(run)
    assert amps.A_r == pytest.approx(A_R, rel=0.01) and amps.A_s == pytest.approx(A_S, rel=0.02)
    assert amps.alpha_s == pytest.approx(ALPHA_S, abs=0.01)


def test_predictions_and_crossovers_recover_the_law(run):
    predicted = roughness_predictions(run)
    measured = run["final_loss"].sel(length=1.0).isel(scheme=0, student_groups=0, temperature=0, route=0,
                                                       init=0).mean("replicate")
    for target, curve in predicted.items():
        np.testing.assert_allclose(curve, measured.sel(target=target).values, rtol=0.02)
    for target, (pred, meas) in crossover_depths(run).items():
        assert pred == pytest.approx(meas, rel=0.05), target
    rows = roughness_report(run, fit_dataset(run))
    assert all(abs(r["difference"]) < 0.03 for r in rows)
