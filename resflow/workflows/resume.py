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
from .rundir import RUN_INFO, RunDir, resumable
from .unfinished import UnfinishedRun, flat, read_run, setting

__all__ = ["resume_config", "find_unfinished", "LATEST"]

LATEST = "latest"  # resume the latest interrupted run of the store, of any experiment


def find_unfinished(store: Path | str, run: str | None = None) -> UnfinishedRun:
    """The run to resume in ``store``: the run of id ``run``; the latest interrupted run of the experiment
    ``run``; or, for None or ``"latest"``, the latest interrupted run of any experiment -- by the one policy
    of :func:`resflow.workflows.rundir.resumable` (some work done, no live process at work on it)."""
    store = Path(store)
    if run not in (None, LATEST) and RunDir(store / "work" / str(run)).is_run:
        chosen = resumable(store, run=str(run))
    else:
        experiment = None if run in (None, LATEST) else run
        if experiment is not None and experiment not in registered():
            raise UnknownNameError(f"{run!r} is neither an experiment ({', '.join(registered())}) "
                                   f"nor a run id in {str(store / 'work')!r}; "
                                   f"`resflow store check {store}` lists the unfinished runs.")
        chosen = resumable(store, experiment=experiment)
    found = read_run(chosen.path, store)
    if found.config is None:
        raise ConfigError(f"the run {found.run_id} cannot be resumed: its {RUN_INFO} does not read as a "
                          f"configuration of {found.experiment!r} here.")
    return found


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
