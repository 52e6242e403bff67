r"""The Random Hierarchy Model: discrete data with a known hierarchy depth (Cagnetta et al., 2023).

A class label is the root of a tree of depth :math:`K`: every symbol expands, by one of its
:math:`m` synonymous **production rules**, into :math:`s` symbols of the level below, down to the
:math:`s^K` input tokens.  Every level has a vocabulary of :math:`v` symbols (the top has the
:math:`n_c` classes), and the rules are drawn at random, without replacement from the
:math:`v^s` possible :math:`s`-tuples, so no two symbols share a tuple and the tree can be
parsed back uniquely: :meth:`RandomHierarchyModel.parse` inverts the rules level by level and
recovers both the label and the depth :math:`K`.

Learning it needs composition: a token alone carries little information on the label; its groups
of :math:`s` tokens, then groups of groups, carry more.  The third use of depth:
``docs/design/compositional.md``.

Reference: Cagnetta, Petrini, Tomasini, Favero & Wyart, "How Deep Neural Networks Learn
Compositional Data: The Random Hierarchy Model", Phys. Rev. X 14, 031001 (2024), arXiv:2307.02129.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from .._random import SeedLike, as_generator
from .._validate import check_int
from ..errors import ConfigError

__all__ = ["HierarchyConfig", "RandomHierarchyModel"]

MAX_TOKENS = 1 << 16  # s^K above this is refused (a sample would not fit a batch)


@dataclass(frozen=True)
class HierarchyConfig:
    """Frozen, validated configuration of a :class:`RandomHierarchyModel`.

    Parameters
    ----------
    vocab : int
        Symbols per level below the top, :math:`v`.
    classes : int
        Labels (symbols of the top level), :math:`n_c`.
    synonyms : int
        Production rules per symbol, :math:`m`.
    branching : int
        Symbols each rule produces, :math:`s \\ge 2`.
    depth : int
        Levels of rules, :math:`K` (the hierarchy depth); inputs have :math:`s^K` tokens.
    seed : int
        Seed of the rules.
    """

    vocab: int = 8
    classes: int = 8
    synonyms: int = 2
    branching: int = 2
    depth: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        for name, minimum in (("vocab", 2), ("classes", 2), ("synonyms", 1), ("branching", 2), ("depth", 1),
                              ("seed", 0)):
            object.__setattr__(self, name, check_int(name, getattr(self, name), minimum=minimum))
        tuples = self.vocab ** self.branching
        for name, symbols in (("classes", self.classes), ("vocab", self.vocab)):
            if symbols * self.synonyms > tuples:
                raise ConfigError(
                    f"{name} x synonyms = {symbols} x {self.synonyms} rules exceed the {tuples} distinct "
                    f"{self.branching}-tuples of {self.vocab} symbols, so the rules cannot be unambiguous; "
                    "lower synonyms or raise vocab or branching.")
        if self.branching ** self.depth > MAX_TOKENS:
            raise ConfigError(f"branching^depth = {self.branching}^{self.depth} tokens per input exceeds "
                              f"{MAX_TOKENS}; lower depth or branching.")

    @property
    def n_tokens(self) -> int:
        return self.branching ** self.depth


class RandomHierarchyModel:
    """Random production rules and a sampler of (tokens, label) pairs; see the module docstring.

    Examples
    --------
    >>> rhm = RandomHierarchyModel(HierarchyConfig(vocab=6, classes=4, synonyms=2, branching=2, depth=3))
    >>> tokens, labels = rhm.sample(5, seed=0)
    >>> tokens.shape, bool((rhm.parse(tokens)[0] == labels).all())
    (torch.Size([5, 8]), True)
    """

    def __init__(self, config: HierarchyConfig | None = None, **overrides) -> None:
        if config is None:
            config = HierarchyConfig(**overrides)
        elif overrides:
            config = dataclasses.replace(config, **overrides)
        if not isinstance(config, HierarchyConfig):
            raise ConfigError(f"config must be a HierarchyConfig; got {type(config).__name__}.")
        self.config = config
        gen = as_generator(config.seed)
        v, s, m = config.vocab, config.branching, config.synonyms
        #: rules[k] has shape (symbols at level k, m, s): level 0 is the top (the classes)
        self.rules: list[torch.Tensor] = []
        for level in range(config.depth):
            symbols = config.classes if level == 0 else v
            chosen = torch.randperm(v ** s, generator=gen)[: symbols * m]  # distinct tuples: unambiguous
            digits = torch.stack([(chosen // v ** (s - 1 - j)) % v for j in range(s)], dim=-1)
            self.rules.append(digits.reshape(symbols, m, s))

    @property
    def depth(self) -> int:
        return self.config.depth

    def sample(self, n: int, *, seed: SeedLike = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` inputs and labels: tokens ``(n, s^K)`` (long, in ``[0, v)``), labels ``(n,)``."""
        n = check_int("n", n, minimum=1)
        gen = as_generator(seed)
        labels = torch.randint(self.config.classes, (n,), generator=gen)
        symbols = labels[:, None]
        for rules in self.rules:
            choice = torch.randint(self.config.synonyms, symbols.shape, generator=gen)
            symbols = rules[symbols, choice].reshape(n, -1)  # each symbol -> its rule's s symbols
        return symbols, labels

    def parse(self, tokens: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Invert the rules bottom-up: ``(labels, levels parsed)``; a label is -1 where the tokens
        are not a sentence of this grammar.  For sampled tokens, levels parsed = the depth :math:`K`."""
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype != torch.long:
            raise ConfigError("tokens must be a 2-D LongTensor (batch, branching^depth), "
                              "as sample() returns.")
        v, s = self.config.vocab, self.config.branching
        weights = torch.tensor([v ** (s - 1 - j) for j in range(s)])
        symbols, levels = tokens.clone(), 0
        valid = torch.ones(len(tokens), dtype=torch.bool)
        for rules in reversed(self.rules):
            if symbols.shape[1] % s:
                break
            codes = (symbols.reshape(len(tokens), -1, s) * weights).sum(-1)  # each s-tuple as one integer
            table = torch.full((v ** s,), -1, dtype=torch.long)
            flat = (rules * weights).sum(-1)  # (symbols, m)
            table[flat.reshape(-1)] = torch.arange(rules.shape[0]).repeat_interleave(rules.shape[1])
            symbols = table[codes.clamp(0, v ** s - 1)]
            valid &= (symbols >= 0).all(dim=1)
            symbols = symbols.clamp(min=0)
            levels += 1
        if symbols.shape[1] != 1:
            return torch.full((len(tokens),), -1, dtype=torch.long), levels
        return torch.where(valid, symbols[:, 0], -1), levels

    def __repr__(self) -> str:
        c = self.config
        return (f"RandomHierarchyModel(vocab={c.vocab}, classes={c.classes}, synonyms={c.synonyms}, "
                f"branching={c.branching}, depth={c.depth}, seed={c.seed})")
