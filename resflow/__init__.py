"""resflow: how residual networks use depth.

A residual network :math:`h_{l+1} = h_l + f_l(h_l)` read as a discretised flow (any explicit
Runge--Kutta block, with a torchdiffeq reference) or as a noisy ensemble of similar layers, with
teachers of tunable roughness along depth.  Everything users need is re-exported here.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from . import laws  # noqa: E402  (numeric evaluation of the derived laws; derivations load lazily)
from .correlation import DepthCorrelation, Equicorrelated, Fractional, parse_correlation
from .engine import train, train_reference
from .ensemble import NoisyEnsemble
from .errors import (
    ConfigError,
    IncompatibleOptionsError,
    ResflowError,
    ShapeError,
    TableauError,
    UnknownNameError,
)
from .experiments import EXPERIMENTS, ExperimentConfig, preset, run_experiment
from .fgn import FractionalBrownianPath, fgn_autocovariance, fgn_covariance, sample_fgn
from .fields import LinearField, MLPField, PiecewiseField, VectorField, rmsnorm
from .fitting import SeriesFit, fit_dataset
from .order_conditions import elementary_weight, tree_factorial, trees_of_order
from .probes import ProbeResult, probe_teacher
from .provenance import provenance
from .reference import solve_reference
from .stack import ResidualStack
from .stepper import rk_step, solve_fixed
from .store import Store, StoreError
from .students import StudentSpec
from .tableau import TABLEAUX, ButcherTableau, get_tableau
from .teacher import TEACHER_FAMILIES, Teacher, TeacherConfig
from .training import TrainConfig

try:
    __version__ = version("resflow")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0+unknown"

__all__ = [
    "__version__",
    # integrators as data
    "ButcherTableau",
    "TABLEAUX",
    "get_tableau",
    "trees_of_order",
    "tree_factorial",
    "elementary_weight",
    # flows
    "VectorField",
    "MLPField",
    "LinearField",
    "PiecewiseField",
    "rmsnorm",
    "rk_step",
    "solve_fixed",
    "ResidualStack",
    "solve_reference",
    # noise along depth and ensembles
    "DepthCorrelation",
    "Equicorrelated",
    "Fractional",
    "parse_correlation",
    "fgn_autocovariance",
    "fgn_covariance",
    "sample_fgn",
    "FractionalBrownianPath",
    "NoisyEnsemble",
    # teachers
    "TEACHER_FAMILIES",
    "TeacherConfig",
    "Teacher",
    # laws, engine, experiments, fits, store, probes
    "laws",
    "StudentSpec",
    "TrainConfig",
    "train",
    "train_reference",
    "EXPERIMENTS",
    "ExperimentConfig",
    "preset",
    "run_experiment",
    "SeriesFit",
    "fit_dataset",
    "Store",
    "StoreError",
    "ProbeResult",
    "probe_teacher",
    # provenance and errors
    "provenance",
    "ResflowError",
    "ConfigError",
    "UnknownNameError",
    "ShapeError",
    "IncompatibleOptionsError",
    "TableauError",
]
