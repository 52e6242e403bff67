"""Fractional Gaussian noise: exact autocovariance reproduced within sampling error."""

import math

import pytest
import torch

from resflow import ConfigError, FractionalBrownianPath, fgn_autocovariance, fgn_covariance, sample_fgn

# Standard-normal quantile for the per-check tolerance: a correct sampler fails one check with
# probability ~6e-7, and the seeds are fixed, so the suite is deterministic.
Z = 5.0
N_PATHS = 4000
LENGTH = 32
LAGS = range(6)


def check_autocovariance(samples: torch.Tensor, hurst: float) -> None:
    """Per-path lag-k averages are i.i.d. across paths: compare their mean to gamma(k) within Z SE."""
    n_paths, length = samples.shape
    exact = fgn_autocovariance(hurst, len(LAGS))
    for k in LAGS:
        per_path = (samples[:, : length - k] * samples[:, k:]).mean(dim=1)
        se = per_path.std() / math.sqrt(n_paths)
        assert abs(per_path.mean() - exact[k]) <= Z * se, (hurst, k, float(per_path.mean()), float(exact[k]))


@pytest.mark.parametrize("method", ["davies-harte", "cholesky"])
@pytest.mark.parametrize("hurst", [0.1, 0.25, 0.5, 0.75, 0.9])
def test_sampled_fgn_has_the_exact_autocovariance(hurst, method):
    z = sample_fgn(LENGTH, hurst, (N_PATHS,), seed=11, method=method)
    assert z.shape == (N_PATHS, LENGTH) and z.dtype == torch.float64
    check_autocovariance(z, hurst)


def test_autocovariance_formula_special_cases():
    assert torch.allclose(fgn_autocovariance(0.5, 5), torch.tensor([1.0, 0, 0, 0, 0], dtype=torch.float64))
    # variance of the sum of n values is n^{2H}
    for hurst in (0.2, 0.7):
        assert math.isclose(float(fgn_covariance(10, hurst).sum()), 10 ** (2 * hurst), rel_tol=1e-12)


def test_seeded_sampling_is_reproducible():
    assert torch.equal(sample_fgn(16, 0.7, (3,), seed=4), sample_fgn(16, 0.7, (3,), seed=4))
    assert not torch.equal(sample_fgn(16, 0.7, (3,), seed=4), sample_fgn(16, 0.7, (3,), seed=5))


def test_fbm_path_is_consistent_across_resolutions():
    path = FractionalBrownianPath(0.7, 64, (5,), seed=3)
    fine = path.increments(64, normalise=False)
    coarse = path.increments(8, normalise=False)
    torch.testing.assert_close(coarse, fine.reshape(5, 8, 8).sum(-1), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(path.values(1)[:, -1], fine.sum(-1), rtol=1e-12, atol=1e-12)


def test_normalised_coarse_increments_are_again_unit_fgn():
    path = FractionalBrownianPath(0.75, 4 * LENGTH, (N_PATHS,), seed=8)
    check_autocovariance(path.increments(LENGTH), 0.75)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: sample_fgn(8, 1.0), r"hurst must be a finite number in \(0.0, 1.0\)"),
        (lambda: sample_fgn(8, 0.0), "hurst must be"),
        (lambda: sample_fgn(0, 0.5), "n must be a positive integer"),
        (lambda: sample_fgn(8, 0.5, method="hosking"), "method must be one of"),
        (lambda: FractionalBrownianPath(0.5, 10).values(3), "does not divide"),
    ],
)
def test_bad_arguments(call, message):
    with pytest.raises(ConfigError, match=message):
        call()
