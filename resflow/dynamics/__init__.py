"""Dynamics: residual networks as discretised flows.

==================  =========================================================================
module              what it holds
==================  =========================================================================
``tableau``         :class:`ButcherTableau` and the registry :data:`TABLEAUX` (integrators as data)
``rooted_trees``    rooted trees, tree factorials, elementary weights: the exact order conditions
``fields``          vector fields ``f(t, h)``: :class:`MLPField` (the study's block), linear, piecewise
``stepper``         the one explicit Runge--Kutta stepper, fixed-step solves
``stack``           :class:`ResidualStack`: a depth-``L`` network *is* the stepper applied ``L`` times
``reference``       continuous-depth reference solutions through torchdiffeq
``convergence``     empirical convergence order of stacks against their ODE
==================  =========================================================================

Depends on torch only (torchdiffeq and xarray are imported when a reference solve or a
convergence study is asked for).
"""

from .convergence import convergence_study, empirical_order
from .fields import ACTIVATIONS, LinearField, MLPField, PiecewiseField, VectorField, rmsnorm
from .reference import solve_reference
from .rooted_trees import elementary_weight, tree_factorial, tree_order, tree_symmetry, trees_of_order
from .stack import ResidualStack
from .stepper import integrate_fixed, rk_stages, rk_step, solve_fixed
from .tableau import TABLEAUX, ButcherTableau, get_tableau

__all__ = [
    "ButcherTableau", "TABLEAUX", "get_tableau",
    "trees_of_order", "tree_order", "tree_factorial", "tree_symmetry", "elementary_weight",
    "VectorField", "MLPField", "LinearField", "PiecewiseField", "ACTIVATIONS", "rmsnorm",
    "rk_stages", "rk_step", "integrate_fixed", "solve_fixed",
    "ResidualStack", "solve_reference", "convergence_study", "empirical_order",
]
