"""A bank: every student of one scheme, their parameters in one flat buffer, laid out layer by layer.

Students are sorted deepest first; layer ``l`` holds the ``n_l`` students deeper than ``l`` (a
prefix of the bank), so no parameter is padding and every layer is one batched matmul.  The flat
buffer is ``[layer 0: W1, b1, W2 | layer 1: ... | head | embedding]`` (the embedding, of students of
tokens only: :mod:`resflow.training.classes`); :meth:`StudentBank.layers` gives the
per-layer views of any buffer with that layout (parameters, gradients, Adam moments, learning
rates).  Initial values come from :func:`resflow.training.block.init_student`, one student at a time.

A bank of group-structured students (:attr:`~resflow.training.block.StudentSpec.weight_groups`) keeps a
copy of a shared weight in every layer of its group; :meth:`StudentBank.sum_shared_gradients` replaces
each copy's gradient by the sum over the group's copies -- the gradient of the shared weight -- so copies
that start equal stay equal under Adam (elementwise).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ..errors import ConfigError
from .block import StudentSpec, init_student, layer_groups
from .kernels import LayerParams

__all__ = ["StudentBank"]


class StudentBank:
    """Layout of the students of one scheme (no tensors of its own but the initial buffer)."""

    def __init__(self, specs: list[StudentSpec], width: int, hidden: int, vocab: int,
                 inputs: int = 0) -> None:
        schemes = {s.scheme for s in specs}
        if len(schemes) != 1:
            raise ConfigError(f"a bank holds one scheme, got {sorted(schemes)}")
        if len({s.weight_groups == 0 for s in specs}) != 1:
            raise ConfigError("a bank holds plain or group-structured students, not both")
        self.tableau = specs[0].tableau
        self.a, self.b, _ = self.tableau.as_floats()
        self.specs = sorted(specs, key=StudentSpec.sort_key)
        self.width, self.hidden, self.vocab = width, hidden, vocab
        self.stages = self.tableau.stages
        self.max_depth = self.specs[0].depth
        self.counts = [sum(s.depth > layer for s in self.specs) for layer in range(self.max_depth)]
        s, h, d = self.stages, hidden, width
        self._layer_sizes = [(c * s * h * d, c * s * h, c * s * d * h) for c in self.counts]
        self.head_size = len(self.specs) * vocab * width
        self.inputs = inputs  # students of tokens: an embedding (width, inputs) each, after the heads
        self.embed_size = len(self.specs) * width * inputs
        self.size = sum(map(sum, self._layer_sizes)) + self.head_size + self.embed_size
        self.shares_weights = self.specs[0].weight_groups > 0
        # the slots (layer l, student i), layer by layer, and the shared weight each copies
        if self.shares_weights:
            names: dict[tuple[int, int], int] = {}
            groups = [layer_groups(s) for s in self.specs]
            owners = [torch.tensor([names.setdefault((i, int(groups[i][layer])), len(names))
                                    for i in range(count)])
                      for layer, count in enumerate(self.counts)]  # layer l: the shared weight of each slot
            self._slot_owner = {torch.device("cpu"): owners}
            self._owners = len(names)

    def __len__(self) -> int:
        return len(self.specs)

    def layers(self, flat: torch.Tensor) -> list[LayerParams]:
        """Per-layer views ``W1 (n_l, s, h, d)``, ``b1 (n_l, s, h)``, ``W2 (n_l, s, d, h)`` of a flat
        buffer."""
        out, offset = [], 0
        s, h, d = self.stages, self.hidden, self.width
        for count, sizes in zip(self.counts, self._layer_sizes, strict=True):
            w1, b1, w2 = (flat[offset + sum(sizes[:k]): offset + sum(sizes[:k + 1])] for k in range(3))
            out.append(LayerParams(w1.view(count, s, h, d), b1.view(count, s, h), w2.view(count, s, d, h)))
            offset += sum(sizes)
        return out

    def head(self, flat: torch.Tensor) -> torch.Tensor:
        """The learned heads ``(n, vocab, width)`` in a flat buffer."""
        end = self.size - self.embed_size
        return flat[end - self.head_size:end].view(len(self.specs), self.vocab, self.width)

    def embed(self, flat: torch.Tensor) -> torch.Tensor:
        """The token embeddings ``(n, width, inputs)`` in a flat buffer (empty without ``inputs``)."""
        return flat[self.size - self.embed_size:].view(len(self.specs), self.width, self.inputs)

    def initial_parameters(self, dtype: torch.dtype, given: Mapping[StudentSpec | str, dict] | None = None
                           ) -> torch.Tensor:
        """The flat buffer of every student's :func:`~resflow.training.block.init_student` values (CPU), or
        of the parameters ``given`` for a student (keyed by its spec or its repr; as
        :func:`~resflow.training.block.init_student` returns them)."""
        flat = torch.empty(self.size, dtype=dtype)
        layers = self.layers(flat)
        # by repr: a NaN temperature never equals itself
        given = {(k if isinstance(k, str) else repr(k)): v for k, v in (given or {}).items()}
        for i, spec in enumerate(self.specs):
            init = given.get(repr(spec)) or init_student(spec, self.width, self.hidden, self.vocab, dtype,
                                                         self.inputs)
            for layer in range(spec.depth):
                for name in ("W1", "b1", "W2"):
                    getattr(layers[layer], name)[i] = init[name][layer]
            self.head(flat)[i] = init["head"]
            if self.inputs:
                self.embed(flat)[i] = init["embed"]
        return flat

    def student_parameters(self, flat: torch.Tensor, index: int) -> dict[str, torch.Tensor]:
        """One student's parameters as in :func:`~resflow.training.block.init_student` (copies)."""
        depth = self.specs[index].depth
        layers = self.layers(flat)[:depth]
        out = {name: torch.stack([getattr(p, name)[index] for p in layers]) for name in ("W1", "b1", "W2")}
        out["head"] = self.head(flat)[index].clone()
        if self.inputs:
            out["embed"] = self.embed(flat)[index].clone()
        return out

    def sum_shared_gradients(self, grads: torch.Tensor) -> None:
        """In place, on a flat gradient buffer of a group-structured bank: every copy of a shared weight
        gets the sum of the gradients of all its copies (a no-op for plain students)."""
        if not self.shares_weights:
            return
        if grads.device not in self._slot_owner:  # copied once per device (never inside a CUDA-graph capture)
            cpu = self._slot_owner[torch.device("cpu")]
            self._slot_owner[grads.device] = [owner.to(grads.device) for owner in cpu]
        owners = self._slot_owner[grads.device]
        layers = self.layers(grads)
        for name in ("W1", "b1", "W2"):
            views = [getattr(p, name) for p in layers]
            shared = torch.zeros((self._owners, *views[0].shape[1:]), dtype=grads.dtype, device=grads.device)
            # one index_add_ per layer: no index repeats within a call, so the sum runs layer by layer in a
            # fixed order on every device (a GPU's atomics would otherwise order repeated indices at random)
            for owner, view in zip(owners, views, strict=True):
                shared.index_add_(0, owner, view)
            for owner, view in zip(owners, views, strict=True):
                torch.index_select(shared, 0, owner, out=view)

    def per_element(self, values: list[float], dtype: torch.dtype, head_values: list[float] | None = None
                    ) -> torch.Tensor:
        """A flat buffer holding ``values[i]`` at every element of student ``i`` (e.g. learning rates);
        its head (and embedding) elements hold ``head_values[i]`` if given."""
        flat = torch.empty(self.size, dtype=dtype)
        v = torch.tensor(values, dtype=dtype)
        for p in self.layers(flat):
            for name in ("W1", "b1", "W2"):
                view = getattr(p, name)
                view.copy_(v[: view.shape[0]].view(-1, *([1] * (view.ndim - 1))).expand_as(view))
        heads = v if head_values is None else torch.tensor(head_values, dtype=dtype)
        self.head(flat).copy_(heads.view(-1, 1, 1).expand(len(self.specs), self.vocab, self.width))
        self.embed(flat).copy_(heads.view(-1, 1, 1).expand(len(self.specs), self.width, self.inputs))
        return flat

    def finite_students(self, flat: torch.Tensor) -> torch.Tensor:
        """Per-student flag (CPU bool, bank order): every element of that student is finite."""
        ok = torch.ones(len(self.specs), dtype=torch.bool)
        for p in self.layers(flat):
            for name in ("W1", "b1", "W2"):
                view = getattr(p, name)
                ok[: view.shape[0]] &= torch.isfinite(view).flatten(1).all(dim=1).cpu()
        ok &= torch.isfinite(self.head(flat)).flatten(1).all(dim=1).cpu()
        if self.inputs:
            ok &= torch.isfinite(self.embed(flat)).flatten(1).all(dim=1).cpu()
        return ok

    def flops_per_step(self, batch: int, training: bool = True) -> float:
        """Analytic FLOPs of the student matmuls per step: forward :math:`4Bdh` per student, layer and
        stage; a training step is forward + backward, three times that (the usual count)."""
        forward = 4.0 * batch * self.width * self.hidden * sum(self.counts) * self.stages
        return 3.0 * forward if training else forward
