r"""Vector fields :math:`f(t, h)`: the residual branch of a block, or the right-hand side of an ODE.

Every field is a :class:`torch.nn.Module` called as ``field(t, h)`` (the torchdiffeq convention),
with ``h`` of shape ``(..., dim)``, so the same object drives a residual stack
(:class:`resflow.ResidualStack`) and any ODE solver (:func:`resflow.solve_fixed`,
:func:`resflow.solve_reference`).

Fields
------
:class:`MLPField`
    The study's block :math:`f(h) = W_2\, \mathrm{relu}(W_1\, \mathrm{rmsnorm}(h) + b_1)^2`.
:class:`LinearField`
    :math:`f(h) = A h`, with the exact flow :math:`h(t) = e^{At} h(0)`.
:class:`PiecewiseField`
    A depth-dependent field: one field per piece of :math:`[0, T)` (per-layer weights).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .._random import SeedLike, as_generator, unit_draw
from .._validate import check_choice, check_int, check_real
from ..errors import ConfigError, ShapeError

__all__ = [
    "rmsnorm",
    "VectorField",
    "MLPField",
    "LinearField",
    "PiecewiseField",
    "mlp_branch",
    "mlp_init_std",
    "ACTIVATIONS",
]


def _relu_squared(z: torch.Tensor) -> torch.Tensor:
    return torch.relu(z).square()


def _softplus_squared(z: torch.Tensor) -> torch.Tensor:
    return F.softplus(z).square()


ACTIVATIONS = {
    # The study's activation.  C^1 with a Lipschitz derivative; its second derivative jumps where
    # a pre-activation crosses zero, which caps the convergence order of RK schemes at 3.
    "relu2": _relu_squared,
    # A C-infinity analogue for checks that need a smooth field.
    "softplus2": _softplus_squared,
}
"""Activations of :class:`MLPField`, name -> elementwise function."""


def rmsnorm(h: torch.Tensor) -> torch.Tensor:
    r"""Root-mean-square normalisation over the last axis, without gain:
    :math:`h / \sqrt{\overline{h^2} + \epsilon}` with :math:`\epsilon` the dtype's machine epsilon.

    Uses :func:`torch.nn.functional.rms_norm` (Zhang & Sennrich 2019, "Root Mean Square Layer
    Normalization").
    """
    return F.rms_norm(h, (h.shape[-1],))


class VectorField(nn.Module):
    """Base class: a field ``f(t, h)`` on states of shape ``(..., dim)``."""

    dim: int

    def forward(self, t: torch.Tensor | float, h: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError


def mlp_branch(h: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor,
               activation: str = "relu2") -> torch.Tensor:
    r"""The study's residual branch :math:`W_2\,\sigma(W_1\,\mathrm{rmsnorm}(h) + b_1)`,
    :math:`\sigma = \mathrm{relu}^2` (or :math:`\mathrm{softplus}^2`).

    The one definition of the block's MLP: :class:`MLPField` (teachers, stacks), the students
    (:mod:`resflow.training.block`) and the per-student reference loop all call it.

    Parameters
    ----------
    h : torch.Tensor, shape (..., batch, dim)
    W1 : torch.Tensor, shape (..., hidden, dim)
    b1 : torch.Tensor, shape (..., hidden)
    W2 : torch.Tensor, shape (..., dim, hidden)
        Leading dimensions (e.g. a student axis) broadcast against those of ``h``.
    activation : {"relu2", "softplus2"}

    Returns
    -------
    torch.Tensor, shape (..., batch, dim)
    """
    if W1.ndim == 2:  # one MLP: the fused affine maps of torch
        return F.linear(ACTIVATIONS[activation](F.linear(rmsnorm(h), W1, b1)), W2)
    pre = rmsnorm(h) @ W1.transpose(-1, -2) + b1.unsqueeze(-2)  # stacked MLPs (a leading student axis)
    return ACTIVATIONS[activation](pre) @ W2.transpose(-1, -2)


def mlp_init_std(dim: int, hidden: int) -> dict[str, float]:
    r"""Standard deviations of PyTorch's default ``nn.Linear`` initialisation for the MLP block.

    ``nn.Linear(fan_in, fan_out)`` draws weights and biases from
    :math:`U(-1/\sqrt{\text{fan\_in}}, 1/\sqrt{\text{fan\_in}})`, i.e. std
    :math:`1/\sqrt{3\,\text{fan\_in}}`.  Returns the std of ``W1``, ``b1`` (fan-in ``dim``) and
    ``W2`` (fan-in ``hidden``).
    """
    return {
        "W1": 1.0 / math.sqrt(3.0 * dim),
        "b1": 1.0 / math.sqrt(3.0 * dim),
        "W2": 1.0 / math.sqrt(3.0 * hidden),
    }


def mlp_parameter_shapes(dim: int, hidden: int) -> dict[str, tuple[int, ...]]:
    """Shapes of the MLP block's parameters (``W1``: hidden×dim, ``b1``: hidden, ``W2``: dim×hidden)."""
    return {"W1": (hidden, dim), "b1": (hidden,), "W2": (dim, hidden)}


class MLPField(VectorField):
    r"""The study's residual branch :math:`f(h) = W_2\,\mathrm{relu}(W_1\,\mathrm{rmsnorm}(h) + b_1)^2`.

    Autonomous (ignores ``t``).  :math:`\mathrm{relu}(\cdot)^2` makes the field :math:`C^1` with a
    Lipschitz derivative, smooth away from the hyperplanes :math:`(W_1 \hat h + b_1)_k = 0`; its
    second derivative jumps there, so a trajectory crossing them limits explicit RK schemes to
    order :math:`\min(p, 3)` (measured in ``docs/design/flows.md``).  ``activation="softplus2"``
    gives a smooth field of the same shape.

    Parameters
    ----------
    dim : int
        Width :math:`d` of the residual stream.
    hidden : int, optional
        MLP hidden width, default :math:`4d`.
    seed : int or torch.Generator or None
        Randomness for the initialisation (drawn on the CPU, so a seed gives the same weights on
        every device).
    init : {"uniform", "gaussian"}
        ``"uniform"`` is PyTorch's default ``nn.Linear`` initialisation; ``"gaussian"`` draws
        normals with the same standard deviations (:func:`mlp_init_std`).
    activation : {"relu2", "softplus2"}
        :math:`\mathrm{relu}(z)^2` (the study's) or the smooth :math:`\mathrm{softplus}(z)^2`.
    zero_output : bool
        Start ``W2`` at zero, so the field is identically zero (a student starting as the identity).
    dtype, device
        Of the parameters.

    Shapes
    ------
    ``W1``: (hidden, dim); ``b1``: (hidden,); ``W2``: (dim, hidden); input and output ``(..., dim)``.
    """

    def __init__(
        self,
        dim: int,
        hidden: int | None = None,
        *,
        seed: SeedLike = None,
        init: str = "uniform",
        activation: str = "relu2",
        zero_output: bool = False,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        dim = check_int("dim", dim, minimum=1)
        hidden = 4 * dim if hidden is None else check_int("hidden", hidden, minimum=1)
        init = check_choice("init", init, ("uniform", "gaussian"))
        self.activation = check_choice("activation", activation, tuple(ACTIVATIONS))
        gen = as_generator(seed)
        std = mlp_init_std(dim, hidden)
        params = {
            name: unit_draw(shape, gen, init, dtype) * std[name]
            for name, shape in mlp_parameter_shapes(dim, hidden).items()
        }
        if zero_output:
            params["W2"] = torch.zeros_like(params["W2"])
        self._set(params, device)

    def _set(self, params: dict[str, torch.Tensor], device) -> None:
        self.W1 = nn.Parameter(params["W1"].to(device))
        self.b1 = nn.Parameter(params["b1"].to(device))
        self.W2 = nn.Parameter(params["W2"].to(device))
        self.hidden, self.dim = self.W1.shape

    @classmethod
    def from_parameters(
        cls, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, *, activation: str = "relu2"
    ) -> MLPField:
        """Build the field from given tensors (shapes ``(hidden, dim)``, ``(hidden,)``, ``(dim, hidden)``)."""
        for name, value in (("W1", W1), ("b1", b1), ("W2", W2)):
            if not isinstance(value, torch.Tensor):
                raise ConfigError(f"{name} must be a torch.Tensor; got {type(value).__name__}.")
        if W1.ndim != 2 or b1.shape != (W1.shape[0],) or W2.shape != (W1.shape[1], W1.shape[0]):
            raise ShapeError(
                "MLPField parameters must have shapes W1 (hidden, dim), b1 (hidden,), W2 (dim, hidden); "
                f"got W1 {tuple(W1.shape)}, b1 {tuple(b1.shape)}, W2 {tuple(W2.shape)}."
            )
        field = cls.__new__(cls)
        nn.Module.__init__(field)
        field.activation = check_choice("activation", activation, tuple(ACTIVATIONS))
        field._set({"W1": W1, "b1": b1, "W2": W2}, W1.device)
        return field

    def forward(self, t: torch.Tensor | float, h: torch.Tensor) -> torch.Tensor:
        return mlp_branch(h, self.W1, self.b1, self.W2, self.activation)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, hidden={self.hidden}, activation={self.activation!r}"


class LinearField(VectorField):
    r"""Linear field :math:`f(h) = A h` (acting on the last axis), exact flow :math:`e^{At} h_0`.

    Parameters
    ----------
    matrix : torch.Tensor, shape (dim, dim)
        The matrix :math:`A`.
    """

    def __init__(self, matrix: torch.Tensor) -> None:
        super().__init__()
        if not isinstance(matrix, torch.Tensor):
            raise ConfigError(f"matrix must be a torch.Tensor; got {type(matrix).__name__}.")
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
            raise ShapeError(f"matrix must be square (dim, dim); got shape {tuple(matrix.shape)}.")
        self.A = nn.Parameter(matrix.clone())
        self.dim = matrix.shape[0]

    def forward(self, t: torch.Tensor | float, h: torch.Tensor) -> torch.Tensor:
        return h @ self.A.T

    def exact_solution(self, h0: torch.Tensor, t: float) -> torch.Tensor:
        r""":math:`h(t) = e^{At} h_0` by :func:`torch.linalg.matrix_exp`; ``h0`` of shape ``(..., dim)``."""
        t = check_real("t", t)
        return h0 @ torch.linalg.matrix_exp(self.A.detach() * t).T


class PiecewiseField(VectorField):
    r"""A depth-dependent field, one piece per equal sub-interval of :math:`[0, T)`.

    On :math:`[kT/K, (k+1)T/K)` the field is ``pieces[k]``; this is how a residual network with
    per-layer weights reads as an ODE with a (piecewise-constant in time) vector field.  A residual
    stack whose depth is a multiple of ``K`` steps through each piece with whole steps, so it
    converges to this ODE at its scheme's order; the reference solver integrates piece by piece.

    Parameters
    ----------
    pieces : sequence of VectorField
        One field per piece, all of the same ``dim``.
    horizon : float
        :math:`T > 0`.
    """

    def __init__(self, pieces: Sequence[nn.Module], horizon: float = 1.0) -> None:
        super().__init__()
        if isinstance(pieces, nn.Module) or not isinstance(pieces, Sequence) or len(pieces) == 0:
            raise ConfigError(
                f"pieces must be a non-empty sequence of fields; got {type(pieces).__name__}."
            )
        for i, piece in enumerate(pieces):
            if not isinstance(piece, nn.Module) or not callable(piece):
                raise ConfigError(f"pieces[{i}] must be a field (nn.Module); got {type(piece).__name__}.")
        self.pieces = nn.ModuleList(pieces)
        self.horizon = check_real("horizon", horizon, low=0.0, low_open=True)
        self.dim = getattr(pieces[0], "dim", None)

    @property
    def n_pieces(self) -> int:
        return len(self.pieces)

    def breakpoints(self) -> list[float]:
        """Piece boundaries :math:`0, T/K, \\dots, T`."""
        return [self.horizon * k / self.n_pieces for k in range(self.n_pieces + 1)]

    def piece_at(self, t: float) -> nn.Module:
        """The piece whose half-open interval contains ``t`` (clamped to ``[0, T]``)."""
        k = math.floor(float(t) / self.horizon * self.n_pieces)
        return self.pieces[min(max(k, 0), self.n_pieces - 1)]

    def forward(self, t: torch.Tensor | float, h: torch.Tensor) -> torch.Tensor:
        return self.piece_at(float(t))(t, h)
