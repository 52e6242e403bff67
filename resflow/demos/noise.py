"""Demos of the ensemble reading: averaging noisy layers, and the roughness knob between the readings."""

from __future__ import annotations

import time

import numpy as np
import torch
import xarray as xr

from .. import laws
from .._validate import check_int
from ..analysis import colors, new_figure
from ..noise import Equicorrelated, NoisyEnsemble
from .core import DemoResult, finish, register

__all__ = ["ensemble_averaging", "roughness_knob"]


@register
def ensemble_averaging(seed: int = 0, *, rhos: tuple[float, ...] = (0.0, 0.02, 0.1, 0.3), samples: int = 4000,
                       members: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)) -> DemoResult:
    """(c) The mean of l noisy, equally correlated layers: MSE = sigma²(rho + (1 - rho)/l).

    Independent layers (rho = 0) average as 1/l for ever; any correlation leaves a plateau
    sigma² rho once l > (1 - rho)/rho.  Simulated ensembles (``samples`` draws) against the law.
    """
    started = time.perf_counter()
    seed, samples = check_int("seed", seed, minimum=0), check_int("samples", samples, minimum=2)
    gen = torch.Generator().manual_seed(seed)
    ell = np.asarray(members, float)
    simulated = np.array([[float(NoisyEnsemble(n, 1.0, Equicorrelated(rho))(torch.zeros(samples), seed=gen)
                                 .square().mean()) for n in members] for rho in rhos])
    law = np.array([laws.evaluate("ensemble-equicorrelated", L=ell, sigma=1.0, rho=rho) for rho in rhos])
    data = xr.Dataset(
        {"mse": (("rho", "members"), simulated,
                 {"long_name": "simulated MSE of the ensemble mean", "units": "1"}),
         "law": (("rho", "members"), law, {"long_name": "sigma^2 (rho + (1 - rho)/l)", "units": "1"})},
        coords={"rho": ("rho", list(rhos), {"long_name": "correlation between layers"}),
                "members": ("members", ell, {"long_name": "layers (ensemble members) l"})})
    fig, (ax,) = new_figure(1, figsize=(5.5, 4.2))
    for color, rho, sim, exact in zip(colors("viridis", len(rhos)), rhos, simulated, law, strict=True):
        ax.loglog(ell, sim, "o", color=color, ms=4, label=f"rho = {rho:g}")
        ax.loglog(ell, exact, "-", color=color, lw=1)
        if rho > 0:
            ax.axhline(rho, color=color, ls=":", lw=0.8)
    ax.set(xlabel="layers l", ylabel=r"MSE of the mean ($\sigma = 1$)")  # one title: the figure's
    ax.legend(fontsize=8)
    return finish("ensemble_averaging", "Noisy ensemble: loss ∝ 1/l down to the correlation's plateau",
                  fig, data, started, {"rhos": list(rhos), "samples": samples, "members": list(members)},
                  seed)


