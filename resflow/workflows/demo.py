"""Demo of the dynamics core: stacks converge to their ODE, ensembles average, teachers differ.

:func:`run_flow_demo` is what ``resflow demo overview`` calls (also ``python -m resflow.workflows.demo``).
It writes a Dataset (``demo.nc``), a figure (``demo.png``) and ``provenance.json`` into a new
directory ``work/demo-overview-<time>`` of the store ``out``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import xarray as xr

from .._atomic import atomic_write
from ..dynamics.convergence import convergence_study
from ..dynamics.fields import MLPField
from ..dynamics.tableau import TABLEAUX
from ..noise.ensemble import NoisyEnsemble
from ..presenting.plots import plot_flow_demo, save_figure
from ..probing.metrics import update_angles
from ..provenance import provenance
from ..store import Store
from ..training.teacher import Teacher

__all__ = ["FlowDemoConfig", "FlowDemoResult", "flow_demo_dataset", "run_flow_demo"]


@dataclass(frozen=True)
class FlowDemoConfig:
    width: int = 16
    batch: int = 64
    depths: tuple[int, ...] = (4, 8, 16, 32, 64, 128)
    schemes: tuple[str, ...] = tuple(TABLEAUX)
    members: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
    noises: tuple[str, ...] = ("iid", "correlated:0.1", "fractional:0.25", "fractional:0.75")
    sigma: float = 1.0
    ensemble_samples: int = 4000
    teachers: tuple[str, ...] = ("independent", "tied", "correlated:0.9", "fractional:0.75")
    teacher_width: int = 32
    teacher_depth: int = 128
    teacher_batch: int = 512
    seed: int = 0


def flow_demo_dataset(config: FlowDemoConfig) -> xr.Dataset:
    """Compute the demo's three studies as one Dataset (nothing is written)."""
    gen = torch.Generator().manual_seed(config.seed)
    h0 = torch.randn(config.batch, config.width, generator=gen, dtype=torch.float64)
    studies = []
    for activation in ("relu2", "softplus2"):
        field = MLPField(config.width, seed=config.seed, activation=activation, dtype=torch.float64)
        studies.append(convergence_study(field, h0, depths=config.depths, schemes=config.schemes))
    conv = xr.concat(studies, dim=xr.DataArray(["relu2", "softplus2"], dims="field", name="field"))
    conv["declared_order"] = conv["declared_order"].isel(field=0, drop=True)

    mse = np.empty((len(config.noises), len(config.members)))
    exact = np.empty_like(mse)
    for i, noise in enumerate(config.noises):
        for j, n in enumerate(config.members):
            ens = NoisyEnsemble(n, config.sigma, noise)
            out = ens(torch.zeros(config.ensemble_samples), seed=gen)
            mse[i, j] = float(out.square().mean())
            exact[i, j] = ens.exact_mse()

    angles = []
    for spec in config.teachers:
        teacher = Teacher(spec, width=config.teacher_width, depth=config.teacher_depth, seed=config.seed)
        with torch.no_grad():
            states = teacher.hidden_states(teacher.sample_inputs(config.teacher_batch, seed=gen))
        angles.append(update_angles(states).mean(dim=-1).numpy())

    return conv.assign(
        ensemble_mse=(("noise", "members"), mse,
                      {"long_name": "simulated MSE of the ensemble mean", "units": "1"}),
        ensemble_mse_exact=(("noise", "members"), exact,
                            {"long_name": "exact MSE sigma^2 1'C1/L^2", "units": "1"}),
        update_angle=(("teacher", "layer"), np.stack(angles), {
            "long_name": "mean angle between successive updates", "units": "rad"}),
    ).assign_coords(
        noise=("noise", list(config.noises), {"long_name": "correlation of member noise"}),
        members=("members", list(config.members), {"long_name": "ensemble members L"}),
        teacher=("teacher", list(config.teachers), {"long_name": "teacher family"}),
        layer=("layer", np.arange(config.teacher_depth - 1), {"long_name": "layer index l"}),
    )


@dataclass(frozen=True, kw_only=True)
class FlowDemoResult:
    """The demo's Dataset and the files written."""

    dataset: xr.Dataset
    work_dir: Path
    figure: Path


def run_flow_demo(out: Path | str = Path("results"),
                  config: FlowDemoConfig = FlowDemoConfig()) -> FlowDemoResult:
    """Run the demo and write ``demo.nc``, ``demo.png`` and ``provenance.json`` into a new work directory
    of the store ``out`` (created if missing)."""
    # first: a bad --out fails before the work
    run_dir = Store.open(out, create=True).work_dir("demo-overview")
    ds = flow_demo_dataset(config)
    prov = provenance(asdict(config), seed=config.seed, experiment="flow-demo")
    ds.attrs.update(prov)
    atomic_write(run_dir / "demo.nc", lambda tmp: ds.to_netcdf(tmp, engine="scipy"))
    figure = save_figure(plot_flow_demo(ds), run_dir / "demo.png", prov)
    atomic_write(run_dir / "provenance.json", json.dumps(prov, indent=2) + "\n")
    return FlowDemoResult(dataset=ds, work_dir=run_dir, figure=figure)


if __name__ == "__main__":  # pragma: no cover
    print(run_flow_demo().work_dir)
