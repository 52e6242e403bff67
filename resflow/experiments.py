"""Experiments: frozen configurations, presets, ``--set`` overrides, and running one into a store.

An experiment is a module in ``resflow.sims`` (the repository's ``sims/``) defining ``PRESETS``
(name -> :class:`ExperimentConfig`) and ``figure(ds, fits)``.  :func:`run_experiment` builds the
teachers and students, trains them with :func:`resflow.engine.train`, writes the labelled Dataset,
the fits and the figure into a new run directory of the store, and can resume an interrupted run.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xarray as xr

from ._validate import check_int
from .engine import CHECKPOINT_NAME, train
from .errors import ConfigError, UnknownNameError
from .fitting import SeriesFit, fit_dataset
from .plotting import save_figure
from .provenance import provenance
from .results import build_dataset
from .store import Store
from .students import StudentSpec
from .tableau import TABLEAUX
from .teacher import Teacher, TeacherConfig
from .training import TrainConfig

__all__ = ["EXPERIMENTS", "ExperimentConfig", "load_experiment", "preset", "run_experiment", "find_resumable",
           "RECORD_NAME", "FIGURE_NAME"]

EXPERIMENTS = {
    "smooth-vs-rough": "resflow.sims.smooth_vs_rough",
    "temperature": "resflow.sims.temperature",
    "rk2": "resflow.sims.rk2",
    "roughness": "resflow.sims.roughness",
}
RECORD_NAME = "record.txt"  # in a work directory: the id of the store record it produced
FIGURE_NAME = "figure.png"
RUN_INFO = "run.json"


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that defines a run: teachers, students, training.

    ``targets`` are teacher specs (``independent``, ``tied``, ``correlated:0.9``, ``fractional:0.75``);
    every target gets students of every ``depth`` x ``scheme`` x seed (``seeds`` of them, from
    ``seed``) x temperature (KL).
    """

    experiment: str
    targets: tuple[str, ...] = ("independent", "tied")
    width: int = 16
    teacher_depth: int = 32
    vocab: int = 128
    teacher_seed: int = 0
    depths: tuple[int, ...] = (2, 4, 8, 16)
    schemes: tuple[str, ...] = ("euler",)
    seeds: int = 3
    seed: int = 0
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        if self.experiment not in EXPERIMENTS:
            raise UnknownNameError(f"unknown experiment {self.experiment!r}; choose one of {', '.join(EXPERIMENTS)}.")
        for name in ("width", "teacher_depth", "vocab", "seeds"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), minimum=1))
        for name in ("teacher_seed", "seed"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), minimum=0))
        object.__setattr__(self, "depths", tuple(sorted(check_int("depths", d, minimum=1) for d in self.depths)))
        if len(set(self.depths)) < 2:
            raise ConfigError(f"depths must hold at least two different depths to fit an exponent; got {self.depths}.")
        for s in self.schemes:
            if s not in TABLEAUX:
                raise UnknownNameError(f"scheme {s!r} is not registered; choose from {', '.join(TABLEAUX)}.")
        if not self.targets:
            raise ConfigError("targets must name at least one teacher, e.g. ('independent', 'tied').")
        for t in self.targets:
            self.teacher_config(t)  # validates the spec

    def teacher_config(self, target: str) -> TeacherConfig:
        return TeacherConfig.from_spec(target, width=self.width, depth=self.teacher_depth, vocab=self.vocab,
                                       seed=self.teacher_seed)

    def student_specs(self) -> list[StudentSpec]:
        temps = self.train.temperatures if self.train.loss == "kl" else (math.nan,)
        return [StudentSpec(t, s, d, self.seed + k, temp) for t in self.targets for s in self.schemes
                for d in self.depths for k in range(self.seeds) for temp in temps]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def with_overrides(self, assignments: list[str]) -> ExperimentConfig:
        """Apply ``key=value`` overrides (``train.steps=2000``, ``depths=2,4,8``, ``targets=tied``)."""
        top = {f.name: f for f in dataclasses.fields(self)}
        inner = {f.name: f for f in dataclasses.fields(TrainConfig)}
        outer_values: dict[str, Any] = {}
        train_values: dict[str, Any] = {}
        for item in assignments:
            key, sep, raw = item.partition("=")
            if not sep:
                raise ConfigError(f"--set expects key=value; got {item!r}.")
            key = key.strip()
            if key.startswith("train."):
                name = key[len("train."):]
                if name not in inner:
                    raise ConfigError(f"unknown key {key!r}; train keys are: {', '.join('train.' + k for k in inner)}.")
                train_values[name] = _parse(raw, getattr(self.train, name), key)
            elif key in top and key not in ("experiment", "train"):
                outer_values[key] = _parse(raw, getattr(self, key), key)
            else:
                valid = [k for k in top if k not in ("experiment", "train")] + ["train.<key>"]
                raise ConfigError(f"unknown key {key!r}; valid keys are: {', '.join(valid)}.")
        train_cfg = dataclasses.replace(self.train, **train_values) if train_values else self.train
        return dataclasses.replace(self, train=train_cfg, **outer_values)


