"""Run an experiment end to end: build teachers and students, train, store, fit, draw.

:func:`run_experiment` is what ``resflow run`` calls.  It writes the run as a ``toy-run`` record and
its fits as a ``fit`` record of the store, and ``fits.json`` and ``figure.png`` into the run's work
directory ``STORE/work/<experiment>-<time>/`` (its run id), beside ``run.json`` (the configuration, the
preset, when it started) and the checkpoints; the run holds ``run.lock`` there while it works.  An interrupted
run (Ctrl-C, a kill) resumes from its checkpoint; one that fails before any work leaves no directory.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import xarray as xr

from .._overrides import config_from_dict
from ..errors import ConfigError
from ..experiments.config import ExperimentConfig
from ..fitting.fits import SeriesFit
from ..fitting.separation import Separation, separations
from ..store import Store, run_lock
from .constructions import CONSTRUCTIONS
from .exits import EARLY_EXIT
from .group_angles import GROUP_ANGLES
from .intervene import STUDENT_INTERVENTIONS
from .measures import register_measure
from .plan import RunPlan
from .rundir import RECORD_NAME, RUN_INFO, RunDir, checkpoint_steps, has_checkpoint, resumable, run_started
from .smoothness import SMOOTHNESS
from .stages import FIGURE_NAME, FITS_NAME, RECORD_STAGES, Drawn, RunContext, Trained, run_stages

# teacher_tracking: deprecated here (resflow <= 0.4 had it)
from .tracking import TEACHER_TRACKING, teacher_tracking  # noqa: F401

__all__ = ["ExperimentResult", "run_experiment", "find_resumable", "has_checkpoint", "checkpoint_steps",
           "run_started", "RECORD_NAME", "FIGURE_NAME", "FITS_NAME", "RUN_INFO"]

# the measures every run takes of its trained students, in this order (more: register_measure)
for _measure in (TEACHER_TRACKING, STUDENT_INTERVENTIONS, EARLY_EXIT, CONSTRUCTIONS, SMOOTHNESS,
                 GROUP_ANGLES):
    register_measure(_measure)


@dataclass(frozen=True, kw_only=True)
class ExperimentResult:
    """What :func:`run_experiment` produced.

    ``finished`` is False only when the run stopped early on purpose (``stop_after``); then only
    ``work_dir`` and ``steps_done`` are set and the run can be resumed.
    """

    config: ExperimentConfig
    work_dir: Path
    finished: bool
    steps_done: int
    record: str | None = None
    fit_record: str | None = None
    dataset: xr.Dataset | None = None
    fits: tuple[SeriesFit, ...] = ()
    figure: Path | None = None

    @property
    def separations(self) -> tuple[Separation, ...]:
        """The first answer of a run with a tied and an independent teacher: tied minus independent exponents,
        paired by replicate, and whether the readings are separated (:mod:`resflow.fitting.separation`)."""
        return tuple(separations(list(self.fits)))


def find_resumable(store: Path | str, experiment: str | None = None, *, run: str | None = None) -> Path:
    """The work directory to resume in ``store``: the run ``run`` (a run id, the directory's name), or else
    the latest run of ``experiment`` (of any, when None) that did some work, has no record yet, and no process
    at work on it -- the one policy of :func:`resflow.workflows.rundir.resumable`."""
    return resumable(store, run=run, experiment=experiment).path


def train_dataset(config: ExperimentConfig, *, run_dir: Path | None, resume: bool = False,
                  progress: Callable[[int, int, dict[str, float]], None] | None = None,
                  stop_after: int | None = None) -> tuple[int, xr.Dataset | None, dict[str, str]]:
    """Train every student of ``config`` (checkpointing in ``run_dir``), measure them and arrange the result
    as a dataset with provenance -- the stages train, measure and record, without a store
    (:mod:`resflow.workflows.stages`): ``(steps done, dataset, provenance)``, the dataset None when
    ``stop_after`` stopped it early.  What a sweep cell (:mod:`resflow.workflows.sweep`) runs."""
    context = RunContext(run_dir=run_dir, resume=resume, progress=progress, stop_after=stop_after)
    output = run_stages(RunPlan.resolve(config), context, RECORD_STAGES)
    if isinstance(output, Trained):
        return output.result.steps_done, None, {}
    return output.steps_done, output.dataset, output.provenance


def run_experiment(config: ExperimentConfig, *, out: Path | str, resume: bool | str = False,
                   preset: str | None = None,
                   progress: Callable[[int, int, dict[str, float]], None] | None = None,
                   stop_after: int | None = None) -> ExperimentResult:
    """Train every student of ``config`` and write the run, its fits and its figure into the store ``out``.

    Parameters
    ----------
    config : ExperimentConfig
        E.g. ``resflow.preset("smooth-vs-rough", "cpu").with_overrides(["train.steps=2000"])``.
    out : path
        The store (created if missing, unless resuming).
    resume : bool or str
        Continue the latest interrupted run of this experiment in ``out``, or the run of this id (the name of
        its work directory); the same config is required (:func:`resflow.workflows.resume_config` reads it).
    preset : str, optional
        The preset ``config`` was built from, kept in the run's ``run.json`` for listings and resumption.
    progress : callable, optional
        ``progress(step, total, mean train loss per target)``, about every 1% of training.
    stop_after : int, optional
        Stop after this many steps (checkpointed, resumable); for tests of resumption.
    """
    plan = RunPlan.resolve(config)  # before any directory: a bad name or a missing GPU leaves nothing
    out = Path(out)
    if resume:  # before opening: resuming never creates a store
        run_dir = find_resumable(out, config.experiment, run=resume if isinstance(resume, str) else None)
        store = Store.open(out)
        saved = RunDir(run_dir).info()
        # read back first: a run.json of an earlier version spells some keys otherwise (the optimiser's)
        if config_from_dict(ExperimentConfig, saved["config"]).to_json() != config.to_json():
            raise ConfigError(f"{run_dir} was started with a different configuration; resume it with its own "
                              "(resflow run RUN_ID --resume reads it), or start a new run.")
    else:
        store = Store.open(out, create=True)
        run_dir = store.work_dir(config.experiment)
        started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        RunDir(run_dir).write_info(json.loads(config.to_json()), preset=preset, started=started)
    try:
        with run_lock(run_dir):
            context = RunContext(run_dir=run_dir, store=store, resume=bool(resume), progress=progress,
                                 stop_after=stop_after)
            return _result(config, run_dir, run_stages(plan, context))
    except BaseException:
        # failed before any work: nothing to resume, nothing kept
        if not resume and not has_checkpoint(run_dir):
            shutil.rmtree(run_dir, ignore_errors=True)
        raise


def _result(config: ExperimentConfig, run_dir: Path, output: Trained | Drawn) -> ExperimentResult:
    if isinstance(output, Trained):
        return ExperimentResult(config=config, work_dir=run_dir, finished=False,
                                steps_done=output.result.steps_done)
    fitted, recorded = output.fitted, output.fitted.recorded
    return ExperimentResult(config=config, work_dir=run_dir, finished=True, steps_done=recorded.steps_done,
                            record=recorded.record, fit_record=fitted.fit_record, dataset=recorded.dataset,
                            fits=fitted.fits, figure=output.figure)
