"""Euler vs midpoint (RK2) students on the rough and the smooth teacher, MSE loss."""

from __future__ import annotations

import dataclasses

from resflow.experiments import ExperimentConfig
from resflow.plotting import plot_experiment

from .smooth_vs_rough import PRESETS as BASE

PRESETS = {
    "cpu": dataclasses.replace(BASE["cpu"], experiment="rk2", schemes=("euler", "midpoint"), depths=(2, 4, 8),
                               seeds=2),
    "paper": dataclasses.replace(BASE["paper"], experiment="rk2", schemes=("euler", "midpoint"),
                                 depths=(3, 6, 12, 24)),
}
assert all(isinstance(p, ExperimentConfig) for p in PRESETS.values())


def figure(ds, fits):
    return plot_experiment(ds, fits)
