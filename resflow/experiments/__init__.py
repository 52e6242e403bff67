"""Experiments: the typed configurations of runs and the one registry of experiments.

============  =================================================================================
module        what it holds
============  =================================================================================
``config``    :class:`ExperimentConfig` (teachers, students, training) and typed ``--set`` overrides
``registry``  :class:`Experiment` and the registry, discovered from the ``EXPERIMENT`` of each
              module in ``sims/``: names, presets, figures
``render``    ``docs/experiments.md``, generated from the registry
============  =================================================================================

Running an experiment end to end (build, train, store, fit, figure) is
:func:`resflow.workflows.run_experiment`, one layer up.
"""

from .config import ExperimentConfig, config_keys, parse_assignment
from .registry import Experiment, get_experiment, preset, registered

__all__ = ["ExperimentConfig", "Experiment", "registered", "get_experiment", "preset", "config_keys",
           "parse_assignment"]
