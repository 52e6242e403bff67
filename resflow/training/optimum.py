r"""A student's optimum by a route independent of training: full-batch L-BFGS in float64 on a fixed sample.

Ordinary training (:mod:`resflow.training.driver`) draws fresh inputs every step and stops after a budget of
steps; the loss it reaches bounds the loss the student's architecture can reach from above, by an unknown
margin.  This module reaches, for one student, the lowest loss its architecture attains on a teacher by
another route: the parameters :math:`(W_1, b_1, W_2)` of every layer in float64, the loss of the recipe
(:func:`resflow.training.block.mse_loss` of :func:`~resflow.training.block.student_forward`, defined once)
on a **fixed sample** of ``samples`` Gaussian inputs, minimised by L-BFGS with a strong-Wolfe line search
(``torch.optim.LBFGS``; Nocedal & Wright, *Numerical Optimization*, ch. 7) from a given start -- a trained
student, or a fresh draw -- until the loss has settled or the evaluations run out.  The loss is then **scored
on fresh inputs** (``test_samples``, another seed): a sample's optimum fits that sample, so its loss on the
sample (``train_loss``) lies below what it reaches on fresh data, and the gap says how much.

**Settled** (:attr:`Optimum.settled`): over the last ``window`` evaluations the loss on the sample fell by
less than ``settle`` of itself, *and* the gradient's norm is at most ``gradient_tolerance`` times the loss
over the parameters' norm (a relative gradient: the change of the loss, as a share of itself, per relative
change of the parameters).  Both are reported, settled or not; several starts reaching the same loss is the
evidence that the optimum, not a start's own basin, was reached (:mod:`resflow.workflows.optimum`).

Only MSE students of flow teachers (the toy model's regression runs); plain students (no weight groups).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch

from .._validate import check_int, check_real
from ..dynamics.tableau import get_tableau
from ..errors import ConfigError
from .block import mse_loss, student_forward

__all__ = ["OptimumSettings", "Optimum", "reach_optimum", "OPTIMISED"]

OPTIMISED = ("W1", "b1", "W2")  # an MSE student's parameters (the head is the KL runs')


@dataclass(frozen=True, kw_only=True)
class OptimumSettings:
    """How an optimum is reached (module docstring): the fixed sample's size and seed, the fresh inputs it is
    scored on, the evaluations allowed, L-BFGS's memory, and when the loss counts as settled."""

    samples: int = 2**14
    test_samples: int = 2**16
    evaluations: int = 2000
    history: int = 100
    settle: float = 1e-3
    window: int = 300
    gradient_tolerance: float = 1e-3
    seed: int = 12345

    def __post_init__(self) -> None:
        for name, low in (("samples", 16), ("test_samples", 16), ("evaluations", 1), ("history", 1),
                          ("window", 1), ("seed", 0)):
            object.__setattr__(self, name, check_int(name, getattr(self, name), minimum=low))
        for name in ("settle", "gradient_tolerance"):
            object.__setattr__(self, name, check_real(name, getattr(self, name), low=0.0, low_open=True))


@dataclass(frozen=True, kw_only=True)
class Optimum:
    """What :func:`reach_optimum` reached from one start.

    ``start_loss`` and ``test_loss`` are on the fresh inputs (before and after), ``train_loss`` on the fixed
    sample; ``last_fall`` the share of the sample loss lost over the last ``window`` evaluations;
    ``relative_gradient`` :math:`\\|g\\|\\,\\|\\theta\\| / L`; ``parameters`` the reached ones (float64).
    """

    start_loss: float
    test_loss: float
    train_loss: float
    gradient_norm: float
    relative_gradient: float
    evaluations: int
    last_fall: float
    settled: bool
    parameters: dict[str, torch.Tensor]


def _inputs(width: int, n: int, seed: int) -> torch.Tensor:
    return torch.randn((n, width), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def reach_optimum(teacher, parameters: dict[str, torch.Tensor], *, scheme: str = "euler",
                  settings: OptimumSettings | None = None) -> Optimum:
    """Minimise a student's MSE loss on ``teacher`` from ``parameters`` (``W1``, ``b1``, ``W2`` as
    :func:`~resflow.training.block.init_student` lays them out) by full-batch L-BFGS in float64 (module
    docstring).  The teacher is copied, not changed."""
    settings = settings or OptimumSettings()
    missing = [name for name in OPTIMISED if name not in parameters]
    if missing:
        raise ConfigError(f"parameters must hold {', '.join(OPTIMISED)} (a student's, as init_student lays "
                          f"them out); missing {', '.join(missing)}.")
    tableau = get_tableau(scheme)
    target = copy.deepcopy(teacher).double()
    width = target.width
    x = _inputs(width, settings.samples, settings.seed)
    x_test = _inputs(width, settings.test_samples, settings.seed + 1)
    with torch.no_grad():
        y, y_test = target(x), target(x_test)
    shapes = {name: tuple(parameters[name].shape) for name in OPTIMISED}
    flat = torch.cat([parameters[name].detach().double().reshape(-1) for name in OPTIMISED]).clone()
    flat.requires_grad_(True)

    def unflat(v: torch.Tensor) -> dict[str, torch.Tensor]:
        out, i = {}, 0
        for name, shape in shapes.items():
            size = math.prod(shape)
            out[name] = v[i:i + size].reshape(shape)
            i += size
        return out

    def loss_on(v: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return mse_loss(student_forward(unflat(v), inputs, tableau), targets)

    with torch.no_grad():
        start_loss = float(loss_on(flat, x_test, y_test))
    optimiser = torch.optim.LBFGS([flat], lr=1.0, max_iter=min(50, settings.evaluations),
                                  max_eval=min(50, settings.evaluations), history_size=settings.history,
                                  tolerance_grad=0.0, tolerance_change=0.0, line_search_fn="strong_wolfe")
    history: list[tuple[int, float]] = []  # (evaluations so far, sample loss)
    count = 0

    def closure() -> torch.Tensor:
        nonlocal count
        optimiser.zero_grad()
        loss = loss_on(flat, x, y)
        loss.backward()
        count += 1
        return loss

    last_fall = math.inf
    while count < settings.evaluations:
        before = count
        optimiser.step(closure)
        with torch.no_grad():
            history.append((count, float(loss_on(flat, x, y))))
        earlier = [loss for n, loss in history if n <= count - settings.window]
        if earlier:
            last_fall = (earlier[-1] - history[-1][1]) / history[-1][1]
        if earlier and last_fall < settings.settle or count == before:
            break
    with torch.no_grad():
        train_loss, test_loss = float(loss_on(flat, x, y)), float(loss_on(flat, x_test, y_test))
    value = loss_on(flat, x, y)
    (gradient,) = torch.autograd.grad(value, flat)
    gradient_norm = float(gradient.norm())
    relative = gradient_norm * float(flat.detach().norm()) / train_loss if train_loss > 0 else math.inf
    settled = bool(last_fall < settings.settle and relative <= settings.gradient_tolerance)
    reached = {name: value.detach().clone() for name, value in unflat(flat.detach()).items()}
    return Optimum(start_loss=start_loss, test_loss=test_loss, train_loss=train_loss,
                   gradient_norm=gradient_norm, relative_gradient=relative, evaluations=count,
                   last_fall=float(last_fall), settled=settled, parameters=reached)
