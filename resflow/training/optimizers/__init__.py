"""Optimiser rules: the ``train.optimizer`` settings and what the engine asks of them (:mod:`.base`).

Two are built in (:mod:`.builtin`): :class:`Adam` and :class:`Soap`; :func:`register_optimizer` adds one.
Importing this package loads no torch.
"""

from .base import (
    OPTIMIZERS,
    BankRule,
    OptimizerSettings,
    optimizer_field_types,
    optimizer_settings,
    register_optimizer,
)
from .builtin import Adam, Soap

__all__ = ["OPTIMIZERS", "BankRule", "OptimizerSettings", "optimizer_field_types", "optimizer_settings",
           "register_optimizer", "Adam", "Soap"]
