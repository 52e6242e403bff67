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


    def for_specs(self, requested: list[StudentSpec]) -> TrainingResult:
        """This result for the students ``requested``, each holding the values (loss curves, batches, failure,
        metrics, parameters) of the student it trained as (:meth:`StudentSpec.canonical`); itself when every
        requested student was trained as itself."""
        if all(s.canonical() == s for s in requested) and set(requested) == set(self.specs):
            return self
        rows = [self.specs.index(s.canonical()) for s in requested]
        extra = dict(self.extra)
        if "parameters" in extra:
            extra["parameters"] = {s: extra["parameters"][s.canonical()] for s in requested}
        return TrainingResult(
            specs=list(requested), eval_steps=self.eval_steps, test_loss=self.test_loss[rows],
            final_batches=self.final_batches[rows], failed=self.failed[rows],
            fail_reason=[self.fail_reason[i] for i in rows], hidden={k: v[rows] for k, v in self.hidden.items()},
            wall_time=self.wall_time, device=self.device, steps_done=self.steps_done, extra=extra)
