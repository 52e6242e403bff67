"""Exceptions raised by resflow.

Every error a user can trigger through the public API is a :class:`ResflowError`, so a script or
the command line can catch one type.  The messages name the argument, what was expected, what was
received (value and type) and how to fix it; an unknown name is answered by :meth:`UnknownNameError.of`
(the closest names first, then all of them or where they are listed).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "ResflowError",
    "ConfigError",
    "UnknownNameError",
    "ShapeError",
    "IncompatibleOptionsError",
    "TableauError",
    "FitFailedError",
    "TrainingDivergedError",
    "closest",
    "did_you_mean",
]


class ResflowError(Exception):
    """Base class of every error resflow raises on bad input."""


class ConfigError(ResflowError, ValueError):
    """An argument or configuration value is of the wrong type or out of range."""


class UnknownNameError(ConfigError):
    """A name (scheme, teacher family, correlation model, ...) is not in its registry."""

    @classmethod
    def of(cls, what: str, name: object, choices: Iterable[str], *, listing: str = "") -> UnknownNameError:
        """The error for ``name``, not among ``choices``, on one line: ``unknown {what} 'name'; did you mean
        ...? (...)`` (:func:`did_you_mean`); ``listing`` says where the whole list is (a command, a page).

        >>> print(UnknownNameError.of("experiment", "rk3", ["smooth-vs-rough", "rk2"]))
        unknown experiment 'rk3'; did you mean 'rk2'? (choose one of smooth-vs-rough, rk2).
        """
        return cls(f"unknown {what} {name!r}{did_you_mean(name, choices, listing=listing)}.")


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



# a list this short is shown whole in an error; a longer one by its closest names and where it is listed
FEW_NAMES = 10
# difflib's similarity ratio a suggestion needs (its default: one typo in a short name passes)
CLOSE_CUTOFF = 0.6
# ... and at most this much below the best one: 'train.steps' for 'train.stepz', not 'train.dtype'
CLOSE_MARGIN = 0.1


def closest(name: object, choices: Iterable[str]) -> list[str]:
    """Up to three of ``choices`` closest to ``name``, closest first (``difflib``'s ratio, at least
    :data:`CLOSE_CUTOFF` and within :data:`CLOSE_MARGIN` of the best); a dotted choice is also compared by its
    last part (``steps`` finds ``train.steps``).  None for a non-string."""
    from difflib import SequenceMatcher

    if not isinstance(name, str):
        return []
    scores = {str(c): max(SequenceMatcher(None, name, part).ratio()
                          for part in (str(c), str(c).rsplit(".", 1)[-1]))
              for c in choices}
    best = max(scores.values(), default=0.0)
    ranked = sorted((c for c, s in scores.items() if s >= max(CLOSE_CUTOFF, best - CLOSE_MARGIN)),
                    key=lambda c: -scores[c])
    return ranked[:3]


def did_you_mean(name: object, choices: Iterable[str], *, listing: str = "") -> str:
    """What follows "unknown X 'name'" in an error: the closest of ``choices`` (``difflib``) first, then every
    choice when there are at most :data:`FEW_NAMES` of them (or no ``listing``), else where they are listed.

    >>> print(did_you_mean("replicate", [f"key{i}" for i in range(20)] + ["replicates"],
    ...                    listing="`--list-keys`"))
    ; did you mean 'replicates'? (all 21 are listed by `--list-keys`)
    """
    choices = [str(c) for c in choices]
    close = closest(name, choices)
    rest = (f"choose one of {', '.join(choices)}" if len(choices) <= FEW_NAMES or not listing
            else f"all {len(choices)} are listed by {listing}")
    return f"; did you mean {' or '.join(map(repr, close))}? ({rest})" if close else f"; {rest}"

