r"""The training engine: a state/step core (the driver loop is :mod:`resflow.training.driver`).

:class:`Trainer` is the core, built once per run from the students, the teachers and the
:class:`~resflow.training.config.TrainConfig`; it holds what never changes (the banks' layout, the
teachers, per-element learning rates, scratch buffers).  Everything that changes is a
:class:`~resflow.training.state.TrainState`:

* ``state = trainer.init(seed)`` -- initial parameters (:func:`~resflow.training.block.init_student`), the
  optimiser's buffers (zeros, named by its rule), one data stream per replicate (seed
  ``seed + replicate``);
* ``state = trainer.step(state, *trainer.next_batch(state))`` -- one optimiser step of every student
  still training, by the rule of ``train.optimizer`` bound to each bank (:mod:`resflow.training.optimizers`);
  teachers evaluated once, ahead; fused forward/backward (:mod:`resflow.training.kernels`);
  a student whose loss or gradient is not finite is frozen and marked failed with the reason;
* ``trainer.evaluate(state, x)`` -- per-student test loss on a batch per replicate.

Students are grouped in banks by scheme, structure (plain, or weights shared within groups of layers:
:meth:`~resflow.training.bank.StudentBank.sum_shared_gradients`), budget and training length; every student
trains for its own number of steps (:meth:`~resflow.training.block.StudentSpec.steps`) with the schedule
compressed to it, then stays frozen and is evaluated with the others at the end.  A bank of shorter copies
(the lengths 1/4, 1/2 of the convergence verdict) is **forked** from the bank of the same students at full
length: its schedule coincides with theirs for its first steps
(:func:`~resflow.training.config.shared_schedule`: the constant phase), so it starts as a copy of their
state (parameters and optimiser moments) at that step and trains only from there -- the same students, data
and updates as copies trained from the start, for less work.

No global torch setting is changed for good: TF32 (``train.tf32`` on a GPU) is switched on for the training
loop only (:meth:`Trainer.precision`) and restored after it, and on a CPU the torch thread count follows the
cores the machine has free while ``with trainer.threads:`` is entered (:mod:`resflow.training.threads`),
then goes back to what it was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
from collections.abc import Hashable, Iterator, Mapping

import numpy as np
import torch

from ..errors import IncompatibleOptionsError
from .bank import StudentBank
from .block import StudentSpec
from .classes import ClassTargets, HierarchyTarget
from .config import TrainConfig, lr_multiplier, shared_schedule, student_lr
from .graphs import StepGraphs, tf32_matmuls
from .kernels import bank_backward, bank_forward, embed_backward
from .state import CHECKPOINT_NAME, TrainState
from .targets import Targets, check_run
from .teacher import Teacher
from .threads import ThreadGovernor

__all__ = ["Trainer", "resolve_device", "CHECKPOINT_NAME", "PREFETCH"]

PREFETCH = 8  # training batches drawn at once, their teacher outputs computed in one pass


def resolve_device(device: str) -> torch.device:
    """``"auto"`` picks CUDA when available; ``"cuda"`` without a GPU is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise IncompatibleOptionsError(f"device={device!r} but no CUDA device is available; "
                                       "use --device cpu or auto.")
    return torch.device(device)


