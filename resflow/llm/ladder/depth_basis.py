r"""An architecture knob for how depth is used: decoder layers whose weights are smooth functions of depth.

With ``depth_basis = K`` every parameter of decoder layer :math:`l` of a depth-:math:`\ell` model is

.. math::  W_l = \sum_{k < K} P_k(x_l)\, C_k, \qquad x_l = 2\,\frac{l + 1/2}{\ell} - 1 \in (-1, 1),

with :math:`P_k` the Legendre polynomials and :math:`C_k` trained coefficients shared by every layer.
``K = 1``
is one block repeated (weights tied across depth, the toys' smooth teacher); ``K = 2`` lets every weight
vary linearly along depth; ``K`` ≥ ℓ spans any weights (independent layers, reparametrised).  The layers start
tied (:math:`C_0` the first layer's initialisation, the other coefficients zero), so any variation along depth
is learned.  A discretised flow reads this as a smooth vector field (the procedural reading); independent
layers leave room for the ensemble reading.  What the knob costs is counted: a model has
:math:`K \times` one layer's parameters in its decoder, whatever its depth.

:class:`DepthBasisModel` wraps a ladder model (HF Llama) and runs it with the layer weights computed from the
coefficients (``torch.func.functional_call``); :meth:`DepthBasisModel.materialize` writes them into the
wrapped
model, which is then an ordinary HF model that every probe, lesion and pruning reads.
"""

from __future__ import annotations

import numpy as np
import torch

from .model import decoder_layers

__all__ = ["DepthBasisModel", "legendre_basis", "unwrap"]


def legendre_basis(depth: int, order: int) -> np.ndarray:
    """``(depth, order)``: Legendre polynomial ``k`` at the centre of layer ``l`` mapped into (-1, 1)."""
    x = 2.0 * (np.arange(depth) + 0.5) / depth - 1.0
    return np.polynomial.legendre.legvander(x, order - 1)


class DepthBasisModel(torch.nn.Module):
    """A ladder model whose decoder layers' weights are ``order`` Legendre coefficients along depth (module
    docstring).  Called like the wrapped model (``input_ids``, ``use_cache``) and returns its output."""

    def __init__(self, model, order: int) -> None:
        super().__init__()
        if not isinstance(order, int) or order < 1:
            raise ValueError(f"order must be an int of at least 1; got {order!r}.")
        self.inner = model
        self.order = order
        layers = decoder_layers(model)
        self.register_buffer("basis", torch.tensor(legendre_basis(len(layers), order), dtype=torch.float32))
        self.names = [name for name, _ in layers[0].named_parameters()]
        self.layer_ndims = [p.ndim for p in layers[0].parameters()]
        self.coefficients = torch.nn.ParameterList()
        for first in layers[0].parameters():
            start = torch.zeros(order, *first.shape, dtype=first.dtype)
            start[0] = first.detach()
            self.coefficients.append(torch.nn.Parameter(start))
        for layer in layers:  # the layers' own weights are overwritten at every call: not trained
            for p in layer.parameters():
                p.requires_grad_(False)

    def undecayed_parameters(self) -> list[torch.nn.Parameter]:
        """The coefficients of vectors (the norms' weights): not weight-decayed, as the layers' own are
        not."""
        return [c for c, ndim in zip(self.coefficients, self.layer_ndims, strict=True) if ndim < 2]

    def layer_weights(self) -> dict[str, torch.Tensor]:
        """Every decoder layer's parameters as the wrapped model names them."""
        out = {}
        for name, coefficient in zip(self.names, self.coefficients, strict=True):
            values = torch.tensordot(self.basis.to(coefficient.dtype), coefficient, dims=1)
            for layer, value in enumerate(values):
                out[f"model.layers.{layer}.{name}"] = value
        return out

    def forward(self, **kwargs):
        return torch.func.functional_call(self.inner, self.layer_weights(), args=(), kwargs=kwargs,
                                          strict=False)

    @torch.no_grad()
    def materialize(self):
        """The wrapped model with the computed weights written in (an ordinary HF model)."""
        params = dict(self.inner.named_parameters())
        for name, value in self.layer_weights().items():
            params[name].copy_(value)
        return self.inner

    def parameter_count(self) -> int:
        """Trained parameters without the embedding: the coefficients and the final norm."""
        norm = sum(p.numel() for p in self.inner.model.norm.parameters())
        return sum(c.numel() for c in self.coefficients) + norm


def unwrap(model):
    """The HF model itself: materialised from a :class:`DepthBasisModel`, or ``model`` as it is."""
    return model.materialize() if isinstance(model, DepthBasisModel) else model
