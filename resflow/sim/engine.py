r"""The simulation engine: online teacher--student training, all students of a run batched.

Every step draws fresh inputs :math:`x \sim N(0, I_d)`, evaluates each teacher **once**, and
advances every student (all targets x schemes x depths x seeds x temperatures) in one process:
one :class:`~resflow.students.StudentBank` per scheme, one backward pass, one
:class:`~resflow.training.BatchedAdam` step.  Test losses on fresh batches are recorded every
``eval_every`` steps; the run checkpoints atomically every ``checkpoint_every`` steps (and on
Ctrl-C) and can be resumed; a student whose loss or gradient becomes NaN/inf is frozen and marked
failed with the reason while the others go on.

:func:`train_reference` is the plain per-student loop (``torch.optim.Adam``, one student at a
time, the same data stream) kept as a reference: the tests check both give the same losses.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..dynamics.fields import rmsnorm
from ..dynamics.tableau import get_tableau
from ..errors import ConfigError, IncompatibleOptionsError
from .config import TrainConfig, lr_multiplier, student_lr
from .optim import BatchedAdam
from .results import TrainingResult
from .students import StudentBank, StudentSpec
from .teacher import Teacher

__all__ = ["DataStream", "train", "resolve_device", "StateMetrics", "CHECKPOINT_NAME"]

CHECKPOINT_NAME = "checkpoint.pt"
METRIC_BATCH = 1024  # inputs used for the hidden-state metrics of the trained students
StateMetrics = Callable[[torch.Tensor], dict[str, torch.Tensor]]
"""``states (L + 1, n, d) -> {name: per-layer values (layers, n)}``, e.g. :func:`resflow.analysis.token_metrics`."""


def resolve_device(device: str) -> torch.device:
    """``"auto"`` picks CUDA when available; ``"cuda"`` without a GPU is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise IncompatibleOptionsError("device='cuda' but no CUDA device is available; use --device cpu or auto.")
    return torch.device(device)


class DataStream:
    """Fresh inputs for training and evaluation, drawn on the CPU from two seeded generators
    (so a seed gives the same data on every device, and a checkpoint can restore the stream)."""

    def __init__(self, seed: int, width: int, dtype: torch.dtype, device: torch.device) -> None:
        self.width, self.dtype, self.device = width, dtype, device
        self.train_gen = torch.Generator().manual_seed(seed)
        self.eval_gen = torch.Generator().manual_seed(seed + 0x5EED)

    def train_batch(self, batch: int) -> torch.Tensor:
        return torch.randn((batch, self.width), generator=self.train_gen, dtype=self.dtype).to(self.device)

    def eval_batch(self, batch: int) -> torch.Tensor:
        return torch.randn((batch, self.width), generator=self.eval_gen, dtype=self.dtype).to(self.device)

    def state(self) -> dict[str, torch.Tensor]:
        return {"train": self.train_gen.get_state(), "eval": self.eval_gen.get_state()}

    def load(self, state: dict[str, torch.Tensor]) -> None:
        self.train_gen.set_state(state["train"])
        self.eval_gen.set_state(state["eval"])


class _Targets:
    """Teacher outputs for one batch: computed once, gathered per student."""

    def __init__(self, teachers: dict[str, Teacher], temperatures: list[float], config: TrainConfig):
        self.labels = list(teachers)
        self.teachers = teachers
        self.temperatures = temperatures
        self.config = config

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        finals = torch.stack([self.teachers[k](x) for k in self.labels])  # (n_teachers, B, d)
        out = {"final": finals}
        if self.config.loss == "kl":
            heads = torch.stack([self.teachers[k].head for k in self.labels])  # (n_teachers, V, d)
            logits = torch.bmm(finals, heads.transpose(1, 2))  # (n_teachers, B, V)
            temps = torch.tensor(self.temperatures, dtype=x.dtype, device=x.device)
            out["logp"] = torch.log_softmax(logits[:, None] / temps[None, :, None, None], dim=-1)
            out["heads"] = heads
        return out


