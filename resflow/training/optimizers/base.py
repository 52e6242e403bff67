r"""What an optimiser rule is to the engine, and the registry of rules by name.

The engine keeps every parameter of a bank of students in one flat buffer (:mod:`resflow.training.bank`) with
a flat buffer of per-element learning rates.  An optimiser **rule** is two objects, in the shape of
optax's ``init``/``update`` pairs and diffrax's solver classes:

* its **settings** -- a frozen dataclass subclassing :class:`OptimizerSettings`, the ``train.optimizer`` part
  of a :class:`~resflow.training.config.TrainConfig` (``--set train.optimizer.name=soap``,
  ``--set train.optimizer.beta2=0.95``).  Pure data, no torch: presets are declared and listed without it;
* its **bank rule** -- what ``settings.bind(bank, heads=...)`` returns for one bank (:class:`BankRule`): the
  state buffers it needs, by name and size, and the update of the bank's flat parameters in place.

Nothing in the engine names an optimiser: it allocates the buffers a rule asks for (zeros, in the
:class:`~resflow.training.state.TrainState` and its checkpoints), copies them when a bank forks, and calls
``rule.apply`` after every step's gradients.  A rule that can be replayed as a CUDA graph says so
(``capturable``); its step-dependent numbers then come from :meth:`BankRule.scalars` as 0-d tensors.

A new rule is a settings class with a ``name`` and :func:`register_optimizer` -- see
``docs/design/extending.md`` and ``tests/test_extending.py`` (momentum SGD in a test file).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..._plugins import PluginRegistry
from ...errors import ConfigError, UnknownNameError

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from ..bank import StudentBank

__all__ = ["OptimizerSettings", "BankRule", "OPTIMIZERS", "register_optimizer", "optimizer_settings",
           "optimizer_field_types"]


class BankRule(Protocol):
    """An optimiser rule bound to one bank's layout (what :meth:`OptimizerSettings.bind` returns).

    ``buffers`` names the rule's state buffers and their sizes in elements (zeros at the start, one set per
    bank); ``scalars(step, multiplier)`` the step's numbers (``step`` 0-based, ``multiplier`` the schedule's
    factor); ``apply`` updates ``param`` in place from ``grad`` (both the bank's flat layout), ``lr`` (its
    per-element learning rates, 0 for frozen students) and ``work`` (scratch of the parameters' size).
    With ``capturable`` true, ``apply`` launches the same work at every step and reads ``scalars`` as given
    (floats, or 0-d tensors in a CUDA graph): the engine may capture it.
    """

    capturable: bool
    buffers: Mapping[str, int]

    def scalars(self, step: int, multiplier: float) -> tuple: ...

    def apply(self, param: torch.Tensor, grad: torch.Tensor, state: Mapping[str, torch.Tensor],
              lr: torch.Tensor, work: torch.Tensor, scalars: tuple, step: int) -> None: ...


OPTIMIZERS: PluginRegistry[type[OptimizerSettings]] = PluginRegistry("resflow.optimizers",
                                                                     "an optimiser rule")


@dataclasses.dataclass(frozen=True)
class OptimizerSettings:
    """The settings of an optimiser rule (base class: subclass it as a frozen dataclass with a ``name``).

    Class attributes a rule may set: ``name`` (its registry name), ``token_students`` (whether it trains
    students of tokens, whose embeddings the bank lays out beside the layers; default true) and
    ``per_matrix_reference`` (whether the reference loop gives it one leaf tensor per weight matrix).
    """

    name: ClassVar[str] = ""
    token_students: ClassVar[bool] = True
    per_matrix_reference: ClassVar[bool] = False

    def bind(self, bank: StudentBank, *, heads: bool) -> BankRule:
        """The rule for ``bank`` (``heads``: whether its learned heads train)."""
        raise NotImplementedError(f"{type(self).__name__} has no bind(); an optimiser rule must give one.")

    def reference(self, groups: list[dict]) -> torch.optim.Optimizer:
        """The same rule as a ``torch.optim`` optimiser over ``groups`` (the reference loop's)."""
        raise ConfigError(f"the optimiser {self.name!r} has no reference implementation; the reference loop "
                          "trains with adam or soap.")

    def items(self) -> dict[str, Any]:
        """``{"name": ..., field: value, ...}``: the nested ``train.optimizer`` keys."""
        return {"name": self.name} | {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def train_keys(self) -> dict[str, Any]:
        """What this rule adds to ``TrainConfig.to_dict()`` (run ids, fingerprints, ``run.json``): the nested
        ``{"optimizer": {...}}``.  The first two rules keep the flat keys of before the nesting (their
        ``from_train_keys`` reads them back), so earlier runs keep their ids and resume."""
        return {"optimizer": self.items()}

    @classmethod
    def from_train_keys(cls, data: dict[str, Any]) -> OptimizerSettings:
        """Take this rule's flat keys of before the nesting out of ``data`` (a saved train dict); none
        here."""
        return cls()


def register_optimizer(cls: type[OptimizerSettings]) -> type[OptimizerSettings]:
    """Class decorator: make ``cls`` known by its ``name`` (to ``--set train.optimizer.name``, presets, saved
    runs).  A name taken by another class is refused."""
    if not (isinstance(cls, type) and issubclass(cls, OptimizerSettings) and dataclasses.is_dataclass(cls)):
        raise ConfigError(f"register_optimizer takes a dataclass subclassing OptimizerSettings; got {cls!r}.")
    if not cls.name or not isinstance(cls.name, str):
        raise ConfigError(f"{cls.__name__} needs a class attribute name = '...' to be registered.")
    taken = OPTIMIZERS.data.get(cls.name)
    if taken is not None and taken.__qualname__ != cls.__qualname__:
        raise ConfigError(f"the optimiser name {cls.name!r} is taken by {taken.__qualname__}; "
                          "choose another name.")
    OPTIMIZERS[cls.name] = cls
    return cls


OPTIMIZERS.bind(register_optimizer)  # plug-ins: the entry points of "resflow.optimizers"


def _settings_class(name: Any) -> type[OptimizerSettings]:
    if name not in OPTIMIZERS:
        raise UnknownNameError.of("optimizer", name, sorted(OPTIMIZERS))
    return OPTIMIZERS[name]


def optimizer_settings(value: Any) -> OptimizerSettings:
    """An optimiser's settings from what a configuration may hold: settings already, a registered name
    (``"soap"``: its defaults) or the nested dict of :meth:`OptimizerSettings.items`."""
    if isinstance(value, OptimizerSettings):
        if type(value).name not in OPTIMIZERS:
            raise ConfigError(f"the optimiser {type(value).__name__} is not registered; decorate it with "
                              "@register_optimizer.")
        return value
    if isinstance(value, str):
        return _settings_class(value)()
    if isinstance(value, Mapping):
        fields = dict(value)
        cls = _settings_class(fields.pop("name", "adam"))
        known = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(set(fields) - known):
            owners = sorted(n for n, other in OPTIMIZERS.items()
                            if set(unknown) <= {f.name for f in dataclasses.fields(other)})
            hint = f" (set optimizer.name={owners[0]} to use {owners[0]}'s)" if owners else ""
            raise ConfigError(f"the optimiser {cls.name!r} has no field {', '.join(unknown)}; its fields are "
                              f"{', '.join(sorted(known)) or 'none'}{hint}.")
        return cls(**fields)
    raise ConfigError(f"optimizer must be an optimiser's name (one of {', '.join(sorted(OPTIMIZERS))}), its "
                      f"settings or a dict with a 'name'; got {type(value).__name__}.")


def optimizer_field_types() -> dict[str, Any]:
    """Every ``train.optimizer`` key a ``--set`` may name, with its declared type (over all registered
    rules)."""
    import typing

    out: dict[str, Any] = {"name": str}
    for cls in OPTIMIZERS.values():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            out.setdefault(f.name, hints[f.name])
    return out
