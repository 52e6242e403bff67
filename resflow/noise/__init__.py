"""Noise along depth: fractional Gaussian noise, correlation objects, noisy ensembles.

=================  ==========================================================================
module             what it holds
=================  ==========================================================================
``fgn``            fractional Gaussian noise (exact samplers), fractional Brownian paths
``correlation``    :class:`DepthCorrelation` objects (equicorrelated, fractional, grouped) shared by
                   ensembles and teachers
``ensemble``       :class:`NoisyEnsemble`: a residual network read as an average of noisy layers
=================  ==========================================================================

Depends on torch only; independent of :mod:`resflow.dynamics`.
"""

from .correlation import DepthCorrelation, Equicorrelated, Fractional, Grouped, group_of, parse_correlation
from .ensemble import NoisyEnsemble
from .fgn import FGN_METHODS, FractionalBrownianPath, fgn_autocovariance, fgn_covariance, sample_fgn

__all__ = [
    "DepthCorrelation", "Equicorrelated", "Fractional", "Grouped", "group_of", "parse_correlation",
    "NoisyEnsemble",
    "FGN_METHODS", "FractionalBrownianPath", "fgn_autocovariance", "fgn_covariance", "sample_fgn",
]
