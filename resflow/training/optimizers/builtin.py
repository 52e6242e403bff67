r"""The engine's two rules: Adam (the study's) and SOAP (Adam in the eigenbasis of Shampoo's preconditioner).

Settings only (pure Python); their updates live with their kernels, loaded when a trainer binds them:
:class:`~resflow.training.optimizers.adam.AdamRule` and :class:`~resflow.training.optimizers.soap.SoapRule`.
Both keep the flat keys of ``TrainConfig.to_dict()`` they had before the rules were nested (``adam_beta1``,
``adam_beta2``, ``adam_eps``; SOAP adds ``optimizer: "soap"``, ``precondition_frequency``,
``shampoo_beta``), so the runs started before keep their ids, and their checkpoints resume.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..._validate import check_int, check_real
from ...errors import ConfigError
from .base import OptimizerSettings, register_optimizer

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from ..bank import StudentBank
    from .base import BankRule

__all__ = ["Adam", "Soap", "LEGACY_OPTIMIZER_FIELDS"]

# flat key -> field (Adam's, SOAP's)
_LEGACY = {"adam_beta1": "beta1", "adam_beta2": "beta2", "adam_eps": "eps"}
_SOAP_ONLY = ("precondition_frequency", "shampoo_beta")  # SOAP's flat keys, named as its fields
#: every flat optimiser key of resflow <= 0.4 -> the settings' field
#: (TrainConfig and ``--set`` still read them)
LEGACY_OPTIMIZER_FIELDS = _LEGACY | {key: key for key in _SOAP_ONLY}


def _check_moments(settings: Any) -> None:
    set_ = lambda name, value: object.__setattr__(settings, name, value)  # noqa: E731
    for name in ("beta1", "beta2"):
        set_(name, check_real(f"optimizer.{name}", getattr(settings, name),
                              low=0.0, high=1.0, high_open=True))
    set_("eps", check_real("optimizer.eps", settings.eps, low=0.0, low_open=True))


@register_optimizer
@dataclass(frozen=True)
class Adam(OptimizerSettings):
    r"""Adam (Kingma & Ba 2015) as :class:`torch.optim.Adam` computes it (no weight decay), per element."""

    name: ClassVar[str] = "adam"
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8

    def __post_init__(self) -> None:
        _check_moments(self)

    def bind(self, bank: StudentBank, *, heads: bool) -> BankRule:
        from .adam import AdamRule

        return AdamRule(self, bank.size)

    def reference(self, groups: list[dict]) -> torch.optim.Optimizer:
        import torch

        return torch.optim.Adam(groups, betas=(self.beta1, self.beta2), eps=self.eps,
                                foreach=False, fused=False)

    def train_keys(self) -> dict[str, Any]:
        return {key: getattr(self, field) for key, field in _LEGACY.items()}

    @classmethod
    def from_train_keys(cls, data: dict[str, Any]) -> Adam:
        for key in _SOAP_ONLY:  # saved experiments of before held SOAP's fields
            data.pop(key, None)
        return cls(**{field: data.pop(key) for key, field in _LEGACY.items() if key in data})


@register_optimizer
@dataclass(frozen=True)
class Soap(OptimizerSettings):
    r"""SOAP (Vyas et al. 2024, arXiv:2409.11321): Adam on the gradient rotated into the eigenbases of
    Shampoo's Kronecker factors, recomputed every ``precondition_frequency`` steps; ``shampoo_beta`` is the
    factors' decay.  Students of tokens are not laid out for it (their embeddings are not a layer's
    matrices).  The default betas are Adam's (0.9, 0.999), as every SOAP run had before the rules were
    nested (the cpu recipe sets 0.95, 0.95; the reference implementation's defaults)."""

    name: ClassVar[str] = "soap"
    token_students: ClassVar[bool] = False
    per_matrix_reference: ClassVar[bool] = True
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    shampoo_beta: float = 0.95
    precondition_frequency: int = 10

    def __post_init__(self) -> None:
        _check_moments(self)
        object.__setattr__(self, "shampoo_beta",
                           check_real("optimizer.shampoo_beta", self.shampoo_beta,
                                      low=0.0, high=1.0, high_open=True))
        object.__setattr__(self, "precondition_frequency",
                           check_int("optimizer.precondition_frequency", self.precondition_frequency,
                                     minimum=1))

    def bind(self, bank: StudentBank, *, heads: bool) -> BankRule:
        from .soap import SoapRule

        return SoapRule(self, bank, heads=heads)

    def reference(self, groups: list[dict]) -> torch.optim.Optimizer:
        try:
            from pytorch_optimizer import SOAP
        except ImportError:  # pragma: no cover - the dev extra has it
            raise ConfigError("the reference loop's SOAP is pytorch_optimizer.SOAP: "
                              "pip install pytorch-optimizer (or the dev extra).") from None
        return SOAP(groups, betas=(self.beta1, self.beta2), shampoo_beta=self.shampoo_beta, eps=self.eps,
                    weight_decay=0.0, precondition_frequency=self.precondition_frequency, correct_bias=True)

    def train_keys(self) -> dict[str, Any]:
        return ({"optimizer": self.name} | {key: getattr(self, field) for key, field in _LEGACY.items()}
                | {key: getattr(self, key) for key in _SOAP_ONLY})

    @classmethod
    def from_train_keys(cls, data: dict[str, Any]) -> Soap:
        fields = {field: data.pop(key) for key, field in _LEGACY.items() if key in data}
        fields |= {key: data.pop(key) for key in _SOAP_ONLY if key in data}
        return cls(**fields)
