"""Figures.  Every plot function takes Datasets; :func:`save_figure` stamps provenance on the file."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless by default; a notebook user can switch backends before importing
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

__all__ = ["plot_flow_demo", "save_figure"]


def save_figure(fig: matplotlib.figure.Figure, path: Path, provenance: dict[str, str]) -> Path:
    """Save ``fig`` with a provenance footer and the full provenance in the PNG's text chunks."""
    footer = (
        f"resflow {provenance.get('resflow_version', '?')} | commit {provenance.get('git_commit', '?')[:12]} | "
        f"torch {provenance.get('torch_version', '?')} | seed {provenance.get('seed', '?')} | "
        f"{provenance.get('created', '')}"
    )
    fig.text(0.01, 0.005, footer, fontsize=6, color="0.4", ha="left", va="bottom")
    metadata = {"Software": "resflow", "Description": json.dumps(provenance, sort_keys=True)}
    fig.savefig(path, dpi=130, metadata=metadata)
    plt.close(fig)
    return path


def plot_flow_demo(ds: xr.Dataset) -> matplotlib.figure.Figure:
    """Three panels: stack-vs-ODE convergence, ensemble MSE vs members, teacher update angles."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), constrained_layout=True)
    fig.get_layout_engine().set(rect=(0, 0.03, 1, 0.97))

    ax = axes[0]
    conv = ds["error"].sel(field="relu2")
    colors = plt.cm.viridis(np.linspace(0, 0.9, conv.sizes["scheme"]))
    depth = ds["depth"].values
    for color, scheme in zip(colors, conv["scheme"].values, strict=True):
        fits = ds["empirical_order"].sel(scheme=scheme)
        ax.loglog(depth, conv.sel(scheme=scheme), "o-", color=color, ms=3,
                  label=f"{scheme}: p={int(ds['declared_order'].sel(scheme=scheme))}, "
                        f"fit {float(fits.sel(field='relu2')):.2f} (smooth {float(fits.sel(field='softplus2')):.2f})")
    for p in (1, 2, 3, 4):
        ax.loglog(depth, 0.5 * (depth / depth[0]) ** (-p) * float(conv.max()), ":", color="0.7", lw=0.8)
    ax.set(xlabel="depth L (step T/L)", ylabel="relative error vs ODE",
           title="tied stack → its ODE (relu² block; smooth: softplus²)")
    ax.legend(fontsize=6.5, loc="lower left")

    ax = axes[1]
    for noise in ds["noise"].values:
        line, = ax.loglog(ds["members"], ds["ensemble_mse"].sel(noise=noise), "o", ms=4, label=f"{noise}")
        ax.loglog(ds["members"], ds["ensemble_mse_exact"].sel(noise=noise), "-", color=line.get_color(), lw=1)
    ax.set(xlabel="members L", ylabel="MSE of the ensemble mean",
           title="noisy ensemble: points simulated, lines exact")
    ax.legend(fontsize=7)

    ax = axes[2]
    for teacher in ds["teacher"].values:
        ax.plot(ds["layer"], np.degrees(ds["update_angle"].sel(teacher=teacher)), label=str(teacher), lw=1.2)
    ax.axhline(90, color="0.6", ls=":", lw=0.8)
    ax.set(xlabel="layer l", ylabel="mean angle between Δh_l and Δh_{l+1} (deg)", ylim=(0, 100),
           title="teachers: angle of successive updates")
    ax.legend(fontsize=7)
    return fig
