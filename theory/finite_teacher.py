r"""A teacher of finite depth :math:`L_T`: the error-vs-depth laws of its students, from exact discrete sums.

A student of depth :math:`\ell` stands in for blocks of :math:`k = L_T/\ell` teacher layers
(:math:`\ell` divides :math:`L_T`).  A student as deep as its teacher (:math:`k = 1`) can copy it
exactly, so every law below vanishes at :math:`\ell = L_T`; the familiar power laws are their
:math:`\ell \ll L_T` limits, and over a range of depths that reaches towards :math:`L_T` they bend
down.

**Ensemble (rough teacher).**  The teacher's layers are independent draws.  Within a block, the
share of the weight variance in the fluctuations about the block mean is the exact discrete sum
:math:`r(k) = 1 - \frac{1}{k^2}\sum_{i,j<k} C_{ij} = 1 - 1/k` (:mod:`resflow.theory.roughness`
gives it for correlated and fractional teachers).  A student layer learns the block mean; the
fluctuations are learned only on average and their errors add incoherently over the :math:`\ell`
layers (the ensemble law, :math:`\ell^{-1}`), so

.. math:: \mathcal L = A\,\frac{r(L_T/\ell)}{\ell} = A\,\Big(\frac1\ell - \frac1{L_T}\Big).

**Procedural (smooth teacher).**  The tied teacher is :math:`L_T` Euler steps of size
:math:`s = T/L_T` of one field :math:`f`.  Over a block, :math:`k` Euler steps compose to
:math:`y + ks\,f + \big(\sum_{j=1}^{k}(j-1)\big)\, s^2 f'f + O(s^3)`, the discrete sum being
:math:`\binom k2`; one Euler step of the student, of size :math:`H = ks = T/\ell`, has no
:math:`f'f` term.  The local error of a student layer is therefore
:math:`\binom k2 s^2 f'f = \frac{H^2}{2}\big(1 - \frac1k\big) f'f`, and summed over the
:math:`\ell` layers coherently (:math:`\ell` times) or incoherently (:math:`\sqrt\ell` times):

.. math:: \mathcal L_{\rm coherent} = A\,\Big(\frac1\ell - \frac1{L_T}\Big)^2, \qquad
          \mathcal L_{\rm incoherent} = \frac{A}{\ell}\Big(\frac1\ell - \frac1{L_T}\Big)^2 .

A student block of order :math:`p \ge 2` (e.g. midpoint) matches the flow's :math:`H^2/2\,f'f`,
which the teacher's Euler steps miss by :math:`k s^2/2 = Hs/2`: the teacher's own discretisation
error becomes a floor, :math:`\mathcal L \approx A\,\ell^{-2p} + B\,L_T^{-2}` (coherent, leading
order).

**The finite-teacher factor.**  Each law is :math:`A\,\ell^{-\alpha_\infty}\,F(\ell, L_T)` with
:math:`F \to 1` as :math:`L_T \to \infty`: :math:`F = 1 - \ell/L_T` (ensemble) and
:math:`(1 - \ell/L_T)^2` (procedural, Euler).  The law-aware fit of :mod:`resflow.fitting.fits`
divides the measured loss by :math:`F` and fits the exponent of what remains.

Assumptions: the student's per-layer field is the teacher's block field (it does not learn the
discretisation's modified field); leading order in :math:`s` and :math:`H`; for the ensemble law,
the block mean is learned and the fluctuations act as independent errors.
"""

from __future__ import annotations

import sympy as sp

from ._law import Derivation
from .accumulation import ones_quadratic_form

__all__ = ["block_second_order_sum", "rough_share_iid", "derive_ensemble", "derive_procedural_coherent",
           "derive_procedural_incoherent", "derive_procedural_modified", "derive_higher_order_floor"]

ell, L_T, A, B, T = sp.symbols("ell L_T A B T", positive=True)
c, epsilon = sp.symbols("c epsilon", nonnegative=True)
p = sp.Symbol("p", positive=True, integer=True)
k, j = sp.symbols("k j", positive=True, integer=True)
REFERENCES = (
    "Liu, Kangaslahti, Liu & Gore, arXiv:2602.05970 (2026) (teachers of depth 128; students to depth 48)",
    "Hairer, Nørsett & Wanner, Solving ODEs I, §II.2 (Taylor and B-series of RK methods)",
)


