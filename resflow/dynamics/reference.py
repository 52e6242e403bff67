r"""Continuous-depth reference solutions via torchdiffeq.

:func:`solve_reference` integrates :math:`dh/dt = f(t, h)` on :math:`[0, T]` with torchdiffeq's
adaptive ``dopri5`` (Dormand & Prince 1980) at tight tolerances by default, or with one of its
fixed-grid methods (``euler``, ``midpoint``, ``heun2``, ``heun3``, ``rk4`` -- the 3/8 rule) given a
``step_size``.  A :class:`~resflow.PiecewiseField` is integrated piece by piece, so the
adaptive solver never steps across a jump of the field.

Reference: R. T. Q. Chen et al., "Neural Ordinary Differential Equations", NeurIPS 2018
(torchdiffeq).
"""

from __future__ import annotations

import torch
from torch import nn

from .._validate import check_choice, check_real
from ..errors import IncompatibleOptionsError
from .fields import PiecewiseField

__all__ = ["solve_reference", "ADAPTIVE_METHODS", "FIXED_GRID_METHODS"]

ADAPTIVE_METHODS = ("dopri5", "dopri8", "bosh3", "adaptive_heun")
FIXED_GRID_METHODS = ("euler", "midpoint", "heun2", "heun3", "rk4")


def solve_reference(
    field: nn.Module,
    h0: torch.Tensor,
    horizon: float = 1.0,
    *,
    method: str = "dopri5",
    rtol: float = 1e-12,
    atol: float = 1e-14,
    step_size: float | None = None,
) -> torch.Tensor:
    r"""Solve :math:`dh/dt = f(t, h)`, :math:`h(0) = h_0`, and return :math:`h(T)`.

    Parameters
    ----------
    field : callable ``field(t, h)``
        The vector field (any resflow field).
    h0 : torch.Tensor, shape (..., dim)
        Initial state; use float64 for tight tolerances.
    horizon : float
        :math:`T > 0`.
    method : str
        An adaptive method (``ADAPTIVE_METHODS``) or a fixed-grid one (``FIXED_GRID_METHODS``,
        which needs ``step_size``).
    rtol, atol : float
        Tolerances of adaptive methods.  The global error is a small multiple of ``rtol``
        (about 10x on the study's relu² block, whose kinks slow the adaptive solver down).
    step_size : float, optional
        Step of fixed-grid methods.

    Returns
    -------
    torch.Tensor, shape (..., dim)
    """
    horizon = check_real("horizon", horizon, low=0.0, low_open=True)
    method = check_choice("method", method, ADAPTIVE_METHODS + FIXED_GRID_METHODS)
    options = None
    if method in FIXED_GRID_METHODS:
        if step_size is None:
            raise IncompatibleOptionsError(
                f"method {method!r} is a fixed-grid method and needs step_size (e.g. horizon / depth)."
            )
        options = {"step_size": check_real("step_size", step_size, low=0.0, low_open=True)}
    elif step_size is not None:
        raise IncompatibleOptionsError(
            f"step_size is only for fixed-grid methods {FIXED_GRID_METHODS}; method {method!r} is adaptive."
        )
    if isinstance(field, PiecewiseField):
        h = h0
        edges = field.breakpoints()
        for piece, (t0, t1) in zip(field.pieces, zip(edges[:-1], edges[1:], strict=True), strict=True):
            h = _solve(piece, h, t0, t1, method, rtol, atol, options)
        return h
    return _solve(field, h0, 0.0, horizon, method, rtol, atol, options)


def _solve(field, h0, t0, t1, method, rtol, atol, options) -> torch.Tensor:
    from torchdiffeq import odeint  # imported on first use: torchdiffeq loads scipy

    t = torch.tensor([t0, t1], dtype=h0.dtype, device=h0.device)
    return odeint(field, h0, t, method=method, rtol=rtol, atol=atol, options=options)[-1]
