"""The figure of ``resflow probe``: the study's four panels of hidden-state metrics against layer, models
overlaid."""

from __future__ import annotations

import numpy as np

from ..probing.probes import ProbeResult
from .plots import new_figure

__all__ = ["plot_probes"]


def plot_probes(results: list[ProbeResult], *, normalise: bool = False):
    """The study's panels: step angle, update angle, norms, per-layer loss against layer, models overlaid."""
    fig, axes = new_figure(4, figsize=(18, 4.4))
    for r in results:
        x = np.arange(r.n_layers + 1) / (r.n_layers if normalise else 1)
        axes[0].plot(x[: r.n_layers], np.degrees(r.mean["step_angle"][: r.n_layers]), "o-", ms=3,
                     label=r.model)
        axes[1].plot(x[: r.n_layers - 1], np.degrees(r.mean["update_angle"][: r.n_layers - 1]), "o-", ms=3,
                     label=r.model)
        axes[2].plot(x, r.mean["norm"][: r.n_layers + 1], "o-", ms=3, label=r.model)
        for lens, style in (("logit_lens", ":"), ("last_layer_lens", "-")):
            if lens in r.losses:
                axes[3].plot(x, r.losses[lens][: r.n_layers + 1], style, marker="o", ms=3,
                             label=f"{r.model} ({lens.replace('_', ' ')})")
    xlabel = "layer l / L" if normalise else "layer l"
    axes[0].set(xlabel=xlabel, ylabel="θ(h_l, h_l+1) (deg)", title="rotation per layer")
    axes[1].set(xlabel=xlabel, ylabel="θ(Δh_l, Δh_l+1) (deg)", title="angle of successive updates",
                ylim=(0, 180))
    axes[1].axhline(90, color="0.6", ls=":", lw=0.8)
    axes[2].set(xlabel=xlabel, ylabel="‖h_l‖", title="norm of the state", yscale="log")
    axes[3].set(xlabel=xlabel, ylabel="next-token loss (nat)", title="per-layer loss (causal LMs)")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    return fig
