r"""Interventions across depth: what lesioning or swapping one layer does, read in each regime.

A residual stack :math:`h_{k+1} = h_k + \Delta_k(h_k)`, :math:`k = 0..\ell-1`.  The *damage* of an
intervention is the mean square change of the output, :math:`D = \mathbb E\,|y' - y|^2` per
coordinate (``resflow.probing.interventions`` measures exactly this).

**Ensemble regime** (the noisy ensemble): the updates do not read the stream, :math:`\Delta_k = u_k/\ell`
with :math:`u_k = m + \sigma z_k`, :math:`z` unit variance and equicorrelated :math:`\rho`; the output is
their mean.  Exactly, for every :math:`\ell` and layer :math:`l`:

* lesion (skip layer :math:`l`): :math:`D = (m^2 + \sigma^2)/\ell^2`, flat in :math:`l/\ell`;
* lesion and rescale the others by :math:`\ell/(\ell - 1)`:
  :math:`D = \sigma^2(1-\rho)/(\ell(\ell-1))`: only the noise of the layer is lost;
* swap layers :math:`l, l+1`: :math:`D = 0` (a sum does not depend on the order).

**Procedural regime** (an Euler discretised flow), with the scalar linear field :math:`\dot h = a(t) h`
solved exactly (:math:`h_{k+1} = (1 + a_k/\ell) h_k`, :math:`a_k = a(k/\ell)`):

* lesion: :math:`D = h_\ell^2\, a_l^2/(\ell + a_l)^2` exactly, :math:`\approx h(1)^2 a(l/\ell)^2/\ell^2`:
  the profile follows the field's rate at :math:`l/\ell` (flat for an autonomous field: in general
  :math:`D \approx |\Phi(1, t_l) f(t_l, h(t_l))|^2/\ell^2`, and for an autonomous flow
  :math:`\Phi(1,t) f(h(t)) = f(h(1))`);
* lesion and rescale: :math:`D \approx h(1)^2 (a(l/\ell) - \bar a)^2/\ell^2`, :math:`\bar a` the
  layers' mean rate: rescaling repairs the lesion to leading order exactly where the layer does what
  the average layer does (everywhere, for an autonomous field);
* swap: with matrix fields :math:`A_k`, :math:`(I + A_{l+1}/\ell)(I + A_l/\ell) - (I + A_l/\ell)(I +
  A_{l+1}/\ell) = [A_{l+1}, A_l]/\ell^2`; layers that differ by :math:`|A_{l+1} - A_l| \sim
  \ell^{-\gamma}` give :math:`D \propto \ell^{-4-2\gamma}`: :math:`\ell^{-6}` for a smooth flow
  (:math:`\gamma = 1`), :math:`\ell^{-4}` for independent layers (:math:`\gamma = 0`).

**Trace** (the input corrupted, the clean update of layer :math:`l` restored; :math:`R` the recovered
share of the output's error): an ensemble whose corrupted updates differ by :math:`\delta_k`,
equicorrelated :math:`\rho` along depth, recovers
:math:`R = 1 - (\ell-1)(1 + (\ell-2)\rho)/(\ell(1 + (\ell-1)\rho))`, flat in :math:`l`
(:math:`1/\ell` for independent effects, :math:`\approx 2/\ell` for identical ones); the scalar linear
flow recovers :math:`R = 1 - \ell^2/(\ell + a_l)^2 \approx 2a(l/\ell)/\ell`, following the field's rate.

So a single lesion costs :math:`\propto \ell^{-2}` in *both* regimes; what separates them is the
rescaled lesion (the noise share :math:`\sigma^2(1-\rho)/(m^2+\sigma^2)` of a layer's update against
the non-autonomy :math:`(a - \bar a)^2/a^2`) and the swap (exactly 0 against :math:`\ell^{-4-2\gamma}`).
"""

from __future__ import annotations

import sympy as sp

from ._law import Derivation

__all__ = ["derive_lesion_ensemble", "derive_lesion_rescaled_ensemble", "derive_swap_ensemble",
           "derive_lesion_flow", "derive_lesion_rescaled_flow", "derive_swap_flow", "derive_trace_ensemble",
           "derive_trace_flow"]

ell = sp.Symbol("ell", positive=True)
m, sigma, h = sp.symbols("m sigma h", positive=True)
rho = sp.Symbol("rho", nonnegative=True)
a, abar = sp.symbols("a abar", real=True)
gamma = sp.Symbol("gamma", nonnegative=True)
D = sp.Symbol("D")
REFERENCES = (
    "Veit, Wilber & Belongie, NeurIPS 2016 (lesioning residual networks: ensembles of shallow paths)",
    "Lad, Gurnee & Tegmark, arXiv:2406.19384 (2024) (deleting and swapping layers of LLMs)",
    "Gromov et al., arXiv:2403.17887 (2024) (the unreasonable ineffectiveness of the deeper layers)",
    "Liu, Kangaslahti, Liu & Gore, arXiv:2602.05970 (2026) (ensemble averaging against procedural depth)",
)


