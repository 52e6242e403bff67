r"""Hidden-state metrics of a residual stream: one definition for toy stacks and transformers.

For states :math:`h_0, \dots, h_L` (of a token, or an input sample) and updates
:math:`\Delta h_l = h_{l+1} - h_l`:

========================  ===============================================================  ==========
metric                    definition                                                       layers
========================  ===============================================================  ==========
``step_angle``            :math:`\theta(h_l, h_{l+1})`                                      0..L-1
``update_angle``          :math:`\theta(\Delta h_l, \Delta h_{l+1})`                        0..L-2
``norm``                  :math:`\|h_l\|`                                                   0..L
``update_norm``           :math:`\|\Delta h_l\|`                                            0..L-1
``angle_to_final``        :math:`\theta(h_l, h_L)`                                          0..L
``progress``              :math:`\langle h_l - h_0, h_L - h_0\rangle / \|h_L - h_0\|^2`     0..L
========================  ===============================================================  ==========

The update angle is the regime signature: near 0 when successive layers push the same way (a
smooth flow, procedural use of depth), near :math:`\pi/2` when they are unrelated (an ensemble of
noisy layers).  Reference: Liu, Kangaslahti, Liu & Gore, arXiv:2602.05970 (2026).
"""

from __future__ import annotations

import torch

from ..errors import ShapeError

__all__ = ["METRICS", "METRIC_LABELS", "angle", "step_angles", "update_angles", "token_metrics"]

METRICS = ("step_angle", "update_angle", "norm", "update_norm", "angle_to_final", "progress")
METRIC_LABELS = {  # name -> (long_name, units), for every Dataset that stores these metrics
    "step_angle": ("angle between h_l and h_(l+1)", "rad"),
    "update_angle": ("angle between successive updates dh_l and dh_(l+1)", "rad"),
    "norm": ("norm of h_l", "1"),
    "update_norm": ("norm of dh_l = h_(l+1) - h_l", "1"),
    "angle_to_final": ("angle between h_l and h_L", "rad"),
    "progress": ("progress <h_l - h_0, h_L - h_0> / |h_L - h_0|^2", "1"),
}
FLOAT64_EPS = 1e-12  # zero-vector guard of the float64 token metrics


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


def token_metrics(states: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every metric of :data:`METRICS` per token, from states ``(L + 1, n_tokens, d)``; each value
    ``(layers, n_tokens)``, computed in float64."""
    if not isinstance(states, torch.Tensor) or states.ndim != 3 or states.shape[0] < 3:
        raise ShapeError(f"states must have shape (L + 1, n_tokens, d) with L >= 2; got "
                         f"{getattr(states, 'shape', type(states).__name__)}.")
    h = states.double()
    dh = torch.diff(h, dim=0)
    total = h[-1] - h[0]
    denom = total.square().sum(-1).clamp_min(1e-300)
    return {
        "step_angle": angle(h[:-1], h[1:], eps=FLOAT64_EPS),
        "update_angle": angle(dh[:-1], dh[1:], eps=FLOAT64_EPS),
        "norm": h.norm(dim=-1),
        "update_norm": dh.norm(dim=-1),
        "angle_to_final": angle(h, h[-1].expand_as(h), eps=FLOAT64_EPS),
        "progress": ((h - h[0]) * total).sum(-1) / denom,
    }
