"""The student's hidden width as an axis: the main job's students of both teachers at widths 32, 64, 128.

``resflow sweep student-width --preset cpu --out STORE`` trains one cell per width and replicate;
``resflow report STORE --axis student_hidden`` gives α and law α per width beside the approximation view's
reading (``resflow theory width-limited-block``): is tied α ≈ 3 a property of smooth targets, or of a
fixed-width block approximating k steps of the teacher's flow?
"""

from __future__ import annotations

from resflow.experiments import Experiment

from .smooth_vs_rough import axis_presets, figure

EXPERIMENT = Experiment(
    name="student-width",
    summary="The students' hidden width as an axis (32, 64, 128; the teacher's is 64): α of both teachers "
            "against the width, beside the approximation view of a width-limited block.",
    presets=axis_presets("student-width"), figure=figure,
    costs={"cpu": "25 min 26 s on 2 cores with a test suite running beside it (docs/results.md)"},
    # the paper preset's teachers have width 32, hidden 128
    grids={"cpu": {"student_hidden": (32, 64, 128)}, "long": {"student_hidden": (32, 64, 128, 256)},
           "paper": {"student_hidden": (64, 128, 256)}},
)
