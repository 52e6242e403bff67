r"""Fused kernels: the student block and losses of :mod:`resflow.training.block` for many students at once,
with their gradients derived by hand.

Students of one scheme are stacked along a leading axis, deepest first, so layer :math:`l` is a
batched matmul over the :math:`n_l` students deeper than :math:`l` (a prefix of the axis).  One
training step is a forward pass that keeps what the backward pass needs, the loss and its
gradient with respect to the final states, and a backward pass through the layers that writes
every parameter gradient straight into the engine's flat gradient buffer -- no autograd graph,
about half the elementwise passes of autograd (measured in ``docs/benchmarks.md``).

Derivatives, for one stage with input :math:`y` (:math:`D` = width):

* :math:`\hat y = r\,y`, :math:`r = (\overline{y^2} + \epsilon)^{-1/2}`:
  :math:`\partial_y = r\,(g - \hat y\,\overline{g\,\hat y})`;
* :math:`p = W_1 \hat y + b_1`, :math:`a = \mathrm{relu}(p)`, :math:`k = W_2 a^2`:
  :math:`\partial W_2 = g_k^\top a^2`, :math:`\partial p = 2\,a \odot (g_k W_2)`,
  :math:`\partial W_1 = \partial p^\top \hat y`, :math:`\partial b_1 = \sum \partial p`,
  :math:`\partial \hat y = \partial p\, W_1`;
* an RK step :math:`y_i = y + \sum_{j<i} a_{ij} k_j`, :math:`y' = y + \sum_i b_i k_i`, taken in
  reverse: :math:`g_{k_i} = b_i g + \sum_{j>i} a_{ji}\, g_{y_j}`, :math:`g_y = g + \sum_i g_{y_i}`.

``tests/test_kernels.py`` checks every kernel against autograd through the definitions of
:mod:`resflow.training.block` (float64, with :func:`torch.autograd.gradcheck` for the step as a whole).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Stage", "LayerParams", "rms_forward", "rms_backward", "block_forward", "block_backward",
           "bank_forward", "bank_backward", "mse_head", "kl_head", "ce_head", "embed_forward",
           "embed_backward"]


@dataclass
class Stage:
    """What the backward pass of one stage needs: normalised input, its inverse RMS, relu and relu²."""

    xn: torch.Tensor  # (n, B, d)
    r: torch.Tensor  # (n, B, 1)
    act: torch.Tensor  # (n, B, h)
    sq: torch.Tensor  # (n, B, h)


@dataclass
class LayerParams:
    """One layer's parameters (or gradients) of the ``n_l`` students deeper than it: views into a flat
    buffer."""

    W1: torch.Tensor  # (n_l, stages, h, d)
    b1: torch.Tensor  # (n_l, stages, h)
    W2: torch.Tensor  # (n_l, stages, d, h)


def rms_forward(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rmsnorm(y), r)`` with ``r = rsqrt(mean(y**2) + eps)``, eps the dtype's machine epsilon (as
    :func:`torch.nn.functional.rms_norm`)."""
    r = torch.rsqrt(y.square().mean(-1, keepdim=True) + torch.finfo(y.dtype).eps)
    return y * r, r


