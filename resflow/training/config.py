r"""The training recipe as data: :class:`TrainConfig` and the learning-rate schedule.

The study's optimiser: Adam with :math:`\mathrm{lr} = c \cdot \mathrm{base} / \sqrt{\ell}` (or
constant), constant for a fraction of training, then a decay to a final fraction (the study:
linear to 10%).  Pure Python: importing this module loads no torch, so experiment presets can be
declared (and listed by the command line) without it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import warnings
from dataclasses import dataclass
from typing import Any

from .._validate import check_choice, check_int, check_real, check_sequence
from ..errors import ConfigError
from .optimizers import Adam, OptimizerSettings, optimizer_settings
from .optimizers.builtin import LEGACY_OPTIMIZER_FIELDS

__all__ = ["TrainConfig", "lr_multiplier", "student_lr", "shared_schedule", "LEGACY_OPTIMIZER_FIELDS"]



CLASSROOM_STEPS = 3000  # TrainConfig.classroom's run: about 6 s for eight small students on one core


@dataclass(frozen=True)
class TrainConfig:
    """Frozen, validated training configuration (shared by every student of a run).

    Parameters
    ----------
    steps, batch : int
        Optimiser steps and training batch size (fresh :math:`x \\sim N(0, I)` every step).
    loss : {"mse", "kl", "ce"}
        MSE on the final normalised state, KL(teacher || student) on logits, or cross-entropy of the
        labels of classification targets (``"rhm:L"``, :mod:`resflow.training.classes`: students with a token
        embedding and a learned head).
    head : {"learned", "shared"}
        KL only: a student head learned from zero, or the teacher's head at the teacher's temperature
        (cross-entropy students always learn theirs).
    temperatures : tuple of float
        KL teacher temperatures (one student per temperature); ignored for MSE.
    lr_base, lr_scale : float
        :math:`\\mathrm{lr} = c \\cdot \\mathrm{base} / \\sqrt{\\ell}` with ``lr_scale`` = c.
    lr_depth_scaling : bool
        Divide by :math:`\\sqrt{\\ell}` (the study's scaled schedule) or not (constant lr).
    head_lr_depth_scaling : bool
        Whether a learned head's learning rate is divided by :math:`\\sqrt{\\ell}` too; the study's
        recipe does not (the head is one layer whatever the depth).
    constant_fraction : float
        Fraction of training at full learning rate.
    decay : {"linear", "geometric", "none"}
        Shape of the decay from full to ``final_lr_fraction``.
    final_lr_fraction : float
        Learning rate at the last step, as a fraction of the full one.
    optimizer : OptimizerSettings or str
        The optimiser rule and its own settings (:mod:`resflow.training.optimizers`): :class:`Adam` (the
        study's; betas 0.9, 0.999) or :class:`Soap` (Adam in the eigenbasis of Shampoo's preconditioner,
        :mod:`resflow.training.optimizers.soap`), or any registered rule; a name gives that rule's
        defaults.  On the command line: ``--set train.optimizer.name=soap --set train.optimizer.beta2=0.99``.
    eval_every : int
        Steps between test-loss evaluations (loss curves).
    eval_batches, eval_batch_size : int
        Fresh test batches per evaluation (kept separate for the bootstrap).
    checkpoint_every : int
        Steps between checkpoints (a kill loses at most this many steps).
    dtype : {"float32", "float64"}
    device : {"auto", "cpu", "cuda"}
    tf32 : bool
        GPU only: TF32 matmuls during training (switched on for the training loop, restored after).
    cuda_graphs : bool
        GPU only: replay each training step as a CUDA graph (captured after a few eager steps).

    Notes
    -----
    The defaults are the study's optimiser and schedule (Adam, :math:`2 \\cdot 6\\times10^{-4}/\\sqrt\\ell`,
    80% constant, linear decay to 10%) with 4000 steps of batch 512 instead of its 40k--80k of batch 1024: the
    base of the experiment presets (``sims/``), which set their own sizes.  A short run with them is far from
    trained, and an unconverged run shows a smooth teacher's exponent no larger than a rough one's
    (students of depths 1--8 trained 600 steps against width-32 teachers of depth 128, seed 0:
    :math:`\\alpha` 0.42 tied, 0.48 independent).  For the picture in seconds, use :meth:`classroom`.
    """

    steps: int = 4000
    batch: int = 512
    loss: str = "mse"
    head: str = "learned"
    temperatures: tuple[float, ...] = ()
    lr_base: float = 6e-4
    lr_scale: float = 2.0
    lr_depth_scaling: bool = True
    head_lr_depth_scaling: bool = False
    constant_fraction: float = 0.8
    decay: str = "linear"
    final_lr_fraction: float = 0.1
    optimizer: OptimizerSettings = Adam()
    eval_every: int = 250
    eval_batches: int = 8
    eval_batch_size: int = 2048
    checkpoint_every: int = 500
    dtype: str = "float32"
    device: str = "auto"
    tf32: bool = False
    cuda_graphs: bool = True

    def __post_init__(self) -> None:
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        for name in ("steps", "batch", "eval_every", "eval_batches", "eval_batch_size", "checkpoint_every"):
            set_(name, check_int(name, getattr(self, name), minimum=1))
        check_choice("loss", self.loss, ("mse", "kl", "ce"))
        set_("optimizer", optimizer_settings(self.optimizer))
        check_choice("head", self.head, ("learned", "shared"))
        check_choice("decay", self.decay, ("linear", "geometric", "none"))
        check_choice("dtype", self.dtype, ("float32", "float64"))
        check_choice("device", self.device, ("auto", "cpu", "cuda"))
        temps = tuple(check_real("temperatures", t, low=0.0, low_open=True)
                      for t in check_sequence("temperatures", self.temperatures, example="(0.1, 1.0)"))
        set_("temperatures", temps)
        if self.loss == "kl" and not temps:
            raise ConfigError("loss='kl' needs at least one teacher temperature, "
                              "e.g. temperatures=(0.1, 1.0).")
        if self.loss == "ce" and (self.head != "learned" or not self.optimizer.token_students):
            raise ConfigError(f"loss='ce' students learn their head and embeddings, which the optimizer "
                              f"{self.optimizer.name!r} does not lay out; "
                              "set head='learned' and optimizer='adam'.")
        for name in ("lr_base", "lr_scale"):
            set_(name, check_real(name, getattr(self, name), low=0.0, low_open=True))
        set_("constant_fraction", check_real("constant_fraction", self.constant_fraction, low=0.0, high=1.0))
        set_("final_lr_fraction", check_real("final_lr_fraction", self.final_lr_fraction, low=0.0, high=1.0,
                                             low_open=True))
        for name in ("lr_depth_scaling", "head_lr_depth_scaling", "tf32", "cuda_graphs"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false; got {getattr(self, name)!r}.")

    @classmethod
    def classroom(cls, **overrides: Any) -> TrainConfig:
        """The classroom recipe: small students trained on the CPU in seconds that already tell a smooth
        teacher from a rough one (``docs/design/classroom.md``; :func:`resflow.train` shows it whole).

        Adam at a large learning rate, :math:`32 \\cdot 6\\times10^{-4}/\\sqrt\\ell`, constant for half of
        3000 steps of batch 128, then a geometric decay to 1%; one evaluation, at the end, on two batches
        of 512.  With width-8 teachers of depth 16 and students of depths 1, 2, 4, 8 it gives, at seed 0,
        exponents 2.2 (tied) and 1.3 (independent) in about 6 s on one core -- far from the trained values
        (about 3 and 1), but already apart.  ``overrides`` replace fields; ``eval_every`` and
        ``checkpoint_every`` follow ``steps`` unless given.  The demo :func:`resflow.demos.smooth_vs_rough`
        trains with it.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ConfigError(f"unknown TrainConfig fields {unknown}; valid fields are {sorted(known)}.")
        steps = overrides.get("steps", CLASSROOM_STEPS)
        recipe = dict(steps=steps, batch=128, lr_scale=32.0, constant_fraction=0.5, decay="geometric",
                      final_lr_fraction=0.01, eval_every=steps, eval_batches=2, eval_batch_size=512,
                      checkpoint_every=steps, device="cpu")
        return cls(**(recipe | overrides))

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes``, as ``--set train.KEY=VALUE`` gives them: ``optimizer.name`` picks a rule
        (its defaults), ``optimizer.FIELD`` sets one of the rule's own fields."""
        fields = {k.partition(".")[2]: changes.pop(k) for k in list(changes) if k.startswith("optimizer.")}
        optimizer = changes.pop("optimizer", self.optimizer)
        if fields:
            current = optimizer_settings(optimizer)
            name = fields.pop("name", current.name)
            optimizer = optimizer_settings((current.items() if name == current.name else {"name": name})
                                           | fields)
        return dataclasses.replace(self, optimizer=optimizer, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (run ids, checkpoint fingerprints, ``run.json``): the fields, with the optimiser's keys
        as its rule writes them (:meth:`~resflow.training.optimizers.OptimizerSettings.train_keys`)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "optimizer"}
        return out | self.optimizer.train_keys()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """The configuration :meth:`to_dict` gave (lists as tuples); the optimiser read by its rule, flat keys
        of earlier versions included.  Unknown keys are refused."""
        data = dict(data)
        optimizer = data.pop("optimizer", "adam")
        if not isinstance(optimizer, dict):
            optimizer = optimizer_settings(optimizer).from_train_keys(data)
        known = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(set(data) - known):
            raise ConfigError("a saved TrainConfig has keys this resflow does not know: "
                              f"{', '.join(unknown)}; resume it with the resflow version that started it, "
                              "or start a new run.")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(optimizer=optimizer, **values)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def _legacy_optimizer(optimizer: Any, legacy: dict[str, Any]) -> OptimizerSettings:
    """The optimiser settings of ``optimizer`` with the flat fields of resflow <= 0.4 folded in (a rule
    without such a field ignores it, as those versions' Adam ignored SOAP's)."""
    current = optimizer_settings(optimizer)
    known = {f.name for f in dataclasses.fields(current)}
    fields = {LEGACY_OPTIMIZER_FIELDS[k]: v for k, v in legacy.items()
              if LEGACY_OPTIMIZER_FIELDS[k] in known}
    return optimizer_settings(current.items() | fields)


