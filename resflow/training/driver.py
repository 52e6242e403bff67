r"""The driver of a training run: the short loop around :class:`~resflow.training.engine.Trainer`.

:func:`train` builds the trainer and its state, then steps it with evaluations every ``eval_every``
steps, atomic checkpoints every ``checkpoint_every`` steps and on Ctrl-C, resume from a checkpoint,
progress, and the hidden-state metrics of the trained students; it returns a
:class:`~resflow.training.results.TrainingResult`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .block import StudentSpec
from .config import TrainConfig
from .engine import Trainer
from .hidden import StateMetrics, hidden_metrics
from .results import TrainingResult
from .state import CHECKPOINT_NAME, TrainState, load_checkpoint, save_checkpoint
from .teacher import Teacher, shared_teacher_depth

__all__ = ["train"]


def train(
    specs: list[StudentSpec],
    teachers: Mapping[Hashable, Teacher],
    config: TrainConfig,
    *,
    seed: int = 0,
    run_dir: Path | None = None,
    resume: bool = False,
    progress: Callable[[int, int, dict[str, float]], None] | None = None,
    stop_after: int | None = None,
    state_metrics: StateMetrics | None = None,
    initial: Mapping[StudentSpec, dict] | None = None,
    keep_parameters: bool = False,
) -> TrainingResult:
    """Train all ``specs`` against their teachers, batched (see the module docstring).

    Students that are the same model are trained once: a group-structured student with as many groups as
    layers is the plain student (:meth:`~resflow.training.block.StudentSpec.canonical`); the result holds
    every requested student.

    Parameters
    ----------
    specs : list of StudentSpec
    teachers : mapping
        ``(target, replicate)`` or ``target`` -> :class:`~resflow.training.Teacher`
        (:func:`~resflow.training.targets.teacher_key`).
    config : TrainConfig
    seed : int
        Seed of the data streams (replicate ``r`` uses ``seed + r``; initialisations come from each spec).
    run_dir : Path, optional
        Where the checkpoint lives; without it nothing is written.
    resume : bool
        Continue from ``run_dir/checkpoint.pt``.
    progress : callable, optional
        ``progress(step, total, mean train loss per target)``, about every 1% of training.
    stop_after : int, optional
        Stop (after checkpointing) once this many steps are done; for tests of resumption.
    state_metrics : callable, optional
        Hidden-state metrics to record for every trained student (per-layer means over
        ``METRIC_BATCH`` fixed inputs), e.g. :func:`resflow.analysis.token_metrics`.
    initial : mapping, optional
        Initial parameters of some students (spec -> the dict :func:`~resflow.training.block.init_student`
        returns); the others start from :func:`~resflow.training.block.init_student`.
    keep_parameters : bool
        Return every student's trained parameters in ``result.parameters`` (spec -> dict, CPU).

    Returns
    -------
    TrainingResult
        One row per student, in the order of ``specs`` (``result.test_loss[i, k]``: ``specs[i]`` at step
        ``result.eval_steps[k]``; the last column is the final loss); :func:`resflow.fit_dataset` fits it.

    Examples
    --------
    The classroom route: students of depths 1 to 8 against a smooth (tied) and a rough (independent)
    teacher, trained in seconds on a CPU (:meth:`TrainConfig.classroom`), and their depth exponents
    :math:`\\alpha` (loss :math:`\\propto \\ell^{-\\alpha}`); ``docs/design/classroom.md`` has the same code.

    >>> import resflow
    >>> teachers = {t: resflow.Teacher(t, width=8, depth=16, seed=0) for t in ("tied", "independent")}
    >>> DEPTHS = (1, 2, 4, 8)
    >>> students = [resflow.StudentSpec(t, "euler", depth, replicate=0) for t in teachers for depth in DEPTHS]
    >>> result = resflow.train(students, teachers, resflow.TrainConfig.classroom(), seed=0)
    >>> alpha = {fit.target: fit.exponent for fit in resflow.fit_dataset(result)}
    >>> alpha["tied"] > alpha["independent"] + 0.5  # seed 0: 2.22 and 1.26 (trained: about 3 and 1)
    True
    """
    # a structured student with as many groups as layers is the plain student: trained once, reported for both
    requested = list(specs)
    if any(s.canonical() != s for s in specs):
        initial = {k.canonical(): v for k, v in (initial or {}).items()} or None
        specs = list(dict.fromkeys(s.canonical() for s in specs))
    trainer = Trainer(specs, teachers, config, initial)
    state = trainer.init(seed)
    fingerprint = trainer.fingerprint(seed)
    checkpoint = None if run_dir is None else Path(run_dir) / CHECKPOINT_NAME
    if resume:
        if checkpoint is None:
            raise ConfigError("nothing to resume: no run directory given.")
        state.load(load_checkpoint(checkpoint, fingerprint))

    def save() -> None:
        if checkpoint is not None:
            save_checkpoint(checkpoint, state, fingerprint)

    def evaluate(keep_batches: bool = False):
        losses = np.stack([trainer.evaluate(state, state.data.eval_batch(config.eval_batch_size)).numpy()
                           for _ in range(config.eval_batches)], axis=1)  # (n, K)
        return losses if keep_batches else losses.mean(axis=1)

    t0 = time.perf_counter()
    report_every = max(config.steps // 100, 1)
    with trainer.precision(), trainer.threads:
        try:
            while state.step < config.steps:
                if (state.step % config.eval_every == 0
                        and (not state.eval_steps or state.eval_steps[-1] != state.step)):
                    state.eval_steps.append(state.step)
                    state.history.append(evaluate())
                state = trainer.step(state, *trainer.next_batch(state))
                if progress is not None and (state.step % report_every == 0 or state.step == config.steps):
                    progress(state.step, config.steps, _summary(trainer.order, state))
                # the last checkpoint is the trained state *before* the final evaluation, so resuming a run
                # killed after training (before its record was written) evaluates it exactly as it would have
                if (state.step % config.checkpoint_every == 0 or state.step >= config.steps
                        or (stop_after is not None and state.step >= stop_after)):
                    save()
                    if stop_after is not None and state.step >= stop_after:
                        break
        except KeyboardInterrupt:
            save()
            raise
        finished = state.step >= config.steps
        n = len(trainer.order)
        final_batches = evaluate(keep_batches=True) if finished else np.full((n, config.eval_batches), np.nan)
        if finished:
            state.eval_steps.append(state.step)
            state.history.append(final_batches.mean(axis=1))
        hidden = hidden_metrics(trainer, state, state_metrics) if state_metrics is not None else {}
    parameters = None
    if keep_parameters:
        parameters = {spec: {k: v.cpu() for k, v in trainer.student_parameters(state, i).items()}
                      for i, spec in enumerate(trainer.order)}
    return TrainingResult(
        specs=trainer.order, eval_steps=list(state.eval_steps), test_loss=np.stack(state.history, axis=1),
        final_batches=final_batches, failed=state.failed.numpy().copy(), fail_reason=list(state.reasons),
        hidden=hidden, wall_time=time.perf_counter() - t0, device=str(trainer.device), steps_done=state.step,
        parameters=parameters, config=config, teacher_depth=shared_teacher_depth(teachers), seed=seed,
    ).for_specs(requested)


def _summary(order: list[StudentSpec], state: TrainState) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    for spec, value, bad in zip(order, state.last_loss.tolist(), state.failed.tolist(), strict=True):
        if not bad and math.isfinite(value):
            out.setdefault(spec.target, []).append(value)
    return {k: float(np.mean(v)) for k, v in out.items()}
