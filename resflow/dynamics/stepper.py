r"""The one explicit Runge--Kutta stepper, shared by residual stacks and fixed-step ODE solves.

A residual stack of depth :math:`L` is *literally* :func:`integrate_fixed` applied with step
:math:`T/L` (or the branch scale), so "a ResNet is a discretised ODE" holds by construction:
:class:`resflow.ResidualStack` and :func:`solve_fixed` both call :func:`rk_step`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from .._validate import check_int, check_real
from ..errors import ConfigError, IncompatibleOptionsError, ShapeError
from .fields import PiecewiseField
from .tableau import ButcherTableau, get_tableau

__all__ = ["rk_stages", "rk_step", "integrate_fixed", "solve_fixed", "fields_per_step"]


def rk_stages(
    evaluate_stage: Callable[[int, torch.Tensor], torch.Tensor],
    y: torch.Tensor,
    h: float,
    tableau: ButcherTableau,
) -> torch.Tensor:
    r"""The explicit Runge--Kutta combination, with the stage evaluations supplied by the caller.

    ``evaluate_stage(i, y_i)`` returns :math:`k_i` for the stage input
    :math:`y_i = y + h\sum_{j<i} a_{ij} k_j`; the result is :math:`y + h \sum_i b_i k_i`.
    :func:`rk_step` calls it with one field at times :math:`t + c_i h`; a trained residual block
    with one MLP per stage (the study's RK2 block) calls it with its per-stage MLPs.
    """
    a, b, _ = tableau.as_floats()
    stages: list[torch.Tensor] = []
    for i in range(tableau.stages):
        yi = y
        for j in range(i):
            if a[i][j] != 0.0:
                yi = yi + (h * a[i][j]) * stages[j]
        stages.append(evaluate_stage(i, yi))
    increment = None
    for bi, ki in zip(b, stages, strict=True):
        if bi != 0.0:
            increment = bi * ki if increment is None else increment + bi * ki
    return y + h * increment


def rk_step(
    field: nn.Module, t: float, h: float, y: torch.Tensor, tableau: ButcherTableau
) -> torch.Tensor:
    r"""One explicit Runge--Kutta step :math:`y \mapsto y + h \sum_i b_i k_i`.

    Parameters
    ----------
    field : callable ``field(t, y)``
        The vector field (a residual branch).
    t : float
        Time (depth-time) at the start of the step.
    h : float
        Step size (for a residual block: the branch scale).
    y : torch.Tensor, shape (..., dim)
        State at ``t``.
    tableau : ButcherTableau
        The method.

    Returns
    -------
    torch.Tensor, shape (..., dim)
        State at ``t + h``.
    """
    _, _, c = tableau.as_floats()
    return rk_stages(lambda i, yi: field(t + c[i] * h, yi), y, h, tableau)


def fields_per_step(fields: nn.Module | Sequence[nn.Module], n_steps: int) -> list[nn.Module]:
    """The field each of ``n_steps`` steps uses.

    A single field is used for every step (tied weights); a sequence must have one field per
    step; a :class:`PiecewiseField` with ``K`` pieces needs ``n_steps`` to be a multiple of ``K``
    and each step then lies inside one piece.
    """
    n_steps = check_int("depth", n_steps, minimum=1)
    if isinstance(fields, PiecewiseField):
        k = fields.n_pieces
        if n_steps % k:
            raise IncompatibleOptionsError(
                f"depth {n_steps} is not a multiple of the {k} pieces of the PiecewiseField; "
                f"use a depth in {{{k}, {2 * k}, {3 * k}, ...}} so every step lies inside one piece."
            )
        return [fields.pieces[(step * k) // n_steps] for step in range(n_steps)]
    if isinstance(fields, nn.Module):
        return [fields] * n_steps
    if isinstance(fields, Sequence) and not isinstance(fields, str):
        if len(fields) != n_steps:
            raise ShapeError(
                f"got {len(fields)} per-layer fields for depth {n_steps}; pass exactly one field per "
                "layer, or a single field for a tied stack."
            )
        for i, f in enumerate(fields):
            if not isinstance(f, nn.Module):
                raise ConfigError(f"fields[{i}] must be a field (nn.Module); got {type(f).__name__}.")
        return list(fields)
    raise ConfigError(
        f"fields must be a field (nn.Module) or a sequence of fields; got {type(fields).__name__}."
    )


def integrate_fixed(
    step_fields: Sequence[nn.Module],
    y0: torch.Tensor,
    *,
    step: float,
    tableau: ButcherTableau,
    t0: float = 0.0,
    return_states: bool = False,
) -> torch.Tensor:
    """Apply :func:`rk_step` once per entry of ``step_fields``, step ``n`` at ``t0 + n * step``.

    Returns the final state, shape ``(..., dim)``, or with ``return_states`` all states
    ``h_0, ..., h_L`` stacked, shape ``(L + 1, ..., dim)``.
    """
    y = y0
    states = [y0] if return_states else None
    for n, field in enumerate(step_fields):
        y = rk_step(field, t0 + n * step, step, y, tableau)
        if states is not None:
            states.append(y)
    return torch.stack(states) if states is not None else y


def solve_fixed(
    field: nn.Module,
    y0: torch.Tensor,
    *,
    horizon: float = 1.0,
    n_steps: int,
    scheme: str | ButcherTableau = "euler",
    return_states: bool = False,
) -> torch.Tensor:
    r"""Solve :math:`y' = f(t, y)` on :math:`[0, T]` with ``n_steps`` equal steps of ``scheme``.

    The same computation as a tied :class:`resflow.ResidualStack` of depth ``n_steps``.
    """
    horizon = check_real("horizon", horizon, low=0.0, low_open=True)
    n_steps = check_int("n_steps", n_steps, minimum=1)
    tableau = get_tableau(scheme)
    return integrate_fixed(
        fields_per_step(field, n_steps),
        y0,
        step=horizon / n_steps,
        tableau=tableau,
        return_states=return_states,
    )