class _BankLoss:
    """Per-student loss of one bank against the shared targets."""

    def __init__(self, bank: StudentBank, labels: list[str], temperatures: list[float], config: TrainConfig):
        device = bank.W1.device
        self.bank, self.config = bank, config
        self.teacher_idx = torch.tensor([labels.index(s.target) for s in bank.specs], device=device)
        if config.loss == "kl":
            self.temp_idx = torch.tensor([temperatures.index(s.temperature) for s in bank.specs], device=device)
            self.temps = torch.tensor([s.temperature for s in bank.specs], dtype=bank.W1.dtype, device=device)

    def __call__(self, h: torch.Tensor, targets: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.config.loss == "mse":
            return (rmsnorm(h) - targets["final"][self.teacher_idx]).square().mean(dim=(1, 2))
        logp = targets["logp"][self.teacher_idx, self.temp_idx]  # (n, B, V)
        if self.config.head == "learned":
            logits = self.bank.logits(h)
        else:
            heads = targets["heads"][self.teacher_idx]
            logits = torch.bmm(rmsnorm(h), heads.transpose(1, 2)) / self.temps[:, None, None]
        logq = torch.log_softmax(logits, dim=-1)
        return (logp.exp() * (logp - logq)).sum(-1).mean(-1)


def _check_specs(specs: list[StudentSpec], teachers: dict[str, Teacher], config: TrainConfig) -> None:
    if not specs:
        raise ConfigError("no students to train: give at least one depth, scheme, seed and target.")
    for s in specs:
        if s.target not in teachers:
            raise ConfigError(f"student target {s.target!r} has no teacher; teachers are {sorted(teachers)}.")
        get_tableau(s.scheme)
        if config.loss == "kl" and s.temperature not in config.temperatures:
            raise ConfigError(f"student temperature {s.temperature} is not in temperatures {config.temperatures}.")
    widths = {t.width for t in teachers.values()}
    if len(widths) != 1:
        raise ConfigError(f"all teachers of a run must have one width; got {sorted(widths)}.")


def _atomic_save(obj: Any, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def train(
    specs: list[StudentSpec],
    teachers: dict[str, Teacher],
    config: TrainConfig,
    *,
    seed: int = 0,
    run_dir: Path | None = None,
    resume: bool = False,
    progress: Callable[[int, int, dict[str, float]], None] | None = None,
    stop_after: int | None = None,
    state_metrics: StateMetrics | None = None,
) -> TrainingResult:
    """Train all ``specs`` against their teachers, batched.

    Parameters
    ----------
    specs : list of StudentSpec
    teachers : dict
        Target label -> :class:`~resflow.Teacher` (every ``spec.target`` must be a key).
    config : TrainConfig
    seed : int
        Seed of the data stream (student initialisations come from each spec's seed).
    run_dir : Path, optional
        Where the checkpoint lives; without it nothing is written.
    resume : bool
        Continue from ``run_dir/checkpoint.pt``.
    progress : callable, optional
        Called as ``progress(step, total, losses)`` about every 1% of training.
    stop_after : int, optional
        Stop (after checkpointing) once this many steps are done; for tests of resumption.
    state_metrics : callable, optional
        Hidden-state metrics to record for every trained student (per-layer means over
        ``METRIC_BATCH`` fixed inputs), e.g. :func:`resflow.analysis.token_metrics`.
    """
    _check_specs(specs, teachers, config)
    device = resolve_device(config.device)
    dtype = getattr(torch, config.dtype)
    if config.tf32 and device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    width = next(iter(teachers.values())).width
    hidden = next(iter(teachers.values())).config.hidden
    vocab = next(iter(teachers.values())).config.vocab
    teachers = {k: t.to(device=device, dtype=dtype) for k, t in teachers.items()}
    temperatures = sorted(set(config.temperatures))
    target_fn = _Targets(teachers, temperatures, config)
    banks = [StudentBank([s for s in specs if s.scheme == scheme], width, hidden, vocab, dtype, device)
             for scheme in sorted({s.scheme for s in specs})]
    losses = [_BankLoss(b, target_fn.labels, temperatures, config) for b in banks]
    optimisers = [
        BatchedAdam(b.parameters, torch.tensor([student_lr(s.depth, config) for s in b.specs], dtype=dtype,
                                               device=device),
                    betas=(config.adam_beta1, config.adam_beta2), eps=config.adam_eps)
        for b in banks
    ]
    order = [s for b in banks for s in b.specs]
    n = len(order)
    stream = DataStream(seed, width, dtype, device)
    failed = torch.zeros(n, dtype=torch.bool)
    reasons = [""] * n
    eval_steps: list[int] = []
    history: list[np.ndarray] = []
    start_step = 0
    checkpoint = None if run_dir is None else Path(run_dir) / CHECKPOINT_NAME
    fingerprint = {"config": config.to_json(), "specs": [repr(s) for s in order], "seed": seed,
                   "teachers": {k: t.config.to_json() for k, t in teachers.items()}}

    if resume:
        if checkpoint is None or not checkpoint.exists():
            raise ConfigError(f"nothing to resume: no checkpoint at {checkpoint}.")
        state = torch.load(checkpoint, map_location=device, weights_only=False)
        if state["fingerprint"] != fingerprint:
            raise IncompatibleOptionsError(
                f"the checkpoint at {checkpoint} was written by a different configuration; resume with the "
                "same experiment, preset and --set options, or start a new run."
            )
        for bank, opt, saved_params, saved_opt in zip(banks, optimisers, state["params"], state["optim"], strict=True):
            with torch.no_grad():
                for p, q in zip(bank.parameters, saved_params, strict=True):
                    p.copy_(q)
            opt.load_state_dict(saved_opt)
        stream.load(state["stream"])
        failed = state["failed"].clone()
        reasons = list(state["reasons"])
        eval_steps, history = list(state["eval_steps"]), list(state["history"])
        start_step = state["step"]

    def save(step: int) -> None:
        if checkpoint is None:
            return
        _atomic_save({
            "fingerprint": fingerprint, "step": step, "stream": stream.state(),
            "params": [[p.detach() for p in b.parameters] for b in banks],
            "optim": [o.state_dict() for o in optimisers], "failed": failed, "reasons": reasons,
            "eval_steps": eval_steps, "history": history,
        }, checkpoint)

    def evaluate(keep_batches: bool = False):
        per_batch = []
        with torch.no_grad():
            for _ in range(config.eval_batches):
                x = stream.eval_batch(config.eval_batch_size)
                targets = target_fn(x)
                per_batch.append(torch.cat([loss(b.forward(x), targets) for b, loss in zip(banks, losses,
                                                                                           strict=True)]).cpu())
        values = torch.stack(per_batch, dim=1).double().numpy()  # (n, K)
        values[failed.numpy()] = np.nan
        return values if keep_batches else values.mean(axis=1)

    t0 = time.perf_counter()
    step = start_step
    train_loss = torch.zeros(n, dtype=torch.float64)
    autocast = (torch.autocast(device_type="cuda", dtype=torch.bfloat16) if config.bf16 and device.type == "cuda"
                else contextlib.nullcontext())
    try:
        while step < config.steps:
            if step % config.eval_every == 0 and (not eval_steps or eval_steps[-1] != step):
                eval_steps.append(step)
                history.append(evaluate())
            x = stream.train_batch(config.batch)
            with autocast:
                targets = target_fn(x)
                per_student = torch.cat([loss(b.forward(x), targets) for b, loss in zip(banks, losses, strict=True)])
            per_student = per_student.float() if per_student.dtype == torch.bfloat16 else per_student
            finite = torch.isfinite(per_student.detach()).cpu()
            for i in torch.nonzero(~finite & ~failed).flatten().tolist():
                failed[i] = True
                reasons[i] = f"loss became {float(per_student[i].detach())} at step {step}"
            active = (~failed).to(per_student.device)
            total = torch.where(active, per_student, torch.zeros((), dtype=per_student.dtype,
                                                                 device=per_student.device)).sum()
            for b in banks:
                for p in b.parameters:
                    p.grad = None
            total.backward()
            offset = 0
            for b, opt in zip(banks, optimisers, strict=True):
                size = len(b)
                grad_ok = torch.stack([torch.isfinite(p.grad).reshape(size, -1).all(dim=1) for p in b.parameters
                                       if p.grad is not None]).all(dim=0).cpu()
                for j in torch.nonzero(~grad_ok).flatten().tolist():
                    if not failed[offset + j]:
                        failed[offset + j] = True
                        reasons[offset + j] = f"gradient became non-finite at step {step}"
                opt.step(lr_multiplier(step, config), (~failed[offset:offset + size]).to(device))
                offset += size
            train_loss = per_student.detach().double().cpu()
            step += 1
            if progress is not None and (step % max(config.steps // 100, 1) == 0 or step == config.steps):
                progress(step, config.steps, _summary(order, train_loss, failed))
            if step % config.checkpoint_every == 0 or (stop_after is not None and step >= stop_after):
                save(step)
                if stop_after is not None and step >= stop_after:
                    break
    except KeyboardInterrupt:
        save(step)
        raise
    finished = step >= config.steps
    final_batches = evaluate(keep_batches=True) if finished else np.full((n, config.eval_batches), np.nan)
    if finished:
        eval_steps.append(step)
        history.append(final_batches.mean(axis=1))
        save(step)
    hidden = _hidden_metrics(banks, stream, state_metrics) if state_metrics is not None else {}
    return TrainingResult(
        specs=order, eval_steps=eval_steps, test_loss=np.stack(history, axis=1),
        final_batches=final_batches, failed=failed.numpy(), fail_reason=reasons,
        hidden=hidden, wall_time=time.perf_counter() - t0,
        device=str(device), steps_done=step,
    )


def _summary(order: list[StudentSpec], losses: torch.Tensor, failed: torch.Tensor) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    for spec, value, bad in zip(order, losses.tolist(), failed.tolist(), strict=True):
        if not bad:
            out.setdefault(spec.target, []).append(value)
    return {k: float(np.mean(v)) for k, v in out.items()}


def _hidden_metrics(banks: list[StudentBank], stream: DataStream, metrics: StateMetrics) -> dict[str, np.ndarray]:
    """Per-layer means of ``metrics`` of every trained student (bank order), NaN-padded to ``max_depth + 1``."""
    max_depth = max(b.max_depth for b in banks)
    x = torch.randn((METRIC_BATCH, stream.width), generator=torch.Generator().manual_seed(12345),
                    dtype=stream.dtype).to(stream.device)
    per_student: list[dict[str, np.ndarray]] = []
    with torch.no_grad():
        for bank in banks:
            _, states = bank.forward(x, return_states=True)
            for i, spec in enumerate(bank.specs):
                traj = torch.stack([states[0][i]] + [states[layer + 1][i] for layer in range(spec.depth)])
                values = metrics(traj) if spec.depth >= 2 else {}
                per_student.append({k: v.mean(dim=-1).cpu().numpy() for k, v in values.items()})
    names = list(dict.fromkeys(k for values in per_student for k in values))
    out = {name: np.full((len(per_student), max_depth + 1), np.nan) for name in names}
    for i, values in enumerate(per_student):
        for name, mean in values.items():
            out[name][i, : mean.shape[0]] = mean
    return out
