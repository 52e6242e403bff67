"""Argument checks shared by the public constructors (private module).

Each check returns the (normalised) value or raises a :class:`~resflow.errors.ConfigError` whose
message names the argument, the allowed values, what was received and its type.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

from .errors import ConfigError, UnknownNameError, closest


def _received(value: Any) -> str:
    return f"got {value!r} ({type(value).__name__})"


def check_int(name: str, value: Any, *, minimum: int | None = None, hint: str = "") -> int:
    """Return ``value`` as an ``int`` if it is an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name} must be an integer; {_received(value)}. {hint}".strip())
    value = int(value)
    if minimum is not None and value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ConfigError(f"{name} must be {what}; {_received(value)}. {hint}".strip())
    return value


def check_real(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    hint: str = "",
) -> float:
    """Return ``value`` as a finite ``float`` inside the given interval."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{name} must be a real number; {_received(value)}. {hint}".strip())
    value = float(value)
    lo_ok = low is None or (value > low if low_open else value >= low)
    hi_ok = high is None or (value < high if high_open else value <= high)
    if not math.isfinite(value) or not (lo_ok and hi_ok):
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        interval = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
        raise ConfigError(f"{name} must be a finite number in {interval}; {_received(value)}. {hint}".strip())
    return value


def check_sequence(name: str, value: Any, *, example: str = "") -> tuple:
    """Return ``value`` as a tuple if it is a list or tuple (a lone string is not a sequence here)."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        hint = f" e.g. {example}" if example else ""
        raise ConfigError(f"{name} must be a tuple or list;{hint} {_received(value)}.")
    return tuple(value)


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices`` (strings)."""
    choices = list(choices)
    if not isinstance(value, str) or value not in choices:
        close = closest(value, choices)
        raise UnknownNameError(f"{name} must be one of {', '.join(map(repr, choices))}; {_received(value)}"
                               + (f"; did you mean {' or '.join(map(repr, close))}?" if close else "."))
    return value
