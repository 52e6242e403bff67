r"""The student: its block, its initialisation and its losses, defined once.

A student of depth :math:`\ell` with scheme :math:`(A, b)` applies per layer one Runge--Kutta step
of unit size whose stage :math:`i` is its own MLP (:func:`resflow.dynamics.mlp_branch`):

.. math:: k_i = f_{l,i}\Big(y + \sum_{j<i} a_{ij} k_j\Big), \qquad y \mapsto y + \sum_i b_i k_i,
          \qquad f_{l,i}(y) = W_{2,l,i}\,\mathrm{relu}(W_{1,l,i}\,\mathrm{rmsnorm}(y) + b_{1,l,i})^2

(``euler``: the study's block :math:`h \mapsto h + f(h)`; ``midpoint``: its RK2 block with two
MLPs).  Input :math:`h_0 = \mathrm{rmsnorm}(x)`; output :math:`\mathrm{rmsnorm}(h_\ell)`.
:math:`W_2` and the learned head start at zero, so every student starts as the identity
(its output is :math:`\mathrm{rmsnorm}(x)`); :math:`W_1, b_1` start at PyTorch's default
``nn.Linear`` initialisation, drawn on the CPU from a seed that depends on (replicate, scheme,
depth) only, so students of different targets or temperatures in one replicate start identical.

Losses, per student and averaged over the batch: the MSE between the normalised final states
(:func:`mse_loss`), or KL(teacher || student) of the softmax outputs (:func:`kl_loss`).

These functions are the recipe.  The batched engine's fused kernels (:mod:`resflow.training.kernels`)
compute the same forward and its hand-derived gradient, and are tested against autograd through
these definitions; the per-student reference loop (:mod:`resflow.training.reference_loop`) calls them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass

import torch

from ..dynamics.fields import mlp_branch, mlp_init_std, mlp_parameter_shapes, rmsnorm
from ..dynamics.stepper import rk_stages
from ..dynamics.tableau import ButcherTableau, get_tableau
from ..errors import ConfigError
from ..noise import group_of

__all__ = ["ROUTES", "StudentSpec", "student_seed", "layer_groups", "first_layers", "init_student",
           "student_block", "student_forward", "student_steps", "student_layer_steps", "student_logits",
           "mse_loss", "kl_loss", "PARAMETER_NAMES", "teacher_built_student"]

PARAMETER_NAMES = ("W1", "b1", "W2", "head")

# The routes by which a student reaches its trained weights (docs/design/certification.md): each name once,
# here.
ROUTES = {
    "scratch": "init_student's draw: W2 and head zero (the identity), W1 and b1 drawn layer by layer",
    "continuation": "the run's trained scratch student of half the depth (same teacher, init and data), "
                    "each layer split into two half steps (resflow.training.continuation.split_layers)",
    "smooth": "as scratch, but every layer starts with layer 0's W1 and b1: constant along depth",
}


@dataclass(frozen=True)
class StudentSpec:
    """One student.

    Attributes
    ----------
    target : str
        The teacher it learns (a teacher spec such as ``"tied"``).
    scheme : str
        Its block (a name in :data:`resflow.dynamics.TABLEAUX`).
    depth : int
    replicate : int
        Its replicate: the seed of its initialisation, and of its teacher and data stream in an
        experiment (students of one replicate share teacher seeds and data across targets).
    temperature : float
        KL teacher temperature (NaN for MSE).
    length : float
        Its training length as a fraction of its budget (1: the whole budget; 0.25, 0.5: copies trained
        a quarter and half as long, each with the schedule compressed to its length, for the
        convergence verdict).
    weight_groups : int
        0 (a plain student): every layer has its own weights.  ``K >= 1`` (a group-structured
        student): its layers are split into ``min(K, depth)`` contiguous groups
        (:func:`layer_groups`) and the weights are shared within a group.
    budget : float
        Its share of the run's steps, in (0, 1]: at length 1 it trains for ``budget`` times the run's
        steps (:meth:`steps`).  Students of one run may have different budgets (an experiment gives
        some depths more than others, ``budgets``); 1 is the whole run.
    route : str
        How it starts (a name in :data:`ROUTES`): ``"scratch"`` (:func:`init_student`), ``"smooth"``
        (its layers start equal), ``"continuation"`` (from the trained scratch student of half its depth,
        :func:`resflow.training.train_routes`).
    init : int
        Which independent draw of its route's random start (0: the draw of every earlier version), so that
        the spread over initialisations is measured apart from the spread over teachers.
    hidden : int
        The hidden width of its MLP blocks; 0 (the default): its teacher's (the study's students), so that
        the student's width can be an axis of its own (``docs/results.md``, width).

    Attributes
    ----------
    tableau : ButcherTableau
        Its block's tableau, resolved from ``scheme`` when the spec is made (an unknown scheme fails there);
        not part of the spec's identity (its repr, equality and hash are the fields above).
    """

    target: str
    scheme: str
    depth: int
    replicate: int
    temperature: float = float("nan")
    length: float = 1.0
    weight_groups: int = 0
    budget: float = 1.0
    route: str = "scratch"
    init: int = 0
    hidden: int = 0
    tableau: ButcherTableau = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tableau", get_tableau(self.scheme))
        if self.route not in ROUTES:
            raise ConfigError(f"route must be one of {', '.join(ROUTES)}; got {self.route!r}.")
        if isinstance(self.init, bool) or not isinstance(self.init, int) or self.init < 0:
            raise ConfigError(f"init must be the index (>= 0) of an initialisation; got {self.init!r}.")
        if (isinstance(self.weight_groups, bool) or not isinstance(self.weight_groups, int)
                or self.weight_groups < 0):
            raise ConfigError("weight_groups must be 0 (every layer its own weights) "
                              f"or a number of weight groups >= 1; got {self.weight_groups!r}.")
        if isinstance(self.hidden, bool) or not isinstance(self.hidden, int) or self.hidden < 0:
            raise ConfigError("hidden must be a student's hidden width >= 1, or 0 for its teacher's; "
                              f"got {self.hidden!r}.")
        if (isinstance(self.budget, bool) or not isinstance(self.budget, int | float)
                or not 0 < self.budget <= 1):
            raise ConfigError(f"budget must be a share of the run's steps in (0, 1]; got {self.budget!r}.")

    def canonical(self) -> StudentSpec:
        """The student this one trains as: a group-structured student with at least as many groups as
        layers has one layer per group -- it *is* the plain student, trained once
        (:func:`resflow.training.train`)."""
        return dataclasses.replace(self, weight_groups=0) if 0 < self.depth <= self.weight_groups else self

    # defaults left out: a plain student's repr is what it was (checkpoint fingerprints)
    def __repr__(self) -> str:
        left_out = {"weight_groups": 0, "budget": 1, "route": "scratch", "init": 0, "hidden": 0}
        fields = [f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self) if f.repr
                  and not (f.name in left_out and getattr(self, f.name) == left_out[f.name])]
        return f"StudentSpec({', '.join(fields)})"

    def steps(self, run_steps: int) -> int:
        """Optimiser steps this student trains in a run of ``run_steps``: ``length * budget * run_steps``,
        rounded (0 means it cannot be trained)."""
        return round(self.length * self.budget * run_steps)

    def sort_key(self) -> tuple:
        """Deterministic order: scheme, length, deepest first, then target, replicate, temperature (NaN-safe),
        weight groups, route, init, hidden width."""
        temp = -1.0 if math.isnan(self.temperature) else self.temperature
        return (self.scheme, -self.length, -self.depth, self.target, self.replicate, temp, self.weight_groups,
                list(ROUTES).index(self.route), self.init, self.hidden)


def student_seed(seed: int, scheme: str, depth: int, init: int = 0, route: str = "scratch") -> int:
    """Initialisation seed of a student: depends on (replicate, scheme, depth, init, route) only, so students
    of different targets, temperatures or lengths in one replicate start from the same weights.  Init 0 of
    the scratch route has the seed of every earlier version."""
    tag = (f"resflow-student:{seed}:{scheme}:{depth}"
           + ("" if (init, route) == (0, "scratch") else f":{init}:{route}"))
    return int(hashlib.sha256(tag.encode()).hexdigest()[:15], 16)


def layer_groups(spec: StudentSpec) -> torch.Tensor | None:
    """The weight group of each of the student's layers (contiguous, :func:`resflow.noise.group_of` with
    ``min(groups, depth)`` groups), or None for a plain student (every layer its own weights)."""
    if spec.weight_groups == 0:
        return None
    return group_of(spec.depth, min(spec.weight_groups, spec.depth))


def first_layers(groups: torch.Tensor) -> torch.Tensor:
    """The first layer of each group of a contiguous grouping ``groups`` (one group index per layer, as
    :func:`layer_groups` gives): the layer whose weights a shared weight starts from."""
    return torch.searchsorted(groups, torch.arange(int(groups.max()) + 1))


def init_student(spec: StudentSpec, width: int, hidden: int, vocab: int,
                 dtype: torch.dtype = torch.float32, inputs: int = 0) -> dict[str, torch.Tensor]:
    """Initial weights of one student, drawn on the CPU from :func:`student_seed`.

    Returns ``W1`` (depth, stages, hidden, width) and ``b1`` (depth, stages, hidden) from
    PyTorch's default ``nn.Linear`` initialisation :math:`U(-1/\\sqrt{d}, 1/\\sqrt{d})`;
    ``W2`` (depth, stages, width, hidden) and ``head`` (vocab, width) **zero**: the student is the
    identity at initialisation.  A group-structured student draws the same values, then every layer
    takes its group's first layer's (:func:`layer_groups`), so the copies of a shared weight start equal.
    A student of tokens (``inputs`` > 0: one-hot codes of that size, :mod:`resflow.training.classes`) also
    has an ``embed`` (width, inputs), :math:`N(0, 1)` as ``torch.nn.Embedding``, drawn after the layers.

    The seed is :func:`student_seed` of the spec's replicate, scheme, depth, init and route.  Route
    ``"smooth"`` then gives every layer layer 0's ``W1`` and ``b1`` (a start constant along depth); route
    ``"continuation"`` has no draw of its own (its weights come from its parent,
    :func:`resflow.training.train_routes`) and is refused.  ``hidden`` is the teacher's hidden width, used
    unless the spec gives its own (:attr:`StudentSpec.hidden`).
    """
    hidden = spec.hidden or hidden
    if spec.route == "continuation":
        raise ConfigError("a continuation student starts from the trained student of half its depth, "
                          "not from a draw: train it with resflow.training.train_routes "
                          "(or give its initial parameters).")
    stages = spec.tableau.stages
    gen = torch.Generator().manual_seed(
        student_seed(spec.replicate, spec.scheme, spec.depth, spec.init, spec.route))
    std = mlp_init_std(width, hidden)
    shapes = mlp_parameter_shapes(width, hidden)
    bound = {name: s * 3**0.5 for name, s in std.items()}
    W1 = torch.empty((spec.depth, stages, *shapes["W1"]), dtype=dtype)
    b1 = torch.empty((spec.depth, stages, *shapes["b1"]), dtype=dtype)
    for layer in range(spec.depth):
        for stage in range(stages):
            W1[layer, stage] = (2 * torch.rand(shapes["W1"], generator=gen, dtype=dtype) - 1) * bound["W1"]
            b1[layer, stage] = (2 * torch.rand(shapes["b1"], generator=gen, dtype=dtype) - 1) * bound["b1"]
    groups = layer_groups(spec)
    if groups is not None:
        first = first_layers(groups)[groups]  # each layer: its group's first layer
        W1, b1 = W1[first], b1[first]
    if spec.route == "smooth":  # every layer starts as layer 0: constant along depth
        W1, b1 = W1[:1].repeat(spec.depth, 1, 1, 1), b1[:1].repeat(spec.depth, 1, 1)
    out = {
        "W1": W1,
        "b1": b1,
        "W2": torch.zeros((spec.depth, stages, *shapes["W2"]), dtype=dtype),
        "head": torch.zeros((vocab, width), dtype=dtype),
    }
    if inputs:
        out["embed"] = torch.randn((width, inputs), generator=gen, dtype=dtype)
    return out


def student_block(y: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor,
                  tableau: ButcherTableau) -> torch.Tensor:
    """One block: a unit RK step whose stage ``i`` is the MLP
    ``(W1[..., i, :, :], b1[..., i, :], W2[..., i, :, :])``.

    ``y`` is ``(..., batch, width)``; the parameters carry a stage axis before their matrix axes
    and may carry leading (student) axes that broadcast against ``y``'s.
    """
    return rk_stages(lambda i, yi: mlp_branch(yi, W1[..., i, :, :], b1[..., i, :], W2[..., i, :, :]), y, 1.0,
                     tableau)


def student_forward(params: dict[str, torch.Tensor], x: torch.Tensor, tableau: ButcherTableau,
                    return_states: bool = False) -> torch.Tensor:
    """Final state :math:`h_\\ell` (not normalised) of one student on inputs ``x`` (batch, width);
    with ``return_states``, all of :math:`h_0 = \\mathrm{rmsnorm}(x), \\dots, h_\\ell` stacked."""
    h = rmsnorm(x)
    states = [h]
    for layer in range(params["W1"].shape[0]):
        h = student_block(h, params["W1"][layer], params["b1"][layer], params["W2"][layer], tableau)
        states.append(h)
    return torch.stack(states) if return_states else h


def student_steps(params: dict[str, torch.Tensor], tableau: ButcherTableau) -> list:
    """The student's layers as steps ``h -> next h`` (layer ``k``: :func:`student_block` with its weights),
    for :mod:`resflow.probing.interventions`; ``run_steps(student_steps(p, t), rmsnorm(x))`` is
    ``student_forward(p, x, t)``."""
    return [lambda h, k=k: student_block(h, params["W1"][k], params["b1"][k], params["W2"][k], tableau)
            for k in range(params["W1"].shape[0])]


def student_layer_steps(params: dict[str, torch.Tensor], states: torch.Tensor,
                        tableau: ButcherTableau) -> torch.Tensor:
    r"""Each layer of a student applied to its own input: layer :math:`l` to ``states[l]``, for
    :math:`l = 0..\ell-1` (``states`` ``(>= depth, batch, width)``, e.g. a teacher's states at matching
    times); shape ``(depth, batch, width)``."""
    depth = params["W1"].shape[0]
    return torch.stack([student_block(states[layer], params["W1"][layer], params["b1"][layer],
                                      params["W2"][layer], tableau) for layer in range(depth)])


def student_logits(h: torch.Tensor, head: torch.Tensor,
                   temperature: float | torch.Tensor = 1.0) -> torch.Tensor:
    """Logits :math:`\\mathrm{head}(\\mathrm{rmsnorm}(h)) / T` (a learned head: ``T = 1``)."""
    return (rmsnorm(h) @ head.transpose(-1, -2)) / temperature


def mse_loss(h: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over batch and width of :math:`(\\mathrm{rmsnorm}(h) - \\text{target})^2`; the target is the
    teacher's normalised final state.  Leading (student) axes are kept."""
    return (rmsnorm(h) - target).square().mean(dim=(-2, -1))


