"""``resflow run lm-ladder``: train the depth ladder, write its record, fit the depth law, draw the figure.

The work directory ``STORE/work/lm-ladder-<time>/`` holds the run's configuration, its tokenizer and
every model (``models/NAME/model``, an ordinary HuggingFace directory that ``resflow probe`` and
``resflow intervene`` read); ``--resume`` continues the latest unfinished ladder model by model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .._atomic import atomic_write
from ..errors import ConfigError
from ..llm.ladder.depth_use import ladder_depth_use_for
from ..llm.ladder.fit import LadderFit, ladder_fits
from ..llm.ladder.model import require_llm
from ..llm.ladder.records import ladder_dataset, ladder_tables, plot_ladder
from ..llm.ladder.train import SPEED_ONLY, LadderConfig, check_device, ladder_data, model_name, train_ladder
from ..presenting.plots import save_figure
from ..provenance import provenance
from ..records.kinds import LM_LADDER
from ..store import Store, run_lock
from .rundir import RUN_INFO, RunDir, resumable

__all__ = ["LadderRun", "run_ladder", "ladder_depth_use_of", "FIGURE_NAME"]

FIGURE_NAME = "figure.png"


@dataclass(frozen=True, kw_only=True)
class LadderRun:
    """What :func:`run_ladder` wrote: the record, the fits, the figure, the tables (Markdown)."""

    config: LadderConfig
    work_dir: Path
    record: str
    fits: tuple[LadderFit, ...]
    figure: Path
    tables: str


def _started(run_dir: Path) -> dict:
    """The configuration a ladder's work directory was started with, as JSON values; a key added to the
    configuration after the run started reads as its default (what the run did)."""
    stored = RunDir(run_dir).info()["config"]
    return {**json.loads(LadderConfig().to_json()), **stored}


def _resumable(store: Path, config: LadderConfig, run: str | None = None) -> Path:
    """The ladder to resume (:func:`resflow.workflows.rundir.resumable`, the one policy), if it was started
    with ``config`` but for the settings of speed alone."""
    run_dir = resumable(store, run=run, experiment=None if run else config.experiment).path

    def results(values: dict) -> dict:  # the settings that decide the results (device, workers: speed only)
        return {k: v for k, v in values.items() if k not in SPEED_ONLY}

    if results(_started(run_dir)) != results(json.loads(config.to_json())):
        raise ConfigError(f"{run_dir} was started with a different configuration; "
                          "pass the same preset and --set options to resume it "
                          "(the device and the number of workers may differ).")
    return run_dir


def run_ladder(config: LadderConfig, *, out: Path | str, resume: bool | str = False,
               progress: Callable[[int, int, str], None] | None = None) -> LadderRun:
    """Train and measure every model of ``config`` and write the ``lm-ladder`` record and figure into ``out``;
    ``resume`` continues the latest unfinished ladder of ``out``, or the run of that id."""
    require_llm()  # before anything is written
    check_device(config)
    out = Path(out)
    if resume:
        run_dir = _resumable(out, config, resume if isinstance(resume, str) else None)
        store = Store.open(out)
    else:
        store = Store.open(out, create=True)
        run_dir = store.work_dir(config.experiment)
        RunDir(run_dir).write_info(json.loads(config.to_json()))
    with run_lock(run_dir):  # held while it works: `resflow store check` tells in progress from interrupted
        trained = train_ladder(config, run_dir, progress=progress)
        prov = provenance(config.to_dict(), seed=config.first_seed, experiment=config.experiment,
                          device=trained.device)
        ds = ladder_dataset(trained, prov)
        record = store.write(ds, kind=LM_LADDER, name=config.experiment)
        RunDir(run_dir).write_record(record)
    fits = ladder_fits(ds)
    atomic_write(run_dir / "fits.json", json.dumps([f.to_json() for f in fits], indent=1))
    figure = save_figure(plot_ladder(ds, fits), run_dir / FIGURE_NAME, prov)
    return LadderRun(config=config, work_dir=run_dir, record=record, fits=tuple(fits), figure=figure,
                     tables=ladder_tables(ds, record))


def ladder_depth_use_of(work_dir: Path | str, device: str = "cpu", progress=None) -> dict:
    """The depth-use measures (:func:`resflow.llm.ladder.depth_use.ladder_depth_use`) of a ladder's work
    directory as its ``run.json`` configures it (keys it lacks at their defaults): what is missing is measured
    and saved beside what is there, for a ladder finished before a measure existed; its record is not
    rewritten."""
    run_dir = Path(work_dir)
    if not (run_dir / RUN_INFO).is_file() or not (run_dir / "models").is_dir():
        raise ConfigError(f"work_dir {str(run_dir)!r} is not a ladder's work directory (no {RUN_INFO} and "
                          "models/ in it); pass STORE/work/lm-ladder-<time>, as `resflow run lm-ladder` "
                          "printed it.")
    config = LadderConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in _started(run_dir).items()})
    named = [(model_name(*m), *m) for m in config.models()]
    return ladder_depth_use_for(config, run_dir, ladder_data(config, run_dir), named, device=device,
                                progress=progress)
