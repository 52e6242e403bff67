r"""Adam on a flat parameter buffer with a learning rate per element.

Students of different depths have different learning rates (:math:`c\cdot\mathrm{base}/\sqrt\ell`),
so the engine keeps every parameter of a bank in one flat buffer with a matching flat buffer of
learning rates and updates it in a handful of vectorised passes.  The update of each element is
that of :class:`torch.optim.Adam` (Kingma & Ba 2015; non-fused, no weight decay):
:math:`m \leftarrow \beta_1 m + (1-\beta_1) g`, :math:`v \leftarrow \beta_2 v + (1-\beta_2) g^2`,
:math:`p \leftarrow p - \frac{\mathrm{lr}}{1-\beta_1^t}\, m / (\sqrt{v}/\sqrt{1-\beta_2^t} + \epsilon)`,
which the per-student reference loop uses; a frozen (failed) student has learning rate 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["AdamSettings", "adam_scalars", "adam_apply"]


@dataclass(frozen=True)
class AdamSettings:
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8


def adam_scalars(t: int, multiplier: float, settings: AdamSettings) -> tuple[float, float]:
    """``(-lr multiplier / (1 - beta1^t), sqrt(1 - beta2^t))``: the step's scalar factors."""
    return -multiplier / (1.0 - settings.beta1**t), math.sqrt(1.0 - settings.beta2**t)


def adam_apply(param: torch.Tensor, grad: torch.Tensor, m: torch.Tensor, v: torch.Tensor, lr: torch.Tensor,
               settings: AdamSettings, work: torch.Tensor, coef: float | torch.Tensor,
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
