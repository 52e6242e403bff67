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

from .._atomic import atomic_write
from .._overrides import config_from_dict
from ..errors import ConfigError
from ..experiments.config import ExperimentConfig
from ..experiments.registry import get_experiment
from ..fitting.fit_records import fits_to_dataset
from ..fitting.fits import FitSettings, SeriesFit, fit_dataset
from ..fitting.separation import Separation, separations
from ..presenting.plots import save_figure
from ..probing.groups import GROUP_LABELS, student_group_angles
from ..probing.probes import SIGNATURE_LABELS, state_signature
from ..provenance import provenance
from ..records import build_dataset
from ..records.kinds import FIT, TOY_RUN
from ..store import Store, run_lock
from ..training.continuation import train_by_doubling
from ..training.engine import resolve_device
from ..training.routes import train_routes
from .constructions import CONSTRUCTIONS
from .exits import EARLY_EXIT, EXIT_RULE_NOTE
from .intervene import STUDENT_INTERVENTIONS
from .measures import TrainedStudents, chosen_measures, register_measure, run_measures
from .rundir import RECORD_NAME, RUN_INFO, RunDir, checkpoint_steps, has_checkpoint, resumable, run_started
from .smoothness import SMOOTHNESS

# teacher_tracking: deprecated here (resflow <= 0.4 had it)
from .tracking import TEACHER_TRACKING, teacher_tracking  # noqa: F401

__all__ = ["ExperimentResult", "run_experiment", "find_resumable", "has_checkpoint", "checkpoint_steps",
           "run_started", "RECORD_NAME", "FIGURE_NAME", "FITS_NAME", "RUN_INFO"]

# the measures every run takes of its trained students, in this order (more: register_measure)
for _measure in (TEACHER_TRACKING, STUDENT_INTERVENTIONS, EARLY_EXIT, CONSTRUCTIONS, SMOOTHNESS):
    register_measure(_measure)

FIGURE_NAME = "figure.png"
FITS_NAME = "fits.json"


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
    """Train every student of ``config`` (checkpointing in ``run_dir``) and arrange the result as a dataset
    with provenance: ``(steps done, dataset, provenance)``, the dataset None when ``stop_after`` stopped
    it early.
    Shared by :func:`run_experiment` and the sweep cells (:mod:`resflow.workflows.sweep`)."""
    teachers = config.teachers()
    if config.init == "doubling":
        if stop_after is not None:
            raise ConfigError("stop_after stops one training run; "
                              "depth-doubling continuation (init='doubling') trains one run per depth. "
                              "Interrupt it instead (it resumes stage by stage with --resume), "
                              "or use init='scratch'.")
        result = train_by_doubling(config.student_specs(), teachers, config.train, seed=config.seed,
                                   run_dir=run_dir, resume=resume, progress=progress,
                                   state_metrics=state_signature)
    else:
        result = train_routes(config.student_specs(), teachers, config.train, seed=config.seed,
                              run_dir=run_dir, resume=resume, progress=progress, stop_after=stop_after,
                              state_metrics=state_signature)
    if result.steps_done < config.train.steps:
        return result.steps_done, None, {}
    # every registered measure of trained students that applies (tracking, interventions, early exit, ...)
    students = TrainedStudents.of_result(result, teachers, config.train.dtype)
    measured, measure_labels = run_measures(students, config.measures)
    result.hidden.update(measured)
    if "update_angle" in result.hidden:  # the probes by functional group, stored beside the other probes
        result.hidden.update(student_group_angles(result.specs, result.hidden["update_angle"]))
    prov = provenance(config.to_dict(), seed=config.seed, experiment=config.experiment, device=result.device)
    prov["exit_rule"] = EXIT_RULE_NOTE["ce" if config.classifies else "regression"]
    if "stage_wall_times" in result.extra:  # the seconds of each training run (routes: first, continuation)
        prov["stage_wall_time_s"] = json.dumps(
            {k: round(v, 1) for k, v in result.extra["stage_wall_times"].items()})
    ds = build_dataset(result, loss=config.train.loss, targets=list(config.targets), attrs=prov,
                       metric_labels={**SIGNATURE_LABELS, **measure_labels, **GROUP_LABELS},
                       routes=config.routes)
    return result.steps_done, ds, prov


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
    experiment = get_experiment(config.experiment)
    resolve_device(config.train.device)  # before any directory: --device cuda without a GPU leaves nothing
    chosen_measures(config.measures)  # an unknown measure too
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
            return _run_in(run_dir, store, config, experiment, resume=bool(resume), progress=progress,
                           stop_after=stop_after)
    except BaseException:
        # failed before any work: nothing to resume, nothing kept
        if not resume and not has_checkpoint(run_dir):
            shutil.rmtree(run_dir, ignore_errors=True)
        raise


def _run_in(run_dir: Path, store: Store, config: ExperimentConfig, experiment, *, resume: bool, progress,
            stop_after: int | None) -> ExperimentResult:
    """Train, write the records, fit and draw: the work of :func:`run_experiment` in its run directory."""
    steps_done, ds, prov = train_dataset(config, run_dir=run_dir, resume=resume, progress=progress,
                                         stop_after=stop_after)
    if ds is None:
        return ExperimentResult(config=config, work_dir=run_dir, finished=False, steps_done=steps_done)
    record = store.write(ds, kind=TOY_RUN, name=config.experiment)
    ds.attrs["store_record"] = record
    RunDir(run_dir).write_record(record)
    settings = FitSettings()
    fits = fit_dataset(ds, settings)
    fit_ds = fits_to_dataset(fits, source_record=record, settings=settings)
    fit_ds.attrs.update(prov)
    fit_record = store.write(fit_ds, kind=FIT, name=config.experiment)
    atomic_write(run_dir / FITS_NAME, json.dumps([f.to_json() for f in fits], indent=1))
    figure = save_figure(experiment.figure(ds, fits), run_dir / FIGURE_NAME, prov)
    return ExperimentResult(config=config, work_dir=run_dir, finished=True, steps_done=steps_done,
                            record=record, fit_record=fit_record, dataset=ds, fits=tuple(fits), figure=figure)