def _exponent(expr: sp.Expr) -> sp.Expr:
    return sp.simplify(-ell * sp.diff(expr, ell) / expr)


def _ensemble_damage(w_other: sp.Expr, w_self: sp.Expr) -> sp.Expr:
    r"""Per-coordinate :math:`\mathbb E(\sum_k w_k u_k)^2` for weights :math:`w_k` = ``w_other`` on the
    :math:`\ell - 1` other layers and ``w_self`` on layer :math:`l`; :math:`u_k = m + \sigma z_k`."""
    total = (ell - 1) * w_other + w_self  # sum of the weights: multiplies the common update m
    squares = (ell - 1) * w_other**2 + w_self**2
    variance = sigma**2 * ((1 - rho) * squares + rho * total**2)  # 1' C 1-type quadratic form, equicorrelated
    return sp.factor(sp.simplify(m**2 * total**2 + variance))


def derive_lesion_ensemble() -> Derivation:
    damage = _ensemble_damage(sp.Integer(0), -1 / ell)
    return Derivation(
        "lesion-ensemble",
        "Damage of skipping one layer of a noisy ensemble: (m^2 + sigma^2)/ell^2, flat in l",
        sp.Eq(D, damage), (ell, m, sigma), _exponent(damage),
        "Updates u_k/ell with u_k = m + sigma z_k "
        "(z unit variance, equicorrelated rho, not reading the stream); "
        "the output is their sum.  D = E(y' - y)^2 per coordinate; exact for every ell and every layer l.",
        REFERENCES, steps=(("y' - y", -sp.Symbol("u_l") / ell),),
    )


def derive_lesion_rescaled_ensemble() -> Derivation:
    damage = _ensemble_damage(1 / (ell - 1) - 1 / ell, -1 / ell)
    arranged = sigma**2 * (1 - rho) / (ell * (ell - 1))
    assert sp.simplify(damage - arranged) == 0
    damage = arranged
    return Derivation(
        "lesion-rescaled-ensemble",
        "Damage of skipping one layer of a noisy ensemble and rescaling the rest by ell/(ell - 1)",
        sp.Eq(D, damage), (ell, sigma, rho), _exponent(damage),
        "As lesion-ensemble; the other layers' updates are multiplied by ell/(ell - 1), "
        "so the weights sum to 1 again and the common update m cancels: "
        "only layer l's own noise is lost.  Exact for every ell, l.",
        REFERENCES,
        steps=(("sum of the weights", sp.simplify((ell - 1) * (1 / (ell - 1) - 1 / ell) - 1 / ell)),),
    )


def derive_swap_ensemble() -> Derivation:
    damage = _ensemble_damage(sp.Integer(0), sp.Integer(0))  # the same layers, summed in another order
    return Derivation(
        "swap-ensemble", "Damage of swapping two adjacent layers of a noisy ensemble: 0",
        sp.Eq(D, damage), (ell,), None,
        "As lesion-ensemble: the output is a sum of updates that do not read the stream, "
        "so it does not depend on their order (measured: zero to round-off).",
        REFERENCES,
    )


def derive_lesion_flow() -> Derivation:
    hl = h  # |h_ell|, the output of the unlesioned stack
    exact = hl**2 * (1 - 1 / (1 + a / ell)) ** 2  # the lesioned output is h_ell / (1 + a_l/ell)
    exact = sp.factor(sp.simplify(exact))
    leading = sp.series(exact, ell, sp.oo, 3).removeO()
    return Derivation(
        "lesion-flow", "Damage of skipping layer l of an Euler-discretised flow: h^2 a^2/(ell + a)^2",
        sp.Eq(D, exact), (ell, a, h), _exponent(leading),
        "Scalar linear field dh/dt = a(t) h, Euler steps h_{k+1} = (1 + a_k/ell) h_k; "
        "a = a(l/ell) is the field's rate at the lesioned layer, h = |h_ell| the output.  "
        "Exact for this model; to leading order "
        "D = |Phi(1, t_l) f(t_l, h(t_l))|^2/ell^2 for any smooth field (flat in l/ell when autonomous).",
        REFERENCES, steps=(("leading order", leading),),
    )


