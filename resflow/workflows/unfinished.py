"""Runs without a record yet: in progress, interrupted, or stopped before any work.

A run (``resflow run``) works in ``STORE/work/<run-id>/`` (:class:`~resflow.workflows.rundir.RunDir`); it
writes its record to the store only at the end.  :func:`unfinished_runs` lists every run directory without a
record (by the one scanner, :func:`~resflow.workflows.rundir.run_dirs`) -- how far it got,
whether a process still works on it (the lock is held), and the command that resumes it -- for
``resflow store check`` and ``resflow report``; :func:`idle_run_dirs` names those that did no work, which
:func:`gc_store` removes.
"""

from __future__ import annotations

import datetime as _dt
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._overrides import config_from_dict, flat
from ..errors import ConfigError
from ..experiments.config import ExperimentConfig
from ..experiments.registry import registered
from ..llm.ladder.train import RESULT, LadderConfig, model_name
from ..store import Leftover, Store, StoreReport
from ..store.store import STALE_AFTER_S
from .rundir import RunDir, checkpoint_steps, run_dirs

__all__ = ["UnfinishedRun", "unfinished_runs", "read_run", "idle_run_dirs", "gc_store", "config_from_dict",
           "nearest_preset", "IN_PROGRESS", "INTERRUPTED", "UNKNOWN", "NO_WORK"]

IN_PROGRESS = "in progress"  # a live process holds the run's lock
INTERRUPTED = "interrupted"  # the lock is free: its process ended before the record was written
UNKNOWN = "in progress or interrupted"  # no lock to ask: a run of a resflow before run locks
NO_WORK = "unfinished run (no work done)"  # what a run directory without work is, as a leftover
SHOWN_CHANGES = 6  # changes from the preset a listing names before "and N more"


@dataclass(frozen=True, kw_only=True)
class UnfinishedRun:
    """A run directory of a store without a record: what it runs, how far it got, who works on it.

    ``done``/``total`` count steps (toy runs: at the last checkpoint, over every training run of the
    experiment) or models (the language-model ladder); ``stages`` say the same per training run.
    ``config`` is None when ``run.json`` cannot be read (then ``experiment`` is what its id says).
    """

    run_id: str
    path: Path
    store: Path
    experiment: str
    config: Any | None
    preset: str | None  # as recorded by the run, else the preset nearest its configuration
    changes: tuple[str, ...]  # key=value where the configuration differs from that preset
    started: _dt.datetime | None
    state: str  # IN_PROGRESS | INTERRUPTED | UNKNOWN
    writer: str  # "<pid>@<host>" of the process that took the lock last ("" when there is no lock)
    done: int | None
    total: int | None
    unit: str  # "steps" | "models"
    stages: tuple[str, ...]
    # when the last checkpoint (or model) was written, POSIX time; None: no work done yet
    written: float | None

    @property
    def work_done(self) -> bool:
        return self.written is not None

    @property
    def resume_command(self) -> str:
        return f"resflow run {self.run_id} --out {shlex.quote(str(self.store))} --resume"

    @property
    def progress(self) -> str:
        """How far it got, in a few words: ``checkpoint at step 1500 of 6000``, ``no checkpoint yet``."""
        if not self.work_done:
            return "no checkpoint yet"
        return (f"checkpoint at step {'?' if self.done is None else self.done} of {self.total or '?'}"
                if self.unit == "steps" else f"{self.done} of {self.total} models trained")

    def lines(self, now: float | None = None) -> list[str]:
        """A few plain lines for a listing: the id and state, what it runs, how far it got, how to resume."""
        now = time.time() if now is None else now
        state = self.state + (f" ({self.writer} holds its lock)"
                              if self.state == IN_PROGRESS and self.writer else "")
        preset = "" if self.preset is None else f", preset {self.preset}"
        if self.changes:
            more = len(self.changes) - SHOWN_CHANGES
            preset += (f" with {', '.join(self.changes[:SHOWN_CHANGES])}"
                       + (f" and {more} more" if more > 0 else ""))
        started = "" if self.started is None else (f", started {self.started:%Y-%m-%d %H:%M} UTC "
                                                   f"({_ago(now - self.started.timestamp())})")
        far = self.progress
        if self.work_done:
            far += (f" ({', '.join(self.stages)})" if len(self.stages) > 1 else "") + \
                f", written {_ago(now - self.written)}"
        out = [f"{self.run_id}: {state}", f"  {self.experiment}{preset}{started}", f"  {far}"]
        if self.state != IN_PROGRESS and self.work_done:
            out.append(f"  resume: {self.resume_command}")
        return out


