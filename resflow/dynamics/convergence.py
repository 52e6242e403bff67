r"""Convergence of residual stacks to their ODE as depth grows.

:func:`convergence_study` measures, for each scheme and depth :math:`L`, the relative error
:math:`\|h_L - h(T)\| / \|h(T)\|` of a tied residual stack against a reference (an exact solution,
or a tight dopri5 solve), and fits the empirical order as the slope of :math:`-\log` error against
:math:`\log L`.  A scheme of order :math:`p` on a :math:`C^p` field gives slope :math:`p`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from .._validate import check_int, check_real
from ..errors import ConfigError, ShapeError
from ..loglog import slopes

if TYPE_CHECKING:
    import xarray
from .reference import solve_reference
from .stack import ResidualStack
from .tableau import TABLEAUX, get_tableau

__all__ = ["empirical_order", "convergence_study"]


def empirical_order(depths: Sequence[int], errors: Sequence[float]) -> float:
    r"""Least-squares slope :math:`-\,d \log(\text{error}) / d \log L` over the given points."""
    depths = np.asarray(depths, dtype=float)
    errors = np.asarray(errors, dtype=float)
    if depths.shape != errors.shape or depths.size < 2:
        raise ShapeError(
            f"depths and errors must be 1-D of equal length >= 2; got {depths.shape} and {errors.shape}."
        )
    if np.any(depths <= 0) or np.any(errors <= 0) or not np.all(np.isfinite(errors)):
        raise ConfigError("depths and errors must be positive and finite to fit a log-log slope.")
    return slopes(depths, errors)


def convergence_study(
    field: nn.Module,
    h0: torch.Tensor,
    *,
    depths: Sequence[int] = (4, 8, 16, 32, 64, 128),
    schemes: Sequence[str] = tuple(TABLEAUX),
    horizon: float = 1.0,
    reference: torch.Tensor | None = None,
) -> xarray.Dataset:
    r"""Error of tied stacks against the ODE, per scheme and depth.

    Parameters
    ----------
    field : VectorField
        The (tied) block.
    h0 : torch.Tensor, shape (batch, dim)
        Initial states (float64 recommended).
    depths : sequence of int
        Depths :math:`L`; step :math:`T/L`.
    schemes : sequence of str
        Names from :data:`resflow.TABLEAUX`.
    horizon : float
        :math:`T`.
    reference : torch.Tensor, optional
        :math:`h(T)`; by default a dopri5 solve at ``rtol=1e-13``.

    Returns
    -------
    xarray.Dataset
        ``error`` (scheme, depth), ``empirical_order`` (scheme), ``declared_order`` (scheme),
        ``reference_error_floor`` (scalar: the dopri5 tolerance when no reference is given).
    """
    import xarray as xr

    horizon = check_real("horizon", horizon, low=0.0, low_open=True)
    depths = [check_int("depths", d, minimum=1) for d in depths]
    tableaux = [get_tableau(s) for s in schemes]
    if reference is None:
        reference = solve_reference(field, h0, horizon, rtol=1e-13, atol=1e-14)
    errors = np.empty((len(tableaux), len(depths)))
    with torch.no_grad():
        for i, tab in enumerate(tableaux):
            for j, depth in enumerate(depths):
                out = ResidualStack(field, depth, scheme=tab, horizon=horizon)(h0)
                errors[i, j] = float((out - reference).norm() / reference.norm())
    names = [t.name for t in tableaux]
    return xr.Dataset(
        {
            "error": (("scheme", "depth"), errors, {
                "long_name": "relative error of the residual stack against the ODE solution",
                "units": "1",
            }),
            "empirical_order": (("scheme",), [empirical_order(depths, e) for e in errors], {
                "long_name": "fitted slope of -log(error) against log(depth)", "units": "1",
            }),
            "declared_order": (("scheme",), [t.order for t in tableaux], {
                "long_name": "order declared by the Butcher tableau", "units": "1",
            }),
        },
        coords={
            "scheme": ("scheme", names, {"long_name": "Runge-Kutta scheme of the block"}),
            "depth": ("depth", depths, {"long_name": "number of layers L", "units": "layers"}),
        },
        attrs={"horizon": horizon},
    )
