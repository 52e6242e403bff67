"""CUDA graphs of the training step: on a GPU, each step is replayed instead of launched op by op.

A training step launches a few hundred small kernels; on a GPU their launch cost, not their work,
sets the pace at the toy model's sizes. After ``WARMUP`` eager steps the step is captured as two
graphs over static buffers (the batch and its teachers' final states are copied in): (1) forward,
loss and backward, writing the gradients and the per-student losses; (2) the Adam update, its step-
dependent scalars read from 0-d tensors. Between the two the host checks the losses and gradients,
so a student whose loss becomes NaN is still frozen before the update; after such a failure the
trainer goes back to eager steps for good. Nothing here runs on a CPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .optim import adam_apply
from .state import TrainState

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Trainer

__all__ = ["StepGraphs", "WARMUP"]

WARMUP = 3  # eager steps before the capture (and warm-up replays on a side stream)


class StepGraphs:
    """Capture and replay the training step of a :class:`~resflow.sim.engine.Trainer` (CUDA only)."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self.enabled = True
        self.buffers: tuple[int, ...] | None = None

    def ready(self, state: TrainState) -> bool:
        return self.enabled and state.step >= WARMUP and not bool(state.failed.any())

    def _capture(self, state: TrainState) -> None:
        trainer = self.trainer
        device = trainer.device
        self.x = torch.zeros((trainer.config.batch, trainer.width), dtype=trainer.dtype, device=device)
        self.finals = torch.zeros((len(trainer.targets.labels), trainer.config.batch, trainer.width),
                                  dtype=trainer.dtype, device=device)
        self.coef = torch.zeros((), dtype=trainer.dtype, device=device)
        self.bias2 = torch.ones((), dtype=trainer.dtype, device=device)
        side = torch.cuda.Stream(device=device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                trainer._gradients(state.params, self.x, self.finals)
                scratch = [(p.clone(), m.clone(), v.clone()) for p, m, v in zip(state.params, state.adam_m,
                                                                                  state.adam_v, strict=True)]
                for k, (p, m, v) in enumerate(scratch):
                    adam_apply(p, trainer.grads[k], m, v, trainer.lr[k], trainer.adam, trainer.work[k], self.coef,
                               self.bias2)
        torch.cuda.current_stream(device).wait_stream(side)
        self.gradients = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.gradients):
            self.losses = trainer._gradients(state.params, self.x, self.finals)
        self.update = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.update):
            for k in range(len(trainer.banks)):
                adam_apply(state.params[k], trainer.grads[k], state.adam_m[k], state.adam_v[k], trainer.lr[k],
                           trainer.adam, trainer.work[k], self.coef, self.bias2)
        self.buffers = self._key(state)

    @staticmethod
    def _key(state: TrainState) -> tuple[int, ...]:
        return tuple(t.data_ptr() for t in state.params + state.adam_m + state.adam_v)

    def step(self, state: TrainState, x: torch.Tensor, finals: torch.Tensor, coef: float,
             bias2_sqrt: float) -> torch.Tensor:
        """One training step by replay; returns the per-student losses."""
        if self.buffers != self._key(state):  # first use, or a new state's buffers
            self._capture(state)
        self.x.copy_(x)
        self.finals.copy_(finals)
        self.coef.fill_(coef)
        self.bias2.fill_(bias2_sqrt)
        self.gradients.replay()
        losses = self.losses.clone()
        trainer = self.trainer
        if trainer._check(state, losses):
            self.update.replay()
        else:  # a student failed: it is frozen now; finish this step eagerly and stay eager
            self.enabled = False
            for k in range(len(trainer.banks)):
                adam_apply(state.params[k], trainer.grads[k], state.adam_m[k], state.adam_v[k], trainer.lr[k],
                           trainer.adam, trainer.work[k], coef, bias2_sqrt)
        return losses
