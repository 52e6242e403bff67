r"""A width-limited block: the approximation view of a trained student of a smooth teacher.

The tied teacher is :math:`L_T` Euler steps of size :math:`s = T/L_T` of one field :math:`f`.  A student of
depth :math:`\ell` replaces each block of :math:`k = L_T/\ell` teacher steps by one layer
:math:`y \mapsto y + g(y)`, :math:`g` an MLP of hidden width :math:`h`.  What the layer has to reproduce is
the block's map, whose expansion in :math:`s` has exact discrete sums for coefficients (step :math:`j` of
the block sees the :math:`j` increments before it):

.. math:: \Phi_k(y) = y + ks\,f + \tbinom k2 s^2 f'f
          + s^3\Big[\tbinom k3 f'f'f + \tfrac12\textstyle\sum_{j<k} j^2\, f''(f, f)\Big] + O(s^4),

which tend to the flow's :math:`H f + \frac{H^2}{2} f'f + \frac{H^3}{6}(f'f'f + f''(f,f))`,
:math:`H = ks = T/\ell`, as :math:`k \to \infty`.

The Euler student (the construction of :mod:`resflow.theory.finite_teacher`) holds only :math:`ks\,f`.  A
trained block is any map of its class: with :math:`h` at least the teacher field's hidden width it holds
:math:`ks\,f`, and of the second-order term the share its width allows; a share :math:`\varepsilon(h) \le 1`
(in squared norm) is left, and so are the third-order terms.  With the layers' errors reaching the output
with coherence :math:`\ell^c` (:mod:`resflow.probing.tracking`),

.. math:: \mathcal L = \ell^{1+c}\Big[4A\,\varepsilon\, e_2^2 + 18B\,(e_{3a}^2 + e_{3b}^2)\Big]
          \;\xrightarrow{L_T\to\infty}\; A\,\varepsilon\,\ell^{c-3} + B\,\ell^{c-5},

(the constants normalise the limit), with the local exponent
:math:`\alpha = 3 - c + 2B/(B + A\varepsilon\ell^2)`: between :math:`3 - c` (deep students, the
second-order term left) and :math:`5 - c` (shallow students, or a block wide enough that
:math:`\varepsilon \to 0`).  What width does, in this view: at fixed depths a wider block leaves less of the
second-order term, so the loss falls with :math:`h` and :math:`\alpha` rises, and the crossover depth
:math:`\ell^* = \sqrt{B/(A\varepsilon)}` moves out.  The procedural reading (a student that discretises the
teacher's field) predicts neither.  :math:`\varepsilon(h)` itself is not derived here: it is the share of
:math:`f'f` outside what a width-:math:`h` MLP next to :math:`ks\,f` can represent, measured by the
``student-width`` axis (``resflow sweep student-width``).
"""

from __future__ import annotations

import sympy as sp

from ._law import Derivation

__all__ = ["block_third_order_sums", "block_coefficients", "derive_width_limited"]

ell, L_T, A, B, T = sp.symbols("ell L_T A B T", positive=True)
c, epsilon = sp.symbols("c epsilon", nonnegative=True)
k, j = sp.symbols("k j", positive=True, integer=True)
REFERENCES = (
    "Hairer, Nørsett & Wanner, Solving ODEs I, §II.2 (Taylor and B-series; elementary differentials)",
    "Liu, Kangaslahti, Liu & Gore, arXiv:2602.05970 (2026) (tied teachers, trained students, alpha about 3)",
)


def block_third_order_sums() -> tuple[sp.Expr, sp.Expr]:
    r"""The :math:`s^3` coefficients of :math:`k` composed Euler steps:
    :math:`\sum_{j<k}\binom j2 = \binom k3` (of :math:`f'f'f`) and :math:`\frac12\sum_{j<k} j^2`
    (of :math:`f''(f,f)`)."""
    first = sp.factor(sp.summation(sp.binomial(j, 2).expand(func=True), (j, 0, k - 1)))
    second = sp.factor(sp.summation(j**2, (j, 0, k - 1)) / 2)
    return first, second


