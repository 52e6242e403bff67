"""Exceptions raised by resflow.

Every error a user can trigger through the public API is a :class:`ResflowError`, so a script or
the command line can catch one type.  The messages name the argument, what was expected, what was
received (value and type) and how to fix it.
"""

from __future__ import annotations

__all__ = [
    "ResflowError",
    "ConfigError",
    "UnknownNameError",
    "ShapeError",
    "IncompatibleOptionsError",
    "TableauError",
    "FitFailedError",
    "TrainingDivergedError",
]


class ResflowError(Exception):
    """Base class of every error resflow raises on bad input."""


class ConfigError(ResflowError, ValueError):
    """An argument or configuration value is of the wrong type or out of range."""


class UnknownNameError(ConfigError):
    """A name (scheme, teacher family, correlation model, ...) is not in its registry."""


class ShapeError(ConfigError):
    """Tensors or sequences that must agree in shape or length do not."""


class IncompatibleOptionsError(ConfigError):
    """Options that are each valid but cannot be combined."""


class TableauError(ConfigError):
    """A Butcher tableau is inconsistent (not explicit, rows do not sum to c, order not met)."""


class FitFailedError(ResflowError):
    """A fit ran but failed its checks (starts disagree, a term vanished, standard errors not finite)."""


class TrainingDivergedError(ResflowError, FloatingPointError):
    """A model's training or validation loss stopped being finite (a learning rate too high, usually)."""

