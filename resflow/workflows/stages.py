"""A toy run as a fixed list of stages: train -> measure -> record -> fit -> draw.

Each stage is an object with a ``name`` and ``run(plan, context, previous)``: it takes the run's
:class:`~resflow.workflows.plan.RunPlan`, the :class:`RunContext` (where and how the run works) and the
previous stage's typed output, and returns its own.  :func:`run_stages` calls them in order and stops after
training when training stopped early (``stop_after``).  :func:`resflow.workflows.run.run_experiment` runs all
of :data:`STAGES`; a sweep cell runs the first three without a store (``docs/design/run-spine.md``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import xarray as xr

from .._atomic import atomic_write
from ..errors import ConfigError
from ..fitting.fit_records import fits_to_dataset
from ..fitting.fits import FitSettings, SeriesFit, fit_dataset
from ..presenting.plots import save_figure
from ..probing.probes import SIGNATURE_LABELS, state_signature
from ..provenance import provenance
from ..records import build_dataset
from ..records.kinds import FIT, TOY_RUN
from ..store import Store
from ..training.continuation import train_by_doubling
from ..training.results import TrainingResult
from ..training.routes import train_routes
from .exits import EXIT_RULE_NOTE
from .measures import Measurements, TrainedStudents, measure_students
from .plan import RunPlan
from .rundir import RunDir

__all__ = ["RunContext", "Trained", "Measured", "Recorded", "Fitted", "Drawn", "Stage", "STAGES",
           "RECORD_STAGES", "run_stages", "FIGURE_NAME", "FITS_NAME"]

FIGURE_NAME = "figure.png"
FITS_NAME = "fits.json"


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """Where and how a run works: its directory (checkpoints; None: in memory), its store (None: build the
    record without writing it), whether it resumes, its progress callback and an early stop."""

    run_dir: Path | None = None
    store: Store | None = None
    resume: bool = False
    progress: Callable[[int, int, dict[str, float]], None] | None = None
    stop_after: int | None = None


@dataclass(frozen=True)
class Trained:
    """Every student trained (or as far as ``stop_after`` let them): ``steps`` is the run's length."""

    result: TrainingResult
    steps: int

    @property
    def finished(self) -> bool:
        return self.result.steps_done >= self.steps


@dataclass(frozen=True)
class Measured:
    """The trained students and what the run's measures found on them."""

    result: TrainingResult
    measurements: Measurements


@dataclass(frozen=True)
class Recorded:
    """The run as a ``toy-run`` dataset with its provenance; ``record`` its id once written to the store."""

    dataset: xr.Dataset
    provenance: dict[str, str]
    record: str | None
    steps_done: int


@dataclass(frozen=True)
class Fitted:
    """The depth exponents of the record, and their ``fit`` record."""

    recorded: Recorded
    fits: tuple[SeriesFit, ...]
    fit_record: str | None


@dataclass(frozen=True)
class Drawn:
    """The experiment's figure of the fitted run."""

    fitted: Fitted
    figure: Path


class Stage(Protocol):
    """One step of a run: ``run(plan, context, previous stage's output) -> its own output``."""

    name: str

    def run(self, plan: RunPlan, context: RunContext, previous): ...


class _Named:
    name = ""

    def __repr__(self) -> str:
        return f"<stage {self.name}>"


class Train(_Named):
    """Train every student of the plan: by routes, or by depth-doubling continuation."""

    name = "train"

    def run(self, plan: RunPlan, context: RunContext, previous: None = None) -> Trained:
        config = plan.config
        kwargs = dict(seed=config.seed, run_dir=context.run_dir, resume=context.resume,
                      progress=context.progress, state_metrics=state_signature)
        if config.init == "doubling":
            if context.stop_after is not None:
                raise ConfigError("stop_after stops one training run; "
                                  "depth-doubling continuation (init='doubling') trains one run per depth. "
                                  "Interrupt it instead (it resumes stage by stage with --resume), "
                                  "or use init='scratch'.")
            result = train_by_doubling(list(plan.specs), plan.teachers, config.train, **kwargs)
        else:
            result = train_routes(list(plan.specs), plan.teachers, config.train,
                                  stop_after=context.stop_after, **kwargs)
        return Trained(result, config.train.steps)


class Measure(_Named):
    """Every measure of the plan that applies, on the trained students."""

    name = "measure"

    def run(self, plan: RunPlan, context: RunContext, previous: Trained) -> Measured:
        students = TrainedStudents.of_result(previous.result, plan.teachers, plan.config.train.dtype)
        return Measured(previous.result, measure_students(students, plan.measures))


class Record(_Named):
    """The run on named dimensions with its provenance, written to the store when the context has one."""

    name = "record"

    def run(self, plan: RunPlan, context: RunContext, previous: Measured) -> Recorded:
        config, result = plan.config, previous.result
        prov = provenance(plan.described, seed=config.seed, experiment=config.experiment,
                          device=result.device)
        prov["exit_rule"] = EXIT_RULE_NOTE["ce" if config.classifies else "regression"]
        if result.stage_wall_times:  # the seconds of each training run (routes: first, continuation)
            seconds = {k: round(v, 1) for k, v in result.stage_wall_times.items()}
            prov["stage_wall_time_s"] = json.dumps(seconds)
        ds = build_dataset(result, loss=config.train.loss, targets=list(config.targets), attrs=prov,
                           metric_labels={**SIGNATURE_LABELS, **previous.measurements.labels},
                           routes=config.routes, measured=previous.measurements.outputs)
        record = None
        if context.store is not None:
            record = context.store.write(ds, kind=TOY_RUN, name=config.experiment)
            ds.attrs["store_record"] = record
            if context.run_dir is not None:
                RunDir(context.run_dir).write_record(record)
        return Recorded(ds, prov, record, result.steps_done)


class Fit(_Named):
    """The depth exponents of every series, as a ``fit`` record and ``fits.json`` in the run directory."""

    name = "fit"

    def run(self, plan: RunPlan, context: RunContext, previous: Recorded) -> Fitted:
        settings = FitSettings()
        fits = tuple(fit_dataset(previous.dataset, settings))
        fit_record = None
        if context.store is not None:
            fit_ds = fits_to_dataset(list(fits), source_record=previous.record, settings=settings)
            fit_ds.attrs.update(previous.provenance)
            fit_record = context.store.write(fit_ds, kind=FIT, name=plan.config.experiment)
        if context.run_dir is not None:
            atomic_write(Path(context.run_dir) / FITS_NAME, json.dumps([f.to_json() for f in fits], indent=1))
        return Fitted(previous, fits, fit_record)


class Draw(_Named):
    """The experiment's figure, with the run's provenance, in the run directory."""

    name = "draw"

    def run(self, plan: RunPlan, context: RunContext, previous: Fitted) -> Drawn:
        figure = plan.experiment.figure(previous.recorded.dataset, list(previous.fits))
        path = save_figure(figure, Path(context.run_dir) / FIGURE_NAME, previous.recorded.provenance)
        return Drawn(previous, path)


STAGES: tuple[Stage, ...] = (Train(), Measure(), Record(), Fit(), Draw())
RECORD_STAGES: tuple[Stage, ...] = STAGES[:3]  # a sweep cell: trained, measured, a dataset


def run_stages(plan: RunPlan, context: RunContext, stages: Sequence[Stage] = STAGES):
    """Run ``stages`` in order, each on the previous one's output; the last output, or the :class:`Trained`
    of a run that stopped early."""
    output = None
    for stage in stages:
        output = stage.run(plan, context, output)
        if isinstance(output, Trained) and not output.finished:
            break
    return output