def derive_lesion_rescaled_flow() -> Derivation:
    eps = sp.Symbol("epsilon", positive=True)  # 1/ell
    # log(rescaled / original) = sum_{k != l} log(1 + a_k/(ell - 1)) - sum_k log(1 + a_k/ell); to first order
    # in 1/ell with sum_k a_k = ell abar: (ell abar - a)/(ell - 1) - abar = (abar - a)/(ell - 1)
    log_ratio = (abar / eps - a) * eps / (1 - eps) - abar
    first = sp.simplify(sp.series(log_ratio, eps, 0, 2).removeO())
    value = sp.simplify((h * first) ** 2).subs(eps, 1 / ell)
    return Derivation(
        "lesion-rescaled-flow",
        "Damage of skipping layer l of an Euler flow and rescaling the rest: h^2 (a - abar)^2/ell^2",
        sp.Eq(D, value), (ell, a, abar, h), _exponent(value),
        "As lesion-flow; the other steps are lengthened by ell/(ell - 1).  "
        "abar is the mean rate of the layers (sum_k a_k / ell); leading order in 1/ell.  "
        "Rescaling repairs the lesion where a(l/ell) = abar (for "
        "an autonomous field, everywhere, leaving O(ell^-4)).",
        REFERENCES, relation="approximately", steps=(("log of the output ratio, first order", first),),
    )


def derive_swap_flow() -> Derivation:
    A, C = sp.symbols("A C", commutative=False)
    eps, delta = sp.symbols("epsilon delta", positive=True)  # the step 1/ell; |A_{l+1} - A_l| = delta
    B = A + delta * C
    one = sp.Integer(1)
    difference = sp.expand((one + eps * B) * (one + eps * A) - (one + eps * A) * (one + eps * B))
    assert sp.simplify(difference - eps**2 * delta * (C * A - A * C)) == 0
    norm = sp.Symbol("c", positive=True)  # |Phi (C A - A C) h|, the propagated commutator
    damage = ((eps**2 * delta * norm) ** 2).subs({eps: 1 / ell, delta: ell ** (-gamma)})
    damage = sp.powsimp(sp.expand_power_base(damage, force=True), force=True)
    return Derivation(
        "swap-flow", "Damage of swapping adjacent layers of an Euler flow: c^2 ell^(-4 - 2 gamma)",
        sp.Eq(D, damage), (ell, norm, gamma), _exponent(damage),
        "Linear layers I + A_k/ell (matrices, non-commuting); "
        "adjacent layers differ by delta = |A_{l+1} - A_l| = ell^-gamma "
        "(gamma = 1: a smooth flow, gamma = 0: independent layers).  "
        "The swap changes the product by [A_{l+1}, A_l]/ell^2 = delta [C, A]/ell^2; "
        "c is that commutator's size at the output.  Leading order.",
        REFERENCES, relation="proportional", steps=(("swapped - original", difference),),
    )


def derive_trace_ensemble() -> Derivation:
    R = sp.Symbol("R")
    kept = (ell - 1) * (1 + (ell - 2) * rho)  # Var of the sum of the other layers' error terms, over s^2
    full = ell * (1 + (ell - 1) * rho)  # Var of the sum of all of them
    share = (1 + 2 * (ell - 1) * rho) / (ell * (1 + (ell - 1) * rho))
    assert sp.simplify(share - (1 - kept / full)) == 0
    return Derivation(
        "trace-ensemble",
        "Recovered share of restoring one layer's clean update in a noisy ensemble (flat in l)",
        sp.Eq(R, share), (ell, rho), sp.factor(_exponent(share)),
        "Layers whose updates do not read the stream; corrupting the input changes update k by delta_k, "
        "delta equicorrelated rho along depth with equal variances; restoring layer l's clean update removes "
        "delta_l.  R = 1 - E|sum_{k != l} delta_k|^2 / E|sum_k delta_k|^2, exact for every ell and l.",
        REFERENCES, steps=(("independent effects (rho = 0)", sp.simplify(share.subs(rho, 0))),
                           ("identical effects (rho = 1)", sp.simplify(share.subs(rho, 1)))),
    )


def derive_trace_flow() -> Derivation:
    R = sp.Symbol("R")
    # the output error shrinks by 1/(1 + a_l/ell) when layer l's update is clean
    share = 1 - ell**2 / (ell + a) ** 2
    leading = sp.series(share, ell, sp.oo, 2).removeO()
    return Derivation(
        "trace-flow",
        "Recovered share of restoring one layer's clean update in an Euler flow: 1 - ell^2/(ell + a)^2",
        sp.Eq(R, share), (ell, a), _exponent(leading),
        "Scalar linear field dh/dt = a(t) h, Euler steps; the input corrupted by any eta.  "
        "Layer l's clean update keeps the state error e_l instead of (1 + a_l/ell) e_l, "
        "so the output error shrinks by 1/(1 + a_l/ell).  "
        "Exact for this model; to leading order 2 a(l/ell)/ell, following the field's rate.",
        REFERENCES, steps=(("leading order", leading),),
    )
