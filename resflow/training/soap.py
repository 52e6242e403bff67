"""Deprecated since resflow 0.5: batched SOAP moved to :mod:`resflow.training.optimizers.soap`."""

import warnings

from .optimizers.soap import SoapLayout, SoapRule, soap_apply, soap_init

warnings.warn("resflow.training.soap moved to resflow.training.optimizers.soap; import from there.",
              DeprecationWarning, stacklevel=2)

__all__ = ["SoapLayout", "SoapRule", "soap_apply", "soap_init"]
