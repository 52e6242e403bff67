"""Teacher outputs for one step, computed once for every student that learns them.

A *slot* is a (teacher, replicate) pair: the teacher run on that replicate's batch.  Teachers of one
depth, width and scheme (Euler, as every teacher of an experiment) are evaluated together: their
per-layer weights are stacked along the slot axis, the branch scale folded into :math:`W_2`, and each
layer is one call of the fused Euler block of :mod:`resflow.training.kernels` -- so all teachers cost
one pass of layer calls.  Other teachers are evaluated slot by slot through
:class:`~resflow.training.Teacher`.  The results equal ``Teacher(x)`` to rounding (tested).

Teachers are given as a mapping from a key to a :class:`~resflow.training.Teacher`; a student's
teacher is ``teachers[(spec.target, spec.replicate)]`` when that key exists (one teacher per
replicate, as experiments build them), else ``teachers[spec.target]`` (one teacher for all).

:class:`Targets` is one of the engine's two **target kinds** (the other:
:class:`~resflow.training.classes.ClassTargets`, class grammars).  A kind owns what differs between them,
and the engine (:class:`~resflow.training.engine.Trainer`) asks it instead of branching: ``in_dim`` (the
students' input embedding, 0: none), ``bind(banks, config)`` (each bank's slots), ``streams(seed)`` (the
data), ``final_states``/``outputs`` (the targets of a batch), ``first_states(x)`` (the students' first
states), ``loss(k, final, targets, head, grad_head, with_grad)``, ``fixed_inputs()`` (what trained
students are measured on), ``states_inputs(x)``, ``flops(batch)`` and ``capturable`` (whether a step may
be replayed as a CUDA graph).
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Mapping

import torch

from ..dynamics.fields import rmsnorm
from ..errors import ConfigError
from .block import StudentSpec
from .config import TrainConfig
from .data import ReplicateStreams, metric_inputs
from .kernels import LayerParams, block_forward, kl_head, mse_head
from .teacher import Teacher

__all__ = ["Targets", "teacher_key", "check_run"]


def teacher_key(spec: StudentSpec, teachers: Mapping[Hashable, Teacher]) -> Hashable:
    """The key of ``spec``'s teacher in ``teachers`` (see the module docstring)."""
    if (spec.target, spec.replicate) in teachers:
        return (spec.target, spec.replicate)
    if spec.target in teachers:
        return spec.target
    raise ConfigError(f"student target {spec.target!r} (replicate {spec.replicate}) has no teacher; "
                      f"teachers are {sorted(map(str, teachers))}.")


def check_run(specs: list[StudentSpec], teachers: Mapping[Hashable, Teacher], config: TrainConfig) -> None:
    """Refuse, by name, a run the engine cannot train: no students or teachers, a student without its
    teacher, an unknown scheme, a temperature or length out of range, teachers of different shapes."""
    if not specs:
        raise ConfigError("no students to train: give at least one depth, scheme, replicate and target.")
    if not teachers:
        raise ConfigError("no teachers: give at least one target, e.g. {'tied': Teacher('tied')}.")
    for s in specs:
        teacher_key(s, teachers)
        if config.loss == "kl" and s.temperature not in config.temperatures:
            raise ConfigError(f"student temperature {s.temperature} is not in temperatures "
                              f"{config.temperatures}.")
        if not 0.0 < s.length <= 1.0 or s.steps(config.steps) < 1:
            raise ConfigError(f"student length must be a fraction in (0, 1] of at least one step; got length "
                              f"{s.length} of budget {s.budget} of {config.steps} steps.")
    grammars = [k for k, t in teachers.items() if not isinstance(t, Teacher)]
    if grammars and config.loss != "ce":
        raise ConfigError(f"targets {grammars} are grammars (rhm:L): they train with loss 'ce', not "
                          f"{config.loss!r}; set loss='ce' (or give teachers).")
    widths = {(t.width, t.config.hidden, t.config.vocab) for t in teachers.values()}
    if len(widths) != 1:
        raise ConfigError("all teachers of a run must have one width, hidden width and vocabulary; "
                          f"got {widths}.")


