r"""Noisy ensembles: a residual network read as an average of similar noisy layers.

Each of :math:`L` members estimates the same increment :math:`\mu` with noise,
:math:`m_i = \mu + \sigma z_i`, where :math:`z_i` are unit-variance and correlated across members by
a :class:`~resflow.DepthCorrelation`.  The ensemble output is the mean
:math:`\bar m = \frac1L \sum_i m_i`; as a residual network,
:math:`h_l = h_0 + \frac1L \sum_{i<l} m_i` and :math:`h_L = h_0 + \bar m`.

Its exact mean-squared error per component is :math:`\sigma^2\, \mathbf 1^\top C\, \mathbf 1 / L^2`
with :math:`C` the members' correlation matrix: :math:`\sigma^2(\rho + (1-\rho)/L)` for
equicorrelated noise (Veit et al. 2016 read ResNets as ensembles; the :math:`1/L` law is the
central limit theorem).
"""

from __future__ import annotations

import torch

from .._random import SeedLike, as_generator
from .._validate import check_int, check_real
from ..errors import ConfigError
from .correlation import DepthCorrelation, parse_correlation

__all__ = ["NoisyEnsemble"]


class NoisyEnsemble:
    r"""An ensemble of :math:`L` noisy estimates of one increment.

    Parameters
    ----------
    n_members : int
        :math:`L \ge 1`.
    sigma : float
        Noise scale :math:`\sigma \ge 0` of each member.
    correlation : DepthCorrelation or str
        How member noise is correlated: ``Equicorrelated(rho)`` (``"iid"``, ``"correlated:0.3"``)
        or ``Fractional(H)`` (``"fractional:0.75"``).  Default i.i.d.
    """

    def __init__(
        self,
        n_members: int,
        sigma: float,
        correlation: DepthCorrelation | str = "iid",
    ) -> None:
        self.n_members = check_int("n_members", n_members, minimum=1)
        self.sigma = check_real("sigma", sigma, low=0.0)
        self.correlation = parse_correlation(correlation) if isinstance(correlation, str) else correlation
        if not isinstance(self.correlation, DepthCorrelation):
            raise ConfigError(
                "correlation must be a DepthCorrelation or a spec string such as 'correlated:0.5'; "
                f"got {type(correlation).__name__}."
            )

    def __repr__(self) -> str:
        return (
            f"NoisyEnsemble(n_members={self.n_members}, sigma={self.sigma:g}, "
            f"correlation={self.correlation.label!r})"
        )

    def members(self, increment: torch.Tensor, *, seed: SeedLike = None) -> torch.Tensor:
        r"""Member estimates :math:`m_i = \mu + \sigma z_i`; shape ``(L, *increment.shape)``."""
        if not isinstance(increment, torch.Tensor):
            raise ConfigError(f"increment must be a torch.Tensor; got {type(increment).__name__}.")
        noise = self.correlation.sample(
            self.n_members, tuple(increment.shape), seed=as_generator(seed), dtype=increment.dtype
        )
        return increment + self.sigma * noise.to(increment.device)

    def __call__(self, increment: torch.Tensor, *, seed: SeedLike = None) -> torch.Tensor:
        """The ensemble output :math:`\\bar m` (mean of the members), shape of ``increment``."""
        return self.members(increment, seed=seed).mean(dim=0)

    def hidden_states(
        self, h0: torch.Tensor, increment: torch.Tensor, *, seed: SeedLike = None
    ) -> torch.Tensor:
        r"""The ensemble as a residual stack: :math:`h_l = h_0 + \frac1L\sum_{i<l} m_i`.

        Returns all states :math:`h_0, \dots, h_L`, shape ``(L + 1, *h0.shape)``.
        """
        steps = self.members(torch.broadcast_to(increment, h0.shape), seed=seed) / self.n_members
        return torch.cat([h0[None], h0[None] + steps.cumsum(dim=0)], dim=0)

    def exact_mse(self) -> float:
        r"""Exact per-component MSE :math:`\sigma^2\, \mathbf 1^\top C \mathbf 1 / L^2` of the output."""
        cov = self.correlation.covariance(self.n_members)
        return float(self.sigma**2 * cov.sum() / self.n_members**2)

