"""Training one ladder model: AdamW, a warmup-stable-decay schedule, forks for the shorter lengths, resumable.

The schedule of a run of ``n`` steps: linear warmup over ``warmup`` steps, constant, then a linear
decay to 0 over the last ``decay_fraction`` of the ``n`` steps.  A **shorter length** ``f`` (a fraction
of the budget) is a run of ``f n`` steps with the same schedule compressed: up to the start of its
decay it is the long run itself, so it is forked from the long run there and decayed on its own
(model, optimiser and data stream copied, the long run untouched).  The convergence verdict compares
the lengths as it does for the toys' forked students.

Each model draws its initialisation and its data order from its own seed.  The data are random windows
of ``context + 1`` tokens of the training stream; the validation loss is the mean next-token
cross-entropy over fixed non-overlapping windows of the validation stream, reported per evaluation
batch (the windows in ``eval_batches`` contiguous groups).  :func:`train_model` checkpoints every
``checkpoint_every`` steps and resumes from a checkpoint.  On a CPU its torch thread count follows the cores
the machine has free (:class:`resflow.training.threads.ThreadGovernor`, as the toys' engine): two threads
beside another busy process slowed a ladder about tenfold.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ...errors import ConfigError, TrainingDivergedError
from ...training.threads import ThreadGovernor

__all__ = ["LMRecipe", "LMResult", "lr_factor", "fork_step", "validation_windows", "validation_losses",
           "train_model", "data_order", "window_starts", "CHECKPOINT"]

CHECKPOINT = "checkpoint.pt"


@dataclass(frozen=True, kw_only=True)
class LMRecipe:
    """How every model of a ladder is trained and evaluated."""

    steps: int
    batch: int
    context: int
    lr: float
    warmup: int
    decay_fraction: float
    weight_decay: float
    lengths: tuple[float, ...]
    eval_every: int
    eval_batches: int
    checkpoint_every: int
    device: str = "cpu"

    def length_steps(self, length: float) -> int:
        return max(1, round(length * self.steps))


@dataclass
class LMResult:
    """One trained model: validation losses ``(length, eval_batch)``, the curve, what it cost."""

    losses: np.ndarray
    curve_steps: list[int] = field(default_factory=list)
    curve_losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    steps_done: int = 0


def lr_factor(step: int, total: int, warmup: int, decay_fraction: float) -> float:
    """The learning-rate multiplier at ``step`` (0-based) of a run of ``total`` steps (module docstring)."""
    warm = min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0
    start = fork_step(total, decay_fraction)
    if step < start:
        return warm
    return warm * max(0.0, (total - step) / max(1, total - start))


def fork_step(total: int, decay_fraction: float) -> int:
    """The step at which a run of ``total`` steps starts to decay (where a fork of that length leaves)."""
    return int(round((1.0 - decay_fraction) * total))


def validation_windows(stream: np.ndarray, context: int, max_tokens: int) -> torch.Tensor:
    """Non-overlapping windows ``(n, context + 1)`` of a token stream: as many as hold ``max_tokens``
    predicted tokens (at least one)."""
    n = min((len(stream) - 1) // context, max(1, max_tokens // context))
    if n < 1:
        raise ConfigError(f"the validation stream has {len(stream)} tokens, fewer than one window of "
                          f"{context + 1}; use a shorter context or a corpus with more validation text.")
    idx = np.arange(n)[:, None] * context + np.arange(context + 1)[None, :]
    return torch.from_numpy(stream[idx].astype(np.int64))


def _loss(model, windows: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    logits = model(input_ids=windows[:, :-1], use_cache=False).logits
    return torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), windows[:, 1:],
                                             reduction=reduction)


@torch.no_grad()
def validation_losses(model, windows: torch.Tensor, n_batches: int, *, chunk: int = 64) -> np.ndarray:
    """Mean next-token loss of each of ``n_batches`` contiguous groups of the windows (nats)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    per_window = torch.cat([_loss(model, windows[i:i + chunk].to(device), "none").mean(-1).cpu()
                            for i in range(0, len(windows), chunk)])
    model.train(was_training)
    groups = np.array_split(per_window.double().numpy(), min(n_batches, len(per_window)))
    return np.array([g.mean() for g in groups])


