"""Constructions beside every trained student of a run, for its record (:mod:`resflow.probing.constructions`).

For each student, the construction of its teacher, depth and scheme -- built, not trained -- is evaluated on
``CONSTRUCTION_BATCH`` fixed Gaussian inputs (seed ``CONSTRUCTION_SEED``, float64; the same inputs for every
teacher) and stored as ``construction_loss``, so that ``resflow report`` can give trained/construction ratios
per depth and the construction's own exponents.  Students of one teacher, depth and scheme share one value
(computed once).  NaN where a construction is not defined: a depth that does not divide the teacher's, a
grammar target (no variable), a KL student (a trained student's head is learned; the construction has
none; a run of KL students only has no variable).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

from ..probing.constructions import CONSTRUCTION_LABELS, construction_loss
from ..training.targets import teacher_key
from .measures import TrainedStudents

__all__ = ["Constructions", "CONSTRUCTIONS", "CONSTRUCTION_BATCH", "CONSTRUCTION_SEED"]

CONSTRUCTION_BATCH = 8192  # inputs per construction: relative standard error of its loss about 1%
CONSTRUCTION_SEED = 271828


class Constructions:
    """The measure (:class:`~resflow.workflows.measures.Measure`) of the module docstring."""

    name = "constructions"
    labels = CONSTRUCTION_LABELS

    def applies(self, students: TrainedStudents) -> bool:
        return not students.classifies and any(math.isnan(s.temperature) for s in students.specs)

    def measure(self, students: TrainedStudents) -> dict[str, np.ndarray]:
        out = students.per_student("construction_loss")
        x = torch.randn((CONSTRUCTION_BATCH, students.width), dtype=torch.float64,
                        generator=torch.Generator().manual_seed(CONSTRUCTION_SEED))
        teachers: dict = {}
        losses: dict = {}
        for student in students:
            spec = student.spec
            if not math.isnan(spec.temperature):  # KL: no construction of a learned head
                continue
            key = teacher_key(spec, students.teachers)
            if key not in teachers:
                teachers[key] = copy.deepcopy(students.teachers[key]).double()  # the caller's stays as it is
            if (key, spec.depth, spec.scheme) not in losses:
                value = construction_loss(teachers[key], spec.depth, student.tableau, x)
                losses[key, spec.depth, spec.scheme] = np.nan if value is None else value
            out["construction_loss"][student.index] = losses[key, spec.depth, spec.scheme]
        return out


CONSTRUCTIONS = Constructions()
