"""Typed ``key=value`` overrides of a configuration dataclass (private module).

Each value is parsed by the *declared type* of its field, so ``depths=2,4,8`` gives a tuple of ints and
``train.tf32=true`` a bool; an unknown key is refused with the closest valid ones and where all are listed
(``resflow run EXPERIMENT --list-keys``).  Shared by every experiment's
configuration (:class:`resflow.experiments.ExperimentConfig`, :class:`resflow.llm.LadderConfig`).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from .errors import ConfigError, UnknownNameError

__all__ = ["field_types", "typed_assignment", "config_from_dict", "flat"]


def field_types(cls) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _convert(raw: str, kind: Any, key: str) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (types.UnionType, typing.Union):  # X | None: "none" means None
        if raw.lower() == "none" and type(None) in args:
            return None
        return _convert(raw, next(a for a in args if a is not type(None)), key)
    if origin is tuple:
        return tuple(_convert(x.strip(), args[0], key) for x in raw.split(",") if x.strip())
    if kind is bool:
        if raw.lower() not in ("true", "false", "1", "0"):
            raise ValueError(raw)
        return raw.lower() in ("true", "1")
    if kind in (int, float, str):
        return kind(raw)
    raise ValueError(raw)  # pragma: no cover - every declared type is handled above


def typed_assignment(item: str, keys: dict[str, Any]) -> tuple[str, Any]:
    """``"train.steps=2000"`` -> ``("train.steps", 2000)``, typed by ``keys`` (key -> declared type)."""
    key, sep, raw = str(item).partition("=")
    key = key.strip()
    if not sep:
        raise ConfigError(f"--set expects key=value; got {item!r}.")
    if key not in keys:
        raise UnknownNameError.of("key", key, keys, listing="`resflow run EXPERIMENT --list-keys`")
    kind = keys[key]
    try:
        return key, _convert(raw.strip(), kind, key)
    except ValueError:
        name = getattr(kind, "__name__", str(kind))
        raise ConfigError(f"cannot read {key}={raw.strip()!r} as {name}.") from None


def config_from_dict(cls: type, data: dict[str, Any]) -> Any:
    """The configuration dataclass ``cls`` from its ``to_dict()`` (as ``run.json`` keeps it): lists become
    tuples, nested configurations are rebuilt (by their own ``from_dict`` where they have one: the training
    recipe reads its optimiser's keys so), absent keys take their defaults, unknown keys are refused."""
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    if unknown := sorted(set(data) - fields):
        raise ConfigError(f"a saved {cls.__name__} has keys this resflow does not know: "
                          f"{', '.join(unknown)}; "
                          "resume it with the resflow version that started it, or start a new run.")
    values = {}
    for name, value in data.items():
        kind = hints[name]
        if dataclasses.is_dataclass(kind) and isinstance(value, dict):
            value = kind.from_dict(value) if hasattr(kind, "from_dict") else config_from_dict(kind, value)
        elif isinstance(value, list):
            value = tuple(value)
        values[name] = value
    return cls(**values)


def flat(config: Any, prefix: str = "") -> dict[str, Any]:
    """``{"depths": (2, 4), "train.steps": 3000, "train.optimizer.name": "soap", ...}``: every key of a
    configuration as ``--set`` names it (its ``experiment`` left out)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value, key = getattr(config, f.name), prefix + f.name
        if hasattr(value, "items") and dataclasses.is_dataclass(value):  # an optimiser: its name and fields
            out.update({f"{key}.{k}": v for k, v in value.items().items()})
        elif dataclasses.is_dataclass(value):
            out.update(flat(value, key + "."))
        elif key != "experiment":
            out[key] = value
    return out
