"""The grammar of classification target specs (``"rhm:L"``, ``"rhm:L:v8:m4:c8:s2"``), below every subpackage.

One parser, read by the training engine (:mod:`resflow.training.classes`, which builds the grammar) and
by the analyses of its records (:mod:`resflow.fitting.hierarchy`), which know a target only by its spec.
"""

from __future__ import annotations

from typing import Any

from .errors import ConfigError, UnknownNameError

__all__ = ["RHM_DEFAULTS", "is_class_target", "parse_rhm_spec"]

RHM_DEFAULTS = {"vocab": 8, "synonyms": 4, "classes": 8, "branching": 2}
_KEYS = {"v": "vocab", "m": "synonyms", "c": "classes", "s": "branching"}


def is_class_target(spec: object) -> bool:
    """Whether a target spec names a classification target (``"rhm:..."``)."""
    return isinstance(spec, str) and spec.partition(":")[0] == "rhm"


def parse_rhm_spec(spec: str) -> dict[str, Any]:
    """``"rhm:L"`` or ``"rhm:L:v8:m4:c8:s2"`` (any of the keys v, m, c, s) -> the grammar's ``depth``,
    ``vocab``, ``synonyms``, ``classes`` and ``branching`` (defaults :data:`RHM_DEFAULTS`), unvalidated
    beyond being integers (:class:`resflow.training.hierarchy.HierarchyConfig` checks them)."""
    parts = spec.split(":") if isinstance(spec, str) else []
    example = "use 'rhm:L' (L the hierarchy depth) or 'rhm:L:v8:m4:c8:s2'"
    if len(parts) < 2 or parts[0] != "rhm":
        raise UnknownNameError(f"unknown classification target {spec!r}; {example}.")
    values: dict[str, Any] = dict(RHM_DEFAULTS)
    keys = [part[:1] for part in parts[2:]]
    if (not parts[1].isdigit()
            or any(k not in _KEYS or not part[1:].isdigit() for k, part in zip(keys, parts[2:], strict=True))
            or len(set(keys)) != len(keys)):
        raise ConfigError(f"target {spec!r}: cannot read it (digits only, each key once); {example}.")
    values["depth"] = int(parts[1])
    values.update({_KEYS[part[:1]]: int(part[1:]) for part in parts[2:]})
    return values
