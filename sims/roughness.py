"""Roughness as a knob: correlated(rho) and fractional(H) teachers, MSE loss; exponents and the
loss-vs-depth curves predicted by ``resflow theory roughness-correlated`` / ``roughness-fractional``.

The predictions take their two amplitudes and the procedural exponent from the two extreme
teachers of the same run: ``correlated:1`` (tied: ``A_s * l^-alpha_s``) and ``correlated:0``
(independent: gives ``A_r``), then predict every other teacher with no further fitting.
"""

from __future__ import annotations

import dataclasses

import matplotlib.pyplot as plt
import numpy as np

from resflow import laws
from resflow.plotting import plot_loss_vs_depth, plot_training_curves

from .smooth_vs_rough import PRESETS as BASE

PRESETS = {
    "cpu": dataclasses.replace(
        BASE["cpu"], experiment="roughness", seeds=1,
        targets=("correlated:0", "correlated:0.5", "correlated:0.9", "correlated:1", "fractional:0.75"),
    ),
    "paper": dataclasses.replace(
        BASE["paper"], experiment="roughness",
        targets=("correlated:0", "correlated:0.5", "correlated:0.9", "correlated:0.99", "correlated:1",
                 "fractional:0.6", "fractional:0.75", "fractional:0.9"),
    ),
}


def theory_curves(ds) -> dict[str, np.ndarray]:
    """Predicted final loss vs depth for every target, from the extremes' amplitudes (empty if missing)."""
    targets = list(ds["target"].values)
    if "correlated:0" not in targets or "correlated:1" not in targets:
        return {}
    final = ds["final_loss"].isel(scheme=0).mean("seed")
    depth = final["depth"].values.astype(float)
    teacher_depth = float(__import__("json").loads(ds.attrs["config"])["teacher_depth"])
    tied = final.sel(target="correlated:1").values
    slope, intercept = np.polyfit(np.log(depth), np.log(tied), 1)
    alpha_s, a_s = -slope, float(np.exp(intercept))
    rough = final.sel(target="correlated:0").values
    share = (1 - depth / teacher_depth) / depth
    a_r = float(np.sum(share * (rough - a_s * (depth / teacher_depth) * depth ** (-alpha_s))) / np.sum(share**2))
    out = {}
    for target in targets:
        family, _, value = str(target).partition(":")
        kw = dict(ell=depth, L_T=teacher_depth, A_r=a_r, A_s=a_s, alpha_s=alpha_s)
        if family == "correlated":
            out[target] = laws.evaluate("roughness-correlated", rho=float(value), **kw)
        elif family == "fractional":
            out[target] = laws.evaluate("roughness-fractional", H=float(value), **kw)
    return out


def figure(ds, fits):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), constrained_layout=True)
    fig.get_layout_engine().set(rect=(0, 0.03, 1, 0.97))
    plot_loss_vs_depth(ds, fits, axes[0])
    for k, curve in enumerate(theory_curves(ds).values()):
        axes[0].loglog(ds["depth"].values, curve, ":", color=plt.cm.tab10(k % 10), lw=2)
    axes[0].set_title("loss vs depth (dotted: roughness law from the two extremes)")
    plot_training_curves(ds, axes[1])
    return fig
