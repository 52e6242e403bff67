"""Teacher tracking of every trained student of a run, for its record (:mod:`resflow.probing.tracking`).

Each student is compared with its teacher at matching times -- student layer ``l`` against teacher layer
``(l + 1) k`` for a teacher ``k`` times deeper -- on the hidden-state metrics' fixed inputs: per-layer means
(NaN-padded) and the coherence of the errors.  A student whose depth does not divide its teacher's is left
NaN.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import torch

from ..probing.tracking import TRACKING_LABELS, tracking_metrics
from ..training.block import student_forward, student_layer_steps
from ..training.targets import teacher_key
from .measures import TrainedStudents

__all__ = ["TeacherTracking", "TEACHER_TRACKING", "teacher_tracking"]

_PER_STUDENT = ("error_coherence", "error_linearity")


class TeacherTracking:
    """The measure (:class:`~resflow.workflows.measures.Measure`) of the module docstring."""

    name = "teacher-tracking"
    labels = TRACKING_LABELS

    def applies(self, students: TrainedStudents) -> bool:
        return not students.classifies  # a grammar has no flow to track

    def measure(self, students: TrainedStudents) -> dict[str, np.ndarray]:
        x = students.inputs
        out = students.per_layer(*(name for name in TRACKING_LABELS if name not in _PER_STUDENT))
        out.update(students.per_student(*_PER_STUDENT))
        cache: dict = {}
        for student in students:
            spec, i = student.spec, student.index
            teacher = students.teacher_of(spec)
            if teacher.depth % spec.depth or spec.depth < 1:
                continue
            key = teacher_key(spec, students.teachers)
            if key not in cache:
                copied = copy.deepcopy(teacher).to(x.dtype)  # the caller's teacher stays as it is
                cache[key] = copied, copied.hidden_states(x)
            copied, teacher_states = cache[key]
            states = student_forward(student.parameters, x, student.tableau, return_states=True)
            k = teacher.depth // spec.depth
            local = student_layer_steps(student.parameters, teacher_states[::k], student.tableau)
            propagated = torch.stack([copied.propagate(local[layer], (layer + 1) * k)
                                      for layer in range(spec.depth)])
            for name, value in tracking_metrics(states, teacher_states, local, propagated).items():
                if value.ndim == 0:
                    out[name][i] = float(value)
                else:
                    out[name][i, : value.shape[0]] = value.mean(-1).double().numpy()
        return out


TEACHER_TRACKING = TeacherTracking()


def teacher_tracking(result, teachers, dtype: str = "float32") -> dict[str, np.ndarray]:
    """Deprecated since resflow 0.5 (it was ``resflow.workflows.run.teacher_tracking``):
    ``TEACHER_TRACKING.measure(TrainedStudents.of_result(result, teachers, dtype))``."""
    warnings.warn("teacher_tracking is deprecated since resflow 0.5; use resflow.workflows.tracking."
                  "TEACHER_TRACKING.measure(TrainedStudents.of_result(...)).",
                  DeprecationWarning, stacklevel=2)
    students = TrainedStudents.of_result(result, teachers, dtype)
    return {} if students is None else TEACHER_TRACKING.measure(students)
