"""The teacher's depth as an axis: the main job's students against teachers of depth 32, 64 and 128.

``resflow sweep teacher-depth --preset cpu --out STORE`` trains one cell per teacher depth and replicate;
``resflow report STORE --axis teacher_depth`` gives plain α, law α (the finite-teacher factor F divided out)
and F's own shift of plain α per teacher depth: if F is the whole story, law α stays put while plain α
moves.
"""

from __future__ import annotations

from resflow.experiments import Experiment

from .smooth_vs_rough import axis_presets, figure

EXPERIMENT = Experiment(
    name="teacher-depth",
    summary="The teacher's depth as an axis (32, 64, 128): the finite-teacher factor F = 1 - l/L_T tested "
            "directly, predicted against measured.",
    presets=axis_presets("teacher-depth"), figure=figure,
    costs={"cpu": "600 s on 2 cores (as a smooth-vs-rough sweep, docs/results.md)"},
    seconds={"cpu": 600.0},
    # the paper preset's students reach depth 48
    grids={"cpu": {"teacher_depth": (32, 64, 128)}, "long": {"teacher_depth": (32, 64, 128)},
           "paper": {"teacher_depth": (128, 256, 512)}},
)
