r"""Residual stacks: :math:`h_{l+1} = h_l + \text{(one Runge--Kutta step of the branch)}`.

Two parametrisations of the same object:

* **ODE parametrisation** (``horizon=T``, the default ``T = 1``): step :math:`T/L`, so a deeper
  stack is a finer discretisation of :math:`dh/dt = f(t, h)` on :math:`[0, T]`.
* **Branch parametrisation** (``branch_scale=s``, the study's): :math:`h_{l+1} = h_l + s\,f_l(h_l)`
  for Euler, with no explicit time step; the study's teacher uses :math:`s = 1/\sqrt{128}`
  (equivalently its ``W2`` scaled by :math:`1/\sqrt{128}`).  It is the ODE parametrisation with
  :math:`T = sL`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .._validate import check_int, check_real
from ..errors import ConfigError, IncompatibleOptionsError, ShapeError
from .fields import PiecewiseField
from .stepper import fields_per_step, integrate_fixed, rk_step
from .tableau import ButcherTableau, get_tableau

__all__ = ["ResidualStack"]


class ResidualStack(nn.Module):
    r"""A depth-:math:`L` residual network whose blocks are steps of an explicit RK scheme.

    Parameters
    ----------
    fields : VectorField or sequence of VectorField or PiecewiseField
        One field for every layer (tied weights: a discretised autonomous ODE), one field per
        layer (untied), or a :class:`~resflow.PiecewiseField` (depth a multiple of its pieces).
    depth : int, optional
        :math:`L`; required for a single field, inferred from a sequence.
    scheme : str or ButcherTableau
        The block: a name from :data:`resflow.TABLEAUX` (``"euler"`` is the plain residual block;
        ``"midpoint"`` the RK2 block) or a tableau.
    horizon : float, optional
        :math:`T` of the ODE parametrisation (step :math:`T/L`); default 1.
    branch_scale : float, optional
        Step :math:`s` of the branch parametrisation; excludes ``horizon``.

    Examples
    --------
    >>> import torch, resflow
    >>> field = resflow.MLPField(8, seed=0)
    >>> stack = resflow.ResidualStack(field, depth=16, scheme="rk4")
    >>> stack(torch.randn(5, 8)).shape
    torch.Size([5, 8])
    """

    def __init__(
        self,
        fields: nn.Module | Sequence[nn.Module],
        depth: int | None = None,
        *,
        scheme: str | ButcherTableau = "euler",
        horizon: float | None = None,
        branch_scale: float | None = None,
    ) -> None:
        super().__init__()
        if horizon is not None and branch_scale is not None:
            raise IncompatibleOptionsError(
                "pass either horizon (ODE parametrisation, step = horizon / depth) or branch_scale "
                f"(the study's parametrisation, step = branch_scale), not both; got horizon={horizon!r}, "
                f"branch_scale={branch_scale!r}."
            )
        single = isinstance(fields, nn.Module) and not isinstance(fields, PiecewiseField)
        if depth is None:
            if single or isinstance(fields, PiecewiseField):
                raise IncompatibleOptionsError(
                    "depth is required when a single field (or a PiecewiseField) is given; "
                    "e.g. ResidualStack(field, depth=16)."
                )
            depth = len(fields)
        depth = check_int("depth", depth, minimum=1)
        self._step_fields = fields_per_step(fields, depth)
        widths = {getattr(f, "dim", None) for f in self._step_fields} - {None}
        if len(widths) > 1:
            raise ShapeError(f"every layer's field must act on states of one width; got fields of dim "
                             f"{sorted(widths)}. Build all of them with the same dim.")
        self.tied = single
        self.layers = nn.ModuleList([fields] if single else list(dict.fromkeys(self._step_fields)))
        self.tableau = get_tableau(scheme)
        self.depth = depth
        if branch_scale is not None:
            self.step_size = check_real("branch_scale", branch_scale, low=0.0, low_open=True)
            self.horizon = self.step_size * depth
            self.parametrisation = "branch"
        else:
            self.horizon = 1.0 if horizon is None else check_real("horizon", horizon, low=0.0, low_open=True)
            self.step_size = self.horizon / depth
            self.parametrisation = "ode"

    @property
    def width(self) -> int | None:
        """The width :math:`d` of the states the stack acts on (its fields' ``dim``); None if no field
        says."""
        return next((f.dim for f in self._step_fields if getattr(f, "dim", None) is not None), None)

    @property
    def layer_fields(self) -> tuple[nn.Module, ...]:
        """The field each layer applies, ``depth`` entries (the same object repeated when tied)."""
        return tuple(self._step_fields)

    def layer_steps(self) -> list:
        """The layers as steps ``h -> next h`` (layer ``k``: one RK step of its field at time ``k * step``),
        for :mod:`resflow.probing.interventions`; applied in order they give :meth:`forward`."""
        return [lambda h, k=k, f=f: rk_step(f, k * self.step_size, self.step_size, h, self.tableau)
                for k, f in enumerate(self._step_fields)]

    def forward(self, h0: torch.Tensor, return_states: bool = False) -> torch.Tensor:
        r"""Propagate ``h0`` (shape ``(..., dim)``) through the stack.

        Returns :math:`h_L`, or with ``return_states`` all of :math:`h_0, \dots, h_L` stacked,
        shape ``(L + 1, ..., dim)``.  A state of another width raises :class:`~resflow.errors.ShapeError`.
        """
        self._check_state("h0", h0)
        return integrate_fixed(
            self._step_fields, h0, step=self.step_size, tableau=self.tableau, return_states=return_states
        )

    def _check_state(self, name: str, h: torch.Tensor) -> None:
        width = self.width
        if not isinstance(h, torch.Tensor):
            raise ConfigError(f"{name} must be a torch.Tensor of shape (..., {width or 'dim'}); got "
                              f"{type(h).__name__}.")
        if width is not None and (h.ndim == 0 or h.shape[-1] != width):
            got = "a scalar" if h.ndim == 0 else f"shape {tuple(h.shape)}, width {h.shape[-1]}"
            raise ShapeError(f"{name} must have last dimension {width}, the stack's width "
                             f"(its fields' dim); got {got}. Pass states of shape (..., {width}), "
                             f"e.g. torch.randn(batch, {width}), or "
                             "build the stack from fields of the states' width.")

    def extra_repr(self) -> str:
        return (
            f"depth={self.depth}, scheme={self.tableau.name!r}, tied={self.tied}, "
            f"{self.parametrisation}: step={self.step_size:.4g}, horizon={self.horizon:.4g}"
        )
