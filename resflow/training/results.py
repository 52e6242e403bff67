"""What a training run produced, per student, before it is labelled: :class:`TrainingResult`.

:func:`resflow.records.build_dataset` arranges one on named dimensions (the ``toy-run`` record).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .block import StudentSpec

__all__ = ["TrainingResult", "concatenate_results"]


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


def concatenate_results(parts: Sequence[TrainingResult]) -> TrainingResult:
    """One result of several runs of one configuration trained one after the other (the stages of
    :func:`resflow.training.train_routes` or of depth-doubling continuation): students stacked in order,
    per-layer metrics NaN-padded to the deepest student, wall times summed, parameters merged."""
    first = parts[0]
    if any(p.eval_steps != first.eval_steps for p in parts):
        raise ValueError("only runs evaluated at the same steps can be joined (one configuration)")
    hidden = {}
    for name in first.hidden:
        arrays = [p.hidden[name] for p in parts]
        if arrays[0].ndim == 1:
            hidden[name] = np.concatenate(arrays)
            continue
        width = max(a.shape[1] for a in arrays)
        hidden[name] = np.concatenate([np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=np.nan)
                                       for a in arrays])
    extra = {}
    if all("parameters" in p.extra for p in parts):
        extra["parameters"] = {s: v for p in parts for s, v in p.extra["parameters"].items()}
    return TrainingResult(
        specs=[s for p in parts for s in p.specs], eval_steps=first.eval_steps,
        test_loss=np.concatenate([p.test_loss for p in parts]),
        final_batches=np.concatenate([p.final_batches for p in parts]),
        failed=np.concatenate([p.failed for p in parts]), fail_reason=[m for p in parts for m in p.fail_reason],
        hidden=hidden, wall_time=sum(p.wall_time for p in parts), device=first.device,
        steps_done=min(p.steps_done for p in parts), extra=extra)
