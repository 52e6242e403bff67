r"""Training by several routes: students that start from a draw, and students continued from the run's own.

Verdict v4 counts a depth's routes as agreeing when their best students reach the same loss there
(``docs/design/certification.md``).  The routes (:data:`~resflow.training.block.ROUTES`) are a student's
:attr:`~resflow.training.block.StudentSpec.route`: ``scratch`` and ``smooth`` start from a draw of their own
(:func:`~resflow.training.block.init_student`), ``continuation`` from the trained ``scratch`` student of half
its depth with the same teacher, init and data, split into two half steps per layer
(:func:`~resflow.training.continuation.split_layers`).

:func:`train_routes` trains them in two batched runs of one configuration: the students that start from a
draw first, every teacher, replicate, init and length in one batch; then every continuation student, from
its parent's trained parameters, in a second batch.  The two runs draw the same training batches and are
evaluated on the same final batches (one configuration, one data stream per replicate), so their students'
losses compare pairwise.  Each run has its checkpoint (``run_dir/first``, ``run_dir/continuation``) and
resumes on its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path

from ..errors import ConfigError
from .block import StudentSpec
from .config import TrainConfig
from .continuation import split_layers
from .driver import train
from .results import TrainingResult, concatenate_results
from .state import CHECKPOINT_NAME
from .teacher import Teacher

__all__ = ["continuation_parent", "train_routes", "STAGE_DIRS"]

STAGE_DIRS = ("first", "continuation")  # the checkpoint folders of the two runs, under the run directory


def _without_budget(spec: StudentSpec) -> StudentSpec:
    return dataclasses.replace(spec, budget=1.0)


def continuation_parent(spec: StudentSpec, candidates: list[StudentSpec]) -> StudentSpec:
    """The student a continuation student starts from: among ``candidates``, the full-length ``scratch``
    student of half its depth with the same target, scheme, replicate, temperature, structure and init
    (whatever its budget).  A clear error when the run has none."""
    want = dataclasses.replace(spec, route="scratch", depth=spec.depth // 2, length=1.0, budget=1.0)
    if spec.depth % 2 == 0:
        for other in candidates:
            if repr(_without_budget(other)) == repr(want):  # by repr: a NaN temperature never equals itself
                return other
    raise ConfigError(f"the continuation student {spec!r} needs the full-length scratch student of depth "
                      f"{spec.depth // 2} (same target, replicate and init) in the same run; add depth "
                      f"{spec.depth // 2} to the depths, or drop the route 'continuation'.")


def train_routes(specs: list[StudentSpec], teachers: Mapping[Hashable, Teacher], config: TrainConfig, *,
                 seed: int = 0, run_dir: Path | None = None, resume: bool = False,
                 progress: Callable[[int, int, dict[str, float]], None] | None = None,
                 stop_after: int | None = None, state_metrics=None) -> TrainingResult:
    """Train ``specs`` (any routes) as the module docstring says; one result, every student's parameters in
    ``result.parameters`` and each run's seconds in ``result.stage_wall_times``.

    ``progress(step, total, losses)`` counts both runs (``total`` is twice the run's steps when there are
    continuation students); ``stop_after`` stops the first run (checkpointed; resume with ``resume=True``).
    """
    first = [s for s in specs if s.route != "continuation"]
    later = [s for s in specs if s.route == "continuation"]
    parents = {s: continuation_parent(s, first) for s in later}  # checked before anything trains
    stages = [first] + ([later] if later else [])
    total = config.steps * len(stages)

    def staged(offset: int):
        if progress is None:
            return None
        return lambda step, _, losses: progress(offset + step, total, losses)

    def stage_dir(name: str) -> Path | None:
        if run_dir is None:
            return None
        path = Path(run_dir) / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def resumable(path: Path | None) -> bool:
        return resume and path is not None and (path / CHECKPOINT_NAME).exists()

    directory = stage_dir(STAGE_DIRS[0]) if later else (None if run_dir is None else Path(run_dir))
    result = train(first, teachers, config, seed=seed, run_dir=directory, resume=resumable(directory),
                   progress=staged(0), stop_after=stop_after, state_metrics=state_metrics,
                   keep_parameters=True)
    result.stage_wall_times = {STAGE_DIRS[0]: result.wall_time}
    if not later or result.steps_done < config.steps:
        return result
    trained = {repr(s): p for s, p in result.parameters.items()}  # by repr: NaN temperatures
    initial = {s: split_layers(trained[repr(parent)]) for s, parent in parents.items()}
    directory = stage_dir(STAGE_DIRS[1])
    continued = train(later, teachers, config, seed=seed, run_dir=directory, resume=resumable(directory),
                      progress=staged(config.steps), state_metrics=state_metrics, initial=initial,
                      keep_parameters=True)
    joined = concatenate_results([result, continued])
    joined.stage_wall_times = {STAGE_DIRS[0]: result.wall_time, STAGE_DIRS[1]: continued.wall_time}
    return joined
