"""What a training run produced, per student, before it is labelled: :class:`TrainingResult`.

:func:`resflow.records.build_dataset` arranges one on named dimensions (the ``toy-run`` record).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .block import StudentSpec

__all__ = ["TrainingResult"]


@dataclass
class TrainingResult:
    """Everything a run produced, students in the order of ``specs``."""

    specs: list[StudentSpec]
    eval_steps: list[int]
    test_loss: np.ndarray  # (n_students, n_evals)
    final_batches: np.ndarray  # (n_students, eval_batches)
    failed: np.ndarray  # (n_students,) bool
    fail_reason: list[str]
    # state metric -> (n_students, max_depth + 1), mean over inputs, NaN-padded; or (n_students,) for a
    # metric with one value per student (the early-stop fraction)
    hidden: dict[str, np.ndarray]
    wall_time: float
    device: str
    steps_done: int
    extra: dict[str, Any] = field(default_factory=dict)