@register
def roughness_knob(seed: int = 0, *, q: int = 2, rhos: tuple[float, ...] = (0.0, 0.01, 0.05, 0.2, 1.0),
                   hursts: tuple[float, ...] = (0.5, 0.75, 0.9), samples: int = 2000,
                   depths: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)) -> DemoResult:
    """(f) Between the readings: local errors with correlation rho add as
    l^(1-2q) + rho (l^(2-2q) - l^(1-2q)).

    Left: the law for several rho (lines), a Monte Carlo check (points: equicorrelated Gaussian
    local errors of size l^-q), and the crossover depth l* = (1 - rho)/rho beyond which the coherent
    (procedural) part wins.  Right: the local exponent at l = 16 against rho, and against the Hurst
    index H of fractional (long-range correlated) errors, from the derived laws.
    """
    started = time.perf_counter()
    seed, q, samples = (check_int("seed", seed, minimum=0), check_int("q", q, minimum=1),
                        check_int("samples", samples, minimum=2))
    gen = torch.Generator().manual_seed(seed)
    ell = np.asarray(depths, float)
    law = np.array([laws.evaluate("accumulation-equicorrelated", ell=ell, q=float(q), rho=rho)
                    for rho in rhos])
    # the global error is l x (mean of l equicorrelated local errors of size l^-q)
    simulated = np.array([[n**2 * float(NoisyEnsemble(n, float(n) ** -q, Equicorrelated(rho))(
        torch.zeros(samples, dtype=torch.float64), seed=gen).square().mean()) for n in depths]
                          for rho in rhos])
    crossover = np.array([(1 - rho) / rho if rho > 0 else np.inf for rho in rhos])
    rho_grid = np.linspace(0.0, 1.0, 41)
    hurst_grid = np.linspace(0.05, 0.95, 37)
    exponent_rho = np.asarray(laws.exponent("accumulation-equicorrelated", ell=16.0, q=float(q),
                                            rho=rho_grid), float)
    exponent_h = np.asarray(laws.exponent("accumulation-fractional", ell=16.0, q=float(q), H=hurst_grid),
                            float)
    data = xr.Dataset(
        {"loss": (("rho", "depth"), simulated,
                  {"long_name": "squared global error (Monte Carlo)", "units": "1"}),
         "law": (("rho", "depth"), law, {"long_name": "accumulation-equicorrelated law", "units": "1"}),
         "crossover_depth": (("rho",), crossover, {"long_name": "l* = (1 - rho)/rho", "units": "layers"}),
         "exponent_vs_rho": (("rho_grid",), exponent_rho * np.ones_like(rho_grid),
                             {"long_name": "local exponent at l = 16", "units": "1"}),
         "exponent_vs_hurst": (("hurst",), exponent_h * np.ones_like(hurst_grid),
                               {"long_name": "local exponent at l = 16 (fractional errors)", "units": "1"})},
        coords={"rho": list(rhos), "depth": ell, "rho_grid": rho_grid, "hurst": hurst_grid})
    fig, (left, right) = new_figure(2, figsize=(10, 4.2))
    for color, rho, sim, exact, cross in zip(colors("viridis", len(rhos)), rhos, simulated, law, crossover,
                                             strict=True):
        left.loglog(ell, sim, "o", color=color, ms=4)
        left.loglog(ell, exact, "-", color=color, lw=1, label=f"rho = {rho:g}" + (
            f", l* = {cross:.3g}" if np.isfinite(cross) else ""))
        if np.isfinite(cross) and ell[0] <= cross <= ell[-1]:
            left.axvline(cross, color=color, ls=":", lw=0.8)
    left.set(xlabel="depth l", ylabel="squared global error",
             title=rf"local errors of size $\ell^{{-{q}}}$, correlation $\rho$")
    left.legend(fontsize=7)
    right.plot(rho_grid, exponent_rho * np.ones_like(rho_grid), "-", label="vs rho (equicorrelated)")
    right.plot(hurst_grid, exponent_h * np.ones_like(hurst_grid), "--", label="vs H (fractional)")
    marked = np.asarray(laws.exponent("accumulation-fractional", ell=16.0, q=float(q), H=np.asarray(hursts)),
                        float)
    right.plot(hursts, marked * np.ones(len(hursts)), "o", color="C1", ms=4)
    for y, what in ((2 * q - 1, "incoherent"), (2 * q - 2, "coherent")):
        right.axhline(y, color="0.6", lw=0.8, ls=":")
        right.text(0.99, y, what, fontsize=7, ha="right", va="bottom", color="0.4")
    right.set(xlabel="rho or H", ylabel="local exponent at l = 16", title="the roughness knob")
    right.legend(fontsize=8)
    config = {"q": q, "rhos": list(rhos), "hursts": list(hursts), "samples": samples, "depths": list(depths)}
    return finish("roughness_knob", "Roughness: from incoherent (rough) to coherent (smooth) accumulation",
                  fig, data, started, config, seed)