def block_second_order_sum() -> sp.Expr:
    r""":math:`\sum_{j=1}^{k} (j - 1)`: the :math:`s^2 f'f` coefficient of :math:`k` composed Euler steps
    (step :math:`j` sees the :math:`j - 1` increments before it)."""
    return sp.factor(sp.summation(j - 1, (j, 1, k)))


def rough_share_iid() -> sp.Expr:
    r""":math:`1 - \frac{1}{k^2}\mathbf 1^\top I_k \mathbf 1`: fluctuation share of a block of independent
    layers (the double sum of :func:`resflow.theory.accumulation.ones_quadratic_form` with
    :math:`C = I`)."""
    return sp.factor(1 - ones_quadratic_form(sp.Integer(0), sp.Integer(1), k) / k**2)


def _exponent(loss: sp.Expr) -> sp.Expr:
    return sp.simplify(-ell * sp.diff(loss, ell) / loss)


def _factor(loss: sp.Expr) -> sp.Expr:
    """The finite-teacher factor: the law over its L_T -> infinity limit."""
    return sp.simplify(loss / sp.limit(loss, L_T, sp.oo))


def derive_ensemble() -> Derivation:
    share = rough_share_iid()
    loss = sp.expand(A * share.subs(k, L_T / ell) / ell)
    return Derivation(
        "finite-teacher-ensemble",
        "student of a rough teacher of depth L_T: A (1/l - 1/L_T) (ensemble law, exact block sums)",
        sp.Eq(sp.Symbol("loss"), loss), (ell, L_T, A), _exponent(loss),
        "Teacher layers independent; a student layer learns its block's mean, "
        "the fluctuations (share r(k) of the variance, k = L_T/l) act as independent errors of the l layers. "
        "l divides L_T.",
        REFERENCES,
        steps=(("fluctuation share of a block of k independent layers", sp.Eq(sp.Symbol("r"), share)),
               ("finite-teacher factor F = law / its L_T -> oo limit", sp.Eq(sp.Symbol("F"), _factor(loss)))),
    )


def _procedural(coherent: bool) -> tuple[sp.Expr, sp.Expr]:
    H, s = T / ell, T / L_T
    local = sp.simplify(block_second_order_sum().subs(k, L_T / ell) * s**2)  # coefficient of f'f per layer
    assert sp.simplify(local - H**2 / 2 * (1 - ell / L_T)) == 0
    total = ell**2 * local**2 if coherent else ell * local**2  # coherent: (l e)^2; incoherent: l e^2
    derived = sp.simplify(total / T**4 * 4) * A  # the amplitude absorbs T^4/4 and |f'f|^2
    # the same law written as A l^-q (1 - l/L_T)^2, a form that also evaluates at L_T = infinity
    loss = A * ell ** (-2 if coherent else -3) * (1 - ell / L_T) ** 2
    assert sp.simplify(loss - derived) == 0
    return local, loss


def derive_procedural_coherent() -> Derivation:
    local, loss = _procedural(True)
    return Derivation(
        "finite-teacher-procedural-coherent",
        "Euler student of a tied teacher of depth L_T, local errors coherent: A (1/l - 1/L_T)^2",
        sp.Eq(sp.Symbol("loss"), loss), (ell, L_T, A), _exponent(loss),
        "Tied teacher = L_T Euler steps of one field f (step T/L_T); "
        "Euler student of step T/l with the block's field; "
        "leading order; the l local errors add coherently. l divides L_T.",
        REFERENCES,
        steps=(("f'f coefficient of k composed Euler steps (discrete sum)", sp.Eq(sp.Symbol("S_k"),
                                                                                  block_second_order_sum())),
               ("local error of one student layer, in units of f'f", sp.Eq(sp.Symbol("e_l"), local)),
               ("finite-teacher factor F", sp.Eq(sp.Symbol("F"), _factor(loss)))),
    )


def derive_procedural_incoherent() -> Derivation:
    local, loss = _procedural(False)
    return Derivation(
        "finite-teacher-procedural-incoherent",
        "Euler student of a tied teacher of depth L_T, local errors incoherent: A (1/l) (1/l - 1/L_T)^2",
        sp.Eq(sp.Symbol("loss"), loss), (ell, L_T, A), _exponent(loss),
        "As finite-teacher-procedural-coherent, but the l local errors add incoherently (independent "
        "directions): the typical case, exponent 3 for l << L_T.",
        REFERENCES,
        steps=(("local error of one student layer, in units of f'f", sp.Eq(sp.Symbol("e_l"), local)),
               ("finite-teacher factor F", sp.Eq(sp.Symbol("F"), _factor(loss)))),
    )


