"""Noisy ensembles: simulated MSE against the closed-form laws, across generated parameters."""

import math

import torch
from hypothesis import given, settings

from resflow import Equicorrelated, Fractional, NoisyEnsemble, laws

from .strategies import hursts, members, rhos, seeds, sigmas

N_SAMPLES = 20_000
# The ensemble error is Gaussian with variance v, so the empirical MSE of N draws is v * chi2_N / N:
# relative standard error sqrt(2 / N).  Z = 5 standard errors: a false alarm per example ~6e-7.
Z = 5.0
REL_TOL = Z * math.sqrt(2.0 / N_SAMPLES)


def simulated_mse(ensemble: NoisyEnsemble, seed: int) -> float:
    out = ensemble(torch.zeros(N_SAMPLES, dtype=torch.float64), seed=seed)
    return float(out.square().mean())


@settings(max_examples=40)
@given(sigma=sigmas, rho=rhos, n=members, seed=seeds)
def test_equicorrelated_ensemble_mse(sigma, rho, n, seed):
    law = laws.evaluate("ensemble-equicorrelated", L=n, sigma=sigma, rho=rho)  # from the sympy derivation
    assert math.isclose(law, sigma**2 * (rho + (1 - rho) / n), rel_tol=1e-12)  # the formula
    ensemble = NoisyEnsemble(n, sigma, Equicorrelated(rho))
    assert math.isclose(ensemble.exact_mse(), law, rel_tol=1e-12)
    assert abs(simulated_mse(ensemble, seed) / law - 1) <= REL_TOL


@settings(max_examples=25)
@given(sigma=sigmas, hurst=hursts, n=members, seed=seeds)
def test_fractional_ensemble_mse(sigma, hurst, n, seed):
    law = laws.evaluate("ensemble-fractional", L=n, sigma=sigma, H=hurst)  # from the sympy derivation
    ensemble = NoisyEnsemble(n, sigma, Fractional(hurst))
    assert math.isclose(ensemble.exact_mse(), law, rel_tol=1e-9)
    assert abs(simulated_mse(ensemble, seed) / law - 1) <= REL_TOL


@given(sigma=sigmas, n=members, seed=seeds)
def test_ensemble_as_residual_stack_ends_at_the_mean(sigma, n, seed):
    ens = NoisyEnsemble(n, sigma, "correlated:0.3")
    h0 = torch.randn(5, 3, dtype=torch.float64)
    mu = torch.randn(3, dtype=torch.float64)
    hs = ens.hidden_states(h0, mu, seed=seed)
    assert hs.shape == (n + 1, 5, 3) and torch.equal(hs[0], h0)
    torch.testing.assert_close(hs[-1], h0 + ens(mu.expand(5, 3), seed=seed))
