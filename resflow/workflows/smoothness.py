"""Smoothness along depth of every trained student of a run, for its record
(:mod:`resflow.probing.smoothness`).

Per student ``layer_change`` per layer (NaN-padded; layer ``l`` holds the change to layer ``l + 1``) and
``weight_variation``.  Every student has weights, so it applies to every run; failed students stay NaN.
"""

from __future__ import annotations

import numpy as np

from ..probing.smoothness import SMOOTHNESS_LABELS, weight_smoothness
from .measures import TrainedStudents

__all__ = ["Smoothness", "SMOOTHNESS"]


class Smoothness:
    """The measure (:class:`~resflow.workflows.measures.Measure`) of the module docstring."""

    name = "smoothness"
    labels = SMOOTHNESS_LABELS

    def applies(self, students: TrainedStudents) -> bool:
        return True

    def measure(self, students: TrainedStudents) -> dict[str, np.ndarray]:
        out = students.per_layer("layer_change")
        out.update(students.per_student("weight_variation"))
        for student in students:
            if student.failed:
                continue
            change, variation = weight_smoothness(student.parameters)
            out["layer_change"][student.index, : change.shape[0]] = change.numpy()
            out["weight_variation"][student.index] = variation
        return out


SMOOTHNESS = Smoothness()
