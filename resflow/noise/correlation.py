r"""Correlation of a quantity along depth: noise objects shared by ensembles and teachers.

A :class:`DepthCorrelation` describes :math:`n` zero-mean, unit-variance variables indexed by
depth (ensemble members, or one weight entry across the layers of a teacher):

* :class:`Equicorrelated` (:math:`\rho`): :math:`\mathrm{Corr}(z_i, z_j) = \rho` for
  :math:`i \ne j`, sampled as :math:`z_i = \sqrt\rho\, s + \sqrt{1-\rho}\, e_i` with one shared
  draw :math:`s` and independent :math:`e_i`.  :math:`\rho = 0` is i.i.d. (a rough,
  random-walk-like target); :math:`\rho = 1` is one shared value (tied weights: a smooth ODE).
* :class:`Fractional` (:math:`H`): fractional Gaussian noise along depth
  (:mod:`resflow.fgn`); :math:`H = 1/2` is i.i.d., :math:`H \to 1` smooth.
* :class:`Grouped` (:math:`K, \rho`): :math:`K` contiguous groups of layers, equicorrelated with
  :math:`\rho` within a group and independent between groups: the "functional groups" picture,
  :math:`K` distinct maps each used by a run of similar layers (:math:`\rho = 1`: tied within).

Both expose the exact covariance matrix, used by the theory and by the tests.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch

from .._random import SeedLike, as_generator, unit_draw
from .._validate import check_choice, check_int, check_real
from ..errors import ConfigError, IncompatibleOptionsError, UnknownNameError, closest
from .fgn import FGN_METHODS, fgn_covariance, sample_fgn

__all__ = ["DepthCorrelation", "Equicorrelated", "Fractional", "Grouped", "group_of", "parse_correlation"]


class DepthCorrelation(ABC):
    """Correlation structure of ``n`` unit-variance variables along depth."""

    @property
    @abstractmethod
    def label(self) -> str:
        """Short spec string, parseable by :func:`parse_correlation`."""

    @abstractmethod
    def covariance(self, n: int) -> torch.Tensor:
        """Exact ``(n, n)`` covariance (= correlation) matrix, float64."""

    @abstractmethod
    def sample(
        self,
        n: int,
        size: tuple[int, ...] = (),
        *,
        seed: SeedLike = None,
        base: str = "gaussian",
        dtype: torch.dtype = torch.float64,
    ) -> torch.Tensor:
        """Draw ``prod(size)`` independent sequences; returns shape ``(n, *size)`` (depth first).

        ``base`` is the marginal family of the independent draws: ``"gaussian"`` or
        ``"uniform"`` (on :math:`(-\\sqrt3, \\sqrt3)`, PyTorch's default-init shape).
        """


@dataclass(frozen=True)
class Equicorrelated(DepthCorrelation):
    r"""Equicorrelated variables: :math:`z_i = \sqrt\rho\, s + \sqrt{1-\rho}\, e_i`, :math:`0 \le \rho \le 1`.

    Every :math:`z_i` has mean 0 and variance 1 for every :math:`\rho`; with a Gaussian base the
    marginal distribution is exactly :math:`N(0, 1)` for every :math:`\rho`.  With a uniform
    base, :math:`\rho \in \{0, 1\}` keep the uniform marginal and intermediate :math:`\rho` keep
    its mean and variance.  The shared draw is taken first, then the own draws, for every
    :math:`\rho`: the same seed gives bit-identical own draws for :math:`\rho = 0` and the same
    shared draw for :math:`\rho = 1`.
    """

    rho: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "rho", check_real("rho", self.rho, low=0.0, high=1.0, hint="0 is i.i.d., 1 is tied.")
        )

    @property
    def label(self) -> str:
        return f"correlated:{self.rho:g}"

    def covariance(self, n: int) -> torch.Tensor:
        n = check_int("n", n, minimum=1)
        cov = torch.full((n, n), self.rho, dtype=torch.float64)
        cov.fill_diagonal_(1.0)
        return cov

    def sample(self, n, size=(), *, seed=None, base="gaussian", dtype=torch.float64):
        n = check_int("n", n, minimum=1)
        base = check_choice("base", base, ("gaussian", "uniform"))
        gen = as_generator(seed)
        shared = unit_draw(tuple(size), gen, base, dtype)
        own = unit_draw((n, *size), gen, base, dtype)
        if self.rho == 0.0:
            return own
        if self.rho == 1.0:
            return shared.expand(n, *size).clone()
        return self.rho**0.5 * shared + (1.0 - self.rho) ** 0.5 * own


@dataclass(frozen=True)
class Fractional(DepthCorrelation):
    r"""Fractional Gaussian noise along depth with Hurst index :math:`0 < H < 1`.

    Gaussian by construction, so ``base="uniform"`` is refused.
    """

    hurst: float = 0.5
    method: str = "davies-harte"

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "hurst",
            check_real("hurst", self.hurst, low=0.0, high=1.0, low_open=True, high_open=True,
                       hint="H = 0.5 is i.i.d.; H -> 1 is smooth."),
        )
        check_choice("method", self.method, FGN_METHODS)

    @property
    def label(self) -> str:
        return f"fractional:{self.hurst:g}"

    def covariance(self, n: int) -> torch.Tensor:
        return fgn_covariance(n, self.hurst)

    def sample(self, n, size=(), *, seed=None, base="gaussian", dtype=torch.float64):
        if base != "gaussian":
            raise IncompatibleOptionsError(
                f"fractional noise is Gaussian by construction; base must be 'gaussian', got {base!r}. "
                "For a teacher, use init='gaussian' with the fractional family."
            )
        z = sample_fgn(n, self.hurst, tuple(size), seed=seed, method=self.method, dtype=dtype)
        return torch.movedim(z, -1, 0)


def group_of(n: int, groups: int) -> torch.Tensor:
    """The group of each of ``n`` layers split into ``groups`` contiguous runs of near-equal length
    (layer ``i`` is in group ``floor(i * groups / n)``)."""
    n = check_int("n", n, minimum=1)
    groups = check_int("groups", groups, minimum=1)
    if groups > n:
        raise ConfigError(f"groups ({groups}) cannot exceed the number of layers ({n}).")
    return torch.arange(n) * groups // n


@dataclass(frozen=True)
class Grouped(DepthCorrelation):
    r""":math:`K` contiguous groups (:func:`group_of`), equicorrelated with :math:`\rho` within a group
    and independent between groups: :math:`z_i = \sqrt\rho\, s_{g(i)} + \sqrt{1-\rho}\, e_i`.

    ``Grouped(1, rho)`` is ``Equicorrelated(rho)`` and draws the same values from the same seed;
    ``Grouped(n, rho)`` on ``n`` layers is i.i.d.  The shared draws (one per group) are taken first,
    then the own draws, as in :class:`Equicorrelated`.
    """

    groups: int = 1
    rho: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", check_int("groups", self.groups, minimum=1))
        object.__setattr__(
            self, "rho", check_real("rho", self.rho, low=0.0, high=1.0, hint="1 is tied within each group.")
        )

    @property
    def label(self) -> str:
        return f"grouped:{self.groups}" + ("" if self.rho == 1.0 else f":{self.rho:g}")

    def covariance(self, n: int) -> torch.Tensor:
        g = group_of(n, self.groups)
        same = (g[:, None] == g[None, :]).to(torch.float64)
        cov = self.rho * same
        cov.fill_diagonal_(1.0)
        return cov

    def sample(self, n, size=(), *, seed=None, base="gaussian", dtype=torch.float64):
        g = group_of(n, self.groups)
        base = check_choice("base", base, ("gaussian", "uniform"))
        gen = as_generator(seed)
        shared = unit_draw((self.groups, *size), gen, base, dtype)
        own = unit_draw((n, *size), gen, base, dtype)
        if self.rho == 0.0:
            return own
        if self.rho == 1.0:
            return shared[g].clone()
        return self.rho**0.5 * shared[g] + (1.0 - self.rho) ** 0.5 * own


def parse_correlation(spec: str) -> DepthCorrelation:
    """Parse ``"iid"``, ``"independent"``, ``"tied"``, ``"correlated:RHO"``, ``"fractional:H"``,
    ``"grouped:K"`` (tied within each of K groups) or ``"grouped:K:RHO"``."""
    if isinstance(spec, DepthCorrelation):
        return spec
    if not isinstance(spec, str):
        raise ConfigError(f"correlation must be a string such as 'correlated:0.9'; got {spec!r}.")
    name, _, arg = spec.partition(":")
    if name == "grouped" and arg:
        k, _, r = arg.partition(":")
        try:
            groups, rho = int(k), float(r) if r else 1.0
        except ValueError as exc:
            raise ConfigError(f"correlation {spec!r}: use grouped:K or grouped:K:RHO "
                              "with K an integer.") from exc
        return Grouped(groups, rho)  # names groups or rho when out of range
    if name in ("iid", "independent") and not arg:
        return Equicorrelated(0.0)
    if name == "tied" and not arg:
        return Equicorrelated(1.0)
    if name in ("correlated", "equicorrelated", "fractional") and arg:
        try:
            value = float(arg)
        except ValueError as exc:
            raise ConfigError(f"correlation {spec!r}: {arg!r} is not a number.") from exc
        return Equicorrelated(value) if name != "fractional" else Fractional(value)
    close = closest(name, ("iid", "independent", "tied", "correlated", "fractional", "grouped"))
    raise UnknownNameError(
        f"unknown correlation {spec!r}"
        f"{' (did you mean ' + ' or '.join(map(repr, close)) + '?)' if close else ''}; "
        "use 'iid', 'independent', 'tied', 'correlated:RHO' "
        "(0 <= RHO <= 1), 'fractional:H' (0 < H < 1) or 'grouped:K[:RHO]'."
    )
