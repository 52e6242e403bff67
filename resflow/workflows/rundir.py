"""A run's directory, and the one scanner of a store's runs.

Every run -- a toy run (``resflow run EXPERIMENT``) or the language-model ladder (``resflow run
lm-ladder``) -- works in ``STORE/work/<run-id>/``: ``run.json`` (its configuration, preset and start), its
work (checkpoints of the run or of its stages; the ladder's ``models/``), ``run.lock``, which its process
holds while it works, and, once the record is in the store, ``record.txt`` with the record's id.
:class:`RunDir` answers every question about one such directory; :func:`run_dirs` lists a store's, and
:func:`resumable` is the one policy of resuming, which ``resflow run --resume`` (toy runs and the ladder),
``resflow store check``, ``resflow report`` and ``resflow optimum`` all go through:

- a run is **finished** when ``record.txt`` exists, **unfinished** otherwise;
- an unfinished run **resumes** when its ``run.json`` names an experiment registered here, it did some
  work (a checkpoint, or a file under the ladder's ``models/``) and no live process holds its lock;
- of several, the latest started (``run.json``'s time, else the time in its id; ties by id) is taken.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._atomic import atomic_write
from ..errors import ConfigError
from ..experiments.registry import registered
from ..store import RunBusyError, lock_holder
from ..training.engine import CHECKPOINT_NAME

__all__ = ["RunDir", "run_dirs", "resumable", "has_checkpoint", "checkpoint_steps", "run_started", "RUN_INFO",
           "RECORD_NAME"]

RUN_INFO = "run.json"  # {"config": ..., "preset": ..., "started": ISO time}
RECORD_NAME = "record.txt"  # the id of the store record the run produced: the run is finished
MODELS = "models"  # the ladder's trained models, one directory each
RUN_STAMP = re.compile(r"-(\d{8}T\d{6}Z)(?:-\d+)?$")  # the UTC time in a run id, <experiment>-<time>[-N]
_EPOCH = _dt.datetime.fromtimestamp(0, _dt.UTC)


@dataclass(frozen=True)
class RunDir:
    """One run's directory ``STORE/work/<run-id>/`` (module docstring): what it holds, read when asked."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def store(self) -> Path:
        return self.path.parents[1]

    @property
    def is_run(self) -> bool:
        """Whether the directory is a run's (it has ``run.json``): a demo's or a figure's is not."""
        return (self.path / RUN_INFO).is_file()

    def info(self) -> dict[str, Any]:
        """``run.json`` as written ({} when it is missing or unreadable)."""
        try:
            info = json.loads((self.path / RUN_INFO).read_text())
        except (OSError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    def write_info(self, config: dict[str, Any], *, preset: str | None = None,
                   started: str | None = None) -> None:
        """Write ``run.json`` (atomically): the configuration as JSON values, the preset, the start time."""
        info: dict[str, Any] = {"config": config}
        if preset is not None or started is not None:
            info.update(preset=preset, started=started)
        atomic_write(self.path / RUN_INFO, json.dumps(info, indent=1))

    @property
    def experiment(self) -> str | None:
        """The experiment ``run.json`` names, None when it names none."""
        config = self.info().get("config")
        name = config.get("experiment") if isinstance(config, dict) else None
        return name if isinstance(name, str) else None

    @property
    def started(self) -> _dt.datetime | None:
        """When the run started (UTC): from ``run.json``, else from its id."""
        return run_started(self.path)

    @property
    def record(self) -> str | None:
        """The id of the record the run wrote, None while it is unfinished."""
        try:
            return (self.path / RECORD_NAME).read_text().strip()
        except OSError:
            return None

    @property
    def finished(self) -> bool:
        return (self.path / RECORD_NAME).exists()

    def write_record(self, record: str) -> None:
        atomic_write(self.path / RECORD_NAME, record + "\n")

    @property
    def has_checkpoint(self) -> bool:
        return has_checkpoint(self.path)

    def last_written(self) -> float | None:
        """When its last work was written (POSIX time): a checkpoint, or a file of the ladder's models; None
        when it did no work."""
        checkpoints = (self.path / CHECKPOINT_NAME, *self.path.glob(f"*/{CHECKPOINT_NAME}"))
        times = [p.stat().st_mtime for p in checkpoints if p.is_file()]
        models = self.path / MODELS
        if models.is_dir():
            times += [p.stat().st_mtime for p in models.rglob("*") if p.is_file()]
        return max(times, default=None)

    @property
    def work_done(self) -> bool:
        return self.last_written() is not None

    def lock(self) -> tuple[str, bool | None]:
        """(who took the lock last, whether a live process holds it; None when there is no lock to ask)."""
        return lock_holder(self.path)

    @property
    def busy(self) -> bool:
        return bool(self.lock()[1])


def has_checkpoint(run_dir: Path) -> bool:
    """Whether a run directory holds a checkpoint of the run, or of one of its stages (``first/``,
    ``continuation/`` of :func:`resflow.training.train_routes`; ``depth-*/`` of depth-doubling continuation):
    what ``run`` and ``sweep`` resume from."""
    return (run_dir / CHECKPOINT_NAME).exists() or any(run_dir.glob(f"*/{CHECKPOINT_NAME}"))


def checkpoint_steps(run_dir: Path) -> dict[str, tuple[int | None, float]]:
    """Every checkpoint of a run directory, oldest first: stage (``""`` for the run itself) -> (its step, None
    when unreadable; when it was written, POSIX time).  Reads each checkpoint's step only (memory-mapped)."""
    import torch

    found = {}
    paths = [run_dir / CHECKPOINT_NAME, *run_dir.glob(f"*/{CHECKPOINT_NAME}")]
    for path in sorted((p for p in paths if p.is_file()), key=lambda p: p.stat().st_mtime):
        try:
            step = int(torch.load(path, map_location="cpu", weights_only=True, mmap=True)["step"])
        except Exception:  # damaged, or replaced while we read: the step is unknown, the stage is there
            step = None
        found["" if path.parent == run_dir else path.parent.name] = (step, path.stat().st_mtime)
    return found


def run_started(run_dir: Path) -> _dt.datetime | None:
    """When the run of ``run_dir`` started (UTC): from its ``run.json``, else from its id."""
    try:
        return _dt.datetime.fromisoformat(json.loads((run_dir / RUN_INFO).read_text())["started"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    stamp = RUN_STAMP.search(run_dir.name)
    return _dt.datetime.strptime(stamp.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=_dt.UTC) if stamp else None


def run_dirs(store: Path | str, *, unfinished: bool = False) -> list[RunDir]:
    """Every run directory of ``store`` (``work/*/run.json``), oldest first (by start, then id); only those
    without a record when ``unfinished``.  Changes nothing."""
    work = Path(store) / "work"
    found = [RunDir(p) for p in work.iterdir()] if work.is_dir() else []
    found = [r for r in found if r.is_run and not (unfinished and r.finished)]
    return sorted(found, key=lambda r: (r.started or _EPOCH, r.run_id))


def resumable(store: Path | str, *, run: str | None = None, experiment: str | None = None) -> RunDir:
    """The run of ``store`` to resume, by the one policy (module docstring): the run of id ``run``, or
    else the latest resumable run of ``experiment`` (of any, when None).

    Raises
    ------
    ConfigError
        No such run, a finished one, one that did no work, or none to resume; each names the fix.
    RunBusyError
        The run asked for is in progress (a live process holds its lock).
    """
    store = Path(store)
    if run is not None:
        found = RunDir(store / "work" / run)
        if not found.is_run:
            raise ConfigError(f"no run {run!r} in {str(store / 'work')!r}; "
                              f"`resflow store check {store}` lists the unfinished runs and their ids.")
        if found.finished:
            raise ConfigError(f"the run {run} is finished (its record is {found.record}); "
                              "there is nothing to resume.")
        if found.experiment not in registered():
            raise ConfigError(f"the run {run} cannot be resumed: its {RUN_INFO} is unreadable or names an "
                              "experiment not registered here.")
        writer, held = found.lock()
        if held:
            raise RunBusyError(f"the run {run} is in progress ({writer or 'a live process'} holds its "
                               "lock); wait for it to finish, or stop it and resume it then.")
        if not found.work_done:
            raise ConfigError(f"the run {run} did no work (no checkpoint), so there is nothing to resume; "
                              f"start a new run without --resume (`resflow store gc {store}` removes it).")
        return found
    known = registered()
    runs = [r for r in run_dirs(store, unfinished=True) if r.experiment in known
            and (experiment is None or r.experiment == experiment) and r.work_done]
    busy = [r.run_id for r in runs if r.busy]
    ready = [r for r in runs if r.run_id not in busy]
    if not ready:
        what = f"{experiment!r} run" if experiment else "run"
        raise ConfigError(f"no interrupted {what} to resume in {str(store)!r}"
                          + (f" ({', '.join(busy)} in progress)" if busy else "") + "; run without --resume.")
    return ready[-1]
