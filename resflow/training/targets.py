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
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Mapping

import torch

from ..dynamics.fields import rmsnorm
from ..dynamics.tableau import get_tableau
from ..errors import ConfigError
from .block import StudentSpec
from .config import TrainConfig
from .kernels import LayerParams, block_forward
from .teacher import Teacher

__all__ = ["Targets", "teacher_key", "check_run"]


def teacher_key(spec: StudentSpec, teachers: Mapping[Hashable, Teacher]) -> Hashable:
    """The key of ``spec``'s teacher in ``teachers`` (see the module docstring)."""
    if (spec.target, spec.replicate) in teachers:
        return (spec.target, spec.replicate)
    if spec.target in teachers:
        return spec.target
    raise ConfigError(f"student target {spec.target!r} (replicate {spec.replicate}) has no teacher; teachers are "
                      f"{sorted(map(str, teachers))}.")


def check_run(specs: list[StudentSpec], teachers: Mapping[Hashable, Teacher], config: TrainConfig) -> None:
    """Refuse, by name, a run the engine cannot train: no students or teachers, a student without its teacher,
    an unknown scheme, a temperature or length out of range, teachers of different shapes."""
    if not specs:
        raise ConfigError("no students to train: give at least one depth, scheme, replicate and target.")
    if not teachers:
        raise ConfigError("no teachers: give at least one target, e.g. {'tied': Teacher('tied')}.")
    for s in specs:
        teacher_key(s, teachers)
        get_tableau(s.scheme)
        if config.loss == "kl" and s.temperature not in config.temperatures:
            raise ConfigError(f"student temperature {s.temperature} is not in temperatures {config.temperatures}.")
        if not 0.0 < s.length <= 1.0 or s.steps(config.steps) < 1:
            raise ConfigError(f"student length must be a fraction in (0, 1] of at least one step; got length "
                              f"{s.length} of budget {s.budget} of {config.steps} steps.")
    grammars = [k for k, t in teachers.items() if not isinstance(t, Teacher)]
    if grammars and config.loss != "ce":
        raise ConfigError(f"targets {grammars} are grammars (rhm:L): they train with loss 'ce', not "
                          f"{config.loss!r}; set loss='ce' (or give teachers).")
    widths = {(t.width, t.config.hidden, t.config.vocab) for t in teachers.values()}
    if len(widths) != 1:
        raise ConfigError(f"all teachers of a run must have one width, hidden width and vocabulary; got {widths}.")


class Targets:
    """``targets.final_states(x)`` (x: (R, B, d), one batch per replicate) -> (n_slots, B, d);
    ``targets.outputs(finals)`` -> ``{"final"}`` and, for KL, ``"logp"`` (n_slots, n_temps, B, V), ``"heads"``."""

    def __init__(self, teachers: Mapping[Hashable, Teacher], specs: list[StudentSpec], replicates: list[int],
                 temperatures: list[float], kl: bool, dtype: torch.dtype, device: torch.device) -> None:
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
                   == (first.depth, first.width, first.hidden, first.scheme, first.branch_scale) for c in configs)
        self.stacked = None
        if same and first.scheme == "euler":
            fields = [self.teachers[k].stack.layer_fields for k in self.labels]

            def stacked(layer: int, name: str, scale: float = 1.0) -> torch.Tensor:
                return torch.stack([getattr(f[layer], name).detach() * scale for f in fields]).unsqueeze(1)

            self.stacked = [LayerParams(stacked(layer, "W1"), stacked(layer, "b1"),
                                        stacked(layer, "W2", first.branch_scale)) for layer in range(first.depth)]

    def slot_of(self, spec: StudentSpec, teachers: Mapping[Hashable, Teacher]) -> int:
        return self.slots.index((teacher_key(spec, teachers), spec.replicate))

    @torch.no_grad()
    def final_states(self, x: torch.Tensor) -> torch.Tensor:
        """Every slot's MSE target ``rmsnorm(h_L)`` on its replicate's batch of ``x`` (R, N, d): (n_slots, N, d)."""
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
