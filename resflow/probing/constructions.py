r"""Constructions: students built from the teacher, not trained -- the cheapest reference a fit can have.

A teacher of depth :math:`L_T` applies fields :math:`f_1, \dots, f_{L_T}` with step :math:`s` (its branch
scale).  The *construction* of depth :math:`\ell` (for :math:`\ell` dividing :math:`L_T`,
:math:`k = L_T/\ell`) gives its layer :math:`i` the mean of the :math:`k` teacher fields it stands for,

.. math::  g_i(h) = \frac1k \sum_{j=0}^{k-1} f_{ik+j}(h),

and steps it once with step :math:`k s` by a student's scheme (a Butcher tableau).  With Euler steps it is

* for an **independent** (rough) teacher the *block-sum student*: each layer is the exact sum of its
  :math:`k` teacher layers, all evaluated at the block's input (one MLP of hidden width :math:`k` times the
  teacher's) -- the construction the finite-teacher ensemble law describes;
* for a **tied** (smooth) teacher the *teacher-field Euler student*: Euler steps of the teacher's own field,
  :math:`k` times longer -- the construction the procedural laws describe (coherent error, law α 2);

and with the midpoint scheme the teacher-field RK2 student.  At :math:`\ell = L_T` an Euler construction of an
Euler teacher *is* the teacher (loss 0).  Its loss is the MSE between :math:`\mathrm{rmsnorm}(h_\ell)` and the
teacher's output, as for a trained student (:func:`resflow.training.kernels.mse_head`).

A construction is not defined for a depth that does not divide the teacher's depth, nor for targets that are
not flow teachers (grammars); those are ``None``.  Trained students need not follow a construction: a trained
block approximates :math:`k` teacher steps with one MLP of fixed width, and can do better than the
construction (issue 38 measured 7.5--28× better on the tied teacher) or worse.
"""

from __future__ import annotations

import torch

from ..dynamics.fields import rmsnorm
from ..dynamics.stepper import integrate_fixed
from ..dynamics.tableau import ButcherTableau, get_tableau

__all__ = ["construction_fields", "construction_output", "construction_loss", "CONSTRUCTION_LABELS"]

CONSTRUCTION_LABELS = {
    "construction_loss": ("loss of the construction of the student's depth and scheme (built from the "
                          "teacher's fields, not trained; resflow.probing.constructions)", ""),
}


def construction_fields(teacher, depth: int) -> list | None:
    """The ``depth`` block-mean fields :math:`g_i(t, h)` of ``teacher`` (a :class:`~resflow.Teacher`), or None
    when ``depth`` does not divide the teacher's depth."""
    depth = int(depth)
    if depth < 1 or teacher.depth % depth:
        return None
    k = teacher.depth // depth
    fields = teacher.stack.layer_fields
    if len({id(f) for f in fields}) == 1:  # tied: one field, its block mean is itself
        return [fields[0]] * depth

    def block(group):
        return lambda t, h: sum(f(t, h) for f in group) / len(group)

    return [block(fields[i * k:(i + 1) * k]) for i in range(depth)]


def construction_output(teacher, depth: int, scheme: str | ButcherTableau,
                        x: torch.Tensor) -> torch.Tensor | None:
    r"""The construction's output :math:`\mathrm{rmsnorm}(h_\ell)` on inputs ``x`` (shape ``(B, width)``), or
    None where it is not defined."""
    fields = construction_fields(teacher, depth)
    if fields is None:
        return None
    tableau = scheme if isinstance(scheme, ButcherTableau) else get_tableau(scheme)
    k = teacher.depth // int(depth)
    final = integrate_fixed(fields, rmsnorm(x), step=k * teacher.stack.step_size, tableau=tableau)
    return rmsnorm(final)


def construction_loss(teacher, depth: int, scheme: str | ButcherTableau, x: torch.Tensor) -> float | None:
    """The construction's MSE against ``teacher(x)``, averaged over inputs and coordinates as a trained
    student's loss is; None where the construction is not defined."""
    with torch.no_grad():
        out = construction_output(teacher, depth, scheme, x)
        if out is None:
            return None
        return float((out - teacher(x)).square().mean())