class Targets:
    """``targets.final_states(x)`` (x: (R, B, d), one batch per replicate) -> (n_slots, B, d);
    ``targets.outputs(finals)`` -> ``{"final"}`` and, for KL, ``"logp"`` (n_slots, n_temps, B, V),
    ``"heads"``."""

    in_dim = 0  # students of vectors: no input embedding
    capturable = True  # a step of its students may be replayed as a CUDA graph

    def __init__(self, teachers: Mapping[Hashable, Teacher], specs: list[StudentSpec], replicates: list[int],
                 temperatures: list[float], kl: bool, dtype: torch.dtype, device: torch.device) -> None:
        self.replicates, self.dtype, self.device = list(replicates), dtype, device
        self.width = next(iter(teachers.values())).width
        self.temperature_list = list(temperatures)
        keys = {(teacher_key(s, teachers), s.replicate) for s in specs}
        self.slots = sorted(keys, key=lambda kr: (str(kr[0]), kr[1]))
        self.labels = [k for k, _ in self.slots]  # the teacher key of each slot
        # copies: the caller's teachers keep their device and dtype
        self.teachers = {k: copy.deepcopy(teachers[k]).to(device=device, dtype=dtype)
                         for k in dict.fromkeys(self.labels)}
        self.replicate_index = torch.tensor([replicates.index(r) for _, r in self.slots], device=device)
        self.kl = kl
        self.temperatures = torch.tensor(temperatures, dtype=dtype, device=device)
        self.heads = torch.stack([self.teachers[k].head for k in self.labels]) if kl else None
        configs = [self.teachers[k].config for k in self.labels]
        first = configs[0]
        same = all((c.depth, c.width, c.hidden, c.scheme, c.branch_scale)
                   == (first.depth, first.width, first.hidden, first.scheme, first.branch_scale)
                   for c in configs)
        self.stacked = None
        if same and first.scheme == "euler":
            fields = [self.teachers[k].stack.layer_fields for k in self.labels]

            def stacked(layer: int, name: str, scale: float = 1.0) -> torch.Tensor:
                return torch.stack([getattr(f[layer], name).detach() * scale for f in fields]).unsqueeze(1)

            self.stacked = [LayerParams(stacked(layer, "W1"), stacked(layer, "b1"),
                                        stacked(layer, "W2", first.branch_scale))
                            for layer in range(first.depth)]

    def slot_of(self, spec: StudentSpec, teachers: Mapping[Hashable, Teacher]) -> int:
        return self.slots.index((teacher_key(spec, teachers), spec.replicate))

    @torch.no_grad()
    def final_states(self, x: torch.Tensor) -> torch.Tensor:
        """Every slot's MSE target ``rmsnorm(h_L)`` on its replicate's batch of ``x`` (R, N, d):
        (n_slots, N, d)."""
        inputs = x[self.replicate_index]
        if self.stacked is None:
            return torch.stack([self.teachers[k](inputs[s]) for s, k in enumerate(self.labels)])
        h = rmsnorm(inputs)
        for layer in self.stacked:
            h, _ = block_forward(h, layer, ((0.0,),), (1.0,), save=False)
        return rmsnorm(h)

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.outputs(self.final_states(x))

    @torch.no_grad()
    def outputs(self, finals: torch.Tensor) -> dict[str, torch.Tensor]:
        """The targets of a batch from the slots' final states (n_slots, B, d): for KL, adds the
        log-probabilities at every temperature and the heads."""
        out = {"final": finals}
        if self.kl:
            logits = torch.bmm(finals, self.heads.transpose(1, 2))  # (n_slots, B, V)
            out["logp"] = torch.log_softmax(logits[:, None] / self.temperatures[None, :, None, None], dim=-1)
            out["heads"] = self.heads
        return out

    # ------------------------------------------------------------------ the target kind (module docstring)
    def bind(self, banks: list, config: TrainConfig) -> None:
        """Each bank's slots and replicates (and for KL its students' temperatures and head temperatures)."""
        def per_bank(values, dtype=None) -> list[torch.Tensor]:
            return [torch.tensor([values(s) for s in bank.specs], dtype=dtype, device=self.device)
                    for bank in banks]

        self.slot_index = per_bank(lambda s: self.slot_of(s, self.teachers))
        self.bank_replicates = per_bank(lambda s: self.replicates.index(s.replicate))
        self.head_mode = config.head
        if self.kl:
            self.temp_index = per_bank(lambda s: self.temperature_list.index(s.temperature))
            # a learned head is trained at T = 1; the teacher's shared head is read at the teacher's T
            self.head_temperature = per_bank(lambda s: 1.0 if config.head == "learned" else s.temperature,
                                             self.dtype)

    def streams(self, seed: int) -> ReplicateStreams:
        return ReplicateStreams(seed, self.replicates, self.width, self.dtype, self.device)

    def first_states(self, x: torch.Tensor):
        """``first(k, params) -> (h0, None)``: ``rmsnorm`` of the batch of each student's replicate."""
        h0 = rmsnorm(x)
        return lambda k, params: (h0[self.bank_replicates[k]], None)

    def loss(self, k: int, final: torch.Tensor, targets: dict, head: torch.Tensor, grad_head: torch.Tensor,
             with_grad: bool):
        """Per-student loss of bank ``k`` and its gradient with respect to the final states (MSE on the
        teacher's final state, or KL on its logits through a learned or the teacher's shared head)."""
        slot = self.slot_index[k]
        if not self.kl:
            return mse_head(final, targets["final"][slot], with_grad)
        logp = targets["logp"][slot, self.temp_index[k]]
        if self.head_mode == "shared":
            head = targets["heads"][slot]
        return kl_head(final, head, logp, self.head_temperature[k],
                       grad_head if self.head_mode == "learned" else None, with_grad)

    def fixed_inputs(self) -> torch.Tensor:
        """What trained students are measured on: :func:`~resflow.training.data.metric_inputs` (B, d)."""
        return metric_inputs(self.width, self.dtype)

    def states_inputs(self, x: torch.Tensor) -> torch.Tensor:
        """The batch of fixed inputs (B, d) as every replicate's (R, B, d)."""
        return x.unsqueeze(0).expand(len(self.replicates), *x.shape)

    def flops(self, batch: int) -> float:
        """Analytic FLOPs of every slot's teacher forward on a batch."""
        return sum(4.0 * batch * t.width * t.config.hidden * t.depth
                   for t in (self.teachers[k] for k in self.labels))
