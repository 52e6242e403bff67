r"""A batched Adam: one optimiser over parameters stacked along a student axis.

Students of different depths have different learning rates, so the optimiser is batched over
students with a per-student learning rate; it performs exactly the update of
:class:`torch.optim.Adam` (Kingma & Ba 2015, non-fused, no weight decay) for each student, which
the per-student reference loop uses.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["BatchedAdam"]


class BatchedAdam:
    """Adam over parameters stacked along a leading student axis, with one learning rate per student.

    Parameters
    ----------
    params : list of torch.Tensor
        Leaf tensors of shape ``(n_students, ...)``.
    lr : torch.Tensor, shape (n_students,)
        Full learning rate per student (multiplied by the schedule factor at each step).
    betas, eps
        As in :class:`torch.optim.Adam`.

    The update of student ``n`` is, elementwise, that of ``torch.optim.Adam`` (non-fused, no
    weight decay): :math:`p \\mathrel{-}= \\frac{\\mathrm{lr}}{1-\\beta_1^t}\\,
    m / (\\sqrt{v}/\\sqrt{1-\\beta_2^t} + \\epsilon)`.  Students flagged inactive are left untouched.
    """

    def __init__(self, params: list[torch.Tensor], lr: torch.Tensor, betas=(0.9, 0.999), eps: float = 1e-8):
        self.params = params
        self.lr = lr
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.t = 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    @torch.no_grad()
    def step(self, multiplier: float, active: torch.Tensor) -> None:
        self.t += 1
        bias1 = 1.0 - self.beta1**self.t
        bias2_sqrt = math.sqrt(1.0 - self.beta2**self.t)
        step_size = self.lr * multiplier / bias1
        for p, m, v in zip(self.params, self.m, self.v, strict=True):
            if p.grad is None:
                continue
            shape = (-1,) + (1,) * (p.ndim - 1)
            keep = active.view(shape)
            grad = torch.where(keep, p.grad, torch.zeros((), dtype=p.dtype, device=p.device))
            m.copy_(torch.where(keep, m * self.beta1 + grad * (1 - self.beta1), m))
            v.copy_(torch.where(keep, v * self.beta2 + grad * grad * (1 - self.beta2), v))
            denom = v.sqrt() / bias2_sqrt + self.eps
            p.copy_(torch.where(keep, p - step_size.view(shape) * (m / denom), p))

    def state_dict(self) -> dict[str, Any]:
        return {"t": self.t, "m": self.m, "v": self.v, "lr": self.lr}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.t = state["t"]
        for dst, src in zip(self.m + self.v, state["m"] + state["v"], strict=True):
            dst.copy_(src)
