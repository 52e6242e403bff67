"""Deprecated since resflow 0.5: Adam on a flat buffer moved to :mod:`resflow.training.optimizers.adam`."""

import warnings

from .optimizers.adam import AdamRule, adam_apply, adam_scalars

warnings.warn("resflow.training.optim moved to resflow.training.optimizers.adam; import from there.",
              DeprecationWarning, stacklevel=2)

__all__ = ["AdamRule", "adam_apply", "adam_scalars"]
