r"""The ground truth of a finished toy run: every depth's optimum reached by L-BFGS, and the exponent of the
optima beside the run's own interval.

Verdict v4 (:mod:`resflow.fitting.certification`) certifies an exponent from ordinary training: its routes
agree and its drift along training has stopped.  A certificate is worth what it is checked against, so on a
run small enough for it (``--preset ground-truth``: width-8 teachers of depth 16, students of depths 1-8),
:func:`reach_optima` takes every (teacher, replicate, depth) cell's trained starts -- the best student of
each route (a depth with one route: each initialisation) -- and carries each to its optimum by full-batch
L-BFGS in float64 on a fixed sample, scored on fresh inputs (:func:`resflow.training.optimum.reach_optimum`).
Per replicate the **optimum** of a depth is the lowest fresh-input loss known over its starts -- L-BFGS's, or
the trained start's where L-BFGS, fitting its fixed sample, ended higher on fresh inputs -- the **spread** of
the starts (worst / best - 1) says whether they reached one optimum, and the exponent of the optima is the
least-squares slope over the depths, averaged over the replicates (their t interval beside it).

Each start's result is written to ``RUN_DIR/optimum/<settings>/`` as it is reached (one JSON file per start;
other settings' results are kept beside, never replaced), so an
interrupted run continues where it stopped and nothing reached is lost; the whole is then an ``optimum``
store record, with the run's provenance and the settings.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .._atomic import atomic_write
from .._overrides import config_from_dict
from ..errors import ConfigError
from ..experiments import ExperimentConfig
from ..loglog import slopes
from ..provenance import provenance
from ..records.kinds import OPTIMUM
from ..store import Store
from ..training.optimum import OptimumSettings, reach_optimum
from ..training.routes import train_routes
from .rundir import RECORD_NAME, RUN_INFO, RunDir

__all__ = ["OptimumExponent", "OptimaRun", "reach_optima", "settings_dir", "OPTIMA_DIR"]

OPTIMA_DIR = "optimum"  # in the run directory: one JSON file per start reached


@dataclass(frozen=True, kw_only=True)
class OptimumExponent:
    """The exponent of one teacher's optima: per replicate the slope of the best optimum loss per depth
    (``replicate_exponents``), their mean ``exponent`` and t interval, the optima per depth (replicate mean),
    and the largest spread of the starts per depth (``start_spread``: worst / best - 1 over replicates)."""

    target: str
    depths: tuple[int, ...]
    exponent: float
    ci_low: float
    ci_high: float
    replicate_exponents: tuple[float, ...]
    optima: tuple[float, ...]
    start_spread: tuple[float, ...]
    settled: int  # starts whose loss settled (OptimumSettings), of
    starts: int
    improved: int = 0  # starts whose fresh-input loss L-BFGS lowered (the others keep the trained start's)


@dataclass(frozen=True)
class OptimaRun:
    """What :func:`reach_optima` returns: the optima's Dataset (``optimum`` record ``record``) and the
    exponent of each teacher's optima."""

    run_dir: Path
    source_record: str
    record: str
    dataset: object
    exponents: tuple[OptimumExponent, ...]


def _config_of(run_dir: Path) -> ExperimentConfig:
    found = RunDir(run_dir)
    if not found.is_run or not found.finished:
        raise ConfigError(f"run_dir must be the directory of a finished toy run (with {RUN_INFO} and "
                          f"{RECORD_NAME}); {str(run_dir)!r} is not. `resflow run` prints it when it ends.")
    config = config_from_dict(ExperimentConfig, found.info()["config"])
    if config.train.loss != "mse" or config.classifies or any(g != 0 for g in config.student_groups):
        raise ConfigError("optima are reached for MSE students of flow teachers with their own weights per "
                          f"layer (the smooth-vs-rough runs); {str(run_dir)!r} is not one. Use --preset "
                          "ground-truth.")
    return config


