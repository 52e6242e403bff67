r"""Roughness of the teacher: the loss-vs-depth law of a student of a correlated or fractional teacher.

New ground (the study has only the two extremes); the simulation issue tests it.

**Model.**  A student of depth :math:`\ell` replaces each block of :math:`k = L_T/\ell` teacher
layers by one layer.  Split every weight entry's sequence over a block into its block mean and the
fluctuation about it.  With unit-variance weights correlated along depth by :math:`C`, the
fraction of the weight variance in the fluctuations is

.. math:: r(k) = 1 - \frac{\mathbf 1^\top C_k \mathbf 1}{k^2}
          \;=\; (1-\rho)\big(1 - \tfrac1k\big) \ \text{(correlated)},
          \qquad 1 - k^{2H-2}\ \text{(fractional)} .

Assumptions: (A1) the block means form a field that varies smoothly along depth, which the student
learns as a discretised flow, in the procedural regime with exponent :math:`\alpha_s`
(:math:`\alpha_s = 3` for Euler with incoherent local errors, :math:`2` coherent; see
:mod:`resflow.theory.accumulation`); (A2) the fluctuations are learned only on average, the
ensemble regime with exponent 1; (A3) the two parts are independent, so their losses add, each in
proportion to its share of the variance; the amplitudes :math:`A_r, A_s` are those of the
independent (:math:`\rho = 0`) and tied (:math:`\rho = 1`) teachers of the same architecture.  Then

.. math:: \mathcal L(\ell) = A_r\, r(L_T/\ell)\, \ell^{-1}
          + A_s\, \big(1 - r(L_T/\ell)\big)\, \ell^{-\alpha_s} .

The steep term dominates shallow students; the :math:`\ell^{-1}` term takes over at the crossover
depth :math:`\ell^*`, which for the correlated teacher (:math:`k \gg 1`) is
:math:`\ell^* = \big(A_s\rho / (A_r(1-\rho))\big)^{1/(\alpha_s-1)}` and grows without bound as
:math:`\rho \to 1`.  For the fractional teacher the learnable share grows with depth,
:math:`1 - r = (\ell/L_T)^{2-2H}`, so the steep part has the reduced exponent
:math:`\alpha_s - 2 + 2H`.  A student as deep as its teacher (:math:`k = 1`) has :math:`r = 0`: no
rough share is left, only the procedural term.
"""

from __future__ import annotations

import sympy as sp

from ._law import Derivation

__all__ = ["rough_fraction_correlated", "rough_fraction_fractional", "derive_correlated", "derive_fractional",
           "derive_correlated_linear", "derive_fractional_linear"]

ell, L_T, k = sp.symbols("ell L_T k", positive=True)
A_r, A_s, alpha_s = sp.symbols("A_r A_s alpha_s", positive=True)
rho = sp.Symbol("rho", nonnegative=True)
H = sp.Symbol("H", positive=True)
ASSUMPTIONS = (
    "(A1) block means of the teacher weights are learned as a smooth flow "
    "(procedural regime, exponent alpha_s); "
    "(A2) fluctuations within a block are learned only on average (ensemble regime, exponent 1); "
    "(A3) losses of the two independent parts add in proportion to their variance shares; A_r, A_s are the "
    "independent- and tied-teacher amplitudes. Student depth ell divides the teacher depth L_T."
)
REFERENCES = (
    "Marion, Fermanian, Biau & Vert, 'Scaling ResNets in the large-depth regime' "
    "(weights with Hurst regularity)",
    "Liu, Kangaslahti, Liu & Gore, arXiv:2602.05970 (2026) (independent vs tied teachers)",
)


def rough_fraction_correlated() -> sp.Expr:
    """:math:`r(k)` for equicorrelated weights: :math:`1 - (\\rho k^2 + (1-\\rho)k)/k^2`."""
    return sp.factor(1 - (rho * k**2 + (1 - rho) * k) / k**2)


def rough_fraction_fractional() -> sp.Expr:
    """:math:`r(k)` for fGn weights: :math:`1 - k^{2H}/k^2` (the fGn double sum is :math:`k^{2H}`)."""
    return sp.powsimp(1 - k ** (2 * H) / k**2, force=True)


def _law(rough: sp.Expr) -> sp.Expr:
    r = rough.subs(k, L_T / ell)
    return A_r * r / ell + A_s * (1 - r) * ell ** (-alpha_s)


def _exponent(loss: sp.Expr) -> sp.Expr:
    return sp.simplify(-ell * sp.diff(loss, ell) / loss)


def derive_correlated_linear() -> Derivation:
    loss = _readable(_law(rough_fraction_correlated()),
                     A_r * (1 - rho) * (1 / ell - 1 / L_T)
                     + A_s * ell ** (-alpha_s) * (1 - (1 - rho) * (1 - ell / L_T)))
    large_k = A_r * (1 - rho) / ell + A_s * rho * ell ** (-alpha_s)
    crossover = sp.solve(sp.Eq(A_r * (1 - rho) / ell, A_s * rho * ell ** (-alpha_s)), ell)
    return Derivation(
        "roughness-correlated-linear",
        "(first version) correlated(rho) teacher: A_r r/l + A_s (1-r) l^-alpha_s, r = (1-rho)(1 - l/L_T)",
        sp.Eq(sp.Symbol("loss"), loss), (ell, L_T, rho, A_r, A_s, alpha_s), _exponent(loss),
        ASSUMPTIONS, REFERENCES,
        steps=(
            ("rough share of the weight variance in a block of k layers",
             sp.Eq(sp.Symbol("r"), rough_fraction_correlated())),
            ("large-k form", sp.Eq(sp.Symbol("loss"), large_k)),
            ("crossover depth (large k)", sp.Eq(sp.Symbol("ell^*"), crossover[0])),
        ),
    )


