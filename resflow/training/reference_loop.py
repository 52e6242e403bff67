"""The per-student reference loop: each student trained on its own, with autograd and a ``torch.optim``
optimiser.

The plain way to train the students of :mod:`resflow.training.block`: one student at a time, its
forward through :func:`~resflow.training.block.student_forward`, its loss through
:func:`~resflow.training.block.mse_loss`/:func:`~resflow.training.block.kl_loss`, gradients by autograd,
the optimiser rule's reference (``torch.optim.Adam`` for Adam); the same data stream, schedule and
evaluation as the batched engine (:func:`resflow.training.driver.train`).  It is the baseline of
``resflow bench`` and the reference of the engine's equivalence test.  A group-structured student holds
one leaf tensor per shared weight and indexes it by layer (true weight sharing, autograd summing the
copies' gradients), where the engine keeps copies and sums their gradients itself.  For a rule that
preconditions each matrix (SOAP: ``per_matrix_reference``) every weight matrix (each stage of each layer,
and the head) is a leaf of its own and the optimiser is the reference implementation,
``pytorch_optimizer.SOAP`` (the ``dev`` extra): what the engine's batched SOAP
(:mod:`resflow.training.optimizers.soap`) is checked against.  CPU or GPU; no checkpoints.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ..errors import ConfigError
from .block import (
    StudentSpec,
    first_layers,
    init_student,
    kl_loss,
    layer_groups,
    mse_loss,
    student_forward,
    student_logits,
)
from .config import TrainConfig, lr_multiplier, student_lr
from .data import ReplicateStreams
from .engine import resolve_device
from .results import TrainingResult
from .targets import Targets, check_run
from .teacher import Teacher, shared_teacher_depth

__all__ = ["ReferenceLoop", "train_reference"]


class ReferenceLoop:
    """The students of ``specs`` as separate models with separate ``torch.optim`` optimisers.

    ``loop.step(x)`` trains every student still training on its replicate's batch of ``x`` (R, B, d),
    one after the other; ``loop.evaluate(x)`` returns their test losses (students in
    :meth:`StudentSpec.sort_key` order).
    """

    def __init__(self, specs: list[StudentSpec], teachers: dict, config: TrainConfig) -> None:
        check_run(specs, teachers, config)
        if config.loss == "ce":
            raise ConfigError("the reference loop trains regression and KL students (loss 'mse' or 'kl'); "
                              "students of rhm:L targets train in the engine (resflow.training.train).")
        self.config = config
        self.dtype = getattr(torch, config.dtype)
        self.device = resolve_device(config.device)
        any_teacher = next(iter(teachers.values()))
        self.width, hidden, vocab = any_teacher.width, any_teacher.config.hidden, any_teacher.config.vocab
        self.temperatures = sorted(set(config.temperatures))
        self.replicates = sorted({s.replicate for s in specs})
        self.targets = Targets(teachers, specs, self.replicates, self.temperatures, config.loss == "kl",
                               self.dtype, self.device)
        self.order = sorted(specs, key=StudentSpec.sort_key)
        self.slots = [self.targets.slot_of(s, teachers) for s in self.order]
        self.students = []
        for spec in self.order:
            init = init_student(spec, self.width, hidden, vocab, self.dtype)
            groups = layer_groups(spec)
            # one leaf per shared weight: (groups, ...), indexed by layer in the forward
            if groups is not None:
                init.update({k: init[k][first_layers(groups)] for k in ("W1", "b1", "W2")})
            # a leaf per matrix (and bias vector), stacked in the forward
            if config.optimizer.per_matrix_reference:
                leaves = {k: [[v[i, j].to(self.device).requires_grad_(True) for j in range(v.shape[1])]
                              for i in range(v.shape[0])] for k, v in init.items() if k != "head"}
                leaves["head"] = init["head"].to(self.device).requires_grad_(True)
                blocks = [leaf for k in ("W1", "b1", "W2") for row in leaves[k] for leaf in row]
                params = leaves
            else:
                params = {k: v.to(self.device).requires_grad_(True) for k, v in init.items()}
                blocks = [params[k] for k in ("W1", "b1", "W2")]
            groups = [{"params": blocks, "lr": student_lr(spec.depth, config)},
                      {"params": [params["head"]], "lr": student_lr(spec.depth, config, head=True)}]
            self.students.append((spec, params, config.optimizer.reference(groups), spec.tableau))
        self.steps_done = 0

    def _loss(self, i: int, params: dict, tableau, x: torch.Tensor, out: dict) -> torch.Tensor:
        spec, t = self.order[i], self.slots[i]
        if isinstance(params["W1"], list):  # leaves per matrix: stacked into (layers, stages, ...)
            params = {**params, **{k: torch.stack([torch.stack(row) for row in params[k]])
                                   for k in ("W1", "b1", "W2")}}
        groups = layer_groups(spec)
        if groups is not None:  # the shared weights, one copy per layer (autograd sums the copies' gradients)
            index = groups.to(params["W1"].device)
            params = {**params, **{k: params[k][index] for k in ("W1", "b1", "W2")}}
        h = student_forward(params, x[self.replicates.index(spec.replicate)], tableau)
        if self.config.loss == "mse":
            return mse_loss(h, out["final"][t])
        logp = out["logp"][t, self.temperatures.index(spec.temperature)]
        if self.config.head == "learned":
            return kl_loss(student_logits(h, params["head"]), logp)
        return kl_loss(student_logits(h, out["heads"][t], spec.temperature), logp)

    def step(self, x: torch.Tensor) -> None:
        out = self.targets(x)
        for i, (spec, params, opt, tableau) in enumerate(self.students):
            total = spec.steps(self.config.steps)
            if self.steps_done >= total:
                continue
            factor = lr_multiplier(self.steps_done, self.config, total)
            for group, head in zip(opt.param_groups, (False, True), strict=True):
                group["lr"] = student_lr(spec.depth, self.config, head=head) * factor
            opt.zero_grad()
            self._loss(i, params, tableau, x, out).backward()
            opt.step()
        self.steps_done += 1

    @torch.no_grad()
    def evaluate(self, x: torch.Tensor) -> list[float]:
        out = self.targets(x)
        return [float(self._loss(i, p, tab, x, out)) for i, (_, p, _, tab) in enumerate(self.students)]


def train_reference(
    specs: list[StudentSpec], teachers: dict[str, Teacher], config: TrainConfig, *, seed: int = 0
) -> TrainingResult:
    """Train every student of ``specs`` one by one (see the module docstring); the result holds them in the
    order of ``specs``, as :func:`~resflow.training.train`'s does."""
    loop = ReferenceLoop(specs, teachers, config)
    stream = ReplicateStreams(seed, loop.replicates, loop.width, loop.dtype, loop.device)

    def evaluate() -> np.ndarray:
        return np.array([loop.evaluate(stream.eval_batch(config.eval_batch_size))
                         for _ in range(config.eval_batches)]).T  # (n, K)

    t0 = time.perf_counter()
    eval_steps, history = [], []
    for step in range(config.steps):
        if step % config.eval_every == 0:
            eval_steps.append(step)
            history.append(evaluate().mean(axis=1))
        loop.step(stream.train_batch(config.batch))
    final = evaluate()
    eval_steps.append(config.steps)
    history.append(final.mean(axis=1))
    n = len(loop.order)
    return TrainingResult(
        specs=loop.order, eval_steps=eval_steps, test_loss=np.stack(history, axis=1), final_batches=final,
        failed=np.zeros(n, dtype=bool), fail_reason=[""] * n, hidden={},
        wall_time=time.perf_counter() - t0, device=str(loop.device), steps_done=config.steps, config=config,
        teacher_depth=shared_teacher_depth(teachers), seed=seed,
    ).for_specs(specs)
