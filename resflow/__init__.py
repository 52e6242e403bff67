"""resflow: how residual networks use depth.

A residual network :math:`h_{l+1} = h_l + f_l(h_l)` read as a discretised flow (any explicit
Runge--Kutta block, with a torchdiffeq reference) or as a noisy ensemble of similar layers, with
teachers of tunable roughness along depth.  Everything users need is re-exported here.

Importing resflow has no side effects and is cheap: the names below are loaded on first use
(PEP 562), so ``import resflow`` selects no matplotlib backend and loads none of torch, pyplot,
sympy, scipy, xarray, zarr or transformers until a feature needs them.

==================  =======================================================================
subpackage          what it holds
==================  =======================================================================
``dynamics``        tableaux, the RK stepper, residual stacks, vector fields, ODE references
``noise``           fractional Gaussian noise, correlation along depth, noisy ensembles
``training``        teachers, students, the training engine
``analysis``        hidden-state metrics, probes, exponent fits, regimes, comparisons, figures
``llm``             scaling-law fits on trained-LLM tables, probes of transformer models
``records``         what each store record holds: the toy-run record (dims, upgrade, merge)
``store``           the result store (atomic zarr records)
``experiments``     typed experiment configurations and the registry (presets live in ``sims/``)
``workflows``       one function under every command: run, fit, llm-fit, probe, compare, demo
``demos``           classroom demos: a figure and its data in seconds each (``resflow demo --list``)
``cli``             the ``resflow`` command line
``laws``            numeric evaluation of the derivations in ``theory/`` (``resflow.theory``)
``loglog``          the one log--log power-law fit
==================  =======================================================================

Layers and the rules between them: ``docs/design/layout.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import (
    ConfigError,
    FitFailedError,
    IncompatibleOptionsError,
    ResflowError,
    ShapeError,
    TableauError,
    TrainingDivergedError,
    UnknownNameError,
)
from .provenance import package_version

__version__ = package_version()

_EXPORTS: dict[str, str] = {
    # integrators as data, flows
    **dict.fromkeys(
        ("ButcherTableau", "TABLEAUX", "get_tableau", "trees_of_order", "tree_factorial", "elementary_weight",
         "VectorField", "MLPField", "LinearField", "PiecewiseField", "rmsnorm", "rk_step", "solve_fixed",
         "ResidualStack", "solve_reference", "convergence_study", "empirical_order"),
        "resflow.dynamics"),
    # noise along depth and ensembles
    **dict.fromkeys(
        ("DepthCorrelation", "Equicorrelated", "Fractional", "Grouped", "parse_correlation",
         "fgn_autocovariance", "fgn_covariance", "sample_fgn", "FractionalBrownianPath", "NoisyEnsemble"),
        "resflow.noise"),
    # teachers, students, training
    **dict.fromkeys(
        ("TEACHER_FAMILIES", "TeacherConfig", "Teacher", "StudentSpec", "TrainConfig", "train",
         "train_reference", "HierarchyConfig", "RandomHierarchyModel"),
        "resflow.training"),
    # analysis
    **dict.fromkeys(("SeriesFit", "FitSettings", "fit_dataset", "ProbeResult", "token_metrics"),
                    "resflow.analysis"),
    # experiments and workflows (one function under every command)
    **dict.fromkeys(("ExperimentConfig", "Experiment", "preset"), "resflow.experiments"),
    **dict.fromkeys(
        ("run_experiment", "ExperimentResult", "fit_store", "fit_llm_table", "probe_models", "probe_teacher",
         "compare_stores", "run_flow_demo"),
        "resflow.workflows"),
    # store and provenance
    **dict.fromkeys(("Store", "StoreError"), "resflow.store"),
    "provenance": "resflow.provenance",
}
_SUBMODULES = ("laws", "loglog", "dynamics", "noise", "training", "records", "analysis", "llm", "store",
               "experiments", "workflows", "demos", "theory", "sims")

__all__ = [
    "__version__",
    *_EXPORTS,
    *_SUBMODULES,
    "ResflowError",
    "ConfigError",
    "UnknownNameError",
    "ShapeError",
    "IncompatibleOptionsError",
    "TableauError",
    "FitFailedError",
    "TrainingDivergedError",
]


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562) and cache it in the module."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"resflow.{name}")
    else:
        raise AttributeError(f"module 'resflow' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

