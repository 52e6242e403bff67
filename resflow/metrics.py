r"""Hidden-state angles of a residual stream (the regime signature).

For states :math:`h_0, \dots, h_L` and updates :math:`\Delta h_l = h_{l+1} - h_l`:

* step angle :math:`\theta(h_l, h_{l+1})`: how far one layer rotates the state;
* update angle :math:`\theta(\Delta h_l, \Delta h_{l+1})`: near 0 when successive layers push the
  same way (a smooth flow, procedural use of depth), near :math:`\pi/2` when they are unrelated
  (an ensemble of noisy layers).

The probe subsystem builds on these; they live here so any stack can be checked today.
"""

from __future__ import annotations

import torch

from .errors import ShapeError

__all__ = ["angle", "step_angles", "update_angles"]


def angle(u: torch.Tensor, v: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    r"""Angle :math:`\arccos\big(\langle u, v\rangle / (\|u\|\,\|v\|)\big)` in radians over the last axis
    (``eps`` guards zero vectors, as in :func:`torch.nn.functional.cosine_similarity`)."""
    cos = torch.nn.functional.cosine_similarity(u, v, dim=-1, eps=eps)
    return torch.arccos(cos.clamp(-1.0, 1.0))


def _check_states(states: torch.Tensor, minimum: int) -> None:
    if not isinstance(states, torch.Tensor) or states.ndim < 2 or states.shape[0] < minimum:
        raise ShapeError(
            f"states must be a tensor of shape (L + 1, ..., dim) with at least {minimum} states; "
            f"got {getattr(states, 'shape', type(states).__name__)}."
        )


def step_angles(states: torch.Tensor) -> torch.Tensor:
    r""":math:`\theta(h_l, h_{l+1})` for :math:`l = 0..L-1`; shape ``(L, ...)`` from ``(L + 1, ..., dim)``."""
    _check_states(states, 2)
    return angle(states[:-1], states[1:])


def update_angles(states: torch.Tensor) -> torch.Tensor:
    r""":math:`\theta(\Delta h_l, \Delta h_{l+1})` for :math:`l = 0..L-2`; shape ``(L - 1, ...)``."""
    _check_states(states, 3)
    updates = torch.diff(states, dim=0)
    return angle(updates[:-1], updates[1:])
