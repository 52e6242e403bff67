r"""Classification targets for the engine: students trained with cross-entropy on Random Hierarchy Model data.

A target ``"rhm:L"`` is a :class:`~resflow.training.hierarchy.RandomHierarchyModel` of hierarchy
depth :math:`L` (``"rhm:3:v8:m4:c8:s2"`` sets the vocabulary, synonyms, classes and branching; the
defaults are :data:`RHM_DEFAULTS`).  In an experiment every replicate has its own rules (seed
``teacher_seed + replicate``), as every replicate has its own teacher.

What the engine sees (:class:`ClassTargets`, the ``loss="ce"`` counterpart of
:class:`~resflow.training.targets.Targets`):

* the data of a step are tokens, ``(n_slots, B, P)`` (``P`` the longest input of the run; shorter
  inputs padded with -1), one batch per slot (target, replicate) drawn by
  :class:`HierarchyStreams` from the replicate's generator;
* the label of an input is what the grammar says it is: :meth:`RandomHierarchyModel.parse` of its
  tokens (the rules inverted level by level), never a number carried beside the tokens;
* a student reads the tokens through its own embedding of every (position, token) pair
  (:func:`one_hot_inputs`, :func:`~resflow.training.kernels.embed_forward`), its residual stack and
  its head to the ``classes`` (:func:`~resflow.training.kernels.ce_head`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import torch

from .._random import as_generator
from .._specs import RHM_DEFAULTS, parse_rhm_spec
from .._validate import check_int
from ..errors import ConfigError
from .block import StudentSpec
from .data import EVAL_SEED_OFFSET, METRIC_BATCH, METRIC_SEED
from .hierarchy import HierarchyConfig, RandomHierarchyModel
from .kernels import ce_head, embed_forward
from .targets import teacher_key

__all__ = ["RHM_DEFAULTS", "HierarchyTargetConfig", "HierarchyTarget", "ClassTargets", "HierarchyStreams",
           "fixed_sentences", "one_hot_inputs", "one_shape"]

PAD = -1  # token of the positions past an input's end
MAX_INPUTS = 1 << 14  # one-hot inputs (tokens x vocab) a student's embedding may take


@dataclass(frozen=True)
class HierarchyTargetConfig:
    """An RHM target of a run: the grammar (:class:`~resflow.training.hierarchy.HierarchyConfig`) and the
    students' width and hidden width (as a teacher's config carries them for regression students)."""

    hierarchy: HierarchyConfig
    width: int
    hidden: int

    @property
    def vocab(self) -> int:  # the students' head: one output per class
        return self.hierarchy.classes

    @property
    def depth(self) -> int:
        return self.hierarchy.depth

    @classmethod
    def from_spec(cls, spec: str, *, width: int, seed: int,
                  hidden: int | None = None) -> HierarchyTargetConfig:
        """Parse ``"rhm:L"`` or ``"rhm:L:v8:m4:c8:s2"`` (keys v, m, c, s:
        :func:`resflow._specs.parse_rhm_spec`)."""
        values = parse_rhm_spec(spec)
        inputs = values["branching"] ** values["depth"] * values["vocab"]
        if inputs > MAX_INPUTS:
            raise ConfigError(f"target {spec!r}: its students would embed {inputs} one-hot inputs "
                              f"(tokens x vocab) each, more than {MAX_INPUTS}; "
                              "lower the hierarchy depth, the branching or the vocab.")
        width = check_int("width", width, minimum=1)
        hidden = 4 * width if hidden is None else check_int("hidden", hidden, minimum=1)
        return cls(HierarchyConfig(seed=seed, **values), width, hidden)

    def to_json(self) -> str:
        return json.dumps({"hierarchy": dataclasses.asdict(self.hierarchy), "width": self.width,
                           "hidden": self.hidden}, sort_keys=True)


class HierarchyTarget:
    """The grammar a classification student learns: what a teacher is to a regression student."""

    def __init__(self, config: HierarchyTargetConfig) -> None:
        self.config = config
        self.width = config.width
        self.rhm = RandomHierarchyModel(config.hierarchy)

    @property
    def depth(self) -> int:
        return self.config.depth

    @property
    def n_tokens(self) -> int:
        return self.config.hierarchy.n_tokens

    def __repr__(self) -> str:
        return f"HierarchyTarget({self.rhm!r})"


def one_shape(grammars: list[HierarchyConfig]) -> tuple[int, int]:
    """The one ``(vocab, classes)`` of a run's grammars (its students share their embedding and head shapes);
    grammars of different shapes are refused."""
    shapes = {(g.vocab, g.classes) for g in grammars}
    if len(shapes) != 1:
        raise ConfigError("the grammars of a run need one vocabulary (v) and number of classes (c), "
                          "since the students share their embedding and head shapes; "
                          f"got (v, c) = {sorted(shapes)}.")
    return shapes.pop()


def fixed_sentences(target: HierarchyTarget, replicate: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``METRIC_BATCH`` sentences (and labels) of ``target`` that the students of ``replicate`` are
    measured on after training (hidden-state metrics, accuracy, early exit): drawn from seed
    ``METRIC_SEED + replicate``."""
    return target.rhm.sample(METRIC_BATCH, seed=METRIC_SEED + replicate)