def _parse(raw: str, current: Any, key: str) -> Any:
    raw = raw.strip()
    try:
        if isinstance(current, bool):
            if raw.lower() not in ("true", "false", "1", "0"):
                raise ValueError
            return raw.lower() in ("true", "1")
        if isinstance(current, tuple):
            items = [x for x in raw.split(",") if x.strip()]
            sample = current[0] if current else ""
            kind = type(sample) if current else (float if key.endswith("temperatures") else str)
            return tuple(kind(x.strip()) for x in items)
        if isinstance(current, int):
            return int(raw)
        if isinstance(current, float):
            return float(raw)
        return raw
    except ValueError:
        raise ConfigError(f"cannot read {key}={raw!r} as {type(current).__name__}.") from None


def load_experiment(name: str):
    if name not in EXPERIMENTS:
        raise UnknownNameError(f"unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)}.")
    return importlib.import_module(EXPERIMENTS[name])


def preset(name: str, preset_name: str) -> ExperimentConfig:
    module = load_experiment(name)
    if preset_name not in module.PRESETS:
        raise UnknownNameError(f"experiment {name!r} has no preset {preset_name!r}; choose one of "
                               f"{', '.join(module.PRESETS)}.")
    return module.PRESETS[preset_name]


def find_resumable(store: Path, experiment: str) -> Path:
    """Latest work directory of ``experiment`` in ``store`` with a checkpoint and no record yet."""
    work = Path(store) / "work"
    candidates = sorted(p for p in work.glob(f"{experiment}-*") if (p / CHECKPOINT_NAME).exists()
                        and not (p / RECORD_NAME).exists()) if work.is_dir() else []
    if not candidates:
        raise ConfigError(f"no interrupted {experiment!r} run to resume in {str(store)!r}; run without --resume.")
    return candidates[-1]


def run_experiment(config: ExperimentConfig, *, out: Path, resume: bool = False, progress=None,
                   stop_after: int | None = None) -> tuple[Path, xr.Dataset, list[SeriesFit]]:
    """Train, write the Dataset as a ``toy-run`` record of the store ``out``, and ``fits.json``,
    ``figure.png`` into the run's work directory ``out/work/<experiment>-<time>/`` (returned)."""
    if resume:
        run_dir = find_resumable(out, config.experiment)  # before opening: resuming never creates a store
        store = Store.open(out)
        saved = json.loads((run_dir / RUN_INFO).read_text())
        if saved["config"] != json.loads(json.dumps(config.to_dict(), default=str)):
            raise ConfigError(f"{run_dir} was started with a different configuration; pass the same preset and --set "
                              "options to resume it.")
    else:
        store = Store.open(out, create=True)
        run_dir = store.work_dir(config.experiment)
        (run_dir / RUN_INFO).write_text(json.dumps({"config": config.to_dict()}, indent=1, default=str))
    teachers = {t: Teacher(config.teacher_config(t)) for t in config.targets}
    result = train(config.student_specs(), teachers, config.train, seed=config.seed, run_dir=run_dir,
                   resume=resume, progress=progress, stop_after=stop_after)
    if result.steps_done < config.train.steps:
        return run_dir, None, []
    prov = provenance(config.to_dict(), seed=config.seed, experiment=config.experiment, device=result.device)
    ds = build_dataset(result, loss=config.train.loss, targets=list(config.targets), attrs=prov)
    record = store.write(ds, kind="toy-run", name=config.experiment)
    ds.attrs["store_record"] = record
    (run_dir / RECORD_NAME).write_text(record + "\n")
    fits = fit_dataset(ds)
    (run_dir / "fits.json").write_text(json.dumps([f.to_json() for f in fits], indent=1))
    save_figure(load_experiment(config.experiment).figure(ds, fits), run_dir / FIGURE_NAME, prov)
    return run_dir, ds, fits

