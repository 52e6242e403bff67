"""Fresh inputs for training and evaluation: two seeded CPU generators, part of the training state.

Inputs :math:`x \\sim N(0, I_d)` are drawn on the CPU (so a seed gives the same data on every device)
from a training generator and a separate evaluation generator, so evaluation batches never come
from the training stream and consecutive training batches are fresh draws (online learning).
"""

from __future__ import annotations

import torch

__all__ = ["DataStream", "ReplicateStreams", "EVAL_SEED_OFFSET", "METRIC_BATCH", "METRIC_SEED",
           "metric_inputs"]

EVAL_SEED_OFFSET = 0x5EED
METRIC_BATCH = 1024  # fixed inputs the hidden-state metrics of trained students are measured on
METRIC_SEED = 12345  # their seed (:mod:`resflow.training.hidden`)


class DataStream:
    """Training and evaluation batches of width ``width`` from ``seed``; ``state()``/``load()``
    checkpoint it."""

    def __init__(self, seed: int, width: int, dtype: torch.dtype, device: torch.device) -> None:
        self.width, self.dtype, self.device = width, dtype, device
        self.train_gen = torch.Generator().manual_seed(seed)
        self.eval_gen = torch.Generator().manual_seed(seed + EVAL_SEED_OFFSET)

    def train_batch(self, batch: int) -> torch.Tensor:
        return torch.randn((batch, self.width), generator=self.train_gen, dtype=self.dtype).to(self.device)

    def eval_batch(self, batch: int) -> torch.Tensor:
        return torch.randn((batch, self.width), generator=self.eval_gen, dtype=self.dtype).to(self.device)

    def state(self) -> dict[str, torch.Tensor]:
        return {"train": self.train_gen.get_state(), "eval": self.eval_gen.get_state()}

    def load(self, state: dict[str, torch.Tensor]) -> None:
        self.train_gen.set_state(state["train"])
        self.eval_gen.set_state(state["eval"])


class ReplicateStreams:
    """One :class:`DataStream` per replicate (seed ``seed + replicate``); batches are stacked
    ``(R, B, d)``."""

    def __init__(self, seed: int, replicates: list[int], width: int, dtype: torch.dtype,
                 device: torch.device) -> None:
        self.replicates = list(replicates)
        self.streams = [DataStream(seed + r, width, dtype, device) for r in self.replicates]

    def train_batch(self, batch: int) -> torch.Tensor:
        return torch.stack([s.train_batch(batch) for s in self.streams])

    def eval_batch(self, batch: int) -> torch.Tensor:
        return torch.stack([s.eval_batch(batch) for s in self.streams])

    def state(self) -> list[dict[str, torch.Tensor]]:
        return [s.state() for s in self.streams]

    def load(self, state: list[dict[str, torch.Tensor]]) -> None:
        for stream, saved in zip(self.streams, state, strict=True):
            stream.load(saved)


def metric_inputs(width: int, dtype: torch.dtype, generator: torch.Generator | None = None) -> torch.Tensor:
    """The fixed inputs every trained student is measured on: ``METRIC_BATCH`` Gaussian inputs of ``width``,
    drawn on the CPU from ``METRIC_SEED`` (or from ``generator``, to go on drawing from it after them)."""
    generator = generator or torch.Generator().manual_seed(METRIC_SEED)
    return torch.randn((METRIC_BATCH, width), generator=generator, dtype=dtype)