def _ago(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    return f"{seconds / 60:.0f} min ago" if seconds < 7200 else f"{seconds / 3600:.1f} h ago"


def setting(key: str, value: Any) -> str:
    """``key=value`` as ``--set`` takes it (``depths=2,4,8``)."""
    return f"{key}={','.join(map(str, value)) if isinstance(value, list | tuple) else value}"


def nearest_preset(config: Any) -> tuple[str | None, tuple[str, ...]]:
    """The preset of ``config``'s experiment that differs from it in the fewest keys, and those keys as
    ``key=value`` (``(None, ())`` for an experiment not registered here)."""
    experiment = registered().get(config.experiment)
    if experiment is None:
        return None, ()
    mine = flat(config)
    best = None
    for name, candidate in experiment.presets.items():
        theirs = flat(candidate)
        changes = tuple(setting(k, v) for k, v in mine.items() if theirs.get(k) != v)
        if best is None or len(changes) < len(best[1]):
            best = name, changes
    return best if best is not None else (None, ())


def read_run(run_dir: Path, store: Path | None = None) -> UnfinishedRun:
    """What ``run_dir`` (a run directory of ``store``) holds: its configuration, state and progress."""
    found = RunDir(run_dir)
    run_dir, info = found.path, found.info()
    config = _config(info.get("config"))
    preset, changes = nearest_preset(config) if config is not None else (None, ())
    if config is not None and info.get("preset"):
        preset = info["preset"]
        presets = registered()[config.experiment].presets
        if preset in presets:
            theirs = flat(presets[preset])
            changes = tuple(setting(k, v) for k, v in flat(config).items() if theirs.get(k) != v)
    writer, held = found.lock()
    state = UNKNOWN if held is None else IN_PROGRESS if held else INTERRUPTED
    experiment = config.experiment if config is not None else run_dir.name.rsplit("-", 1)[0]
    progress = (_ladder_progress if isinstance(config, LadderConfig) else _toy_progress)(run_dir, config)
    return UnfinishedRun(run_id=run_dir.name, path=run_dir,
                         store=Path(store) if store else run_dir.parents[1],
                         experiment=experiment, config=config, preset=preset, changes=changes,
                         started=found.started, state=state, writer=writer, **progress)


def _config(data: Any) -> Any | None:
    if not isinstance(data, dict) or data.get("experiment") not in registered():
        return None
    kind = type(next(iter(registered()[data["experiment"]].presets.values())))
    try:
        return config_from_dict(kind, data)
    except (ConfigError, TypeError):
        return None


def _toy_progress(run_dir: Path, config: ExperimentConfig | None) -> dict[str, Any]:
    found = checkpoint_steps(run_dir)
    stages = (len(config.depths) if config.init == "doubling" else 2 if "continuation" in config.routes else 1
              ) if config is not None else max(len(found), 1)
    steps = [step for step, _ in found.values()]
    done = None if None in steps else sum(steps)
    names = [f"{name or 'run'} {'?' if step is None else step}" for name, (step, _) in found.items()]
    names += [f"{stages - len(found)} more not started"] * (0 < len(found) < stages)
    return {"done": done, "total": None if config is None else config.train.steps * stages, "unit": "steps",
            "stages": tuple(names), "written": max((t for _, t in found.values()), default=None)}


def _ladder_progress(run_dir: Path, config: LadderConfig) -> dict[str, Any]:
    models = run_dir / "models"
    finished = [m for m in config.models() if (models / model_name(*m) / RESULT).is_file()]
    times = [p.stat().st_mtime for p in models.rglob("*") if p.is_file()] if models.is_dir() else []
    return {"done": len(finished), "total": len(config.models()), "unit": "models", "stages": (),
            "written": max(times, default=None)}


def unfinished_runs(store: Path | str | Store) -> list[UnfinishedRun]:
    """Every run directory of ``store`` (``work/*/run.json``) without a record, oldest first; changes
    nothing."""
    path = store.path if isinstance(store, Store) else Path(store)
    return [read_run(found.path, path) for found in run_dirs(path, unfinished=True)]


def idle_run_dirs(runs: list[UnfinishedRun], *, stale_after_s: float = STALE_AFTER_S) -> list[Leftover]:
    """The runs of ``runs`` that did no work and no process works on, as leftovers: removable when their lock
    is free, or (a run of a resflow before run locks) when nothing in them changed for ``stale_after_s``."""
    now, out = time.time(), []
    for run in runs:
        if run.work_done or run.state == IN_PROGRESS:
            continue
        age = now - max(p.stat().st_mtime for p in (run.path, *run.path.iterdir()))
        removable = run.state == INTERRUPTED or age > stale_after_s
        out.append(Leftover(run.path, NO_WORK, run.writer, False, age, removable,
                            "" if removable else ("kept: started by a resflow without run locks, "
                                                  "it may still be starting; removable once a day old")))
    return out


def gc_store(store: Path | str | Store, *, dry_run: bool = False) -> StoreReport:
    """:meth:`resflow.store.Store.gc`, and the run directories of runs that did no work
    (:func:`idle_run_dirs`); never a run with a checkpoint, never one a live process holds."""
    import shutil

    opened = store if isinstance(store, Store) else Store.open(store)
    report = opened.gc(dry_run=dry_run)
    for left in idle_run_dirs(unfinished_runs(opened)):
        report.leftovers.append(left)
        if not left.removable:
            continue
        if not dry_run:
            shutil.rmtree(left.path, ignore_errors=True)
            if left.path.exists():  # not ours to remove: say so by not listing it
                continue
        report.removed.append(left.path)
    return report