def rms_backward(g: torch.Tensor, xn: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Gradient with respect to ``y`` of ``rmsnorm(y)``, given the gradient ``g`` of its output."""
    return r * (g - xn * (g * xn).mean(-1, keepdim=True))


def _stage_forward(y: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor,
                   residual: torch.Tensor | None, save: bool) -> tuple[torch.Tensor, Stage | None]:
    if save:
        xn, r = rms_forward(y)
    else:  # inference: torch's fused norm, relu² in place
        xn, r = torch.nn.functional.rms_norm(y, (y.shape[-1],)), None
    act = torch.baddbmm(b1.unsqueeze(1), xn, W1.transpose(1, 2)).clamp_min_(0.0)
    sq = act * act if save else act.square_()
    k = (torch.bmm(sq, W2.transpose(1, 2)) if residual is None
         else torch.baddbmm(residual, sq, W2.transpose(1, 2)))
    return k, (Stage(xn, r, act, sq) if save else None)


def block_forward(y: torch.Tensor, p: LayerParams, a: tuple, b: tuple, save: bool
                  ) -> tuple[torch.Tensor, list[Stage]]:
    """One block for every student: ``y`` (n, B, d) -> ``y + sum_i b_i k_i``; the saved stages if ``save``."""
    if len(b) == 1:  # Euler: y + k_0, the residual added inside the matmul
        out, stage = _stage_forward(y, p.W1[:, 0], p.b1[:, 0], p.W2[:, 0], y, save)
        return out, [stage] if save else []
    ks, saved = [], []
    for i in range(len(b)):
        yi = y
        for j in range(i):
            if a[i][j] != 0.0:
                yi = yi + a[i][j] * ks[j]
        k, stage = _stage_forward(yi, p.W1[:, i], p.b1[:, i], p.W2[:, i], None, save)
        ks.append(k)
        saved.append(stage)
    out = y
    for bi, k in zip(b, ks, strict=True):
        if bi != 0.0:
            out = out + bi * k
    return out, saved if save else []


def _stage_backward(gk: torch.Tensor, W1: torch.Tensor, W2: torch.Tensor, stage: Stage, gW1: torch.Tensor,
                    gb1: torch.Tensor, gW2: torch.Tensor, need_input: bool) -> torch.Tensor | None:
    torch.bmm(gk.transpose(1, 2), stage.sq, out=gW2)
    gp = torch.bmm(gk, W2).mul_(stage.act)  # half of dL/dp = 2 a (g_k W2); the 2 goes on the small results
    torch.bmm(gp.transpose(1, 2), stage.xn, out=gW1).mul_(2.0)
    torch.sum(gp, dim=1, out=gb1).mul_(2.0)
    if not need_input:
        return None
    return rms_backward(torch.bmm(gp, W1).mul_(2.0), stage.xn, stage.r)


def block_backward(g: torch.Tensor, p: LayerParams, grads: LayerParams, a: tuple, b: tuple,
                   saved: list[Stage], need_input: bool = True) -> torch.Tensor | None:
    """Backward of :func:`block_forward`: writes the parameter gradients into ``grads`` and returns the
    gradient with respect to the block's input (None when ``need_input`` is False)."""
    s = len(b)
    gy_stage: list[torch.Tensor | None] = [None] * s
    for i in reversed(range(s)):
        gk = g * b[i] if b[i] != 1.0 else g
        for j in range(i + 1, s):
            if a[j][i] != 0.0 and gy_stage[j] is not None:
                gk = gk + a[j][i] * gy_stage[j]
        needs = need_input or i > 0  # stage i > 0 feeds the earlier stages' k
        gy_stage[i] = _stage_backward(gk, p.W1[:, i], p.W2[:, i], saved[i], grads.W1[:, i], grads.b1[:, i],
                                      grads.W2[:, i], needs)
    if not need_input:
        return None
    out = g
    for gy in gy_stage:
        out = out + gy
    return out


def bank_forward(h0: torch.Tensor, layers: list[LayerParams], a: tuple, b: tuple, *, save: bool = False,
                 return_states: bool = False):
    """Final states ``(n, B, d)`` of a bank of students from their first states ``h0``: (n, B, d), or
    (B, d) shared by all.

    ``layers[l]`` holds the ``n_l`` students deeper than ``l`` (non-increasing ``n_l``).  Returns
    ``(final, saved)`` where ``saved[l]`` are the stages of layer ``l`` (empty lists unless ``save``);
    with ``return_states`` also the list of states after every layer (layer ``l``: ``n_l`` students).
    """
    n = layers[0].W1.shape[0]
    h = h0 if h0.ndim == 3 else h0.expand(n, *h0.shape)
    finished, saved, states = [], [], [h] if return_states else None
    for p in layers:
        count = p.W1.shape[0]
        if count < h.shape[0]:
            finished.append(h[count:])
            h = h[:count]
        h, stages = block_forward(h, p, a, b, save)
        saved.append(stages)
        if states is not None:
            states.append(h)
    finished.append(h)
    final = torch.cat(finished[::-1]) if len(finished) > 1 else h
    return (final, saved, states) if return_states else (final, saved)


def bank_backward(g_final: torch.Tensor, layers: list[LayerParams], grads: list[LayerParams], a: tuple,
                  b: tuple, saved: list[list[Stage]], need_input: bool = False) -> torch.Tensor | None:
    """Backward of :func:`bank_forward` from the gradient of the final states ``(n, B, d)``; with
    ``need_input``, returns the gradient with respect to the first states ``h0`` (n, B, d)."""
    g = g_final[: layers[-1].W1.shape[0]]
    for layer in reversed(range(len(layers))):
        count = layers[layer].W1.shape[0]
        if count > g.shape[0]:  # students whose last layer is this one join here
            g = torch.cat([g, g_final[g.shape[0]:count]])
        g = block_backward(g, layers[layer], grads[layer], a, b, saved[layer],
                           need_input=layer > 0 or need_input)
    return g if need_input else None


def embed_forward(inputs: torch.Tensor,
                  embed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """First states of students with a token embedding: ``h0 = rmsnorm(inputs @ embed^T)``.

    ``inputs`` (n, B, I) are one-hot codes of the tokens (:func:`resflow.training.classes.one_hot_inputs`:
    one block of ``v`` per position, so ``embed`` (n, d, I) is an embedding per position and token);
    returns ``(h0, r)`` and the inputs, what :func:`embed_backward` needs.
    """
    h0, r = rms_forward(torch.bmm(inputs, embed.transpose(1, 2)))
    return h0, r, inputs


def embed_backward(g_h0: torch.Tensor, h0: torch.Tensor, r: torch.Tensor, inputs: torch.Tensor,
                   g_embed: torch.Tensor) -> None:
    """Backward of :func:`embed_forward`: writes the embedding's gradient (n, d, I) into ``g_embed``."""
    torch.bmm(rms_backward(g_h0, h0, r).transpose(1, 2), inputs, out=g_embed)


def mse_head(final: torch.Tensor, target: torch.Tensor, with_grad: bool
             ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-student MSE between ``rmsnorm(final)`` and ``target`` (both (n, B, d)), and its gradient
    with respect to ``final``."""
    z, r = rms_forward(final)
    diff = z - target
    loss = diff.square().mean(dim=(1, 2))
    if not with_grad:
        return loss, None
    return loss, rms_backward(diff * (2.0 / (diff.shape[1] * diff.shape[2])), z, r)


def kl_head(final: torch.Tensor, head: torch.Tensor, teacher_logp: torch.Tensor, temperature: torch.Tensor,
            g_head: torch.Tensor | None, with_grad: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-student KL(teacher || student) with logits ``rmsnorm(final) @ head^T / T``.

    ``head`` is (n, V, d) (a learned head: ``temperature`` ones) or the teachers' heads; ``teacher_logp``
    (n, B, V); ``temperature`` (n,).  With ``with_grad``, returns the gradient with respect to
    ``final`` and, if ``g_head`` is given, writes the head's gradient into it.
    """
    z, r = rms_forward(final)
    scale = (1.0 / temperature).view(-1, 1, 1)
    logq = torch.log_softmax(torch.bmm(z, head.transpose(1, 2)) * scale, dim=-1)
    p = teacher_logp.exp()
    loss = (p * (teacher_logp - logq)).sum(-1).mean(-1)
    if not with_grad:
        return loss, None
    g_logits = (logq.exp() - p) * (scale / final.shape[1])
    if g_head is not None:
        torch.bmm(g_logits.transpose(1, 2), z, out=g_head)
    return loss, rms_backward(torch.bmm(g_logits, head), z, r)


def ce_head(final: torch.Tensor, head: torch.Tensor, labels: torch.Tensor, g_head: torch.Tensor | None,
            with_grad: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-student cross-entropy of the classes ``labels`` (n, B) under logits ``rmsnorm(final) @ head^T``
    (``head`` (n, C, d)); with ``with_grad``, the gradient with respect to ``final`` and, if ``g_head`` is
    given, the head's gradient written into it (the logits' gradient: (softmax - onehot) / B)."""
    z, r = rms_forward(final)
    logq = torch.log_softmax(torch.bmm(z, head.transpose(1, 2)), dim=-1)
    loss = -logq.gather(-1, labels.unsqueeze(-1)).squeeze(-1).mean(-1)
    if not with_grad:
        return loss, None
    g_logits = logq.exp()
    g_logits.scatter_add_(-1, labels.unsqueeze(-1), torch.full_like(g_logits[..., :1], -1.0))
    g_logits.mul_(1.0 / final.shape[1])
    if g_head is not None:
        torch.bmm(g_logits.transpose(1, 2), z, out=g_head)
    return loss, rms_backward(torch.bmm(g_logits, head), z, r)
