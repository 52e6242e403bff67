"""Demos of the flow reading: a stack converging to its ODE, and how local errors accumulate."""

from __future__ import annotations

import time

import numpy as np
import torch
import xarray as xr

from .. import laws
from .._validate import check_int
from ..analysis import colors, new_figure
from ..dynamics import MLPField, convergence_study
from ..loglog import slopes
from .core import DemoResult, finish, register

__all__ = ["stack_to_ode", "error_accumulation"]


@register
def stack_to_ode(seed: int = 0, *, width: int = 8, depths: tuple[int, ...] = (2, 4, 8, 16, 32, 64, 128),
                 schemes: tuple[str, ...] = ("euler", "midpoint", "rk4")) -> DemoResult:
    """(a) A tied residual stack converges to its ODE as depth grows: error ~ depth^-p for a scheme of
    order p.

    The block is a smooth MLP (softplus², float64) so every scheme reaches its order; the reference
    is torchdiffeq's dopri5 at tolerance 1e-13.
    """
    started = time.perf_counter()
    seed, width = check_int("seed", seed, minimum=0), check_int("width", width, minimum=1)
    field = MLPField(width, seed=seed, activation="softplus2", dtype=torch.float64)
    h0 = torch.randn(32, width, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    data = convergence_study(field, h0, depths=depths, schemes=schemes)
    fig, (ax,) = new_figure(1, figsize=(5.5, 4.2))
    depth = data["depth"].values
    for color, scheme in zip(colors("viridis", len(schemes)), schemes, strict=True):
        err = data["error"].sel(scheme=scheme).values
        order = float(data["empirical_order"].sel(scheme=scheme))
        ax.loglog(depth, err, "o-", color=color, ms=4,
                  label=f"{scheme}: order {int(data['declared_order'].sel(scheme=scheme))}, "
                        f"fitted {order:.2f}")
    ax.set(xlabel="depth L (step 1/L)", ylabel="error against the ODE")  # one title: the figure's
    ax.legend(fontsize=8)
    return finish("stack_to_ode", "A residual stack is an ODE solver: error ∝ L^-p", fig, data, started,
                  {"width": width, "depths": list(depths), "schemes": list(schemes)}, seed)


@register
def error_accumulation(seed: int = 0, *, q: int = 2, dim: int = 16, samples: int = 400,
                       depths: tuple[int, ...] = (2, 4, 8, 16, 32, 64, 128, 256)) -> DemoResult:
    """(b) Local errors of size l^-q add coherently (loss ~ l^(2-2q)) or incoherently (l^(1-2q)).

    With Euler's q = 2: a smooth, procedural flow makes the same error at every layer (coherent,
    loss ~ l^-2); errors in independent directions partly cancel (incoherent, l^-3).  Monte Carlo
    of ``samples`` random error directions in ``dim`` dimensions against the derived laws.
    """
    started = time.perf_counter()
    seed, q = check_int("seed", seed, minimum=0), check_int("q", q, minimum=1)
    samples, dim = check_int("samples", samples, minimum=2), check_int("dim", dim, minimum=1)
    depths = tuple(check_int("depths", d, minimum=1) for d in depths)
    rng = np.random.default_rng(seed)
    ell = np.asarray(depths, float)
    measured = {"coherent": [], "incoherent": []}
    for n in depths:
        directions = rng.normal(size=(samples, n, dim))
        directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
        local = n ** (-q)
        measured["incoherent"].append(np.mean(np.sum(directions * local, axis=1) ** 2) * dim)
        measured["coherent"].append(np.mean(np.sum(directions[:, :1] * local * n, axis=1) ** 2) * dim)
    law_values = {k: laws.evaluate(f"accumulation-{k}", ell=ell, q=float(q)) for k in measured}
    data = xr.Dataset(
        {"loss": (("accumulation", "depth"), np.array([measured[k] for k in measured]),
                  {"long_name": "squared global error (Monte Carlo)", "units": "1"}),
         "law": (("accumulation", "depth"), np.array([law_values[k] for k in measured]),
                 {"long_name": "derived law (resflow theory accumulation-*)", "units": "1"})},
        coords={"accumulation": list(measured), "depth": ("depth", ell, {"long_name": "depth l"})})
    fig, (ax,) = new_figure(1, figsize=(5.5, 4.2))
    for color, kind in zip(colors("tab10", 2), measured, strict=True):
        slope = float(slopes(ell, np.asarray(measured[kind])))
        ax.loglog(ell, measured[kind], "o", color=color, label=f"{kind}: fitted l^-{slope:.2f}")
        ax.loglog(ell, law_values[kind], "-", color=color, lw=1,
                  label=f"law l^-{float(laws.exponent(f'accumulation-{kind}', ell=1.0, q=float(q))):g}")
    ax.set(xlabel="depth l", ylabel="squared global error", title=rf"local errors of size $\ell^{{-{q}}}$")
    ax.legend(fontsize=8)
    return finish("error_accumulation", "Coherent vs incoherent accumulation of local errors", fig, data,
                  started, {"q": q, "dim": dim, "samples": samples, "depths": list(depths)}, seed)
