"""Noisy ensembles and depth-correlation objects: structure and errors."""

import pytest
import torch

from resflow import (
    ConfigError,
    Equicorrelated,
    Fractional,
    IncompatibleOptionsError,
    NoisyEnsemble,
    UnknownNameError,
    parse_correlation,
)


def test_members_are_increment_plus_scaled_noise():
    ens = NoisyEnsemble(6, 0.5, "iid")
    mu = torch.arange(4.0, dtype=torch.float64)
    members = ens.members(mu, seed=1)
    noise = Equicorrelated(0.0).sample(6, (4,), seed=1)
    torch.testing.assert_close(members, mu + 0.5 * noise)


def test_tied_noise_is_one_shared_draw():
    z = Equicorrelated(1.0).sample(5, (7,), seed=0)
    assert all(torch.equal(z[0], z[i]) for i in range(5))
    assert NoisyEnsemble(5, 2.0, "tied").exact_mse() == pytest.approx(4.0)


def test_parse_correlation():
    assert parse_correlation("iid") == Equicorrelated(0.0)
    assert parse_correlation("independent") == Equicorrelated(0.0)
    assert parse_correlation("tied") == Equicorrelated(1.0)
    assert parse_correlation("correlated:0.25") == Equicorrelated(0.25)
    assert parse_correlation("fractional:0.7") == Fractional(0.7)
    assert parse_correlation(Fractional(0.3)).hurst == 0.3


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: parse_correlation("pink"), UnknownNameError, "unknown correlation 'pink'"),
        (lambda: parse_correlation("correlated:x"), ConfigError, "'x' is not a number"),
        (lambda: Equicorrelated(1.5), ConfigError, r"rho must be a finite number in \[0.0, 1.0\]; got 1.5"),
        (lambda: Fractional(1.0), ConfigError, "hurst must be"),
        (lambda: Fractional(0.7).sample(4, seed=0, base="uniform"), IncompatibleOptionsError, "Gaussian"),
        (lambda: NoisyEnsemble(0, 1.0), ConfigError, "n_members must be a positive integer"),
        (lambda: NoisyEnsemble(3, -1.0), ConfigError, "sigma must be"),
        (lambda: NoisyEnsemble(3, 1.0, 0.5), ConfigError, "correlation must be"),
        (lambda: NoisyEnsemble(3, 1.0).members([1.0, 2.0]), ConfigError, "increment must be a torch.Tensor"),
    ],
)
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()
