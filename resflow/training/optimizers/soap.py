r"""SOAP on a bank's flat buffers: Adam in the eigenbasis of Shampoo's preconditioner, for many students
at once.

SOAP (Vyas, Morwani, Zhao, Kwun, Shapira, Brandfonbrener, Janson & Kakade, "SOAP: Improving and
Stabilizing Shampoo using Adam", arXiv:2409.11321, 2024) keeps, for every weight matrix
:math:`G \in \mathbb R^{m\times n}` (its gradient), Shampoo's two Kronecker factors
:math:`L \leftarrow \beta_s L + (1-\beta_s)\,GG^\top` and
:math:`R \leftarrow \beta_s R + (1-\beta_s)\,G^\top G`
and their eigenbases :math:`Q_L, Q_R`, and runs Adam on the rotated gradient
:math:`Q_L^\top G Q_R`:

.. math:: m \leftarrow \beta_1 m + (1-\beta_1) G, \quad
          v \leftarrow \beta_2 v + (1-\beta_2) (Q_L^\top G Q_R)^{\odot 2}, \quad
          W \leftarrow W - \eta\,\frac{\sqrt{1-\beta_2^{t}}}{1-\beta_1^{t}}\,
          Q_L \frac{Q_L^\top m Q_R}{\sqrt v + \epsilon} Q_R^\top .

The first moment lives in the original coordinates, the second in the rotated ones.  The first step
only sets up the factors (exactly the reference implementation's behaviour); the bases are
recomputed every ``precondition_frequency`` steps by one step of power iteration and a QR
decomposition, the second moments reordered with them.  Vectors (the biases :math:`b_1`) are not
rotated: plain Adam with SOAP's bias correction.

Batched: the matrices of a bank with one shape -- :math:`W_1` of every stage of every layer, or
:math:`W_2`, or the learned heads -- form a **group**, gathered from the flat parameter layout by one
index (:class:`SoapLayout`) and rotated by one batched matmul, whatever the number of students and
layers.  The second moments live in the groups' order (rotated coordinates have no place in the
parameter layout), the factors and bases in one flat buffer per bank.  ``tests/test_soap.py``
checks one step against ``pytorch_optimizer.SOAP`` from the same state, and whole runs against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import torch

from ..bank import StudentBank

__all__ = ["SoapRule", "SoapNumbers", "SoapLayout", "soap_init", "soap_apply"]


class SoapNumbers(Protocol):
    """What the update reads of its settings (:class:`~resflow.training.optimizers.Soap` has them)."""

    beta1: float
    beta2: float
    eps: float
    shampoo_beta: float
    precondition_frequency: int


@dataclass(frozen=True)
class _Group:
    index: torch.Tensor  # positions of the group's elements in the flat parameter layout, matrix by matrix
    shape: tuple[int, int, int]  # (matrices, m, n)


class SoapLayout:
    """The matrix groups of a bank and where their second moments, factors and bases live.

    Groups, in order: :math:`W_1` of every layer (its students, then stages), :math:`W_2` likewise, and
    the learned heads (``heads=True``; an MSE run never trains them, and their elements then get plain
    Adam steps of a zero gradient, i.e. none).  Every element of the bank that is in no group (the
    biases, untrained heads) is a *vector* element.

    * :meth:`gather` -- a parameter-layout buffer's groups, as ``(matrices, m, n)`` copies;
    * :meth:`moments` -- views of the groups and of the vector elements of a second-moment buffer;
    * :meth:`factors` -- ``(L, R)`` views ``(matrices, m, m)``, ``(matrices, n, n)`` of a buffer of
      :attr:`size` elements (the factors, or their eigenbases).
    """

    def __init__(self, bank: StudentBank, heads: bool = True) -> None:
        self.bank, self.heads = bank, heads
        positions = torch.arange(bank.size)
        layers = bank.layers(positions)
        w1 = torch.cat([p.W1.flatten() for p in layers])
        w2 = torch.cat([p.W2.flatten() for p in layers])
        b = sum(bank.counts) * bank.stages
        groups = [_Group(w1, (b, bank.hidden, bank.width)), _Group(w2, (b, bank.width, bank.hidden))]
        if heads:
            groups.append(_Group(bank.head(positions).flatten(), (len(bank), bank.vocab, bank.width)))
        self.groups = groups
        taken = torch.zeros(bank.size, dtype=torch.bool)
        for g in groups:
            taken[g.index] = True
        self.vector_index = positions[~taken]
        self.size = sum(n * (m * m + k * k) for n, m, k in (g.shape for g in groups))
        self._device_index: dict = {}

    def _indices(self, device: torch.device) -> tuple[list[torch.Tensor], torch.Tensor]:
        if device not in self._device_index:  # moved once per device
            self._device_index[device] = ([g.index.to(device) for g in self.groups],
                                          self.vector_index.to(device))
        return self._device_index[device]

    def gather(self, flat: torch.Tensor) -> list[torch.Tensor]:
        indices, _ = self._indices(flat.device)
        return [flat.index_select(0, i).view(g.shape) for i, g in zip(indices, self.groups, strict=True)]

    def scatter(self, flat: torch.Tensor, blocks: list[torch.Tensor]) -> None:
        """Write the groups ``blocks`` into their places of the parameter-layout buffer ``flat``."""
        indices, _ = self._indices(flat.device)
        for i, block in zip(indices, blocks, strict=True):
            flat.index_copy_(0, i, block.reshape(-1))

    def vectors(self, flat: torch.Tensor) -> torch.Tensor:
        """The vector elements of a parameter-layout buffer (a copy)."""
        return flat.index_select(0, self._indices(flat.device)[1])

    def moments(self, v: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Views of a second-moment buffer: the groups' blocks, then the vector elements."""
        out, offset = [], 0
        for g in self.groups:
            size = g.shape[0] * g.shape[1] * g.shape[2]
            out.append(v[offset: offset + size].view(g.shape))
            offset += size
        return out, v[offset:]

    def factors(self, buffer: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        out, offset = [], 0
        for n, m, k in (g.shape for g in self.groups):
            left = buffer[offset: offset + n * m * m].view(n, m, m)
            offset += n * m * m
            right = buffer[offset: offset + n * k * k].view(n, k, k)
            offset += n * k * k
            out.append((left, right))
        return out


def _eigenbasis(factor: torch.Tensor) -> torch.Tensor:
    """Eigenvectors of symmetric ``factor`` (batched), by decreasing eigenvalue."""
    eye = torch.eye(factor.shape[-1], dtype=factor.dtype, device=factor.device)
    _, q = torch.linalg.eigh(factor + 1e-30 * eye)
    return torch.flip(q, dims=[-1])


def _accumulate(grads: list[torch.Tensor], factors: list[tuple[torch.Tensor, torch.Tensor]],
                beta: float) -> None:
    for g, (left, right) in zip(grads, factors, strict=True):
        left.lerp_(g @ g.mT, 1.0 - beta)
        right.lerp_(g.mT @ g, 1.0 - beta)


def soap_init(layout: SoapLayout, grad: torch.Tensor, precond: torch.Tensor, bases: torch.Tensor,
              settings: SoapNumbers) -> None:
    """The first step: the factors from the first gradient and their eigenbases (no parameter update)."""
    _accumulate(layout.gather(grad), layout.factors(precond), settings.shampoo_beta)
    for (left, right), (q_left, q_right) in zip(layout.factors(precond), layout.factors(bases), strict=True):
        q_left.copy_(_eigenbasis(left))
        q_right.copy_(_eigenbasis(right))


def _refresh(layout: SoapLayout, precond: torch.Tensor, bases: torch.Tensor, v: torch.Tensor) -> None:
    """New eigenbases by one power iteration and QR, eigenvalue estimates sorted decreasingly; the second
    moments reordered to follow them."""
    blocks, _ = layout.moments(v)
    for second, (left, right), (q_left, q_right) in zip(blocks, layout.factors(precond),
                                                        layout.factors(bases), strict=True):
        for axis, factor, q in ((1, left, q_left), (2, right, q_right)):
            product = factor @ q
            order = torch.argsort((q * product).sum(dim=-2), dim=-1, descending=True)
            index = order[:, :, None] if axis == 1 else order[:, None, :]
            second.copy_(torch.take_along_dim(second, index, dim=axis))
            q.copy_(torch.linalg.qr(torch.take_along_dim(product, order[:, None, :], dim=2)).Q)


def soap_apply(layout: SoapLayout, param: torch.Tensor, grad: torch.Tensor, m: torch.Tensor, v: torch.Tensor,
               precond: torch.Tensor, bases: torch.Tensor, lr: torch.Tensor, settings: SoapNumbers,
               work: torch.Tensor, t: int, multiplier: float) -> None:
    """One SOAP step (``t`` >= 2: the step's number, the first being :func:`soap_init`) of a bank, in place.

    ``param``, ``grad``, ``m``, ``lr`` and ``work`` are in the parameter layout (``lr``: each element's full
    learning rate, ``multiplier``: the schedule's factor; ``work``: scratch), ``v`` in the layout's
    moment order (:meth:`SoapLayout.moments`).
    """
    b1, b2 = settings.beta1, settings.beta2
    n = t - 1  # the reference implementation counts the set-up step out of its bias correction
    step_size = multiplier * (1.0 - b2**n) ** 0.5 / (1.0 - b1**n)
    grads = layout.gather(grad)
    factors = layout.factors(bases)
    seconds, second_vectors = layout.moments(v)
    for g, second, (left, right) in zip(grads, seconds, factors, strict=True):
        second.lerp_((left.mT @ g @ right).square_(), 1.0 - b2)
    second_vectors.lerp_(layout.vectors(grad).square_(), 1.0 - b2)
    m.lerp_(grad, 1.0 - b1)
    updates = [left @ ((left.mT @ first @ right).div_(second.sqrt().add_(settings.eps))) @ right.mT
               for first, second, (left, right) in zip(layout.gather(m), seconds, factors, strict=True)]
    layout.scatter(work, updates)
    work.index_copy_(0, layout._indices(work.device)[1],
                     layout.vectors(m).div_(second_vectors.sqrt().add_(settings.eps)))
    param.addcmul_(work, lr, value=-step_size)
    _accumulate(grads, layout.factors(precond), settings.shampoo_beta)
    if n > 0 and n % settings.precondition_frequency == 0:
        _refresh(layout, precond, bases, v)


class SoapRule:
    """SOAP bound to a bank (:class:`SoapLayout`): buffers ``m`` (parameter layout), ``v`` (the groups'
    rotated order), ``factors`` and ``bases`` (Shampoo's factors and their eigenbases).  Its first step only
    sets the factors up; the refresh of the bases depends on the step, so it runs eagerly (not capturable)."""

    capturable = False

    def __init__(self, settings: SoapNumbers, bank: StudentBank, *, heads: bool) -> None:
        self.settings = settings
        self.layout = SoapLayout(bank, heads=heads)
        self.buffers = {"m": bank.size, "v": bank.size,
                        "factors": self.layout.size, "bases": self.layout.size}

    def scalars(self, step: int, multiplier: float) -> tuple[float]:
        return (multiplier,)

    def apply(self, param: torch.Tensor, grad: torch.Tensor, state: Mapping[str, torch.Tensor],
              lr: torch.Tensor, work: torch.Tensor, scalars: tuple, step: int) -> None:
        if step == 0:  # SOAP's first step sets up its preconditioner only
            soap_init(self.layout, grad, state["factors"], state["bases"], self.settings)
        else:
            soap_apply(self.layout, param, grad, state["m"], state["v"], state["factors"], state["bases"], lr,
                       self.settings, work, step + 1, scalars[0])
