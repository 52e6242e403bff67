"""The training state, explicit: what a step reads and writes, and what a checkpoint holds.

In the manner of jax-md's ``init_fn``/``apply_fn`` and diffrax's solver state: a
:class:`TrainState` holds everything that changes during training -- parameters, Adam moments, the
step count, the data generators, failure flags and the loss history -- and nothing else; the
:class:`~resflow.training.engine.Trainer` holds what does not change (layout, teachers, schedule).
A checkpoint is the state as tensors and plain data with a format version, written atomically
and read with ``torch.load(weights_only=True)`` (no pickled code is ever executed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .._atomic import atomic_write
from ..errors import ConfigError, IncompatibleOptionsError
from .data import ReplicateStreams

__all__ = ["TrainState", "CHECKPOINT_FORMAT", "CHECKPOINT_NAME", "save_checkpoint", "load_checkpoint"]

CHECKPOINT_FORMAT = 3  # 1: engine v1 (pickled objects); 2: tensors and plain data, flat per-bank buffers,
# one data stream per replicate; 3: SOAP's preconditioners
CHECKPOINT_NAME = "checkpoint.pt"


@dataclass
class TrainState:
    """Everything that changes while training (see the module docstring).

    ``params``, ``adam_m`` and ``adam_v`` hold one flat buffer per bank (:class:`~resflow.training.bank.StudentBank`)
    (with SOAP, ``adam_v`` is in the rotated coordinates, and ``precond``/``bases`` hold each bank's
    Kronecker factors and their eigenbases, :class:`~resflow.training.soap.SoapLayout`; empty for Adam);
    ``data`` the replicates' data streams; ``pending`` the batches drawn ahead with their teacher outputs;
    ``failed``/``reasons`` are in the trainer's student order; ``history`` has one row of test
    losses per entry of ``eval_steps``.
    """

    step: int
    params: list[torch.Tensor]
    adam_m: list[torch.Tensor]
    adam_v: list[torch.Tensor]
    data: ReplicateStreams
    failed: torch.Tensor
    reasons: list[str]
    eval_steps: list[int] = field(default_factory=list)
    history: list[np.ndarray] = field(default_factory=list)
    pending: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)  # (x, teacher finals) drawn ahead
    last_loss: torch.Tensor | None = None  # per-student training loss of the last step (not checkpointed)
    precond: list[torch.Tensor] = field(default_factory=list)  # SOAP only
    bases: list[torch.Tensor] = field(default_factory=list)  # SOAP only
    # bank -> its learning rates with the failed students' zeroed (not checkpointed: rebuilt from ``failed``
    # by the first step's finite check after a resume, before any update)
    frozen_lr: dict[int, torch.Tensor] = field(default_factory=dict)

    @property
    def optimiser_buffers(self) -> list[list[torch.Tensor]]:
        """Every per-bank buffer a step changes: parameters, moments (and SOAP's factors and bases)."""
        return [self.params, self.adam_m, self.adam_v] + ([self.precond, self.bases] if self.precond else [])

    def as_checkpoint(self, fingerprint: dict[str, Any]) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT, "fingerprint": json.dumps(fingerprint, sort_keys=True), "step": self.step,
            "params": [p.detach().cpu() for p in self.params], "adam_m": [m.cpu() for m in self.adam_m],
            "adam_v": [v.cpu() for v in self.adam_v], "precond": [p.cpu() for p in self.precond],
            "bases": [q.cpu() for q in self.bases], "data": self.data.state(), "failed": self.failed.cpu(),
            "reasons": list(self.reasons), "eval_steps": list(self.eval_steps),
            "history": torch.from_numpy(np.stack(self.history)) if self.history else torch.zeros(0),
            "pending_x": [x.cpu() for x, _ in self.pending], "pending_final": [f.cpu() for _, f in self.pending],
        }

    def load(self, checkpoint: dict[str, Any]) -> None:
        """Overwrite this state with a checkpoint's (same layout; buffers are copied in place)."""
        for dst, src in zip(self.params + self.adam_m + self.adam_v + self.precond + self.bases,
                            checkpoint["params"] + checkpoint["adam_m"] + checkpoint["adam_v"] + checkpoint["precond"]
                            + checkpoint["bases"], strict=True):
            dst.copy_(src)
        self.step = int(checkpoint["step"])
        self.data.load(checkpoint["data"])
        self.failed = checkpoint["failed"].clone()
        self.reasons = list(checkpoint["reasons"])
        self.eval_steps = [int(s) for s in checkpoint["eval_steps"]]
        self.history = list(checkpoint["history"].numpy()) if checkpoint["history"].numel() else []
        device = self.params[0].device
        self.pending = [(x.to(device), f.to(device)) for x, f in zip(checkpoint["pending_x"],
                                                                     checkpoint["pending_final"], strict=True)]


def save_checkpoint(path: Path, state: TrainState, fingerprint: dict[str, Any]) -> None:
    """Write the state to ``path`` atomically: a temporary file, fsynced, then renamed into place."""
    atomic_write(path, lambda tmp: torch.save(state.as_checkpoint(fingerprint), tmp))


def load_checkpoint(path: Path, fingerprint: dict[str, Any]) -> dict[str, Any]:
    """Read a checkpoint written for this exact configuration, or raise a clear error."""
    if not path.exists():
        raise ConfigError(f"nothing to resume: no checkpoint at {path}.")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated or foreign files raise many types
        raise ConfigError(f"the checkpoint {path} cannot be read ({type(exc).__name__}); it is damaged or not a "
                          "resflow checkpoint. Start a new run.") from None
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != CHECKPOINT_FORMAT:
        found = checkpoint.get("format", "none") if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise IncompatibleOptionsError(
            f"the checkpoint {path} has format {found!r}, this resflow reads format {CHECKPOINT_FORMAT}; "
            "start a new run (or resume with the resflow version that wrote it).")
    if checkpoint.get("fingerprint") != json.dumps(fingerprint, sort_keys=True):
        raise IncompatibleOptionsError(
            f"the checkpoint at {path} was written by a different configuration; resume with the same experiment, "
            "preset and --set options, or start a new run.")
    return checkpoint