def one_hot_inputs(tokens: torch.Tensor, vocab: int, positions: int, dtype: torch.dtype) -> torch.Tensor:
    """Tokens ``(..., P)`` (long, ``PAD`` past an input's end) as one-hot codes ``(..., positions * vocab)``:
    position ``p`` holding token ``t`` sets entry ``p * vocab + t``; padding sets nothing."""
    if tokens.shape[-1] > positions:
        raise ConfigError(f"inputs of {tokens.shape[-1]} tokens exceed the {positions} positions "
                          "of the embedding.")
    out = torch.zeros((*tokens.shape[:-1], positions * vocab), dtype=dtype, device=tokens.device)
    offsets = torch.arange(tokens.shape[-1], device=tokens.device) * vocab
    index = torch.where(tokens >= 0, tokens + offsets, positions * vocab)  # padding: one column past the end
    out = torch.cat([out, torch.zeros_like(out[..., :1])], dim=-1)
    out.scatter_(-1, index, 1.0)
    return out[..., :-1]


class ClassTargets:
    """The engine's targets for ``loss="ce"`` (module docstring): per slot, the grammar, its inputs and
    labels.  A target kind (:mod:`resflow.training.targets`): students of tokens, embedded, read out by a
    learned head."""

    capturable = False  # its labels come from parsing on the host: no CUDA graph

    def __init__(self, teachers: Mapping[Hashable, HierarchyTarget], specs: list[StudentSpec],
                 replicates: list[int], device: torch.device) -> None:
        for key, target in teachers.items():
            if not isinstance(target, HierarchyTarget):
                raise ConfigError(f"loss='ce' trains on classification targets ('rhm:L'); target {key!r} is "
                                  f"{type(target).__name__}. Use loss='mse' or 'kl' for teachers.")
        keys = {(teacher_key(s, teachers), s.replicate) for s in specs}
        self.slots = sorted(keys, key=lambda kr: (str(kr[0]), kr[1]))
        self.labels = [k for k, _ in self.slots]
        self.teachers = {k: teachers[k] for k in dict.fromkeys(self.labels)}
        self.vocab, self.classes = one_shape([t.config.hierarchy for t in self.teachers.values()])
        self.positions = max(t.n_tokens for t in self.teachers.values())
        self.in_dim = self.positions * self.vocab
        self.replicates = list(replicates)
        self.device = device

    def slot_of(self, spec: StudentSpec, teachers: Mapping[Hashable, HierarchyTarget]) -> int:
        return self.slots.index((teacher_key(spec, teachers), spec.replicate))

    def streams(self, seed: int) -> HierarchyStreams:
        return HierarchyStreams(seed, self, self.device)

    def inputs(self, tokens: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """One-hot codes ``(n_slots, B, in_dim)`` of the tokens ``(n_slots, B, P)``."""
        return one_hot_inputs(tokens, self.vocab, self.positions, dtype)

    @torch.no_grad()
    def final_states(self, tokens: torch.Tensor) -> torch.Tensor:
        """Every slot's labels ``(n_slots, B)``: its grammar's parse of its tokens."""
        out = []
        for s, key in enumerate(self.labels):
            target = self.teachers[key]
            labels, _ = target.rhm.parse(tokens[s, :, : target.n_tokens].cpu())
            if bool((labels < 0).any()):
                raise ConfigError(f"slot {self.slots[s]}: tokens that the grammar does not parse; "
                                  "the data do not come from this target.")
            out.append(labels)
        return torch.stack(out).to(self.device)

    def outputs(self, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"labels": labels}

    # ------------------------------------------------------------------ the target kind
    def bind(self, banks: list, config) -> None:
        """Each bank's slots, and the banks (their embeddings)."""
        self.banks, self.dtype = banks, getattr(torch, config.dtype)
        self.slot_index = [torch.tensor([self.slot_of(s, self.teachers) for s in bank.specs],
                                        device=self.device)
                           for bank in banks]

    def first_states(self, x: torch.Tensor):
        """``first(k, params) -> (h0, saved)``: each student's embedding of its slot's tokens (saved: what
        :func:`~resflow.training.kernels.embed_backward` needs)."""
        inputs = self.inputs(x, self.dtype)

        def first(k: int, params: torch.Tensor):
            h0, r, codes = embed_forward(inputs[self.slot_index[k]], self.banks[k].embed(params))
            return h0, (h0, r, codes)

        return first

    def loss(self, k: int, final: torch.Tensor, targets: dict, head: torch.Tensor, grad_head: torch.Tensor,
             with_grad: bool):
        """Per-student cross-entropy of bank ``k``'s learned head on its slot's labels, and its gradients."""
        return ce_head(final, head, targets["labels"][self.slot_index[k]], grad_head if with_grad else None,
                       with_grad)

    def states_inputs(self, x: torch.Tensor) -> torch.Tensor:
        return x  # already every slot's sentences

    def flops(self, batch: int) -> float:
        return 0.0  # labels by parsing: no teacher forward

    def __call__(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.outputs(self.final_states(tokens))

    def fixed_inputs(self) -> torch.Tensor:
        """The fixed sentences trained students are measured on, (n_slots, METRIC_BATCH, P) on the CPU: each
        slot's :func:`fixed_sentences`."""
        out = torch.full((len(self.slots), METRIC_BATCH, self.positions), PAD, dtype=torch.long)
        for s, (key, replicate) in enumerate(self.slots):
            target = self.teachers[key]
            out[s, :, : target.n_tokens] = fixed_sentences(target, replicate)[0]
        return out

    def sample(self, n: int, generators: list[torch.Generator]) -> torch.Tensor:
        """Fresh tokens ``(n_slots, n, P)`` (CPU): each slot's from its own generator
        (``generators[slot]``)."""
        out = torch.full((len(self.slots), n, self.positions), PAD, dtype=torch.long)
        for s, key in enumerate(self.labels):
            target = self.teachers[key]
            out[s, :, : target.n_tokens] = target.rhm.sample(n, seed=as_generator(generators[s]))[0]
        return out


class HierarchyStreams:
    """Training and evaluation tokens of every slot, each slot (target, replicate ``r``) from its own
    generators seeded ``seed + r`` (training) and ``seed + r + EVAL_SEED_OFFSET`` (evaluation): a target's
    data do not depend on which other targets share the run (a sweep cell draws what the batched run
    draws), targets of one replicate are paired as the teachers' inputs are, and evaluation sentences never
    come from the training stream; ``state()``/``load()`` checkpoint them."""

    def __init__(self, seed: int, targets: ClassTargets, device: torch.device) -> None:
        self.targets, self.device = targets, device
        self.train_gen = [torch.Generator().manual_seed(seed + r) for _, r in targets.slots]
        self.eval_gen = [torch.Generator().manual_seed(seed + r + EVAL_SEED_OFFSET) for _, r in targets.slots]

    def train_batch(self, batch: int) -> torch.Tensor:
        return self.targets.sample(batch, self.train_gen).to(self.device)

    def eval_batch(self, batch: int) -> torch.Tensor:
        return self.targets.sample(batch, self.eval_gen).to(self.device)

    def state(self) -> list[dict[str, torch.Tensor]]:
        return [{"train": t.get_state(), "eval": e.get_state()} for t, e in zip(self.train_gen, self.eval_gen,
                                                                                 strict=True)]

    def load(self, state: list[dict[str, torch.Tensor]]) -> None:
        for t, e, saved in zip(self.train_gen, self.eval_gen, state, strict=True):
            t.set_state(saved["train"])
            e.set_state(saved["eval"])
