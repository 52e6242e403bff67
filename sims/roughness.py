"""Roughness as a knob: correlated(rho) and fractional(H) teachers, MSE loss; exponent and crossover
against the theory (``resflow theory roughness-correlated``)."""

from __future__ import annotations

import dataclasses

import matplotlib.pyplot as plt

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


def figure(ds, fits):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), constrained_layout=True)
    fig.get_layout_engine().set(rect=(0, 0.03, 1, 0.97))
    plot_loss_vs_depth(ds, fits, axes[0])
    plot_training_curves(ds, axes[1])
    return fig