def _accepting_legacy_fields(cls: type) -> type:
    """``TrainConfig(adam_beta1=0.95, ...)`` and ``config.adam_beta1`` keep working, with a
    DeprecationWarning."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        legacy = {k: kwargs.pop(k) for k in list(kwargs) if k in LEGACY_OPTIMIZER_FIELDS}
        if legacy:
            warnings.warn(f"TrainConfig({', '.join(legacy)}=...) is deprecated since resflow 0.5: "
                          "give the optimiser's own settings, e.g. optimizer=Soap(beta1=0.95, beta2=0.95) "
                          "(resflow.training.optimizers).",
                          DeprecationWarning, stacklevel=2)
            kwargs["optimizer"] = _legacy_optimizer(kwargs.get("optimizer", "adam"), legacy)
        init(self, *args, **kwargs)

    def reader(old: str, new: str):
        def get(self: Any) -> Any:
            warnings.warn(f"TrainConfig.{old} is deprecated since resflow 0.5: read .optimizer.{new}.",
                          DeprecationWarning, stacklevel=2)
            default = {"precondition_frequency": 10, "shampoo_beta": 0.95}.get(new)  # what 0.4 held for Adam
            return getattr(self.optimizer, new, default)
        return property(get)

    cls.__init__ = __init__
    for old, new in LEGACY_OPTIMIZER_FIELDS.items():
        setattr(cls, old, reader(old, new))
    return cls


TrainConfig = _accepting_legacy_fields(TrainConfig)


def lr_multiplier(step: int, config: TrainConfig, total: int | None = None) -> float:
    """Schedule factor in ``(0, 1]`` at ``step`` (0-based): constant, then decay to ``final_lr_fraction``
    at the last step.  ``total`` is the student's own number of steps (default ``config.steps``): a
    student trained for half the run has the same schedule compressed to its length."""
    total = config.steps if total is None else total
    start = config.constant_fraction * total
    if config.decay == "none" or step < start:
        return 1.0
    span = max(total - 1 - start, 1.0)
    progress = min((step - start) / span, 1.0)
    if config.decay == "linear":
        return 1.0 - (1.0 - config.final_lr_fraction) * progress
    return config.final_lr_fraction**progress


def shared_schedule(short: int, long: int, config: TrainConfig) -> int:
    """How many leading steps a student trained for ``short`` steps shares with one trained for ``long``
    (``short <= long``): the steps at which both compressed schedules give the same multiplier.

    With a constant phase, that is the short schedule's constant phase (both at full rate); without
    decay (or decaying to the full rate) it is the whole of ``short``.  A student of the short length
    is the long one's state after this many steps, trained on from there with its own schedule: the
    engine forks it there instead of training it from the start.
    """
    if short > long:
        raise ValueError(f"short ({short}) must not exceed long ({long})")
    if config.decay == "none" or config.final_lr_fraction == 1.0:
        return short
    return min(math.ceil(config.constant_fraction * short), short)


def student_lr(depth: int, config: TrainConfig, *, head: bool = False) -> float:
    r"""Full learning rate of a depth-:math:`\ell` student's blocks: :math:`c\,\mathrm{base}/\sqrt\ell`
    (without the square root when ``lr_depth_scaling`` is off); of its learned head (``head=True``):
    :math:`c\,\mathrm{base}`, unless ``head_lr_depth_scaling`` is on."""
    scaled = config.head_lr_depth_scaling if head else config.lr_depth_scaling
    scale = 1.0 / math.sqrt(depth) if (scaled and config.lr_depth_scaling) else 1.0
    return config.lr_scale * config.lr_base * scale
