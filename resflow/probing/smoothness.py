r"""Smoothness of trained weights along depth: the regularity that neural-ODE limits assume.

The neural-ODE limit of a residual network (Sander et al., NeurIPS 2022; Marion et al., 2022) needs weights
that vary smoothly with depth: :math:`\theta_{l+1} - \theta_l = O(1/\ell)`.  For each student, with
:math:`\theta_l` all the weights of layer :math:`l` (every stage's :math:`W_1, b_1, W_2`) as one vector,

* ``layer_change`` (per layer :math:`l = 0 \dots \ell-2`): :math:`\|\theta_{l+1}-\theta_l\| / \|\theta_l\|`;
* ``weight_variation`` (per student): the total variation along depth over the mean layer norm,
  :math:`\sum_l \|\theta_{l+1}-\theta_l\| / \overline{\|\theta_l\|}`.

A smooth field sampled at :math:`\ell` layers keeps ``weight_variation`` of order 1 as :math:`\ell` grows
(its changes shrink as :math:`1/\ell`); independent layers give :math:`\sqrt2` per change and a variation
growing as :math:`\ell`; equal layers (a tied or group-shared student) give 0.
"""

from __future__ import annotations

import torch

__all__ = ["SMOOTHNESS_LABELS", "layer_vectors", "weight_smoothness"]

SMOOTHNESS_LABELS = {
    "layer_change": ("relative change of the layer's weights to the next layer, "
                     "|θ_{l+1} − θ_l| / |θ_l|", "1"),
    "weight_variation": ("total variation of the weights along depth over the mean layer norm, "
                         "Σ_l |θ_{l+1} − θ_l| / mean |θ_l|", "1"),
}

_LAYER_WEIGHTS = ("W1", "b1", "W2")


def layer_vectors(parameters: dict[str, torch.Tensor]) -> torch.Tensor:
    """Each layer's weights (``W1``, ``b1``, ``W2`` of every stage) as one row, ``(depth, n_weights)``."""
    depth = parameters["W1"].shape[0]
    return torch.cat([parameters[name].reshape(depth, -1) for name in _LAYER_WEIGHTS], dim=1)


def weight_smoothness(parameters: dict[str, torch.Tensor]) -> tuple[torch.Tensor, float]:
    """``(layer_change (depth - 1,), weight_variation)`` of one student's parameters (module docstring); a
    student of one layer has no change (an empty tensor, variation NaN)."""
    theta = layer_vectors(parameters).double()
    if theta.shape[0] < 2:
        return theta.new_zeros(0), float("nan")
    steps = (theta[1:] - theta[:-1]).norm(dim=1)
    norms = theta.norm(dim=1)
    return steps / norms[:-1], float(steps.sum() / norms.mean())
