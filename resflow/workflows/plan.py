"""A run's plan: everything a toy run needs from its configuration, resolved once, before any work.

:meth:`RunPlan.resolve` turns an :class:`~resflow.experiments.ExperimentConfig` into typed objects -- the
measures to take, the experiment (its figure), the student specs (each carrying its tableau), the teachers,
the device and the configuration as provenance records it -- and fails on a bad name or device before a run
directory exists.  The stages of :mod:`resflow.workflows.stages` read the plan; none asks the configuration
again (``docs/design/run-spine.md``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from ..experiments.config import ExperimentConfig
from ..experiments.registry import Experiment, get_experiment
from ..training.block import StudentSpec
from ..training.engine import resolve_device
from .measures import Measure, chosen_measures

__all__ = ["RunPlan"]


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """A toy run resolved from its configuration.

    Attributes
    ----------
    config : ExperimentConfig
        The configuration it was resolved from (its ``train`` recipe is what the engine trains with).
    measures : tuple of Measure
        The registered measures the run takes of its trained students, in registration order.
    experiment : Experiment
        The registered experiment (its figure).
    specs : tuple of StudentSpec
        Every student, in the configuration's order.
    teachers : mapping
        Teacher key -> teacher (flow teachers, or class grammars when the experiment classifies).
    device : str
        The device the run trains on, checked to exist.
    described : dict
        The configuration as a dictionary: what provenance records.
    """

    config: ExperimentConfig
    measures: tuple[Measure, ...]
    experiment: Experiment
    specs: tuple[StudentSpec, ...]
    teachers: Mapping[Hashable, Any]
    device: str
    described: dict[str, Any]

    @classmethod
    def resolve(cls, config: ExperimentConfig) -> RunPlan:
        """The plan of ``config``: an unknown measure or experiment, a scheme or a missing device is an error
        here, before anything is written."""
        if not isinstance(config, ExperimentConfig):
            raise TypeError(f"config must be an ExperimentConfig (resflow.preset(...) gives one); "
                            f"got {type(config).__name__}.")
        return cls(config=config, measures=chosen_measures(config.measures),
                   experiment=get_experiment(config.experiment), described=config.to_dict(),
                   specs=tuple(config.student_specs()), teachers=config.teachers(),
                   device=str(resolve_device(config.train.device)))

    @property
    def measure_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.measures)
