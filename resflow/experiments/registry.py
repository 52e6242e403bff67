"""The registry of experiments: each declared once, by an :class:`Experiment` in a module of ``sims/``.

Experiments are entry points of the group ``resflow.experiments`` (``pyproject.toml``: ``NAME =
"resflow.sims.MODULE:EXPERIMENT"``), so this layer never imports the layer above it by a name in its
code, and another installed package can add experiments the same way.  A test checks that every
module of ``sims/`` that defines ``EXPERIMENT`` is declared.  The command line's choices, ``--set``
validation and the generated preset tables in ``docs/experiments.md`` all come from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._plugins import PluginRegistry
from ..errors import ConfigError, UnknownNameError, did_you_mean

__all__ = ["Experiment", "registered", "get_experiment", "preset"]

ENTRY_POINT_GROUP = "resflow.experiments"


@dataclass(frozen=True, kw_only=True)
class Experiment:
    """A registered experiment.

    Attributes
    ----------
    name : str
        What ``resflow run NAME`` takes.
    summary : str
        One line for listings.
    presets : mapping
        Preset name -> configuration (every preset's ``experiment`` is ``name``): an :class:`ExperimentConfig`
        for the toy experiments, :class:`resflow.llm.LadderConfig` for the language-model ladder.
    figure : callable
        ``figure(ds, fits) -> matplotlib.figure.Figure`` drawn for every finished run.
    notes : mapping
        Preset name -> where its settings come from (e.g. the study's section), for the docs.
    costs : mapping
        Preset name -> what one run measured on the project's 2-core CPU machine (wall time, where it
        is recorded), for ``resflow run --list``; a preset without one was not measured there.
    seconds : mapping
        Preset name -> the wall time in seconds of one run of the preset as it is, on 2 idle CPU cores of the
        project's machine (the measurement ``costs`` names): ``resflow run`` prints it as the expected time
        when the run starts.
    report : callable or None
        ``report(ds, record) -> str``: Markdown tables of one run (``resflow report``); None for the
        tables every run has (:func:`resflow.presenting.report.run_tables`).
    grids : mapping
        Preset name -> the keys that preset sweeps and their values (``{"student_hidden": (32, 64, 128)}``):
        an *axis* preset, run by ``resflow sweep NAME --preset P`` (one cell per value and replicate) and read
        by ``resflow report STORE --axis KEY``; ``resflow run`` refuses it and names that command.
    """

    name: str
    summary: str
    presets: Mapping[str, Any]
    figure: Callable[..., Any]
    notes: Mapping[str, str] = field(default_factory=dict)
    costs: Mapping[str, str] = field(default_factory=dict)
    seconds: Mapping[str, float] = field(default_factory=dict)
    report: Callable[..., str] | None = None
    grids: Mapping[str, Mapping[str, tuple]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "presets", MappingProxyType(dict(self.presets)))
        object.__setattr__(self, "grids", MappingProxyType({k: MappingProxyType(dict(v))
                                                            for k, v in self.grids.items()}))
        object.__setattr__(self, "notes", MappingProxyType(dict(self.notes)))
        object.__setattr__(self, "costs", MappingProxyType(dict(self.costs)))
        object.__setattr__(self, "seconds", MappingProxyType(dict(self.seconds)))
        unknown = sorted((set(self.notes) | set(self.costs) | set(self.seconds) | set(self.grids))
                         - set(self.presets))
        if unknown:
            raise ConfigError(f"notes, costs, seconds or grids of experiment {self.name!r} "
                              f"name presets it does not have: {unknown}.")
        bad = {k: v for k, v in self.seconds.items() if not isinstance(v, int | float) or not v > 0}
        if bad:
            raise ConfigError(f"seconds of experiment {self.name!r} must be positive numbers of seconds; "
                              f"got {bad}.")
        for key, config in self.presets.items():
            if getattr(config, "experiment", None) != self.name or not all(
                    hasattr(config, a)
                    for a in ("with_overrides", "describe", "keys", "progress_total", "to_json")):
                raise ConfigError(f"preset {key!r} of experiment {self.name!r} must be a configuration with "
                                  f"experiment={self.name!r} (an ExperimentConfig, or one with its "
                                  "with_overrides, describe, keys, progress_total and to_json).")

    def grid(self, preset: str) -> tuple[str, ...]:
        """The ``--grid`` items of an axis preset (``("student_hidden=32,64,128",)``); () for a preset of one
        configuration."""
        grid = self.grids.get(preset, {})
        return tuple(f"{key}={','.join(map(str, values))}" for key, values in grid.items())

    def preset(self, name: str) -> Any:
        if name not in self.presets:
            raise UnknownNameError(f"experiment {self.name!r} has no preset {name!r}"
                                   f"{did_you_mean(name, self.presets, listing='`resflow run --list`')}.")
        return self.presets[name]


EXPERIMENTS: PluginRegistry[Experiment] = PluginRegistry(ENTRY_POINT_GROUP, "an Experiment")


@EXPERIMENTS.bind
def _register(experiment: Experiment) -> Experiment:
    if not isinstance(experiment, Experiment):
        raise ConfigError(f"an experiment must be an Experiment; got {experiment!r:.80}.")
    if experiment.name in EXPERIMENTS.data:
        raise ConfigError(f"two entry points declare the experiment {experiment.name!r}.")
    EXPERIMENTS[experiment.name] = experiment
    return experiment


def registered() -> Mapping[str, Experiment]:
    """Every registered experiment, name -> :class:`Experiment` (resflow's own by module path, then those of
    other packages; one that a plug-in's module asks for while it loads sees those loaded before it)."""
    return MappingProxyType(dict(EXPERIMENTS))


def get_experiment(name: str) -> Experiment:
    """The registered experiment ``name``; an unknown name lists the registered ones."""
    registry = registered()
    if name not in registry:
        raise UnknownNameError.of("experiment", name, registry, listing="`resflow run --list`")
    return registry[name]


def preset(name: str, preset_name: str) -> Any:
    """The configuration of preset ``preset_name`` of experiment ``name``."""
    return get_experiment(name).preset(preset_name)
