"""The registry of experiments: each declared once, by an :class:`Experiment` in a module of ``sims/``.

A module of :mod:`resflow.sims` (the repository's ``sims/``) that defines ``EXPERIMENT`` is an
experiment; nothing else lists them.  The command line's choices, ``--set`` validation and the
generated preset tables in ``docs/experiments.md`` all come from here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType
from typing import Any

from ..errors import ConfigError, UnknownNameError
from .config import ExperimentConfig

__all__ = ["Experiment", "registered", "get_experiment", "preset"]

SIMS_PACKAGE = "resflow.sims"


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
        Preset name -> :class:`ExperimentConfig` (every preset's ``experiment`` is ``name``).
    figure : callable
        ``figure(ds, fits) -> matplotlib.figure.Figure`` drawn for every finished run.
    notes : mapping
        Preset name -> where its settings come from (e.g. the study's section), for the docs.
    costs : mapping
        Preset name -> what one run measured on the project's 2-core CPU machine (wall time, where it
        is recorded), for ``resflow run --list``; a preset without one was not measured there.
    report : callable or None
        ``report(ds, record) -> str``: Markdown tables of one run (``resflow report``); None for the
        tables every run has (:func:`resflow.analysis.report.run_tables`).
    """

    name: str
    summary: str
    presets: Mapping[str, ExperimentConfig]
    figure: Callable[..., Any]
    notes: Mapping[str, str] = field(default_factory=dict)
    costs: Mapping[str, str] = field(default_factory=dict)
    report: Callable[..., str] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "presets", MappingProxyType(dict(self.presets)))
        object.__setattr__(self, "notes", MappingProxyType(dict(self.notes)))
        object.__setattr__(self, "costs", MappingProxyType(dict(self.costs)))
        unknown = sorted((set(self.notes) | set(self.costs)) - set(self.presets))
        if unknown:
            raise ConfigError(f"notes or costs of experiment {self.name!r} name presets it does not have: {unknown}.")
        for key, config in self.presets.items():
            if not isinstance(config, ExperimentConfig) or config.experiment != self.name:
                raise ConfigError(f"preset {key!r} of experiment {self.name!r} must be an ExperimentConfig "
                                  f"with experiment={self.name!r}.")

    def preset(self, name: str) -> ExperimentConfig:
        if name not in self.presets:
            raise UnknownNameError(f"experiment {self.name!r} has no preset {name!r}; choose one of "
                                   f"{', '.join(self.presets)}.")
        return self.presets[name]


@cache
def _discover() -> Mapping[str, Experiment]:
    package = importlib.import_module(SIMS_PACKAGE)
    found: dict[str, Experiment] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{SIMS_PACKAGE}.{info.name}")
        experiment = getattr(module, "EXPERIMENT", None)
        if isinstance(experiment, Experiment):
            if experiment.name in found:  # pragma: no cover - a programming error in sims/
                raise ConfigError(f"two sims modules declare the experiment {experiment.name!r}.")
            found[experiment.name] = experiment
    return MappingProxyType(found)


def registered() -> Mapping[str, Experiment]:
    """Every registered experiment, name -> :class:`Experiment` (sorted by module name)."""
    return _discover()


def get_experiment(name: str) -> Experiment:
    """The registered experiment ``name``; an unknown name lists the registered ones."""
    registry = registered()
    if name not in registry:
        raise UnknownNameError(f"unknown experiment {name!r}; choose one of {', '.join(registry)}.")
    return registry[name]


def preset(name: str, preset_name: str) -> ExperimentConfig:
    """The configuration of preset ``preset_name`` of experiment ``name``."""
    return get_experiment(name).preset(preset_name)
