r"""Adam on a flat parameter buffer with a learning rate per element.

Students of different depths have different learning rates (:math:`c\cdot\mathrm{base}/\sqrt\ell`),
so the engine keeps every parameter of a bank in one flat buffer with a matching flat buffer of
learning rates and updates it in a handful of vectorised passes.  The update of each element is
that of :class:`torch.optim.Adam` (Kingma & Ba 2015; non-fused, no weight decay):
:math:`m \leftarrow \beta_1 m + (1-\beta_1) g`, :math:`v \leftarrow \beta_2 v + (1-\beta_2) g^2`,
:math:`p \leftarrow p - \frac{\mathrm{lr}}{1-\beta_1^t}\, m / (\sqrt{v}/\sqrt{1-\beta_2^t} + \epsilon)`,
which the per-student reference loop uses; a frozen (failed) student has learning rate 0.
:class:`AdamRule` is the rule the engine binds to a bank (:mod:`resflow.training.optimizers`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol

import torch

__all__ = ["AdamRule", "AdamNumbers", "adam_scalars", "adam_apply"]


class AdamNumbers(Protocol):
    """What the update reads of its settings (:class:`~resflow.training.optimizers.Adam` has them)."""

    beta1: float
    beta2: float
    eps: float


class AdamRule:
    """Adam bound to a bank of ``size`` parameters: buffers ``m`` and ``v`` (the moments), capturable in a
    CUDA graph (its step's numbers are two scalars)."""

    capturable = True

    def __init__(self, settings: AdamNumbers, size: int) -> None:
        self.settings = settings
        self.buffers = {"m": size, "v": size}

    def scalars(self, step: int, multiplier: float) -> tuple[float, float]:
        return adam_scalars(step + 1, multiplier, self.settings)

    def apply(self, param: torch.Tensor, grad: torch.Tensor, state: Mapping[str, torch.Tensor],
              lr: torch.Tensor, work: torch.Tensor, scalars: tuple, step: int) -> None:
        adam_apply(param, grad, state["m"], state["v"], lr, self.settings, work, *scalars)


def adam_scalars(t: int, multiplier: float, settings: AdamNumbers) -> tuple[float, float]:
    """``(-lr multiplier / (1 - beta1^t), sqrt(1 - beta2^t))``: the step's scalar factors."""
    return -multiplier / (1.0 - settings.beta1**t), math.sqrt(1.0 - settings.beta2**t)


def adam_apply(param: torch.Tensor, grad: torch.Tensor, m: torch.Tensor, v: torch.Tensor, lr: torch.Tensor,
               settings: AdamNumbers, work: torch.Tensor, coef: float | torch.Tensor,
               bias2_sqrt: float | torch.Tensor) -> None:
    """The update with the scalar factors given as numbers or as 0-d tensors (for CUDA graph replay)."""
    m.lerp_(grad, 1.0 - settings.beta1)
    v.mul_(settings.beta2).addcmul_(grad, grad, value=1.0 - settings.beta2)
    torch.sqrt(v, out=work).div_(bias2_sqrt).add_(settings.eps)
    torch.div(m, work, out=work).mul_(lr)
    if isinstance(coef, torch.Tensor):
        param.addcmul_(work, coef)
    else:
        param.add_(work, alpha=coef)