def kl_loss(logits: torch.Tensor, teacher_logp: torch.Tensor) -> torch.Tensor:
    """KL(teacher || student) of softmax outputs, mean over the batch; leading axes kept.

    ``teacher_logp`` are the teacher's log-probabilities at its temperature."""
    logq = torch.log_softmax(logits, dim=-1)
    return (teacher_logp.exp() * (teacher_logp - logq)).sum(-1).mean(-1)


def teacher_built_student(teacher, depth: int, groups: int) -> dict:
    """Parameters of a group-structured Euler student of ``depth`` layers built, untrained, from a grouped
    teacher's own group fields: group ``g`` applies the teacher's field of group ``g`` ``depth / groups``
    times with its branch scaled so the group spans the same time (``teacher_depth / depth`` times the
    teacher's step).  At ``depth`` = teacher depth it *is* the teacher; below, a coarser Euler
    discretisation of the same piecewise flow -- what a group-structured student can reach without learning
    anything.  Needs ``groups <= depth``."""
    stack = teacher.stack
    fields = list(stack.layers)
    first = first_layers(group_of(teacher.depth, groups)).tolist()
    mine = group_of(depth, groups)
    scale = stack.step_size * teacher.depth / depth
    layers = [fields[first[int(g)]] if len(fields) > 1 else fields[0] for g in mine]
    return {"W1": torch.stack([f.W1.detach() for f in layers])[:, None],
            "b1": torch.stack([f.b1.detach() for f in layers])[:, None],
            "W2": torch.stack([f.W2.detach() * scale for f in layers])[:, None]}
