r"""Compositional use of depth: targets built from :math:`K` distinct maps (functional groups).

**Grouped accumulation (derived).**  A target made of :math:`K` functional groups — contiguous
runs of similar layers, each group a different map (:class:`resflow.Grouped`, teacher family
``grouped``) — leaves, in a student of depth :math:`\ell` whose layers split into the same
:math:`K` groups of :math:`n = \ell/K`, local errors of size :math:`\ell^{-q}` that are correlated
with :math:`\rho` inside a group and independent between groups.  Their correlation matrix is
block diagonal, so the quadratic form of :mod:`theory.accumulation` is a sum over the groups,

.. math:: \mathbf 1^\top C\, \mathbf 1 = K\big(\rho n^2 + (1-\rho) n\big) = \rho\,\ell^2/K + (1-\rho)\,\ell ,

and the loss is :math:`\ell^{-2q}\big(\rho\ell^2/K + (1-\rho)\ell\big)`.  With :math:`\rho = 1`
(tied within groups) it is the coherent law with its amplitude divided by :math:`K` — the groups'
errors add incoherently — so Euler students keep :math:`\alpha = 2`; the crossover from the
incoherent to the coherent regime moves from :math:`(1-\rho)/\rho` to :math:`\ell^* = K(1-\rho)/\rho`.

**Threshold and composition (hypotheses, not derived; not observed so far).**  Below
:math:`\ell \approx K` a student cannot give each of the :math:`K` maps layers of its own; the study reads its
causal-tracing result as functional groups dividing the labour, which suggests the loss stays near its
shallow value until :math:`\ell \approx K` and only then falls with the within-group law.  For a purely
compositional target (the Random Hierarchy Model, :class:`resflow.RandomHierarchyModel`) nothing
is left to average beyond :math:`K` composition steps, and the best to hope for is an
exponential decay in :math:`\ell - K`.  Both are stated as piecewise laws so that they can be
evaluated and tested.  No derivation exists for trained students; both were confronted with
training (``resflow run compositional``, ``resflow run hierarchy``, docs/results.md) and their
plateau below :math:`K` is not observed in these architectures at these budgets (none of the runs is
converged): ``status = "not observed"``, with the evidence.
"""

from __future__ import annotations

import sympy as sp

from ._law import Derivation
from .accumulation import ASSUMPTIONS, REFERENCES, ones_quadratic_form

__all__ = ["derive_grouped", "derive_threshold", "derive_composition"]

ell, q, K = sp.symbols("ell q K", positive=True)
rho = sp.Symbol("rho", nonnegative=True)
n = sp.Symbol("n", positive=True)
L_0, alpha_g, c = sp.symbols("L_0 alpha_g c", positive=True)

STUDY = "Liu, Kangaslahti, Liu & Gore, arXiv:2602.05970 (2026): causal tracing read as functional groups"
RHM = ("Cagnetta, Petrini, Tomasini, Favero & Wyart, Phys. Rev. X 14, 031001 (2024), arXiv:2307.02129 "
       "(the Random Hierarchy Model)")

# what the measurements say (docs/results.md: "compositional", "hierarchy: students of hierarchical data")
BELOW_K = ("its drops moved to smaller depths as training went on (at a quarter, half and all of the budget: "
           "> 8; > 8, 3, 3; 3, 2, 2 per grammar), and neither run converged")
THRESHOLD_EVIDENCE = (
    "not observed in residual MLP students at the cpu presets' budgets (no run converged): "
    "below K the loss is not flat. Students of grouped:8 teachers: 1.46e-2, 8.45e-3, 3.89e-3, 1.60e-3 at "
    "l = 1, 2, 4, 8 (`resflow run compositional --preset cpu`); students of Random Hierarchy Model data of "
    "hierarchy depth 4 (the grammar too large to memorise) fall below half the uniform-guess loss "
    "at l = 3, 2, 2 (three grammars), before L_h = 4 (`resflow run hierarchy --preset cpu`); "
    + BELOW_K + ". docs/results.md.")
COMPOSITION_EVIDENCE = (
    "not observed in residual MLP students at the cpu preset's budget (no run converged): "
    "its plateau below K is not seen: on Random Hierarchy Model data of hierarchy depth 4 the loss falls "
    "1.47, 0.675, 0.396 nats at l = 1, 2, 3 (`resflow run hierarchy --preset cpu`); "
    + BELOW_K + ". Beyond K "
    "the run is not converged (0.214, 0.148, 0.188 at l = 4, 6, 8), so the exponential tail is untested. "
    "docs/results.md.")


def derive_grouped() -> Derivation:
    per_group = ones_quadratic_form(rho, 1 - rho, n)  # 1^T C_g 1 of one equicorrelated block of n layers
    total = sp.expand((K * per_group).subs(n, ell / K))
    loss = sp.collect(sp.powsimp(sp.expand(ell ** (-2 * q) * total), force=True), rho)
    crossover = [s for s in sp.solve(sp.Eq((1 - rho) * ell, rho * ell**2 / K), ell) if s != 0][0]
    exponent = sp.simplify(-ell * sp.diff(loss, ell) / loss)
    return Derivation(
        "accumulation-grouped",
        "local errors correlated rho within K groups, independent between: "
        "loss ~ l^-2q (rho l^2/K + (1-rho) l)",
        sp.Eq(sp.Symbol("loss"), loss), (ell, q, rho, K), exponent,
        ASSUMPTIONS + " C block diagonal: K groups of l/K layers (K divides l), "
                      "rho within a group, 0 between.",
        (*REFERENCES, STUDY),
        steps=(("one group of n layers", sp.Eq(sp.Symbol("S_g"), per_group)),
               ("K groups of n = l/K layers", sp.Eq(sp.Symbol("S"), total)),
               ("crossover depth (incoherent = coherent part)", sp.Eq(sp.Symbol("ell^*"), crossover))),
        relation="proportional",
    )


def derive_threshold() -> Derivation:
    loss = sp.Piecewise((L_0, ell < K), (L_0 * (K / ell) ** alpha_g, True))
    return Derivation(
        "compositional-threshold",
        "loss flat until l ~ K functional groups, then the within-group law (exponent alpha_g)",
        sp.Eq(sp.Symbol("loss"), loss), (ell, K, L_0, alpha_g),
        sp.Piecewise((sp.Integer(0), ell < K), (alpha_g, True)),
        "Hypothesis, not derived: a student needs about one run of layers per functional group; with fewer "
        "than K layers it merges maps and its loss stays near the shallow value L_0; beyond K each group is "
        "averaged (alpha_g = 1, rough within) or integrated (alpha_g = 2, Euler, smooth within; "
        "accumulation-grouped).",
        (STUDY,), status="not observed", evidence=THRESHOLD_EVIDENCE,
    )


def derive_composition() -> Derivation:
    loss = sp.Piecewise((L_0, ell < K), (L_0 * sp.exp(-c * (ell - K)), True))
    return Derivation(
        "compositional-composition",
        "a purely compositional target (hierarchy depth K) at best decays exponentially beyond K",
        sp.Eq(sp.Symbol("loss"), loss), (ell, K, L_0, c),
        sp.Piecewise((sp.Integer(0), ell < K), (c * ell, True)),
        "Hypothesis, not derived: with K composition steps and nothing to average, extra layers can only "
        "refine each step; no power law is expected, at best exp(-c (l - K)). The exponent shown is the "
        "local one, -d log loss / d log l = c l.",
        (RHM, STUDY), status="not observed", evidence=COMPOSITION_EVIDENCE,
    )
