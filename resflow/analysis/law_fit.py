r"""The law-aware fit: the exponent of a finite teacher's law, fitted beside the plain slope.

A teacher of depth :math:`L_T` bends the loss-vs-depth curve down as :math:`\ell` approaches
:math:`L_T` (:mod:`resflow.theory.finite_teacher`): each law is :math:`A\,\ell^{-\alpha}\,F(\ell, L_T)`
with a finite-teacher factor :math:`F \to 1` as :math:`L_T \to \infty`.  The law-aware exponent is
the slope of :math:`\log(\mathcal L / F)` on :math:`\log\ell`: the exponent the same students would
show against an infinitely deep teacher, *if* the law's finite-teacher form holds.

Which law: a tied teacher (``tied``, ``correlated:1``) is a smooth target, so the procedural law
(``finite-teacher-procedural-incoherent``, :math:`F = (1 - \ell/L_T)^2`); every other teacher has
a rough share and is read with the ensemble law (``finite-teacher-ensemble``, :math:`F = 1 - \ell/L_T`).
:math:`F` is evaluated from the derivation: the law at :math:`L_T` over the law at :math:`L_T = \infty`.
"""

from __future__ import annotations

import numpy as np

from .. import laws

__all__ = ["law_for_target", "finite_teacher_factor"]

SMOOTH_TARGETS = ("tied", "correlated:1")


def law_for_target(target: str) -> str:
    """The finite-teacher law that reads a series of students of ``target``."""
    return "finite-teacher-procedural-incoherent" if target in SMOOTH_TARGETS else "finite-teacher-ensemble"


def finite_teacher_factor(law: str, depths, teacher_depth: float) -> np.ndarray:
    """:math:`F(\\ell, L_T)` = the law at ``teacher_depth`` over its :math:`L_T \\to \\infty` limit, per depth."""
    depths = np.asarray(depths, float)
    if np.any(depths >= teacher_depth):
        return np.full(depths.shape, np.nan)  # a student as deep as its teacher: the law predicts zero loss
    finite = laws.evaluate(law, ell=depths, L_T=float(teacher_depth), A=1.0)
    infinite = laws.evaluate(law, ell=depths, L_T=np.inf, A=1.0)
    return np.asarray(finite / infinite, float)
