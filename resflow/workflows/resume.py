"""Resuming a run from what it saved: ``resflow run RUN --resume`` needs no flag again.

:func:`resume_config` finds the run to resume -- a run id, the latest interrupted run of an experiment, or the
latest of the store -- and returns it with the configuration its ``run.json`` holds
(:class:`~resflow.workflows.unfinished.UnfinishedRun`).  Flags given again are checked against it: one that
agrees is fine, one that conflicts is an :class:`~resflow.errors.IncompatibleOptionsError` that names the
flag, the saved value and the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import ConfigError, IncompatibleOptionsError, UnknownNameError
from ..experiments.config import ExperimentConfig
from ..experiments.registry import registered
from ..store import RunBusyError
from .run import RUN_INFO
from .unfinished import IN_PROGRESS, UnfinishedRun, flat, read_run, setting, unfinished_runs

__all__ = ["resume_config", "find_unfinished", "LATEST"]

LATEST = "latest"  # resume the latest interrupted run of the store, of any experiment


def find_unfinished(store: Path | str, run: str | None = None) -> UnfinishedRun:
    """The run to resume in ``store``: the run of id ``run``; the latest interrupted run of the experiment
    ``run``; or, for None or ``"latest"``, the latest interrupted run of any experiment.  A run resumes when
    it did some work (a checkpoint) and no live process works on it."""
    store = Path(store)
    if run not in (None, LATEST) and (store / "work" / str(run) / RUN_INFO).is_file():
        found = read_run(store / "work" / str(run), store)
        if found.config is None:
            raise ConfigError(f"the run {run} cannot be resumed: its {RUN_INFO} is unreadable "
                              "or names an experiment not registered here.")
        if found.state == IN_PROGRESS:
            raise RunBusyError(f"the run {run} is in progress "
                               f"({found.writer or 'a live process'} holds its lock); "
                               "wait for it to finish, or stop it and resume it then.")
        if not found.work_done:
            raise ConfigError(f"the run {run} did no work (no checkpoint), so there is nothing to resume; "
                              f"start a new run without --resume (`resflow store gc {store}` removes it).")
        return found
    experiment = None if run in (None, LATEST) else run
    if experiment is not None and experiment not in registered():
        raise UnknownNameError(f"{run!r} is neither an experiment ({', '.join(registered())}) "
                               f"nor a run id in {str(store / 'work')!r}; "
                               f"`resflow store check {store}` lists the unfinished runs.")
    runs = [r for r in unfinished_runs(store) if experiment is None or r.experiment == experiment] \
        if store.is_dir() else []
    ready = [r for r in runs if r.work_done and r.state != IN_PROGRESS and r.config is not None]
    if not ready:
        busy = [r.run_id for r in runs if r.state == IN_PROGRESS]
        raise ConfigError(f"no interrupted {f'{experiment!r} ' if experiment else ''}run to resume "
                          f"in {str(store)!r}"
                          + (f" ({', '.join(busy)} in progress)" if busy else "") + "; run without --resume.")
    return ready[-1]


def resume_config(store: Path | str, run: str | None = None, *, preset: str | None = None,
                  sets: Sequence[str] = (), device: str | None = None,
                  replicates: int | None = None) -> UnfinishedRun:
    """The run to resume (:func:`find_unfinished`), its saved configuration in ``.config``, after checking
    the options given again: ``preset``, ``--set`` assignments ``sets``, ``device`` and ``replicates`` (seeds
    of the language-model ladder), each None or empty when not given.

    Raises
    ------
    IncompatibleOptionsError
        An option that conflicts with the saved configuration, named with the saved value and the fix.
    """
    found = find_unfinished(store, run)
    config = found.config
    toy = isinstance(config, ExperimentConfig)
    flags = [(f"--set {item}", str(item)) for item in sets]
    if device is not None:
        flags.append((f"--device {device}", f"{'train.device' if toy else 'device'}={device}"))
    if replicates is not None:
        flags.append((f"--replicates {replicates}", f"{'replicates' if toy else 'seeds'}={replicates}"))
    fix = "to resume it, or start a new run without --resume"
    if preset is not None and preset != found.preset:
        presets = registered()[config.experiment].presets
        if preset not in presets or flat(presets[preset]) != flat(config):
            raise IncompatibleOptionsError(f"--preset {preset} conflicts with the interrupted run's preset "
                                           f"{found.preset or 'unknown'}; drop --preset {fix}.")
    saved = flat(config)
    for flag, assignment in flags:
        key = assignment.partition("=")[0].strip()
        if flat(config.with_overrides([assignment])) != saved:
            raise IncompatibleOptionsError(
                f"{flag} conflicts with the interrupted run's {setting(key, saved[key])}; "
                f"drop {flag if flag.startswith('--set') else flag.split()[0]} {fix}.")
    return found
