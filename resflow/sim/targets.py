"""Teacher outputs for one batch, computed once per step for every student that learns them.

Teachers of one depth, width and scheme (Euler, as every teacher of an experiment) are evaluated
together: their per-layer weights are stacked along a teacher axis, the branch scale folded into
:math:`W_2`, and each layer is one call of the fused Euler block of :mod:`resflow.sim.kernels` --
so two teachers cost one pass of layer calls.  Other teachers are evaluated one by one through
:class:`~resflow.sim.Teacher`.  The results equal ``Teacher(x)`` to rounding (tested).
"""

from __future__ import annotations

import copy

import torch

from ..dynamics.fields import rmsnorm
from .kernels import LayerParams, block_forward
from .teacher import Teacher

__all__ = ["Targets"]


class Targets:
    """``targets(x)`` -> ``{"final": (n_T, B, d)}`` and, for KL, ``"logp"`` (n_T, n_temps, B, V) and ``"heads"``."""

    def __init__(self, teachers: dict[str, Teacher], temperatures: list[float], kl: bool,
                 dtype: torch.dtype, device: torch.device) -> None:
        self.labels = list(teachers)
        # copies: the caller's teachers keep their device and dtype
        self.teachers = {k: copy.deepcopy(t).to(device=device, dtype=dtype) for k, t in teachers.items()}
        self.kl = kl
        self.temperatures = torch.tensor(temperatures, dtype=dtype, device=device)
        self.heads = torch.stack([self.teachers[k].head for k in self.labels]) if kl else None
        first = next(iter(self.teachers.values())).config
        same = all((t.config.depth, t.config.width, t.config.hidden, t.config.scheme, t.config.branch_scale)
                   == (first.depth, first.width, first.hidden, first.scheme, first.branch_scale)
                   for t in self.teachers.values())
        self.stacked = None
        if same and first.scheme == "euler":
            fields = [self.teachers[k].stack.layer_fields for k in self.labels]

            def stacked(layer: int, name: str, scale: float = 1.0) -> torch.Tensor:
                return torch.stack([getattr(f[layer], name).detach() * scale for f in fields]).unsqueeze(1)

            self.stacked = [LayerParams(stacked(layer, "W1"), stacked(layer, "b1"),
                                        stacked(layer, "W2", first.branch_scale)) for layer in range(first.depth)]

    @torch.no_grad()
    def final_states(self, x: torch.Tensor) -> torch.Tensor:
        """Every teacher's MSE target ``rmsnorm(h_L)``, shape (n_teachers, B, d)."""
        if self.stacked is None:
            return torch.stack([self.teachers[k](x) for k in self.labels])
        h = rmsnorm(x).expand(len(self.labels), *x.shape)
        for layer in self.stacked:
            h, _ = block_forward(h, layer, ((0.0,),), (1.0,), save=False)
        return rmsnorm(h)

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.outputs(self.final_states(x))

    @torch.no_grad()
    def outputs(self, finals: torch.Tensor) -> dict[str, torch.Tensor]:
        """The targets of a batch from the teachers' final states (n_T, B, d): for KL, adds the
        log-probabilities at every temperature and the heads."""
        out = {"final": finals}
        if self.kl:
            logits = torch.bmm(finals, self.heads.transpose(1, 2))  # (n_T, B, V)
            out["logp"] = torch.log_softmax(logits[:, None] / self.temperatures[None, :, None, None], dim=-1)
            out["heads"] = self.heads
        return out