def _starts(result, config: ExperimentConfig) -> dict[tuple, list]:
    """Per (target, replicate, depth): the trained starts -- each route's best full-length student, or each
    init where one route trained the depth -- as ``(name, spec)``."""
    finals = {repr(s): float(np.mean(b)) for s, b in zip(result.specs, result.final_batches, strict=True)}
    cells: dict[tuple, dict[str, list]] = {}
    for spec, failed in zip(result.specs, result.failed, strict=True):
        if spec.length != 1.0 or failed or not math.isfinite(finals[repr(spec)]):
            continue
        cell = cells.setdefault((spec.target, spec.replicate, spec.depth), {})
        cell.setdefault(spec.route, []).append(spec)
    out = {}
    for key, routes in cells.items():
        if len(routes) >= 2:
            out[key] = [(route, min(specs, key=lambda s: finals[repr(s)])) for route, specs in routes.items()]
        else:
            ((route, specs),) = routes.items()
            out[key] = [(f"{route} init {s.init}", s) for s in sorted(specs, key=lambda s: s.init)]
    return out


def settings_dir(run_dir: Path | str, settings: OptimumSettings) -> Path:
    """Where the optima of ``settings`` are kept: ``RUN_DIR/optimum/<hash of the settings>/``, one JSON file
    per start."""
    key = hashlib.sha256(json.dumps(asdict(settings), sort_keys=True).encode()).hexdigest()[:12]
    return Path(run_dir) / OPTIMA_DIR / key


def _file(directory: Path, target: str, replicate: int, depth: int, start: str) -> Path:
    safe = "".join(c if c.isalnum() else "-" for c in f"{target}-{replicate}-{depth}-{start}")
    return directory / f"{safe}.json"


def reach_optima(run_dir: Path | str, *, settings: OptimumSettings | None = None, targets=None,
                 progress: Callable[[int, int, str], None] | None = None) -> OptimaRun:
    """Reach the optimum of every start of the finished toy run in ``run_dir`` (module docstring) and write
    them as an ``optimum`` record to the run's store; ``progress(done, total, what)`` after each start.
    ``targets`` keeps only those teachers (default: every teacher of the run), so that two processes can
    share a run's starts: each writes its own starts' files, and a last call without ``targets`` reads them
    all."""
    import torch

    run_dir = Path(run_dir)
    config = _config_of(run_dir)
    settings = settings or OptimumSettings()
    source = RunDir(run_dir).record
    teachers = config.teachers()
    result = train_routes(config.student_specs(), teachers, config.train, seed=config.seed, run_dir=run_dir,
                          resume=True)  # a finished run: its trained students, nothing trained again
    parameters = {repr(s): p for s, p in result.parameters.items()}
    starts = _starts(result, config)
    if targets is not None:
        unknown = sorted(set(targets) - set(config.targets))
        if unknown:
            raise ConfigError(f"targets must be teachers of the run ({', '.join(config.targets)}); got "
                              f"{', '.join(unknown)}.")
        starts = {key: names for key, names in starts.items() if key[0] in set(targets)}
    wanted = json.dumps(asdict(settings), sort_keys=True)
    directory = settings_dir(run_dir, settings)  # other settings' optima are kept beside, never replaced
    directory.mkdir(parents=True, exist_ok=True)
    total, done = sum(len(v) for v in starts.values()), 0
    reached: dict[tuple, dict] = {}
    for (target, replicate, depth), names in sorted(starts.items()):
        for name, spec in names:
            path = _file(directory, target, replicate, depth, name)
            row = json.loads(path.read_text()) if path.exists() else None
            if row is None or row.get("settings") != wanted:
                with torch.no_grad():
                    start = {k: v.detach().clone() for k, v in parameters[repr(spec)].items()}
                found = reach_optimum(teachers[(target, replicate)], start, scheme=spec.scheme,
                                      settings=settings)
                row = {"settings": wanted, "start": name, "start_loss": found.start_loss,
                       "test_loss": found.test_loss, "train_loss": found.train_loss,
                       "gradient_norm": found.gradient_norm, "relative_gradient": found.relative_gradient,
                       "evaluations": found.evaluations, "last_fall": found.last_fall,
                       "settled": found.settled}
                atomic_write(path, json.dumps(row, indent=1))
            reached[(target, replicate, depth, name)] = row
            done += 1
            if progress is not None:
                progress(done, total, f"{target} ℓ = {depth} replicate {replicate} from {name}")
    ds = _optima_dataset(reached, [t for t in config.targets if targets is None or t in set(targets)],
                         settings)
    ds.attrs.update(provenance(config.to_dict(), seed=config.seed, experiment=config.experiment))
    ds.attrs.update({"source_record": source, "optimum_settings": wanted})
    store = Store.open(run_dir.parent.parent)  # the run's store: STORE/work/RUN_DIR
    record = store.write(ds, kind=OPTIMUM, name=config.experiment)
    return OptimaRun(run_dir=run_dir, source_record=source, record=record, dataset=ds,
                     exponents=tuple(optimum_exponents(ds)))


