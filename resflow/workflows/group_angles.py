"""The update angles of students of ``grouped:K`` teachers within and across the teacher's groups, for the
run's record (:func:`resflow.probing.groups.student_group_angles`).

A measure (:class:`~resflow.workflows.measures.Measure`) over the engine's ``update_angle`` probe
(:attr:`~resflow.workflows.measures.TrainedStudents.probes`): the angle between successive layers' updates,
split by whether the two layers sit in one of the teacher's K groups or across a boundary; NaN for students
of other teachers.
"""

from __future__ import annotations

import numpy as np

from ..probing.groups import GROUP_LABELS, student_group_angles
from .measures import TrainedStudents

__all__ = ["GroupAngles", "GROUP_ANGLES"]


class GroupAngles:
    """The measure of the module docstring."""

    name = "group-angles"
    labels = GROUP_LABELS

    def applies(self, students: TrainedStudents) -> bool:
        return "update_angle" in students.probes

    def measure(self, students: TrainedStudents) -> dict[str, np.ndarray]:
        return student_group_angles(students.specs, students.probes["update_angle"])


GROUP_ANGLES = GroupAngles()