class Trainer:
    """The static part of a run, and its ``init``/``step``/``evaluate`` functions (module docstring)."""

    def __init__(self, specs: list[StudentSpec], teachers: Mapping[Hashable, Teacher], config: TrainConfig,
                 initial: Mapping[StudentSpec, dict] | None = None) -> None:
        check_run(specs, teachers, config)
        self.config = config
        self.device = resolve_device(config.device)
        self.threads = ThreadGovernor(self.device)  # the CPU thread count, checked as it trains (enter it)
        self.dtype = getattr(torch, config.dtype)
        any_teacher = next(iter(teachers.values()))
        self.width, hidden, vocab = any_teacher.width, any_teacher.config.hidden, any_teacher.config.vocab
        self.temperatures = sorted(set(config.temperatures))
        self.replicates = sorted({s.replicate for s in specs})
        # the target kind: class grammars (students of tokens and labels) or flow teachers (module targets)
        grammars = isinstance(any_teacher, HierarchyTarget)
        self.targets = (ClassTargets(teachers, specs, self.replicates, self.device) if grammars
                        else Targets(teachers, specs, self.replicates, self.temperatures, config.loss == "kl",
                                     self.dtype, self.device))
        inputs = self.targets.in_dim
        # a bank per scheme, student structure (plain, or K weight groups), hidden width, budget and length
        def key(s: StudentSpec) -> tuple:
            return s.scheme, s.weight_groups, s.hidden, -s.budget, -s.length

        keys = sorted({key(s) for s in specs})
        self.banks = [StudentBank([s for s in specs if key(s) == g], self.width, g[2] or hidden, vocab,
                                  inputs) for g in keys]
        self.bank_steps = [bank.specs[0].steps(config.steps) for bank in self.banks]
        self.initial = {repr(k): v for k, v in (initial or {}).items()}  # given initial parameters, by repr
        self.bank_parent, self.bank_start = self._forks(config)
        self.order = [s for bank in self.banks for s in bank.specs]
        self.offsets = np.cumsum([0] + [len(b) for b in self.banks]).tolist()
        trains_head = config.loss == "kl" and config.head == "learned"
        # the optimiser, per bank
        self.rules = [config.optimizer.bind(bank, heads=trains_head) for bank in self.banks]
        self.lr = [bank.per_element([student_lr(s.depth, config) for s in bank.specs], self.dtype,
                                    [student_lr(s.depth, config, head=True)
                                     for s in bank.specs]).to(self.device)
                   for bank in self.banks]
        self.grads = [torch.zeros(bank.size, dtype=self.dtype, device=self.device) for bank in self.banks]
        self.work = [torch.empty_like(g) for g in self.grads]
        self.targets.bind(self.banks, config)
        self._views: dict[tuple, tuple] = {}
        # CUDA graphs replay a capturable rule's update (Adam's); others (SOAP's) run eagerly
        self.graphs = (StepGraphs(self) if self.device.type == "cuda" and config.cuda_graphs
                       and all(rule.capturable for rule in self.rules) and self.targets.capturable else None)

    @property
    def classes(self) -> bool:
        """Deprecated since resflow 0.5: whether the students learn class grammars (ask ``self.targets``)."""
        import warnings

        warnings.warn("Trainer.classes is deprecated since resflow 0.5; the target kind is Trainer.targets.",
                      DeprecationWarning, stacklevel=2)
        return isinstance(self.targets, ClassTargets)

    def _forks(self, config: TrainConfig) -> tuple[list[int | None], list[int]]:
        """For each bank, the longer bank it is forked from (None: trained from the start) and its first
        step."""
        parents: list[int | None] = []
        starts: list[int] = []
        for k, bank in enumerate(self.banks):
            parent = None
            # the longest earlier bank holding the same students (banks sort longest first)
            for j in range(k):
                other = self.banks[j]
                if ([dataclasses.replace(s, length=other.specs[0].length) for s in bank.specs] == other.specs
                        and all(self._same_start(a, b)
                                for a, b in zip(bank.specs, other.specs, strict=True))):
                    parent = j
                    break
            start = (0 if parent is None
                     else shared_schedule(self.bank_steps[k], self.bank_steps[parent], config))
            parents.append(parent if start > 0 else None)
            starts.append(start)
        return parents, starts

    def _same_start(self, a: StudentSpec, b: StudentSpec) -> bool:
        """Whether two students start from the same parameters (a fork needs it)."""
        x, y = self.initial.get(repr(a)), self.initial.get(repr(b))
        if x is None or y is None:
            return x is None and y is None
        return x.keys() == y.keys() and all(torch.equal(x[name], y[name]) for name in x)

    # ------------------------------------------------------------------ the core
    def fingerprint(self, seed: int) -> dict:
        """What a checkpoint must match to be resumed by this trainer."""
        out = {"config": self.config.to_json(), "specs": [repr(s) for s in self.order], "seed": seed,
               "teachers": {str(k): t.config.to_json() for k, t in self.targets.teachers.items()}}
        if self.initial:  # students that start from given parameters: a digest of them
            digest = hashlib.sha256()
            for spec in self.order:
                for name, value in sorted(self.initial.get(repr(spec), {}).items()):
                    digest.update(name.encode() + value.detach().cpu().double().numpy().tobytes())
            out["initial"] = digest.hexdigest()
        return out

    def init(self, seed: int = 0) -> TrainState:
        """Initial state: every student as :func:`~resflow.training.block.init_student` draws it (or as the
        trainer's ``initial`` gives it, e.g. :func:`resflow.training.continuation.split_layers`), the
        optimiser's buffers at zero, one data stream per replicate."""
        params = [bank.initial_parameters(self.dtype, self.initial).to(self.device) for bank in self.banks]
        n = len(self.order)
        optimiser = [{name: torch.zeros(size, dtype=self.dtype, device=self.device)
                      for name, size in rule.buffers.items()} for rule in self.rules]
        data = self.targets.streams(seed)
        return TrainState(step=0, params=params, optimiser=optimiser, data=data,
                          failed=torch.zeros(n, dtype=torch.bool), reasons=[""] * n)

    def active(self, step: int) -> list[int]:
        """Banks training at ``step`` (forked banks from their fork on)."""
        return [k for k, steps in enumerate(self.bank_steps) if self.bank_start[k] <= step < steps]

    def _fork(self, state: TrainState) -> None:
        """Banks whose fork is at this step start as copies of their parent's students (parameters, optimiser
        buffers, failures)."""
        for k, parent in enumerate(self.bank_parent):
            if parent is not None and self.bank_start[k] == state.step:
                for mine, theirs in zip(state.bank_buffers(k), state.bank_buffers(parent), strict=True):
                    mine.copy_(theirs)
                child, source = slice(self.offsets[k], self.offsets[k + 1]), slice(self.offsets[parent],
                                                                                   self.offsets[parent + 1])
                state.failed[child] = state.failed[source]
                state.reasons[child] = state.reasons[source]

    def _layers(self, k: int, flat: torch.Tensor):
        key = (k, flat.data_ptr())
        if key not in self._views:
            self._views[key] = (self.banks[k].layers(flat), self.banks[k].head(flat))
        return self._views[key]

    def _bank_loss(self, k: int, final: torch.Tensor, targets: dict, params: torch.Tensor,
                   with_grad: bool):
        """Per-student loss of bank ``k`` and its gradient with respect to the final states (the target
        kind's)."""
        return self.targets.loss(k, final, targets, self._layers(k, params)[1],
                                 self._layers(k, self.grads[k])[1], with_grad)

    def next_batch(self, state: TrainState) -> tuple[torch.Tensor, torch.Tensor]:
        """The next training batch (R, B, d) -- one per replicate -- and its slots' teacher final states.

        Batches are drawn ``PREFETCH`` at a time (the same draws, in the same order, as one by one)
        and the teachers run once on all of them; the ones not yet used wait in ``state.pending``
        (and in checkpoints), so a resumed run sees exactly the batches and targets it would have seen.
        """
        if not state.pending:
            xs = [state.data.train_batch(self.config.batch) for _ in range(PREFETCH)]
            finals = self.targets.final_states(torch.cat(xs, dim=1)).split(self.config.batch, dim=1)
            state.pending = list(zip(xs, finals, strict=True))
        return state.pending.pop(0)

    def gradients(self, params: list[torch.Tensor], x: torch.Tensor, finals: torch.Tensor,
                   banks: list[int]) -> list[torch.Tensor]:
        """Training losses of the students of ``banks`` on ``x`` (R, B, d); writes their gradients."""
        targets = self.targets.outputs(finals)
        first = self._first_states(x)
        losses = []
        for k in banks:
            bank = self.banks[k]
            layers, _ = self._layers(k, params[k])
            h0, embedded = first(k, params[k])
            final, saved = bank_forward(h0, layers, bank.a, bank.b, save=True)
            loss, g_final = self._bank_loss(k, final, targets, params[k], with_grad=True)
            g_h0 = bank_backward(g_final, layers, self._layers(k, self.grads[k])[0], bank.a, bank.b, saved,
                                 need_input=embedded is not None)
            if embedded is not None:
                embed_backward(g_h0, *embedded, bank.embed(self.grads[k]))
            # shared weights: the summed gradient on all their copies
            bank.sum_shared_gradients(self.grads[k])
            losses.append(loss)
        return losses

    def _first_states(self, x: torch.Tensor):
        """``first(k, params) -> (h0, saved)``: bank ``k``'s first states on the batch ``x`` (the target
        kind's: ``rmsnorm(x)`` of each student's replicate, saved None; or for students of tokens their
        embedding of their slot's inputs, saved: what :func:`~resflow.training.kernels.embed_backward`
        needs)."""
        return self.targets.first_states(x)

    def step(self, state: TrainState, x: torch.Tensor, finals: torch.Tensor | None = None) -> TrainState:
        """One optimiser step of every student still training, on the batches ``x`` (R, B, d); returns the
        state (its buffers are updated in place).  ``finals``: the slots' teacher outputs on ``x``, if
        known (:meth:`next_batch`)."""
        self.threads.tick()
        self._fork(state)
        banks = self.active(state.step)
        if finals is None:
            finals = self.targets.final_states(x)
        scalars = [self.rules[k].scalars(state.step,
                                         lr_multiplier(state.step, self.config, self.bank_steps[k]))
                   for k in banks]
        if self.graphs is not None and self.graphs.ready(state):
            losses = self.graphs.step(state, x, finals, banks, scalars)
        else:
            losses = self.gradients(state.params, x, finals, banks)
            self.check_finite(state, banks, losses)
            self.update(state, banks, scalars)
        last = torch.full((len(self.order),), math.nan, dtype=torch.float64)
        for k, loss in zip(banks, losses, strict=True):
            last[self.offsets[k]:self.offsets[k + 1]] = loss.detach().double().cpu()
        state.step += 1
        state.last_loss = last
        return state

    def lr_of(self, state: TrainState, k: int) -> torch.Tensor:
        """Bank ``k``'s per-element learning rates in ``state``: 0 for its failed students (frozen)."""
        mask = state.frozen_lr.get(k)
        return self.lr[k] if mask is None else mask

    def update(self, state: TrainState, banks: list[int], scalars: list[tuple]) -> None:
        """The optimiser step of ``banks`` from the gradients :meth:`gradients` wrote (``scalars``: each
        bank's rule's numbers for this step)."""
        for k, numbers in zip(banks, scalars, strict=True):
            self.rules[k].apply(state.params[k], self.grads[k], state.optimiser[k], self.lr_of(state, k),
                                self.work[k], numbers, state.step)

    def check_finite(self, state: TrainState, banks: list[int], losses: list[torch.Tensor]) -> bool:
        """Isolate the students whose loss or gradient is not finite; True when every student is fine."""
        fine = True
        for k, loss in zip(banks, losses, strict=True):
            fine &= self._isolate_failures(state, k, loss)
        return fine

    def _isolate_failures(self, state: TrainState, k: int, loss: torch.Tensor) -> bool:
        """Freeze (learning rate 0, gradient 0) the students of bank ``k`` whose loss or gradient is not
        finite; True when none of them is frozen."""
        bank, grads, offset = self.banks[k], self.grads[k], self.offsets[k]
        bad_loss = ~torch.isfinite(loss).cpu()
        # one reduction for the common case: the sum of the gradients is finite unless an element is not
        # (or the sum overflows, when the per-student check below finds nothing to freeze)
        all_finite = bool(torch.isfinite(grads.sum()))
        bad_grad = torch.zeros_like(bad_loss) if all_finite else ~bank.finite_students(grads)
        new = (bad_loss | bad_grad) & ~state.failed[offset:offset + len(bank)]
        for j in torch.nonzero(new).flatten().tolist():
            state.failed[offset + j] = True
            state.reasons[offset + j] = (f"loss became {float(loss[j])} at step {state.step}" if bad_loss[j]
                                         else f"gradient became non-finite at step {state.step}")
        frozen = state.failed[offset:offset + len(bank)]
        if frozen.any():
            mask = bank.per_element((~frozen).double().tolist(), self.dtype).to(self.device).bool()
            # the state's, not the trainer's (the trainer never changes);
            # exactly 0 even where a rate is not finite
            state.frozen_lr[k] = torch.where(mask, self.lr[k], torch.zeros(
                (), dtype=self.dtype, device=self.device))
            torch.where(mask, grads, torch.zeros((), dtype=grads.dtype, device=grads.device), out=grads)
        return not bool(frozen.any())

    @torch.no_grad()
    def evaluate(self, state: TrainState, x: torch.Tensor) -> torch.Tensor:
        """Per-student test loss on ``x`` (R, B, d) (CPU float64, trainer order; NaN for failed students)."""
        targets = self.targets(x)
        first = self._first_states(x)
        out = []
        for k, bank in enumerate(self.banks):
            final, _ = bank_forward(first(k, state.params[k])[0], self._layers(k, state.params[k])[0],
                                    bank.a, bank.b)
            out.append(self._bank_loss(k, final, targets, state.params[k], with_grad=False)[0])
        values = torch.cat(out).double().cpu()
        values[state.failed] = math.nan
        for k in self._unforked(state):  # its students are still the parent's (failures included)
            parent = self.bank_parent[k]
            values[self.offsets[k]:self.offsets[k + 1]] = (
                values[self.offsets[parent]:self.offsets[parent + 1]])
        return values

    def _unforked(self, state: TrainState) -> list[int]:
        """Forked banks whose fork has not happened yet at ``state`` (it happens inside the step at
        ``bank_start``, so a state at that step still holds the bank's initial parameters)."""
        return [k for k, parent in enumerate(self.bank_parent)
                if parent is not None and state.step <= self.bank_start[k]]

    def _source(self, state: TrainState, k: int) -> int:
        """The bank whose parameters stand for bank ``k`` at ``state`` (its parent until it forks; forks of
        forks followed)."""
        while k in self._unforked(state):
            k = self.bank_parent[k]
        return k

    def student_parameters(self, state: TrainState, index: int) -> dict[str, torch.Tensor]:
        """The parameters of student ``index`` (trainer order), as
        :func:`~resflow.training.block.init_student` gives them."""
        k = int(np.searchsorted(self.offsets, index, side="right")) - 1
        source = self._source(state, k)
        return self.banks[k].student_parameters(state.params[source], index - self.offsets[k])

    @torch.no_grad()
    def hidden_states(self, state: TrainState, x: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
        """``(index, states)`` for every student: its states :math:`h_0..h_\\ell` on ``x`` (B, d),
        (depth + 1, B, d); students of tokens on their slot's sentences of ``x`` (n_slots, B, P)
        (:mod:`resflow.training.hidden`)."""
        first = self._first_states(self.targets.states_inputs(x))
        for k, bank in enumerate(self.banks):
            source = self._source(state, k)
            _, _, states = bank_forward(first(k, state.params[source])[0],
                                        self._layers(k, state.params[source])[0],
                                        bank.a, bank.b, return_states=True)
            for i, spec in enumerate(bank.specs):
                yield self.offsets[k] + i, torch.stack([states[layer][i] for layer in range(spec.depth + 1)])

    def flops_per_step(self, batch: int) -> float:
        """Analytic FLOPs of one training step of the whole run: every student's forward and backward,
        every teacher slot's forward."""
        return sum(bank.flops_per_step(batch) for bank in self.banks) + self.targets.flops(batch)

    def precision(self) -> contextlib.AbstractContextManager:
        """TF32 matmuls for the duration of the block when ``train.tf32`` is set on a GPU; restored after."""
        return tf32_matmuls(self.config.tf32 and self.device.type == "cuda")