_VARIABLES = {  # row key -> (long_name, units)
    "start_loss": ("test loss of the trained start (fresh inputs)", "loss"),
    "test_loss": ("test loss of the optimum reached (fresh inputs)", "loss"),
    "train_loss": ("loss of the optimum reached on its fixed sample", "loss"),
    "gradient_norm": ("norm of the gradient at the optimum reached (fixed sample)", "loss"),
    "relative_gradient": ("|gradient| |parameters| / loss at the optimum reached", "1"),
    "evaluations": ("L-BFGS loss evaluations", "1"),
    "last_fall": ("share of the loss lost over the last window of evaluations", "1"),
    "settled": ("the loss settled and the gradient is within its tolerance", "1"),
}


def _optima_dataset(reached: dict[tuple, dict], targets: list[str], settings: OptimumSettings):
    import xarray as xr

    depths = sorted({k[2] for k in reached})
    replicates = sorted({k[1] for k in reached})
    n_start = max(sum(1 for k in reached if k[:3] == cell) for cell in {k[:3] for k in reached})
    shape = (len(targets), len(depths), len(replicates), n_start)
    data = {name: np.full(shape, np.nan) for name in _VARIABLES}
    names = np.full(shape, "", dtype=object)
    for (target, replicate, depth, name), row in reached.items():
        cell = (targets.index(target), depths.index(depth), replicates.index(replicate))
        j = next(j for j in range(n_start) if names[cell + (j,)] in ("", name))
        names[cell + (j,)] = name
        for key in _VARIABLES:
            data[key][cell + (j,)] = float(row[key])
    variables = {key: (("target", "depth", "replicate", "start"), values,
                       {"long_name": _VARIABLES[key][0], "units": _VARIABLES[key][1]})
                 for key, values in data.items()}
    variables["start_name"] = (("target", "depth", "replicate", "start"), names.astype(str),
                               {"long_name": "the trained start: a route's best student, or one init",
                                "units": "1"})
    coords = {"target": ("target", targets, {"long_name": "teacher (target function) family"}),
              "depth": ("depth", depths, {"long_name": "student depth", "units": "layers"}),
              "replicate": ("replicate", replicates, {"long_name": "replicate (own teacher)"}),
              "start": ("start", np.arange(n_start), {"long_name": "start index within the cell"})}
    return xr.Dataset(variables, coords=coords, attrs={"samples": settings.samples,
                                                       "test_samples": settings.test_samples})


def optimum_exponents(ds) -> list[OptimumExponent]:
    """The exponent of each teacher's optima in an ``optimum`` Dataset (module docstring)."""
    from scipy import stats

    out = []
    depths = [int(d) for d in ds["depth"].values]
    for target in ds["target"].values:
        one = ds.sel(target=target)
        # the lowest fresh-input loss known from each start: L-BFGS's, or the trained start's where L-BFGS,
        # fitting its fixed sample, ended higher on fresh inputs
        known = np.fmin(one["test_loss"].values, one["start_loss"].values)  # (depth, replicate, start)
        best, worst = np.nanmin(known, axis=-1), np.nanmax(known, axis=-1)  # (depth, replicate)
        improved = one["test_loss"].values < one["start_loss"].values
        per = np.asarray(slopes(np.asarray(depths, float), best.T), float)  # (replicate,)
        n = per.size
        half = (float(stats.t.ppf(0.975, n - 1) * per.std(ddof=1) / math.sqrt(n)) if n >= 2 and
                np.all(np.isfinite(per)) else math.nan)
        settled = one["settled"].values
        out.append(OptimumExponent(
            target=str(target), depths=tuple(depths), exponent=float(per.mean()),
            ci_low=float(per.mean() - half), ci_high=float(per.mean() + half),
            replicate_exponents=tuple(float(v) for v in per),
            optima=tuple(float(v) for v in np.nanmean(best, axis=1)),
            start_spread=tuple(float(v) for v in np.nanmax(worst / best - 1, axis=1)),
            settled=int(np.nansum(settled)), starts=int(np.isfinite(settled).sum()),
            improved=int(improved.sum())))
    return out
