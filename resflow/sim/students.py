r"""Students: residual stacks of the study's block, trained against a teacher, batched.

A student of depth :math:`\ell` with scheme :math:`(A, b)` applies per layer one Runge--Kutta step
of unit size whose stage :math:`i` is its own MLP
:math:`f_{l,i}(y) = W_{2,l,i}\,\mathrm{relu}(W_{1,l,i}\,\mathrm{rmsnorm}(y) + b_{1,l,i})^2`
(``euler``: the study's block; ``midpoint``: its RK2 block with two MLPs).  :math:`W_2` starts at
zero, so every student starts as the identity; :math:`W_1, b_1` start at PyTorch's default init.

:class:`StudentBank` holds all students of one scheme with their weights stacked along a leading
student axis, sorted by depth (deepest first), so layer :math:`l` is one batched matmul over the
students deeper than :math:`l` (a prefix of the axis) -- no Python loop over students.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import torch

from .._validate import check_int
from ..dynamics.fields import mlp_init_std, mlp_parameter_shapes, rmsnorm
from ..dynamics.stepper import rk_stages
from ..dynamics.tableau import get_tableau

__all__ = ["StudentSpec", "StudentBank", "student_seed", "init_student_parameters"]


@dataclass(frozen=True)
class StudentSpec:
    """One student: which teacher it learns, its scheme, depth, seed, and KL temperature (NaN for MSE)."""

    target: str
    scheme: str
    depth: int
    seed: int
    temperature: float = float("nan")

    def sort_key(self) -> tuple:
        """Deterministic order: scheme, deepest first, then target, seed, temperature (NaN-safe)."""
        temp = -1.0 if math.isnan(self.temperature) else self.temperature
        return (self.scheme, -self.depth, self.target, self.seed, temp)


def student_seed(seed: int, scheme: str, depth: int) -> int:
    """Initialisation seed of a student: depends on (seed, scheme, depth) only, so students of
    different targets or temperatures with the same seed start from the same weights."""
    digest = hashlib.sha256(f"resflow-student:{seed}:{scheme}:{depth}".encode()).hexdigest()
    return int(digest[:15], 16)


def init_student_parameters(
    spec: StudentSpec, width: int, hidden: int, vocab: int, dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """Initial weights of one student, drawn on the CPU from :func:`student_seed`.

    Returns ``W1`` (depth, stages, hidden, width), ``b1`` (depth, stages, hidden),
    ``W2`` (depth, stages, width, hidden) zeros, ``head`` (vocab, width) zeros.
    """
    stages = get_tableau(spec.scheme).stages
    gen = torch.Generator().manual_seed(student_seed(spec.seed, spec.scheme, spec.depth))
    std = mlp_init_std(width, hidden)
    shapes = mlp_parameter_shapes(width, hidden)
    bound = {name: s * 3**0.5 for name, s in std.items()}
    W1 = torch.empty((spec.depth, stages, *shapes["W1"]), dtype=dtype)
    b1 = torch.empty((spec.depth, stages, *shapes["b1"]), dtype=dtype)
    for layer in range(spec.depth):
        for stage in range(stages):
            W1[layer, stage] = (2 * torch.rand(shapes["W1"], generator=gen, dtype=dtype) - 1) * bound["W1"]
            b1[layer, stage] = (2 * torch.rand(shapes["b1"], generator=gen, dtype=dtype) - 1) * bound["b1"]
    return {
        "W1": W1,
        "b1": b1,
        "W2": torch.zeros((spec.depth, stages, *shapes["W2"]), dtype=dtype),
        "head": torch.zeros((vocab, width), dtype=dtype),
    }


class StudentBank:
    """All students of one scheme, weights stacked ``(n, max_depth, stages, ...)``, deepest first.

    Attributes
    ----------
    specs : list of StudentSpec
        In bank order (depth descending).
    W1, b1, W2, head : torch.Tensor
        Leaf tensors with ``requires_grad``; layers beyond a student's depth are unused padding.
    active_count : list of int
        ``active_count[l]`` = number of students deeper than ``l`` (a prefix of the bank).
    """

    def __init__(self, specs: list[StudentSpec], width: int, hidden: int, vocab: int,
                 dtype: torch.dtype, device: torch.device) -> None:
        schemes = {s.scheme for s in specs}
        if len(schemes) != 1:
            raise ValueError(f"a bank holds one scheme, got {sorted(schemes)}")
        self.tableau = get_tableau(specs[0].scheme)
        self.specs = sorted(specs, key=StudentSpec.sort_key)
        self.max_depth = self.specs[0].depth
        self.active_count = [sum(s.depth > layer for s in self.specs) for layer in range(self.max_depth)]
        stages = self.tableau.stages
        n = len(self.specs)
        tensors = {
            "W1": torch.zeros((n, self.max_depth, stages, hidden, width), dtype=dtype),
            "b1": torch.zeros((n, self.max_depth, stages, hidden), dtype=dtype),
            "W2": torch.zeros((n, self.max_depth, stages, width, hidden), dtype=dtype),
            "head": torch.zeros((n, vocab, width), dtype=dtype),
        }
        for i, spec in enumerate(self.specs):
            init = init_student_parameters(spec, width, hidden, vocab, dtype)
            for name in ("W1", "b1", "W2"):
                tensors[name][i, : spec.depth] = init[name]
            tensors["head"][i] = init["head"]
        self.W1, self.b1, self.W2, self.head = (
            tensors[k].to(device).requires_grad_(True) for k in ("W1", "b1", "W2", "head")
        )

    @property
    def parameters(self) -> list[torch.Tensor]:
        return [self.W1, self.b1, self.W2, self.head]

    def __len__(self) -> int:
        return len(self.specs)

    def _block(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        n = h.shape[0]
        W1, b1, W2 = self.W1[:n, layer], self.b1[:n, layer], self.W2[:n, layer]

        def stage(i: int, y: torch.Tensor) -> torch.Tensor:
            pre = torch.baddbmm(b1[:, i, None, :], rmsnorm(y), W1[:, i].transpose(1, 2))
            return torch.bmm(torch.relu(pre).square(), W2[:, i].transpose(1, 2))

        return rk_stages(stage, h, 1.0, self.tableau)

    def forward(self, x: torch.Tensor, return_states: bool = False):
        """Final states ``(n, batch, width)`` of every student on shared inputs ``x`` (batch, width).

        With ``return_states``, also the list of states after each layer (layer ``l`` holds the
        first ``active_count[l]`` students).
        """
        n = len(self.specs)
        h = rmsnorm(x).unsqueeze(0).expand(n, *x.shape)
        states = [h] if return_states else None
        for layer, count in enumerate(self.active_count):
            updated = self._block(h[:count], layer)
            h = updated if count == n else torch.cat([updated, h[count:]], dim=0)
            if states is not None:
                states.append(updated)
        return (h, states) if return_states else h

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Learned-head logits ``(n, batch, vocab)`` of final states ``h``."""
        return torch.bmm(rmsnorm(h), self.head.transpose(1, 2))

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"W1": self.W1, "b1": self.b1, "W2": self.W2, "head": self.head}

    def hidden_states_of(self, index: int, x: torch.Tensor) -> torch.Tensor:
        """States ``h_0..h_depth`` of one student, shape ``(depth + 1, batch, width)``."""
        depth = self.specs[index].depth
        with torch.no_grad():
            _, states = self.forward(x, return_states=True)
        return torch.stack([states[0][index]] + [states[layer + 1][index] for layer in range(depth)])


def check_depths(depths) -> tuple[int, ...]:
    return tuple(check_int("depths", d, minimum=1) for d in depths)


