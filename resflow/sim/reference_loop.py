"""The per-student reference loop: each student trained on its own with ``torch.optim.Adam``.

Kept as a reference for the batched engine (:func:`resflow.sim.engine.train`): the same data
stream, schedule and evaluation, one student at a time, so the tests can check both agree.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ..dynamics.fields import rmsnorm
from ..dynamics.stepper import rk_stages
from ..dynamics.tableau import get_tableau
from .config import TrainConfig, lr_multiplier, student_lr
from .engine import DataStream, _check_specs, _Targets
from .results import TrainingResult
from .students import StudentSpec, init_student_parameters
from .teacher import Teacher

__all__ = ["train_reference"]


def train_reference(
    specs: list[StudentSpec], teachers: dict[str, Teacher], config: TrainConfig, *, seed: int = 0
) -> TrainingResult:
    """The plain per-student loop: each student a list of per-stage MLP layers trained with
    ``torch.optim.Adam``; same data stream, schedule and evaluation as :func:`train`.  CPU only."""
    _check_specs(specs, teachers, config)
    dtype = getattr(torch, config.dtype)
    device = torch.device("cpu")
    any_teacher = next(iter(teachers.values()))
    width, hidden, vocab = any_teacher.width, any_teacher.config.hidden, any_teacher.config.vocab
    teachers = {k: t.to(dtype=dtype) for k, t in teachers.items()}
    temperatures = sorted(set(config.temperatures))
    target_fn = _Targets(teachers, temperatures, config)
    order = sorted(specs, key=StudentSpec.sort_key)
    students = []
    for spec in order:
        init = init_student_parameters(spec, width, hidden, vocab, dtype)
        params = {k: v.clone().requires_grad_(True) for k, v in init.items()}
        opt = torch.optim.Adam(list(params.values()), lr=student_lr(spec.depth, config),
                               betas=(config.adam_beta1, config.adam_beta2), eps=config.adam_eps,
                               foreach=False, fused=False)
        students.append((spec, params, opt, get_tableau(spec.scheme)))

    def forward(spec, params, tab, x):
        h = rmsnorm(x)
        for layer in range(spec.depth):
            def stage(i, y, layer=layer):
                pre = rmsnorm(y) @ params["W1"][layer, i].T + params["b1"][layer, i]
                return torch.relu(pre).square() @ params["W2"][layer, i].T
            h = rk_stages(stage, h, 1.0, tab)
        return h

    def loss_of(spec, params, h, targets):
        t = target_fn.labels.index(spec.target)
        if config.loss == "mse":
            return (rmsnorm(h) - targets["final"][t]).square().mean()
        logp = targets["logp"][t, temperatures.index(spec.temperature)]
        logits = (rmsnorm(h) @ params["head"].T if config.head == "learned"
                  else rmsnorm(h) @ targets["heads"][t].T / spec.temperature)
        return (logp.exp() * (logp - torch.log_softmax(logits, -1))).sum(-1).mean()

    stream = DataStream(seed, width, dtype, device)

    def evaluate():
        per_batch = []
        with torch.no_grad():
            for _ in range(config.eval_batches):
                x = stream.eval_batch(config.eval_batch_size)
                targets = target_fn(x)
                per_batch.append([float(loss_of(s, p, forward(s, p, tab, x), targets)) for s, p, _, tab in students])
        return np.array(per_batch).T  # (n, K)

    t0 = time.perf_counter()
    eval_steps, history = [], []
    for step in range(config.steps):
        if step % config.eval_every == 0:
            eval_steps.append(step)
            history.append(evaluate().mean(axis=1))
        x = stream.train_batch(config.batch)
        targets = target_fn(x)
        factor = lr_multiplier(step, config)
        for spec, params, opt, tab in students:
            for group in opt.param_groups:
                group["lr"] = student_lr(spec.depth, config) * factor
            opt.zero_grad()
            loss_of(spec, params, forward(spec, params, tab, x), targets).backward()
            opt.step()
    final = evaluate()
    eval_steps.append(config.steps)
    history.append(final.mean(axis=1))
    n = len(order)
    return TrainingResult(
        specs=order, eval_steps=eval_steps, test_loss=np.stack(history, axis=1), final_batches=final,
        failed=np.zeros(n, dtype=bool), fail_reason=[""] * n, hidden={},
        wall_time=time.perf_counter() - t0, device="cpu",
        steps_done=config.steps,
    )