def data_order(seed: int) -> torch.Generator:
    """The generator of a model's training windows (its seed draws its data order)."""
    return torch.Generator().manual_seed(1_000_003 * seed + 17)


def window_starts(gen: torch.Generator, n_tokens: int, context: int, batch: int) -> torch.Tensor:
    """The first positions of one step's ``batch`` training windows of ``context + 1`` tokens."""
    return torch.randint(0, n_tokens - context - 1, (batch,), generator=gen)


def _optimizer(model, recipe: LMRecipe) -> torch.optim.Optimizer:
    """AdamW, decaying matrices only; a parameter that stands for per-layer ones (a depth-basis coefficient)
    decays as they would; frozen parameters are left out."""
    trained = [p for p in model.parameters() if p.requires_grad]
    vectors = {id(p) for p in getattr(model, "undecayed_parameters", list)()}
    decay = [p for p in trained if p.ndim >= 2 and id(p) not in vectors]
    rest = [p for p in trained if p.ndim < 2 or id(p) in vectors]
    return torch.optim.AdamW([{"params": decay, "weight_decay": recipe.weight_decay},
                              {"params": rest, "weight_decay": 0.0}], lr=recipe.lr, betas=(0.9, 0.95))


def _steps(model, opt, stream: torch.Tensor, gen: torch.Generator, recipe: LMRecipe, first: int, last: int,
           total: int, on_step: Callable[[int], None] | None = None) -> None:
    """Train steps ``first .. last - 1`` of a run of ``total`` steps."""
    device = next(model.parameters()).device
    offsets = torch.arange(recipe.context + 1)
    for step in range(first, last):
        for group in opt.param_groups:
            group["lr"] = recipe.lr * lr_factor(step, total, recipe.warmup, recipe.decay_fraction)
        starts = window_starts(gen, len(stream), recipe.context, recipe.batch)
        batch = stream[starts[:, None] + offsets].to(device)
        loss = _loss(model, batch)
        if not torch.isfinite(loss):
            raise TrainingDivergedError(f"the training loss became {float(loss.detach())} at step {step}; "
                                        f"train with a lower lr (it is {recipe.lr:g}) or a longer warmup.")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if on_step is not None:
            on_step(step)


