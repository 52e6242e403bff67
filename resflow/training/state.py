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

CHECKPOINT_FORMAT = 4  # 1: engine v1 (pickled objects); 2: tensors and plain data, flat per-bank buffers,
# one data stream per replicate; 3: SOAP's preconditioners; 4: the optimiser's buffers named by its rule
READABLE_FORMATS = (3, 4)
# format 3's buffer lists, and the names the built-in rules (Adam: m, v; SOAP: m, v, factors, bases) give them
_FORMAT3_NAMES = {"adam_m": "m", "adam_v": "v", "precond": "factors", "bases": "bases"}
CHECKPOINT_NAME = "checkpoint.pt"


@dataclass
class TrainState:
    """Everything that changes while training (see the module docstring).

    ``params`` holds one flat buffer per bank (:class:`~resflow.training.bank.StudentBank`), ``optimiser``
    each bank's optimiser buffers by the names its rule gives them (Adam: ``m``, ``v``; SOAP adds
    ``factors`` and ``bases``, :mod:`resflow.training.optimizers`); ``data`` the replicates' data streams;
    ``pending`` the batches drawn ahead with their teacher outputs;
    ``failed``/``reasons`` are in the trainer's student order; ``history`` has one row of test
    losses per entry of ``eval_steps``.
    """

    step: int
    params: list[torch.Tensor]
    optimiser: list[dict[str, torch.Tensor]]
    data: ReplicateStreams
    failed: torch.Tensor
    reasons: list[str]
    eval_steps: list[int] = field(default_factory=list)
    history: list[np.ndarray] = field(default_factory=list)
    # (x, teacher finals) drawn ahead
    pending: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)
    last_loss: torch.Tensor | None = None  # per-student training loss of the last step (not checkpointed)
    # bank -> its learning rates with the failed students' zeroed (not checkpointed: rebuilt from ``failed``
    # by the first step's finite check after a resume, before any update)
    frozen_lr: dict[int, torch.Tensor] = field(default_factory=dict)

    def bank_buffers(self, k: int) -> list[torch.Tensor]:
        """Every buffer of bank ``k`` a step changes: its parameters, then its optimiser's buffers."""
        return [self.params[k], *self.optimiser[k].values()]

    def as_checkpoint(self, fingerprint: dict[str, Any]) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT, "fingerprint": json.dumps(fingerprint, sort_keys=True),
            "step": self.step,
            "params": [p.detach().cpu() for p in self.params],
            "optimiser": [{name: b.cpu() for name, b in bank.items()} for bank in self.optimiser],
            "data": self.data.state(), "failed": self.failed.cpu(),
            "reasons": list(self.reasons), "eval_steps": list(self.eval_steps),
            "history": torch.from_numpy(np.stack(self.history)) if self.history else torch.zeros(0),
            "pending_x": [x.cpu() for x, _ in self.pending],
            "pending_final": [f.cpu() for _, f in self.pending],
        }

    def load(self, checkpoint: dict[str, Any]) -> None:
        """Overwrite this state with a checkpoint's (same layout; buffers are copied in place)."""
        for dst, src in zip(self.params, checkpoint["params"], strict=True):
            dst.copy_(src)
        saved = _optimiser_of(checkpoint)
        for mine, theirs in zip(self.optimiser, saved, strict=True):
            if mine.keys() != theirs.keys():
                raise IncompatibleOptionsError(f"the checkpoint's optimiser buffers {sorted(theirs)} "
                                               f"are not this run's {sorted(mine)}; start a new run.")
            for name, buffer in mine.items():
                buffer.copy_(theirs[name])
        self.step = int(checkpoint["step"])
        self.data.load(checkpoint["data"])
        self.failed = checkpoint["failed"].clone()
        self.reasons = list(checkpoint["reasons"])
        self.eval_steps = [int(s) for s in checkpoint["eval_steps"]]
        self.history = list(checkpoint["history"].numpy()) if checkpoint["history"].numel() else []
        device = self.params[0].device
        self.pending = [(x.to(device), f.to(device))
                        for x, f in zip(checkpoint["pending_x"], checkpoint["pending_final"], strict=True)]


def _optimiser_of(checkpoint: dict[str, Any]) -> list[dict[str, torch.Tensor]]:
    """Each bank's optimiser buffers by name (format 3 kept them in lists named for Adam and SOAP)."""
    if checkpoint["format"] >= 4:
        return checkpoint["optimiser"]
    lists = {new: checkpoint[old] for old, new in _FORMAT3_NAMES.items() if checkpoint.get(old)}
    return [{name: buffers[k] for name, buffers in lists.items()} for k in range(len(checkpoint["params"]))]


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
        raise ConfigError(f"the checkpoint {path} cannot be read ({type(exc).__name__}); "
                          "it is damaged or not a resflow checkpoint. Start a new run.") from None
    if not isinstance(checkpoint, dict) or checkpoint.get("format") not in READABLE_FORMATS:
        found = (checkpoint.get("format", "none") if isinstance(checkpoint, dict)
                 else type(checkpoint).__name__)
        raise IncompatibleOptionsError(
            f"the checkpoint {path} has format {found!r}, this resflow reads formats "
            f"{' and '.join(map(str, READABLE_FORMATS))}; "
            "start a new run (or resume with the resflow version that wrote it).")
    if checkpoint.get("fingerprint") != json.dumps(fingerprint, sort_keys=True):
        raise IncompatibleOptionsError(
            f"the checkpoint at {path} was written by a different configuration; "
            "resume with the same experiment, preset and --set options, or start a new run.")
    return checkpoint
