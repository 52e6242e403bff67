"""Registries that other packages extend by entry point, as they add experiments.

A :class:`PluginRegistry` is a name -> object mapping (the optimiser rules, the measures of trained students,
the interventions of a stack, the record kinds) holding what resflow registers itself, and, from the first
time it is read, what installed packages declare under its entry-point group::

    [project.entry-points."resflow.measures"]
    layer-weight-norm = "my_package:LAYER_WEIGHT_NORM"

Each entry point is loaded once and passed to the registry's own ``register`` function, which checks it as it
checks resflow's own (a taken name, a missing method); its name must be the object's name.  A plug-in that
does not load, or is refused, is an error naming the entry point and the fix.  Registering writes through
:attr:`PluginRegistry.data` and never loads plug-ins, so resflow's own modules can register at import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from importlib.metadata import entry_points
from typing import Any, TypeVar

from .errors import ConfigError

__all__ = ["PluginRegistry"]

T = TypeVar("T")

class PluginRegistry(MutableMapping[str, T]):
    """A registry of the module docstring: ``group`` is its entry-point group, ``what`` says what one entry
    is, ``register`` (set by :meth:`bind`) checks and adds one."""

    def __init__(self, group: str, what: str) -> None:
        self.group, self.what = group, what
        self.data: dict[str, T] = {}
        self._register: Callable[[Any], Any] | None = None
        self._state = "unread"  # -> "loading" -> "loaded"

    def claim(self, name: str, value: T, *, noun: str, same: Callable[[T, T], bool] | None = None) -> T:
        """Register ``value`` as ``name`` (what a register function does once it has checked ``value``); a
        name another value holds is refused (``same(taken, value)``, default ``==``, says whether it is that
        value again).  Never loads plug-ins."""
        taken = self.data.get(name)
        if taken is not None and not (same or (lambda a, b: a == b))(taken, value):
            raise ConfigError(f"the {noun} name {name!r} is taken; choose another name.")
        self.data[name] = value
        return value

    def bind(self, register: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """Use ``register`` for plug-ins (the registry's public register function); returns it."""
        self._register = register
        return register

    def load(self) -> None:
        """Load every installed plug-in of the group (once; the registry loads them when first read)."""
        if self._state != "unread":
            return
        self._state = "loading"
        try:  # resflow's own first, so that a plug-in may build on them as it loads
            for point in sorted(entry_points(group=self.group),
                                key=lambda p: (not p.value.startswith("resflow."), p.value, p.name)):
                self._add(point)
        except BaseException:
            self._state = "unread"  # every later read names the broken plug-in again
            raise
        self._state = "loaded"

    def _add(self, point) -> None:
        where = f"the {self.group} entry point {point.name} = {point.value!r}"
        try:
            plugin = point.load()
        except Exception as exc:  # a broken plug-in: name it, and how to find it
            raise ConfigError(f"{where} does not load ({type(exc).__name__}: {exc}); "
                              "fix or uninstall the package declaring it.") from None
        name = getattr(plugin, "name", None)
        if name != point.name:
            raise ConfigError(f"{where} must be {self.what} named {point.name!r}; got {plugin!r:.80}.")
        if self.data.get(name) is plugin:  # registered as its module loaded, or on an earlier pass
            return
        try:
            self._register(plugin)
        except ConfigError as exc:
            raise ConfigError(f"{where} is refused: {exc}") from None

    # ------------------------------------------------------------------ the mapping
    def __getitem__(self, name: str) -> T:
        self.load()
        return self.data[name]

    def __iter__(self) -> Iterator[str]:
        self.load()
        return iter(list(self.data))

    def __len__(self) -> int:
        self.load()
        return len(self.data)

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self.data

    def __setitem__(self, name: str, value: T) -> None:
        self.data[name] = value

    def __delitem__(self, name: str) -> None:
        del self.data[name]

    def __repr__(self) -> str:
        return f"PluginRegistry({self.group!r}, {sorted(self.data)})"
