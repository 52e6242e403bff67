"""What a training run produced, per student, before it is labelled: :class:`TrainingResult`.

:func:`resflow.records.build_dataset` arranges one on named dimensions (the ``toy-run`` record);
:meth:`TrainingResult.to_dataset` does it with the run's own loss and teacher depth, so that
:func:`resflow.fit_dataset` fits a result as it fits a record.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConfigError
from .block import StudentSpec
from .config import TrainConfig

if TYPE_CHECKING:
    import torch
    import xarray as xr

__all__ = ["TrainingResult", "concatenate_results"]


@dataclass
class TrainingResult:
    """Everything a run produced, one row per student, in the order of ``specs``.

    :func:`resflow.train` returns its students in the order they were requested, so row ``i`` of every
    array is ``specs[i]`` of the call; look a student up by its spec, never by the position of a depth.

    Attributes
    ----------
    specs : list of StudentSpec
        The students, in the order of the rows.
    eval_steps : list of int
        The optimiser steps at which the test loss was evaluated, ``(n_evals,)``: ``0``, ``eval_every``,
        ``2 eval_every``, ... and, for a finished run, ``config.steps`` (the final evaluation).
    test_loss : numpy.ndarray, shape ``(n_students, n_evals)``
        ``test_loss[i, k]``: student ``specs[i]``'s test loss at step ``eval_steps[k]``, the mean over
        ``eval_batches`` fresh batches of ``eval_batch_size`` inputs; MSE of the final normalised state
        (``loss="mse"``, units 1) or KL(teacher || student) in nats (``loss="kl"``).  The last column of a
        finished run is the final loss, ``final_batches.mean(axis=1)``; NaN after a student failed.
    final_batches : numpy.ndarray, shape ``(n_students, eval_batches)``
        The final test loss on each fresh batch (kept apart for the intervals); NaN if the run stopped early.
    failed : numpy.ndarray of bool, shape ``(n_students,)``
        Whether the student's loss or gradient stopped being finite; ``fail_reason`` says why (``""``: not).
    hidden : dict of str to numpy.ndarray
        Hidden-state metric -> ``(n_students, max_depth + 1)``, mean over inputs, NaN-padded; or
        ``(n_students,)`` for a metric with one value per student (the early-stop fraction).
    wall_time : float
        Seconds of training.
    device : str
    steps_done : int
        Steps trained (``config.steps`` when finished).
    parameters : dict of StudentSpec to dict of str to torch.Tensor, optional
        Every student's trained parameters (CPU), when the run kept them (``keep_parameters``); None
        otherwise.
    stage_wall_times : dict of str to float
        Seconds of each training run that made the result (routes: ``first``, ``continuation``); empty for
        one run.
    config : TrainConfig, optional
        The recipe the run trained with (its ``loss`` labels the losses); None for a result built by hand.
    teacher_depth : float
        The depth :math:`L` shared by the run's teachers (the law-aware fit divides out the finite-teacher
        factor at it); ``inf`` when they differ or are not flows.
    seed : int, optional
        The seed of the data streams.

    Examples
    --------
    The final loss of every student, by spec, and the depth exponents of the run
    (:func:`resflow.fit_dataset`)::

        final = dict(zip(result.specs, result.test_loss[:, -1]))
        fits = resflow.fit_dataset(result)
    """

    specs: list[StudentSpec]
    eval_steps: list[int]
    test_loss: np.ndarray  # (n_students, n_evals)
    final_batches: np.ndarray  # (n_students, eval_batches)
    failed: np.ndarray  # (n_students,) bool
    fail_reason: list[str]
    hidden: dict[str, np.ndarray]
    wall_time: float
    device: str
    steps_done: int
    parameters: dict[StudentSpec, dict[str, torch.Tensor]] | None = None
    stage_wall_times: dict[str, float] = field(default_factory=dict)
    config: TrainConfig | None = None
    teacher_depth: float = math.inf
    seed: int | None = None

    def to_dataset(self, *, metric_labels: dict[str, tuple[str, str]] | None = None) -> xr.Dataset:
        """The result on named dimensions, as a ``toy-run`` record holds it
        (:func:`resflow.records.build_dataset`), with the run's loss, its teacher depth and provenance in the
        attrs: what :func:`resflow.fit_dataset` fits.

        ``metric_labels`` maps hidden-state metrics to ``(long_name, units)`` (e.g.
        :data:`resflow.analysis.METRIC_LABELS`); metrics without one are left out.
        """
        from ..provenance import provenance
        from ..records import build_dataset

        if self.config is None:
            raise ConfigError("to_dataset needs the run's TrainConfig to label its losses; "
                              "this TrainingResult has config=None. "
                              "Use the result resflow.train returns, or pass config=TrainConfig(...).")
        described = {"train": self.config.to_dict()}
        if math.isfinite(self.teacher_depth):
            described["teacher_depth"] = self.teacher_depth
        attrs = provenance(described, seed=self.seed, device=self.device)
        targets = list(dict.fromkeys(s.target for s in self.specs))
        return build_dataset(self, loss=self.config.loss, targets=targets, attrs=attrs,
                             metric_labels=metric_labels)

    def for_specs(self, requested: list[StudentSpec]) -> TrainingResult:
        """This result for the students ``requested``, in that order, each holding the values (loss curves,
        batches, failure, metrics, parameters) of the student it trained as (itself, or
        :meth:`StudentSpec.canonical`); itself when it already holds exactly those students in that order."""
        if list(requested) == list(self.specs):
            return self
        # by repr: a NaN temperature never equals itself, so a spec is found by what it prints
        position = {repr(s): i for i, s in enumerate(self.specs)}
        rows = [position.get(repr(s), position.get(repr(s.canonical()))) for s in requested]
        missing = [s for s, row in zip(requested, rows, strict=True) if row is None]
        if missing:
            raise ConfigError(f"this result holds no student {missing[0]!r} (nor the student it trains as).")
        parameters = None
        if self.parameters is not None:
            by_repr = {repr(s): v for s, v in self.parameters.items()}
            parameters = {s: by_repr[repr(self.specs[i])] for s, i in zip(requested, rows, strict=True)}
        return TrainingResult(
            specs=list(requested), eval_steps=self.eval_steps, test_loss=self.test_loss[rows],
            final_batches=self.final_batches[rows], failed=self.failed[rows],
            fail_reason=[self.fail_reason[i] for i in rows],
            hidden={k: v[rows] for k, v in self.hidden.items()},
            wall_time=self.wall_time, device=self.device, steps_done=self.steps_done, parameters=parameters,
            stage_wall_times=dict(self.stage_wall_times), config=self.config,
            teacher_depth=self.teacher_depth, seed=self.seed)


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
    parameters = None
    if all(p.parameters is not None for p in parts):
        parameters = {s: v for p in parts for s, v in p.parameters.items()}
    return TrainingResult(
        specs=[s for p in parts for s in p.specs], eval_steps=first.eval_steps,
        test_loss=np.concatenate([p.test_loss for p in parts]),
        final_batches=np.concatenate([p.final_batches for p in parts]),
        failed=np.concatenate([p.failed for p in parts]),
        fail_reason=[m for p in parts for m in p.fail_reason],
        hidden=hidden, wall_time=sum(p.wall_time for p in parts), device=first.device,
        steps_done=min(p.steps_done for p in parts), parameters=parameters, config=first.config,
        teacher_depth=(first.teacher_depth if all(p.teacher_depth == first.teacher_depth for p in parts)
                       else math.inf),
        seed=first.seed)
