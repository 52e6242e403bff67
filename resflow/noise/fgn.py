r"""Fractional Gaussian noise (fGn) and fractional Brownian motion (fBm) along depth.

fGn with Hurst index :math:`H \in (0, 1)` is the stationary Gaussian sequence of unit variance with
autocovariance

.. math:: \gamma_H(k) = \tfrac12\left(|k+1|^{2H} - 2|k|^{2H} + |k-1|^{2H}\right),

the increments of fBm :math:`B_H` on a unit grid.  :math:`H = 1/2` is white noise; :math:`H > 1/2`
positively correlated (smooth in the limit :math:`H \to 1`); :math:`H < 1/2` anti-correlated.
The sum of :math:`n` consecutive values has variance :math:`n^{2H}`.

Samplers are exact: Davies--Harte circulant embedding (Davies & Harte, Biometrika 74 (1987)
95-101; Dietrich & Newsam, SIAM J. Sci. Comput. 18 (1997) 1088-1107; the embedding is
non-negative definite for every :math:`H`, Craigmile, J. Time Ser. Anal. 24 (2003) 505-511) or a
Cholesky factor of the Toeplitz covariance.  Randomness comes from an explicit generator.
"""

from __future__ import annotations

import torch

from .._random import SeedLike, as_generator
from .._validate import check_choice, check_int, check_real
from ..errors import ConfigError, IncompatibleOptionsError

__all__ = [
    "fgn_autocovariance",
    "fgn_covariance",
    "sample_fgn",
    "FractionalBrownianPath",
    "FGN_METHODS",
]

FGN_METHODS = ("davies-harte", "cholesky")
_NEGATIVE_EIGENVALUE_TOL = 1e-10  # relative; round-off in the FFT of the embedding


def _check_hurst(hurst: float) -> float:
    return check_real(
        "hurst", hurst, low=0.0, high=1.0, low_open=True, high_open=True,
        hint="H = 0.5 is white noise; H -> 1 is smooth.",
    )


def fgn_autocovariance(hurst: float, lags: torch.Tensor | int) -> torch.Tensor:
    r"""Exact autocovariance :math:`\gamma_H(k)` of unit-variance fGn, float64.

    ``lags`` is an integer tensor of lags, or an int ``n`` meaning lags ``0, ..., n - 1``.
    """
    hurst = _check_hurst(hurst)
    if isinstance(lags, int) and not isinstance(lags, bool):
        lags = torch.arange(check_int("lags", lags, minimum=1))
    k = lags.to(torch.float64).abs()
    two_h = 2.0 * hurst
    return 0.5 * ((k + 1).pow(two_h) - 2 * k.pow(two_h) + (k - 1).abs().pow(two_h))


def fgn_covariance(n: int, hurst: float) -> torch.Tensor:
    """The ``(n, n)`` Toeplitz covariance matrix of ``n`` consecutive fGn values, float64."""
    n = check_int("n", n, minimum=1)
    idx = torch.arange(n)
    return fgn_autocovariance(hurst, (idx[:, None] - idx[None, :]).abs())


def sample_fgn(
    n: int,
    hurst: float,
    size: tuple[int, ...] = (),
    *,
    seed: SeedLike = None,
    method: str = "davies-harte",
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Draw independent unit-variance fGn sequences of length ``n``.

    Returns
    -------
    torch.Tensor, shape (*size, n)
        Each row along the last axis is one exact fGn sample (computed in float64 on the CPU,
        then cast to ``dtype``).
    """
    n = check_int("n", n, minimum=1)
    hurst = _check_hurst(hurst)
    method = check_choice("method", method, FGN_METHODS)
    size = tuple(check_int("size", s, minimum=1) for s in size)
    gen = as_generator(seed)
    if method == "cholesky":
        chol = torch.linalg.cholesky(fgn_covariance(n, hurst))
        z = torch.randn(size + (n,), generator=gen, dtype=torch.float64)
        return (z @ chol.T).to(dtype)
    if n == 1:
        return torch.randn(size + (1,), generator=gen, dtype=torch.float64).to(dtype)
    # Davies-Harte: embed the Toeplitz covariance in a circulant of size m = 2(n - 1).
    gamma = fgn_autocovariance(hurst, n)
    row = torch.cat([gamma, gamma[1:-1].flip(0)])
    m = row.numel()
    eig = torch.fft.fft(row).real
    if eig.min() < -_NEGATIVE_EIGENVALUE_TOL * eig.abs().max():  # pragma: no cover - never for fGn
        raise IncompatibleOptionsError(
            f"the circulant embedding has a negative eigenvalue ({eig.min():.3g}) for H={hurst}; "
            "use method='cholesky'."
        )
    scale = torch.sqrt(eig.clamp_min(0.0) / m)
    noise = torch.complex(
        torch.randn(size + (m,), generator=gen, dtype=torch.float64),
        torch.randn(size + (m,), generator=gen, dtype=torch.float64),
    )
    return torch.fft.fft(scale * noise).real[..., :n].to(dtype)


class FractionalBrownianPath:
    r"""One fixed sample of fBm :math:`B_H` on :math:`[0, 1]`, queried consistently at several resolutions.

    The path is drawn once on a fine grid of ``resolution`` equal steps; :meth:`values` and
    :meth:`increments` at ``n`` points read *the same path* on the coarser grid ``k/n`` (``n`` must
    divide ``resolution``).  So teachers or noise at depths 16, 32 and 64 can share one underlying
    path, as refinements of one another.

    Parameters
    ----------
    hurst : float
        :math:`H \in (0, 1)`.
    resolution : int
        Number of fine steps :math:`N`.
    size : tuple of int
        Independent paths drawn at once (e.g. one per weight entry).
    seed : int or torch.Generator or None
    method : {"davies-harte", "cholesky"}
    """

    def __init__(
        self,
        hurst: float,
        resolution: int,
        size: tuple[int, ...] = (),
        *,
        seed: SeedLike = None,
        method: str = "davies-harte",
    ) -> None:
        self.hurst = _check_hurst(hurst)
        self.resolution = check_int("resolution", resolution, minimum=1)
        steps = sample_fgn(self.resolution, self.hurst, size, seed=seed, method=method)
        steps = steps * self.resolution ** (-self.hurst)  # increments over intervals of length 1/N
        zero = torch.zeros(steps.shape[:-1] + (1,), dtype=steps.dtype)
        self._values = torch.cat([zero, steps.cumsum(-1)], dim=-1)

    def _stride(self, n: int) -> int:
        n = check_int("n", n, minimum=1)
        if self.resolution % n:
            raise ConfigError(
                f"n={n} does not divide the path's resolution {self.resolution}; query at a divisor "
                f"of {self.resolution}, or build the path with a resolution that is a multiple of {n}."
            )
        return self.resolution // n

    def values(self, n: int) -> torch.Tensor:
        r""":math:`B_H(k/n)` for :math:`k = 0, \dots, n`; shape ``(*size, n + 1)``, float64."""
        return self._values[..., :: self._stride(n)]

    def increments(self, n: int, *, normalise: bool = True) -> torch.Tensor:
        r"""Increments :math:`B_H((k+1)/n) - B_H(k/n)`, shape ``(*size, n)``.

        With ``normalise`` they are multiplied by :math:`n^H`, which makes them unit-variance fGn
        at every resolution (self-similarity of fBm).
        """
        inc = torch.diff(self.values(n), dim=-1)
        return inc * n**self.hurst if normalise else inc
