"""Hidden-state metrics of trained students: every student's states on fixed inputs, through a metric
function.

The engine calls :func:`hidden_metrics` once, after training; the metric function comes from above
(:func:`resflow.analysis.state_signature` in ``resflow run``), so this package knows no metric.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch

from .data import METRIC_BATCH, METRIC_SEED, metric_inputs

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Trainer
    from .state import TrainState

__all__ = ["METRIC_BATCH", "METRIC_SEED", "StateMetrics", "hidden_metrics", "metric_inputs"]

StateMetrics = Callable[[torch.Tensor], dict[str, torch.Tensor]]
"""``states (L + 1, n, d) -> {name: per-layer values (layers, n), or one value per student (0-d)}``, e.g.
:func:`resflow.analysis.token_metrics` or :func:`resflow.analysis.state_signature`."""


def hidden_metrics(trainer: Trainer, state: TrainState, metrics: StateMetrics) -> dict[str, np.ndarray]:
    """Per-layer means of ``metrics`` of every trained student (trainer order), NaN-padded to
    ``max_depth + 1``; a metric with one value per student (0-d) is kept as ``(n_students,)``."""
    max_depth = max(s.depth for s in trainer.order)
    # the target kind's: Gaussian inputs (:func:`metric_inputs`), or its grammars' fixed sentences
    x = trainer.targets.fixed_inputs().to(trainer.device)
    per_student: dict[int, dict[str, np.ndarray]] = {}
    for i, states in trainer.hidden_states(state, x):
        values = metrics(states) if states.shape[0] >= 3 else {}
        per_student[i] = {k: (v if v.ndim == 0 else v.mean(dim=-1)).cpu().numpy() for k, v in values.items()}
    shapes = {k: v.ndim for values in per_student.values() for k, v in values.items()}
    out = {name: np.full((len(trainer.order),) + ((max_depth + 1,) if ndim else ()), np.nan)
           for name, ndim in shapes.items()}
    for i, values in per_student.items():
        for name, value in values.items():
            if value.ndim:
                out[name][i, : value.shape[0]] = value
            else:
                out[name][i] = value
    return out
