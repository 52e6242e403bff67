"""Simulation: teachers, students and the training engine of the teacher--student experiments.

==================  ========================================================================
module              what it holds
==================  ========================================================================
``teacher``         :class:`Teacher`, :class:`TeacherConfig`: target functions of tunable roughness
``hierarchy``       :class:`RandomHierarchyModel`: discrete data with a known hierarchy depth
``block``           the student, defined once: :class:`StudentSpec`, its block, init and losses
``config``          :class:`TrainConfig` (the training recipe as data) and the lr schedule
``kernels``         the block and losses for many students at once, with hand-derived gradients
``bank``            the layout of a bank of students of one scheme in one flat buffer; shared weights
``targets``         teacher outputs for a batch, every teacher evaluated once
``classes``         classification targets (``rhm:L``): grammars, token batches, labels by parsing
``data``            :class:`DataStream`: fresh training and evaluation inputs from seeded generators
``optimizers``      optimiser rules (``train.optimizer``): Adam, SOAP, and how to add one
``optim``           deprecated: Adam's update moved to ``optimizers.adam``
``soap``            deprecated: SOAP's update moved to ``optimizers.soap``
``state``           :class:`TrainState` and versioned checkpoints
``threads``         :class:`ThreadGovernor`: the torch thread count, from the cores the machine has free
``graphs``          CUDA graphs of the training step (GPU only)
``engine``          :class:`Trainer`: ``init``/``step``/``evaluate``, banks, forks; names no optimiser
``driver``          :func:`train`: the loop around the trainer (evaluations, checkpoints, resume)
``hidden``          hidden-state metrics of the trained students (fixed inputs, a metric function)
``continuation``    depth-doubling continuation: a deep student from a trained one of half its depth
``routes``          :func:`train_routes`: students of several routes (scratch, smooth, continuation)
                    in two runs
``optimum``         :func:`reach_optimum`: a student's optimum by float64 full-batch L-BFGS (verdict v4's
                    ground truth)
``reference_loop``  :func:`train_reference`: the plain per-student loop, kept as a reference
``results``         :class:`TrainingResult` (a run per student; ``resflow.records`` labels it)
``bench``           ``resflow bench``: the machine's sgemm rate, the engine and the loop
==================  ========================================================================

Built on :mod:`resflow.dynamics` and :mod:`resflow.noise`; knows nothing of fits, stores or plots.
"""

from .bench import BenchRow, PrecisionCheck, precision_check, run_bench
from .block import (
    ROUTES,
    StudentSpec,
    init_student,
    kl_loss,
    layer_groups,
    mse_loss,
    student_block,
    student_forward,
    student_logits,
    student_steps,
    teacher_built_student,
)
from .config import TrainConfig, lr_multiplier, shared_schedule, student_lr
from .continuation import split_layers, train_by_doubling
from .driver import train
from .engine import Trainer
from .hierarchy import HierarchyConfig, RandomHierarchyModel
from .optimum import Optimum, OptimumSettings, reach_optimum
from .reference_loop import train_reference
from .results import TrainingResult, concatenate_results
from .routes import continuation_parent, train_routes
from .state import TrainState
from .teacher import TEACHER_FAMILIES, Teacher, TeacherConfig

__all__ = [
    "teacher_built_student",
    "TEACHER_FAMILIES", "Teacher", "TeacherConfig", "StudentSpec", "layer_groups", "init_student",
    "student_block", "student_forward", "student_logits", "student_steps", "mse_loss", "kl_loss",
    "TrainConfig", "lr_multiplier", "student_lr",
    "Trainer", "TrainState", "train", "train_reference", "TrainingResult", "BenchRow", "run_bench",
    "PrecisionCheck", "precision_check", "HierarchyConfig", "RandomHierarchyModel",
    "shared_schedule", "split_layers", "train_by_doubling", "ROUTES", "train_routes", "continuation_parent",
    "concatenate_results", "Optimum", "OptimumSettings", "reach_optimum",
]