def train_model(model, train_stream: np.ndarray, windows: torch.Tensor, recipe: LMRecipe, *, seed: int,
                work_dir: Path | None = None, progress: Callable[[int], None] | None = None) -> LMResult:
    """Train ``model`` for ``recipe.steps`` steps (forking the shorter lengths) and measure it.

    ``progress(steps)`` is called after every step with the number of steps taken in this call (forks
    included).  With ``work_dir``, a checkpoint is written every ``checkpoint_every`` steps and an
    existing one is resumed.
    """
    lengths = sorted(recipe.lengths)
    if len(windows) < recipe.eval_batches:
        raise ConfigError(f"{len(windows)} validation windows cannot make {recipe.eval_batches} evaluation "
                          "batches; raise val_tokens, lower eval_batches, or give the corpus more validation "
                          "text.")
    if len(train_stream) <= recipe.context + 1:
        raise ConfigError(f"the training stream has {len(train_stream)} tokens, not more than one window of "
                          f"{recipe.context + 1}; use a shorter context or a larger corpus.")
    if lengths[-1] != 1.0:
        raise ConfigError(f"lengths must end with 1 (the whole budget); got {lengths}.")
    forks = {fork_step(recipe.length_steps(f), recipe.decay_fraction): f for f in lengths[:-1]}
    if len(forks) < len(lengths) - 1 or (forks and min(forks) <= recipe.warmup):
        raise ConfigError(f"lengths {lengths} of {recipe.steps} steps need distinct fork points after the "
                          f"{recipe.warmup} warmup steps; train longer or warm up for fewer steps.")
    device = torch.device(recipe.device)
    model.to(device).train()
    opt = _optimizer(model, recipe)
    gen = data_order(seed)
    stream = torch.from_numpy(train_stream.astype(np.int64))
    losses = np.full((len(lengths), recipe.eval_batches), np.nan)
    result = LMResult(losses=losses)
    start, elapsed = 0, 0.0
    path = work_dir / CHECKPOINT if work_dir is not None else None
    if path is not None and path.is_file():
        state = torch.load(path, map_location=device, weights_only=True)  # tensors and plain containers only
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        gen.set_state(state["generator"].cpu())
        start, elapsed = state["step"], state["seconds"]
        saved = state["result"]
        result = LMResult(losses=np.array(saved["losses"], float), curve_steps=list(saved["curve_steps"]),
                          curve_losses=list(saved["curve_losses"]))
    began = time.perf_counter()
    taken = 0

    governor = ThreadGovernor(device)

    def tick(step: int) -> None:
        nonlocal taken
        governor.tick()
        taken += 1
        if progress is not None:
            progress(taken)

    def checkpoint(step: int) -> None:
        if path is None:
            return
        result.seconds = elapsed + time.perf_counter() - began
        state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "generator": gen.get_state(),
                 "step": step, "seconds": result.seconds,
                 "result": {"losses": result.losses.tolist(), "curve_steps": list(result.curve_steps),
                            "curve_losses": list(result.curve_losses)}}
        tmp = path.with_suffix(".tmp")
        torch.save(state, tmp)
        tmp.replace(path)

    marks = sorted(set(range(0, recipe.steps, recipe.eval_every)) | set(forks) | set(
        range(recipe.checkpoint_every, recipe.steps, recipe.checkpoint_every)) | {recipe.steps})
    step = start
    with governor:  # torch threads from the cores the machine has free (resflow.training.threads)
        for mark in [m for m in marks if m >= start]:
            _steps(model, opt, stream, gen, recipe, step, mark, recipe.steps, tick)
            step = mark
            if step in forks and np.isnan(result.losses[lengths.index(forks[step])]).all():
                length = forks[step]
                total = recipe.length_steps(length)
                branch = copy.deepcopy(model)
                branch_opt = _optimizer_copy(branch, opt, recipe)
                branch_gen = torch.Generator().set_state(gen.get_state())
                _steps(branch, branch_opt, stream, branch_gen, recipe, step, total, total, tick)
                result.losses[lengths.index(length)] = validation_losses(branch, windows, recipe.eval_batches)
                del branch, branch_opt
            if step % recipe.eval_every == 0 and step < recipe.steps and step not in result.curve_steps:
                result.curve_steps.append(step)
                now = validation_losses(model, windows, recipe.eval_batches)
                result.curve_losses.append(float(now.mean()))
            if step % recipe.checkpoint_every == 0 and 0 < step < recipe.steps:
                checkpoint(step)
    result.losses[-1] = validation_losses(model, windows, recipe.eval_batches)
    result.curve_steps.append(recipe.steps)
    result.curve_losses.append(float(result.losses[-1].mean()))
    result.seconds = elapsed + time.perf_counter() - began
    result.steps_done = recipe.steps
    if not np.isfinite(result.losses).all():
        raise TrainingDivergedError("a validation loss is not finite; "
                                    f"train with a lower lr (it is {recipe.lr:g}).")
    model.eval()
    return result


def _optimizer_copy(branch, opt, recipe: LMRecipe):
    """An optimiser of ``branch`` (a deep copy of ``opt``'s model) holding a copy of ``opt``'s state."""
    new = _optimizer(branch, recipe)
    new.load_state_dict(copy.deepcopy(opt.state_dict()))
    return new
