"""Euler vs midpoint (RK2) students on the rough and the smooth teacher, MSE loss."""

from __future__ import annotations

import dataclasses

from resflow.experiments import Experiment

from .smooth_vs_rough import PRESETS as BASE
from .smooth_vs_rough import figure

PRESETS = {
    # the main job's routes, inits and lengths at 12k steps (its budget before verdict v3)
    "cpu": dataclasses.replace(BASE["cpu"], experiment="rk2", schemes=("euler", "midpoint"), depths=(2, 4, 8),
                               replicates=2,
                               train=dataclasses.replace(BASE["cpu"].train, steps=12_000, eval_every=1000,
                                                         checkpoint_every=2000)),
    # the study's RK2 runs: midpoint blocks of depths 3, 6, 8, 12, 16, 24 (80k steps, as its MSE runs)
    "paper": dataclasses.replace(BASE["paper"], experiment="rk2", schemes=("euler", "midpoint"),
                                 depths=(3, 6, 8, 12, 16, 24)),
}

EXPERIMENT = Experiment(
    name="rk2",
    summary="Euler and midpoint (RK2, one MLP per stage) students of both teachers: a higher-order block "
            "steepens the procedural law and does nothing against a rough target.",
    presets=PRESETS, figure=figure,
    costs={"cpu": "45 min 37 s on one thread, the other core busy (docs/results.md)"},
)
