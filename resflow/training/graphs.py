"""CUDA graphs of the training step: on a GPU, each step is replayed instead of launched op by op.

A training step launches a few hundred small kernels; on a GPU their launch cost, not their work,
sets the pace at the toy model's sizes. After ``WARMUP`` eager steps the step is captured as two
graphs over static buffers (the batch and its teachers' final states are copied in): (1) forward,
loss and backward, writing the gradients and the per-student losses; (2) the optimiser's update (a rule that
says it is ``capturable``, such as Adam), its step-dependent scalars read from 0-d tensors. Between the two
the host checks the losses and gradients,
so a student whose loss becomes NaN is still frozen before the update; after such a failure the
trainer goes back to eager steps for good. Nothing here runs on a CPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol

import torch

from .optimizers import BankRule
from .state import TrainState

__all__ = ["StepGraphs", "StepParts", "WARMUP", "tf32_matmuls"]

WARMUP = 3  # eager steps before the capture (and warm-up replays on a side stream)


class StepParts(Protocol):
    """The public step interface of a trainer (:class:`~resflow.training.engine.Trainer`) that the graphs
    capture."""

    device: torch.device
    dtype: torch.dtype
    grads: list[torch.Tensor]
    work: list[torch.Tensor]
    lr: list[torch.Tensor]
    rules: list[BankRule]

    def gradients(self, params: list[torch.Tensor], x: torch.Tensor, finals: torch.Tensor,
                  banks: list[int]) -> list[torch.Tensor]: ...

    def check_finite(self, state: TrainState, banks: list[int], losses: list[torch.Tensor]) -> bool: ...

    def update(self, state: TrainState, banks: list[int], scalars: list[tuple]) -> None: ...


class StepGraphs:
    """Capture and replay the training step of a trainer's :class:`StepParts` (CUDA only)."""

    def __init__(self, trainer: StepParts) -> None:
        self.trainer = trainer
        self.enabled = True
        self.key: tuple | None = None

    def ready(self, state: TrainState) -> bool:
        return self.enabled and state.step >= WARMUP and not bool(state.failed.any())

    def _capture(self, state: TrainState, x: torch.Tensor, finals: torch.Tensor, banks: list[int]) -> None:
        trainer = self.trainer
        device = trainer.device
        self.x, self.finals = torch.zeros_like(x), torch.zeros_like(finals)
        # each bank's step numbers as 0-d tensors, filled before every replay (their first values: step 0's)
        self.scalars = [tuple(torch.tensor(v, dtype=trainer.dtype, device=device)
                              for v in trainer.rules[k].scalars(state.step, 1.0)) for k in banks]

        def update(params, optimiser):
            for j, k in enumerate(banks):
                trainer.rules[k].apply(params[k], trainer.grads[k], optimiser[k], trainer.lr[k],
                                       trainer.work[k], self.scalars[j], state.step)

        side = torch.cuda.Stream(device=device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP):  # warm-up replays on scratch copies: the state is not touched
                trainer.gradients(state.params, self.x, self.finals, banks)
                update([p.clone() for p in state.params],
                       [{name: b.clone() for name, b in bank.items()} for bank in state.optimiser])
        torch.cuda.current_stream(device).wait_stream(side)
        self.gradients = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.gradients):
            self.losses = trainer.gradients(state.params, self.x, self.finals, banks)
        self.update = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.update):
            update(state.params, state.optimiser)

    @staticmethod
    def _key(state: TrainState, banks: list[int]) -> tuple:
        return tuple(banks), tuple(t.data_ptr() for k in range(len(state.params))
                                   for t in state.bank_buffers(k))

    def step(self, state: TrainState, x: torch.Tensor, finals: torch.Tensor, banks: list[int],
             scalars: list[tuple]) -> list[torch.Tensor]:
        """One training step of ``banks`` by replay; returns their per-student losses."""
        key = self._key(state, banks)
        if self.key != key:  # first use, another set of training banks, or a new state's buffers
            self._capture(state, x, finals, banks)
            self.key = key
        self.x.copy_(x)
        self.finals.copy_(finals)
        for held, numbers in zip(self.scalars, scalars, strict=True):
            for tensor, value in zip(held, numbers, strict=True):
                tensor.fill_(value)
        self.gradients.replay()
        losses = [loss.clone() for loss in self.losses]
        trainer = self.trainer
        if trainer.check_finite(state, banks, losses):
            self.update.replay()
        else:  # a student failed: it is frozen now; finish this step eagerly and stay eager
            self.enabled = False
            trainer.update(state, banks, scalars)
        return losses


@contextlib.contextmanager
def tf32_matmuls(enabled: bool) -> Iterator[None]:
    """CUDA matmuls in TF32 for the duration of the block when ``enabled``; the previous setting restored
    after (no global torch setting outlives a training loop)."""
    if not enabled:
        yield
        return
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
