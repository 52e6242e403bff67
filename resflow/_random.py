"""Explicit randomness helpers (private module): no global seeding anywhere in resflow."""

from __future__ import annotations

import math
import numbers

import torch

from .errors import ConfigError

SeedLike = int | torch.Generator | None

UNIFORM_HALF_WIDTH = math.sqrt(3.0)  # U(-sqrt 3, sqrt 3) has unit variance


def as_generator(seed: SeedLike, *, name: str = "seed") -> torch.Generator:
    """Return a CPU ``torch.Generator``.

    ``int`` seeds a new generator; a generator is used as is (and advanced); ``None`` seeds a new
    generator from the operating system's entropy (not reproducible, never touches global state).
    """
    if isinstance(seed, torch.Generator):
        return seed
    gen = torch.Generator(device="cpu")
    if seed is None:
        gen.seed()
        return gen
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ConfigError(
            f"{name} must be a non-negative int or a torch.Generator; got {seed!r} ({type(seed).__name__})."
        )
    gen.manual_seed(int(seed))
    return gen


def unit_draw(
    shape: tuple[int, ...], generator: torch.Generator, base: str, dtype: torch.dtype
) -> torch.Tensor:
    """Independent zero-mean, unit-variance draws of ``shape`` on the CPU.

    ``base="gaussian"``: standard normal; ``base="uniform"``: uniform on ``(-sqrt 3, sqrt 3)``.
    """
    if base == "gaussian":
        return torch.randn(shape, generator=generator, dtype=dtype)
    if base == "uniform":
        u = torch.rand(shape, generator=generator, dtype=dtype)
        return (2.0 * u - 1.0) * UNIFORM_HALF_WIDTH
    raise ConfigError(f"base must be 'gaussian' or 'uniform'; got {base!r}.")