def block_coefficients() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    r"""The block's second- and third-order coefficients with :math:`T = 1` (:math:`s = 1/L_T`,
    :math:`k = L_T/\ell`), written in :math:`1/\ell` and :math:`1/L_T` so that they evaluate at
    :math:`L_T = \infty`; each checked against the discrete sums."""
    u, v = 1 / ell, 1 / L_T
    e2 = u * (u - v) / 2
    e3a = u * (u - v) * (u - 2 * v) / 6
    e3b = u * (u - v) * (2 * u - v) / 12
    second = sp.factor(sp.summation(j, (j, 0, k - 1)))
    third_a, third_b = block_third_order_sums()
    for coefficient, total, power in ((e2, second, 2), (e3a, third_a, 3), (e3b, third_b, 3)):
        from_sum = (total / L_T**power).subs(k, L_T / ell)
        assert sp.simplify(from_sum - coefficient) == 0
    return e2, e3a, e3b


def _exponent(loss: sp.Expr) -> sp.Expr:
    """The local exponent, left in 1/L_T (not simplified) so that it evaluates at L_T = infinity."""
    return -ell * sp.diff(loss, ell) / loss


def derive_width_limited() -> Derivation:
    e2, e3a, e3b = block_coefficients()
    # the flow's coefficients, with H = 1/l: what the block's sums tend to as the teacher deepens
    H = 1 / ell
    for coefficient, flow in ((e2, H**2 / 2), (e3a, H**3 / 6), (e3b, H**3 / 6)):
        assert sp.simplify(sp.limit(coefficient, L_T, sp.oo) - flow) == 0
    loss = ell ** (1 + c) * (4 * A * epsilon * e2**2 + 18 * B * (e3a**2 + e3b**2))
    limit = sp.simplify(sp.limit(loss, L_T, sp.oo))
    assert sp.simplify(limit - (A * epsilon * ell ** (c - 3) + B * ell ** (c - 5))) == 0
    # without the third-order terms: the modified-field law of resflow.theory.finite_teacher
    assert sp.simplify(loss.subs(B, 0) - A * epsilon * ell ** (c - 3) * (1 - ell / L_T) ** 2) == 0
    local = sp.simplify(_exponent(limit))
    assert sp.simplify(local - (3 - c + 2 * B / (B + A * epsilon * ell**2))) == 0
    third_a, third_b = block_third_order_sums()
    return Derivation(
        "width-limited-block",
        "trained student of a tied teacher, one width-limited block per k teacher steps: "
        "A eps l^(c-3) + B l^(c-5) (L_T -> oo)",
        sp.Eq(sp.Symbol("loss"), loss), (ell, L_T, A, B, c, epsilon), _exponent(loss),
        "Tied teacher = L_T Euler steps of one field f (T = 1); a student layer is one MLP of hidden "
        "width h, at least the teacher field's, that holds the block's first-order term k s f exactly and "
        "leaves a share epsilon(h) of its second-order term binom(k,2) s^2 f'f and all of its third-order "
        "terms; "
        "the two third-order elementary differentials f'f'f and f''(f,f) taken of equal norm and the "
        "orders' errors orthogonal (their squares add); the layers' errors reach the output with coherence "
        "l^c. Leading orders in s and H; l divides L_T. epsilon(h) is not derived: it falls with h, to be "
        "measured (resflow sweep student-width).",
        REFERENCES,
        steps=(("f'f'f coefficient of k composed Euler steps (discrete sum)",
                sp.Eq(sp.Symbol("Q_3"), third_a)),
               ("f''(f,f) coefficient of k composed Euler steps", sp.Eq(sp.Symbol("R_3"), third_b)),
               ("second- and third-order local error of a layer, T = 1",
                sp.Tuple(sp.Eq(sp.Symbol("e_2"), e2), sp.Eq(sp.Symbol("e_3a"), e3a),
                         sp.Eq(sp.Symbol("e_3b"), e3b))),
               ("the law as the teacher deepens (L_T -> oo)", sp.Eq(sp.Symbol(r"L_{\infty}"), limit)),
               ("its local exponent", sp.Eq(sp.Symbol(r"\alpha_{\infty}"), local))),
        status="hypothesis",
    )