def derive_procedural_modified() -> Derivation:
    r"""Trained students of a tied teacher: a modified field, and errors that add with a measured coherence.

    A trained student layer is not the Euler step of the block's field: it is any map of its class,
    and it learns :math:`ks\,f` exactly and part of the second-order term :math:`\binom k2 s^2 f'f`.
    To leading order its local error is the rest, a share :math:`\varepsilon \le 1` of the Euler
    student's (:math:`\varepsilon = 1`: the Euler student). The layers' errors, carried to the output,
    add with a coherence :math:`C(\ell) = \mathbb E\|\sum_l p_l\|^2 / \sum_l \mathbb E\|p_l\|^2
    \propto \ell^{c}` (:mod:`resflow.probing.tracking`; :math:`c = 1` coherent, :math:`c = 0`
    incoherent), so the loss is :math:`C\,\ell\,\varepsilon\,\|e_\ell\|^2`.
    """
    s = T / L_T
    local = sp.simplify(block_second_order_sum().subs(k, L_T / ell) * s**2)  # the Euler student's, per layer
    total = ell**c * ell * epsilon * local**2  # coherence x layers x share left x (Euler local error)^2
    derived = sp.simplify(total / T**4 * 4) * A
    loss = A * epsilon * ell ** (c - 3) * (1 - ell / L_T) ** 2
    assert sp.simplify(loss - derived) == 0
    factor = sp.simplify(loss / sp.limit(loss, L_T, sp.oo))
    assert sp.simplify(factor - (1 - ell / L_T) ** 2) == 0
    return Derivation(
        "finite-teacher-procedural-modified",
        "trained student of a tied teacher of depth L_T: A eps l^(c-3) (1 - l/L_T)^2 "
        "(modified field, coherence l^c)",
        sp.Eq(sp.Symbol("loss"), loss), (ell, L_T, A, c, epsilon), _exponent(loss),
        "Tied teacher = L_T Euler steps of one field (step T/L_T); a student layer reproduces k s f exactly "
        "and leaves a share epsilon of the Euler student's second-order local error (a modified field); "
        "the layers' errors reach the output with coherence l^c (c = 1 coherent, c = 0 incoherent). "
        "Leading order in s and H; l divides L_T. The finite-teacher factor stays (1 - l/L_T)^2 as long as "
        "epsilon and c do not depend on l: a share epsilon(l) ~ l^eta shifts the exponent by -eta, and a "
        "student whose layers cancel each other's second-order error (a higher-order scheme across layers) "
        "leaves a third-order error with another discrete sum, where this factor no longer applies. "
        "Both are measured: resflow.probing.tracking.",
        REFERENCES,
        steps=(("the Euler student's local error per layer, in units of f'f", sp.Eq(sp.Symbol("e_l"), local)),
               ("loss = coherence x layers x share left x (Euler local error)^2",
                sp.Eq(sp.Symbol("loss"), derived)),
               ("finite-teacher factor F", sp.Eq(sp.Symbol("F"), factor))),
    )


def derive_higher_order_floor() -> Derivation:
    H, s = T / ell, T / L_T
    teacher_miss = sp.simplify(H**2 / 2 - block_second_order_sum().subs(k, L_T / ell) * s**2)  # = H s / 2
    assert sp.simplify(teacher_miss - H * s / 2) == 0
    loss = A * ell ** (-2 * p) + B / L_T**2
    return Derivation(
        "finite-teacher-higher-order",
        "order-p student block (p >= 2) of an Euler teacher of depth L_T: A l^(-2p) + B / L_T^2 (a floor)",
        sp.Eq(sp.Symbol("loss"), loss), (ell, L_T, p, A, B), _exponent(loss),
        "The student's block matches the flow's H^2/2 f'f, which the teacher's k Euler steps miss "
        "by H s / 2 per block: summed coherently over the l blocks, T^2/(2 L_T) f'f, independent of l; "
        "the student's own truncation error adds A l^(-2p) (coherent, leading order; the two are different "
        "elementary differentials, so their squares add).",
        REFERENCES,
        steps=(("what the teacher's k Euler steps miss of the flow's f'f term, per student block",
                sp.Eq(sp.Symbol("m_l"), teacher_miss)),),
    )
