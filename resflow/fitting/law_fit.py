r"""The law-aware fit: the exponent of a finite teacher's law, fitted beside the plain slope.

A teacher of depth :math:`L_T` bends the loss-vs-depth curve down as :math:`\ell` approaches
:math:`L_T` (:mod:`resflow.theory.finite_teacher`): each law is :math:`A\,\ell^{-\alpha}\,F(\ell, L_T)`
with a finite-teacher factor :math:`F \to 1` as :math:`L_T \to \infty`.  The law-aware exponent is
the slope of :math:`\log(\mathcal L / F)` on :math:`\log\ell`: the exponent the same students would
show against an infinitely deep teacher, *if* the law's finite-teacher form holds.

Which law: the teacher's correlation between layers decides.  A teacher whose layers are all one
draw (``tied``, ``correlated:1``) is a smooth target, read with the procedural law
(``finite-teacher-procedural-incoherent``, :math:`F = (1 - \ell/L_T)^2`); one whose layers are
independent draws (``independent``, ``correlated:0``, ``fractional:0.5``) is read with the ensemble
law (``finite-teacher-ensemble``, :math:`F = 1 - \ell/L_T`).  For every other teacher
(``correlated:ρ`` with :math:`0 < \rho < 1`, ``fractional:H`` with :math:`H \ne 1/2`,
``grouped:K``) no single finite-teacher factor is derived -- the roughness laws have two terms --
and the law-aware fit is refused (:func:`law_for_target` returns None).
:math:`F` is evaluated from the derivation: the law at :math:`L_T` over the law at :math:`L_T = \infty`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import laws
from .._specs import is_class_target
from ..noise import parse_correlation

__all__ = ["law_for_target", "finite_teacher_factor", "NO_LAW"]

NO_LAW = "none"  # the law of a series whose teacher has no derived finite-teacher factor


def law_for_target(target: str, teacher_depth: float = math.inf) -> str | None:
    """The finite-teacher law that reads a series of students of ``target`` (a teacher spec), from its
    correlation between layers over ``teacher_depth`` layers; None when no factor is derived for it."""
    if is_class_target(target):  # a grammar, not a flow: no finite-teacher law
        return None
    n = min(int(teacher_depth), 64) if math.isfinite(teacher_depth) else 8  # the families are homogeneous
    covariance = parse_correlation(target).covariance(max(n, 2)).double()
    if torch.allclose(covariance, torch.ones_like(covariance)):
        return "finite-teacher-procedural-incoherent"
    if torch.allclose(covariance, torch.eye(covariance.shape[0], dtype=covariance.dtype)):
        return "finite-teacher-ensemble"
    return None


def finite_teacher_factor(law: str, depths, teacher_depth: float) -> np.ndarray:
    """:math:`F(\\ell, L_T)` = the law at ``teacher_depth`` over its :math:`L_T \\to \\infty` limit, per
    depth."""
    depths = np.asarray(depths, float)
    if np.any(depths >= teacher_depth):
        return np.full(depths.shape, np.nan)  # a student as deep as its teacher: the law predicts zero loss
    finite = laws.evaluate(law, ell=depths, L_T=float(teacher_depth), A=1.0)
    infinite = laws.evaluate(law, ell=depths, L_T=np.inf, A=1.0)
    return np.asarray(finite / infinite, float)
