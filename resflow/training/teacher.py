r"""Teachers: the study's target functions, in four families that differ only in roughness along depth.

Every teacher is a depth-:math:`L` residual stack of the study's block
(:class:`~resflow.MLPField`) with branch scale :math:`1/\sqrt L` (the study's
":math:`W_2` scaled by :math:`1/\sqrt{128}`"), input :math:`h_0 = \mathrm{rmsnorm}(x)` and output
:math:`\mathrm{rmsnorm}(h_L)`, plus a bias-free linear head for logits.  The families set how each
weight entry is correlated across the :math:`L` layers (:mod:`resflow.correlation`):

==============  ==============================================  ================================
family          layer weights                                   reading
==============  ==============================================  ================================
independent     every layer drawn separately                    rough target (ensemble regime)
tied            all layers share one draw                       Euler steps of a smooth ODE
correlated(ρ)   :math:`\sqrt\rho\,\text{shared}                 interpolates; ρ=0, 1 are the above
                + \sqrt{1-\rho}\,\text{own}`
fractional(H)   fGn along depth (increments of fBm)             H=1/2 i.i.d., H→1 smooth
grouped(K, ρ)   K contiguous groups: correlated ρ within, own   K functional groups (composition
                draws between (ρ = 1: tied within a group)      of K maps); K=1 is correlated(ρ)
==============  ==============================================  ================================

Each entry keeps the marginal variance of PyTorch's default initialisation in every family.
The same seed gives the same teacher bit for bit on the CPU (weights are drawn on the CPU);
``correlated(0)`` and ``independent`` are the same teacher, and so are ``correlated(1)`` and ``tied``.

Reference: Liu, Kangaslahti, Liu & Gore, "Inverse Depth Scaling From Most Layers Being Similar",
arXiv:2602.05970 (ICML 2026), toy model.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .._random import SeedLike, as_generator, unit_draw
from .._validate import check_choice, check_int, check_real
from ..dynamics.fields import MLPField, mlp_init_std, mlp_parameter_shapes, rmsnorm
from ..dynamics.stack import ResidualStack
from ..dynamics.stepper import integrate_fixed
from ..dynamics.tableau import TABLEAUX
from ..errors import ConfigError, IncompatibleOptionsError, UnknownNameError, closest
from ..noise.correlation import DepthCorrelation, Equicorrelated, Fractional, Grouped, parse_correlation

__all__ = ["TEACHER_FAMILIES", "TeacherConfig", "Teacher", "shared_teacher_depth"]

TEACHER_FAMILIES = ("independent", "tied", "correlated", "fractional", "grouped")


@dataclass(frozen=True)
class TeacherConfig:
    """Frozen, validated configuration of a :class:`Teacher`.

    Parameters
    ----------
    family : {"independent", "tied", "correlated", "fractional", "grouped"}
    width : int
        Residual width :math:`d` (study: 32).
    depth : int
        Number of layers :math:`L` (study: 128).
    hidden : int, optional
        MLP hidden width, default :math:`4d`.
    vocab : int
        Size of the output vocabulary of :meth:`Teacher.logits` (study: 128).
    rho : float, optional
        Layer correlation :math:`\\rho \\in [0, 1]`; required for ``correlated``; for ``grouped`` the
        correlation within a group (default 1: tied within each group).
    groups : int, optional
        Number of groups :math:`K \\le L`; required for (and only for) ``grouped``.
    hurst : float, optional
        Hurst index :math:`H \\in (0, 1)`; required for (and only for) ``fractional``.
    init : {"uniform", "gaussian"}
        Marginal shape of the weights: PyTorch's default uniform init, or Gaussian with the same
        variance.  ``fractional`` needs ``"gaussian"``.
    branch_scale : float, optional
        Residual branch scale, default :math:`1/\\sqrt{L}`.
    scheme : str
        Block scheme from :data:`resflow.TABLEAUX` (study: ``"euler"``).
    seed : int
        Seed of every random draw of the teacher.
    """

    family: str = "independent"
    width: int = 32
    depth: int = 128
    hidden: int | None = None
    vocab: int = 128
    rho: float | None = None
    hurst: float | None = None
    groups: int | None = None
    init: str = "uniform"
    branch_scale: float | None = None
    scheme: str = "euler"
    seed: int = 0

    def __post_init__(self) -> None:
        check_choice("family", self.family, TEACHER_FAMILIES)
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        set_("width", check_int("width", self.width, minimum=1))
        set_("depth", check_int("depth", self.depth, minimum=1))
        set_("hidden", 4 * self.width if self.hidden is None else check_int("hidden", self.hidden, minimum=1))
        set_("vocab", check_int("vocab", self.vocab, minimum=1))
        set_("seed", check_int("seed", self.seed, minimum=0))
        check_choice("init", self.init, ("uniform", "gaussian"))
        check_choice("scheme", self.scheme, tuple(TABLEAUX))
        if self.family == "correlated":
            if self.rho is None:
                raise ConfigError(
                    "the 'correlated' family needs rho in [0, 1], e.g. TeacherConfig('correlated', rho=0.9)."
                )
            set_("rho", check_real("rho", self.rho, low=0.0, high=1.0))
        elif self.family == "grouped":
            if self.groups is None:
                raise ConfigError("the 'grouped' family needs groups (K), "
                                  "e.g. TeacherConfig('grouped', groups=4).")
            set_("groups", check_int("groups", self.groups, minimum=1))
            if self.groups > self.depth:
                raise ConfigError(f"groups ({self.groups}) cannot exceed the teacher's depth ({self.depth}).")
            set_("rho", 1.0 if self.rho is None else check_real("rho", self.rho, low=0.0, high=1.0))
        elif self.rho is not None:
            raise IncompatibleOptionsError(
                f"rho is only for family='correlated' or 'grouped'; "
                f"got rho={self.rho!r} with family={self.family!r}."
            )
        if self.family != "grouped" and self.groups is not None:
            raise IncompatibleOptionsError(
                f"groups is only for family='grouped'; "
                f"got groups={self.groups!r} with family={self.family!r}.")
        if self.family == "fractional":
            if self.hurst is None:
                raise ConfigError(
                    "the 'fractional' family needs hurst in (0, 1), "
                    "e.g. TeacherConfig('fractional', hurst=0.75, init='gaussian')."
                )
            set_("hurst", check_real("hurst", self.hurst, low=0.0, high=1.0, low_open=True, high_open=True))
            if self.init != "gaussian":
                raise IncompatibleOptionsError(
                    "fractional teachers are Gaussian by construction (fGn along depth); "
                    f"pass init='gaussian' (got init={self.init!r})."
                )
        elif self.hurst is not None:
            raise IncompatibleOptionsError(
                f"hurst is only for family='fractional'; "
                f"got hurst={self.hurst!r} with family={self.family!r}."
            )
        if self.branch_scale is None:
            set_("branch_scale", 1.0 / math.sqrt(self.depth))
        else:
            set_("branch_scale", check_real("branch_scale", self.branch_scale, low=0.0, low_open=True))

    @property
    def correlation(self) -> DepthCorrelation:
        """How each weight entry is correlated across layers (the object the spec string parses to)."""
        if self.family == "fractional":
            return Fractional(self.hurst)
        if self.family == "grouped":
            return Grouped(self.groups, self.rho)
        return Equicorrelated({"independent": 0.0, "tied": 1.0}.get(self.family, self.rho))

    @property
    def label(self) -> str:
        """Short spec: ``independent``, ``tied``, ``correlated:0.9``, ``fractional:0.75``, ``grouped:4``: the
        family's own name, or the label of its correlation (what :meth:`from_spec` parses back)."""
        return self.family if self.family in ("independent", "tied") else self.correlation.label

    @property
    def n_groups(self) -> int:
        """The teacher's number of functional groups K (1 unless ``grouped``)."""
        return getattr(self.correlation, "groups", 1)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TeacherConfig:
        """Build from a dict; unknown keys raise :class:`~resflow.errors.ConfigError`."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown TeacherConfig keys {unknown}; valid keys are {sorted(known)}.")
        return cls(**values)

    @classmethod
    def from_spec(cls, spec: str, **overrides: Any) -> TeacherConfig:
        """Parse ``"independent"``, ``"tied"``, ``"correlated:RHO"``, ``"fractional:H"``, ``"grouped:K"``
        or ``"grouped:K:RHO"``.

        A fractional spec defaults to ``init="gaussian"``.
        """
        if not isinstance(spec, str):
            raise ConfigError(f"teacher spec must be a string such as 'correlated:0.9'; got {spec!r}.")
        family = spec.partition(":")[0]
        close = closest(family, TEACHER_FAMILIES)
        unknown = UnknownNameError(f"unknown teacher spec {spec!r}"
                                   + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else "")
                                   + "; use 'independent', 'tied', 'correlated:RHO', "
                                   "'fractional:H' or 'grouped:K[:RHO]' "
                                   "(or a grammar, 'rhm:L', with train.loss=ce).")
        if family not in TEACHER_FAMILIES:
            raise unknown
        try:
            correlation = parse_correlation(spec)  # the one parser of spec strings (names a bad number)
        except UnknownNameError:
            raise unknown from None
        values: dict[str, Any] = {"family": family}
        if isinstance(correlation, Grouped):
            values |= {"groups": correlation.groups, "rho": correlation.rho}
        elif isinstance(correlation, Fractional):
            values |= {"hurst": correlation.hurst, "init": "gaussian"}
        elif family == "correlated":
            values["rho"] = correlation.rho
        values.update(overrides)
        return cls.from_dict(values)


class Teacher(nn.Module):
    r"""A frozen teacher network (target function) built from a :class:`TeacherConfig`.

    Parameters
    ----------
    config : TeacherConfig or str, optional
        The configuration, or a spec string for :meth:`TeacherConfig.from_spec`.
    **overrides
        Fields of :class:`TeacherConfig` (e.g. ``depth=32``, ``seed=3``).

    Examples
    --------
    >>> import resflow
    >>> teacher = resflow.Teacher("correlated:0.9", width=16, depth=32, seed=0)
    >>> x = teacher.sample_inputs(4, seed=1)
    >>> teacher(x).shape, teacher.hidden_states(x).shape
    (torch.Size([4, 16]), torch.Size([33, 4, 16]))
    """

    def __init__(self, config: TeacherConfig | str | None = None, **overrides: Any) -> None:
        super().__init__()
        if config is None:
            config = TeacherConfig.from_dict(overrides)
        elif isinstance(config, str):
            config = TeacherConfig.from_spec(config, **overrides)
        elif isinstance(config, TeacherConfig):
            if overrides:
                config = dataclasses.replace(config, **overrides)
        else:
            raise ConfigError("config must be a TeacherConfig or a spec string; "
                              f"got {type(config).__name__}.")
        self.config = config
        gen = as_generator(config.seed)
        std = mlp_init_std(config.width, config.hidden)
        layer_params = {
            name: config.correlation.sample(
                config.depth, shape, seed=gen, base=config.init, dtype=torch.float32
            )
            * std[name]
            for name, shape in mlp_parameter_shapes(config.width, config.hidden).items()
        }
        n_fields = 1 if config.family == "tied" else config.depth
        fields = [
            MLPField.from_parameters(layer_params["W1"][i], layer_params["b1"][i], layer_params["W2"][i])
            for i in range(n_fields)
        ]
        self.stack = ResidualStack(
            fields[0] if config.family == "tied" else fields,
            depth=config.depth,
            scheme=config.scheme,
            branch_scale=config.branch_scale,
        )
        head_std = 1.0 / math.sqrt(3.0 * config.width)
        self.head = nn.Parameter(unit_draw((config.vocab, config.width), gen, config.init, torch.float32)
                                 * head_std)
        self.requires_grad_(False)

    @property
    def width(self) -> int:
        return self.config.width

    @property
    def depth(self) -> int:
        return self.config.depth

    def sample_inputs(self, batch: int, *, seed: SeedLike = None) -> torch.Tensor:
        """Inputs :math:`x \\sim N(0, I_d)`, shape ``(batch, width)``, on the teacher's device."""
        batch = check_int("batch", batch, minimum=1)
        x = torch.randn((batch, self.width), generator=as_generator(seed), dtype=self.head.dtype)
        return x.to(self.head.device)

    def _check_input(self, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor):
            raise ConfigError(f"x must be a torch.Tensor of shape (batch, {self.width}); "
                              f"got {type(x).__name__}.")
        if x.shape[-1] != self.width:
            raise ConfigError(
                f"x must have last dimension {self.width} (the teacher width); got shape {tuple(x.shape)}."
            )

    def hidden_states(self, x: torch.Tensor) -> torch.Tensor:
        r"""All residual-stream states :math:`h_0 = \mathrm{rmsnorm}(x), \dots, h_L`; shape
        ``(L + 1, *x.shape)``."""
        self._check_input(x)
        return self.stack(rmsnorm(x), return_states=True)

    def propagate(self, h: torch.Tensor, start: int) -> torch.Tensor:
        r"""The state :math:`h_L` reached from state ``h`` (shape ``(..., width)``) entering layer ``start``
        (``start = L``: ``h`` itself); with ``start = 0`` and :math:`h = h_0` it is the stack's output."""
        start = check_int("start", start, minimum=0)
        if start > self.depth:
            raise ConfigError(f"start must be a layer index 0..{self.depth}; got {start}.")
        return integrate_fixed(self.stack.layer_fields[start:], h, step=self.stack.step_size,
                               tableau=self.stack.tableau)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r"""The MSE target :math:`\mathrm{rmsnorm}(h_L)`, shape ``x.shape``."""
        self._check_input(x)
        return rmsnorm(self.stack(rmsnorm(x)))

    def logits(self, x: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
        r"""KL targets :math:`\mathrm{head}(\mathrm{rmsnorm}(h_L)) / T`, shape ``(*x.shape[:-1], vocab)``."""
        temperature = check_real("temperature", temperature, low=0.0, low_open=True)
        return (self.forward(x) @ self.head.T) / temperature

    def extra_repr(self) -> str:
        return (f"family={self.config.label!r}, width={self.width}, depth={self.depth}, "
                f"seed={self.config.seed}")


def shared_teacher_depth(teachers: Mapping[Hashable, object]) -> float:
    """The depth of the run's teachers when they are flows of one depth (:class:`Teacher`); ``inf``
    otherwise."""
    if not all(isinstance(t, Teacher) for t in teachers.values()):
        return math.inf
    depths = {t.depth for t in teachers.values()}
    return float(depths.pop()) if len(depths) == 1 else math.inf