def derive_fractional_linear() -> Derivation:
    loss = _law(rough_fraction_fractional())
    smooth_share = sp.powsimp(1 - rough_fraction_fractional().subs(k, L_T / ell), force=True)
    crossover = sp.solve(sp.Eq(A_r / ell, A_s * (ell / L_T) ** (2 - 2 * H) * ell ** (-alpha_s)), ell)
    return Derivation(
        "roughness-fractional-linear",
        "(first version) fractional(H) teacher: A_r r/l + A_s (1-r) l^-alpha_s, 1 - r = (l/L_T)^(2-2H)",
        sp.Eq(sp.Symbol("loss"), loss), (ell, L_T, H, A_r, A_s, alpha_s), _exponent(loss),
        ASSUMPTIONS, REFERENCES,
        steps=(
            ("rough share of the weight variance in a block of k layers",
             sp.Eq(sp.Symbol("r"), rough_fraction_fractional())),
            ("learnable (smooth) share at student depth ell", sp.Eq(sp.Symbol("1 - r"), smooth_share)),
            ("crossover depth when r is close to 1",
             sp.Eq(sp.Symbol("ell^*"), crossover[0] if crossover else sp.nan)),
        ),
    )


# ------------------------------------------------------------------ the refined law (second version)
REFINED_ASSUMPTIONS = (
    "(A1') the shared part of the weights makes a field of amplitude a times the tied teacher's "
    "(a^2 = rho for correlated weights; for fGn weights, the variance share of a block's mean, "
    "(l/L_T)^(2-2H)); its procedural loss goes as the fourth power of the amplitude (Euler: |f'f|^2, "
    "f'f quadratic in f), so a^4, with the finite-teacher factor (1 - l/L_T)^2 of "
    "finite-teacher-procedural-incoherent; (A2') the fluctuations, the rough share r(L_T/l) of the variance, "
    "are learned only on average: the finite-teacher ensemble law A_r r / l; (A3) the two losses add. "
    "A_r, A_s, alpha_s are those of the independent and tied teachers of the same architecture."
)


def _refined(rough: sp.Expr, smooth_amplitude_squared: sp.Expr) -> sp.Expr:
    r = rough.subs(k, L_T / ell)
    return A_r * r / ell + A_s * smooth_amplitude_squared**2 * ell ** (-alpha_s) * (1 - ell / L_T) ** 2


def _readable(derived: sp.Expr, readable: sp.Expr) -> sp.Expr:
    """``readable``, after checking it is ``derived`` (the form shown is the form derived, only arranged)."""
    assert sp.simplify(sp.expand(derived - readable)) == 0, (derived, readable)
    return readable


def derive_correlated() -> Derivation:
    loss = _readable(_refined(rough_fraction_correlated(), rho),
                     A_r * (1 - rho) * (1 / ell - 1 / L_T)
                     + A_s * rho**2 * ell ** (-alpha_s) * (1 - ell / L_T) ** 2)
    large_k = A_r * (1 - rho) / ell + A_s * rho**2 * ell ** (-alpha_s)
    crossover = sp.solve(sp.Eq(A_r * (1 - rho) / ell, A_s * rho**2 * ell ** (-alpha_s)), ell)
    return Derivation(
        "roughness-correlated",
        "student of a correlated(rho) teacher: A_r (1-rho)(1/l - 1/L_T) + A_s rho^2 l^-alpha_s (1 - l/L_T)^2",
        sp.Eq(sp.Symbol("loss"), loss), (ell, L_T, rho, A_r, A_s, alpha_s), _exponent(loss),
        REFINED_ASSUMPTIONS, REFERENCES,
        steps=(
            ("rough share of the weight variance in a block of k layers",
             sp.Eq(sp.Symbol("r"), rough_fraction_correlated())),
            ("squared amplitude of the shared field, relative to the tied teacher's",
             sp.Eq(sp.Symbol("a^2"), rho)),
            ("large-k form", sp.Eq(sp.Symbol("loss"), large_k)),
            ("crossover depth (large k)", sp.Eq(sp.Symbol("ell^*"), crossover[0])),
        ),
    )


def derive_fractional() -> Derivation:
    smooth_share = sp.powsimp(1 - rough_fraction_fractional().subs(k, L_T / ell), force=True)
    loss = _refined(rough_fraction_fractional(), smooth_share)
    return Derivation(
        "roughness-fractional",
        "student of a fractional(H) teacher: A_r r/l + A_s (l/L_T)^(4-4H) l^-alpha_s (1 - l/L_T)^2, "
        "r = 1 - (l/L_T)^(2-2H)",
        # the local exponent -d log(loss)/d log(l), left unsimplified (sympy's simplify takes minutes on it)
        sp.Eq(sp.Symbol("loss"), loss), (ell, L_T, H, A_r, A_s, alpha_s), -ell * sp.diff(loss, ell) / loss,
        REFINED_ASSUMPTIONS, REFERENCES,
        steps=(
            ("rough share of the weight variance in a block of k layers",
             sp.Eq(sp.Symbol("r"), rough_fraction_fractional())),
            ("squared amplitude of the learnable (block-mean) field at student depth ell",
             sp.Eq(sp.Symbol("a^2"), smooth_share)),
        ),
    )
