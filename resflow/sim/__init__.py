"""Simulation: teachers, students and the training engine of the teacher--student experiments.

==================  ========================================================================
module              what it holds
==================  ========================================================================
``teacher``         :class:`Teacher`, :class:`TeacherConfig`: target functions of tunable roughness
``students``        :class:`StudentSpec`, the student initialisation and the batched banks
``config``          :class:`TrainConfig` (the training recipe as data) and the lr schedule
``optim``           :class:`BatchedAdam`: Adam over students stacked along one axis
``engine``          :func:`train`: every student of a run trained in one process
``reference_loop``  :func:`train_reference`: the plain per-student loop, kept as a reference
``results``         :class:`TrainingResult` and :func:`build_dataset` (the run as a labelled Dataset)
``bench``           the engine's speed against the per-student loop
==================  ========================================================================

Built on :mod:`resflow.dynamics` and :mod:`resflow.noise`; knows nothing of fits, stores or plots.
"""

from .config import TrainConfig, lr_multiplier, student_lr
from .engine import train
from .optim import BatchedAdam
from .reference_loop import train_reference
from .results import TrainingResult, build_dataset
from .students import StudentSpec
from .teacher import TEACHER_FAMILIES, Teacher, TeacherConfig

__all__ = [
    "TEACHER_FAMILIES", "Teacher", "TeacherConfig", "StudentSpec", "TrainConfig", "lr_multiplier", "student_lr",
    "BatchedAdam", "train", "train_reference", "TrainingResult", "build_dataset",
]
