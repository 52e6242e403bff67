r"""Which regime a fitted depth exponent is consistent with, from the derived laws.

* **ensemble** averaging: local errors of order :math:`\ell^{-1}` (:math:`q = 1`) added
  incoherently, :math:`\alpha = 1`;
* **procedural** assembly with a block of order :math:`p` (declared by its Butcher tableau):
  :math:`q = p + 1`, between coherent (:math:`\alpha = 2p`) and incoherent (:math:`2p + 1`).

Both come from :mod:`resflow.laws` (``accumulation-coherent`` / ``accumulation-incoherent``), and
the order from :data:`resflow.dynamics.TABLEAUX`: nothing here is typed in by hand.

:func:`law_gap` is the threshold of the separation (:mod:`resflow.fitting.separation`): how far apart the two
readings' plain slopes are *at a run's own depths and teacher depth*, from the finite-teacher laws
(``finite-teacher-ensemble`` against ``finite-teacher-procedural-coherent``).
"""

from __future__ import annotations

import math

import numpy as np

from .. import laws
from ..dynamics.tableau import get_tableau
from ..loglog import slopes

__all__ = ["ENSEMBLE_TOL", "PROCEDURAL_TOL", "regime_predictions", "classify", "law_gap", "GAP_LAWS"]

# the two readings' finite-teacher laws whose slopes the separation's threshold compares: the procedural
# law's coherent form (the smaller of its two exponents) against the ensemble law
GAP_LAWS = ("finite-teacher-procedural-coherent", "finite-teacher-ensemble")

ENSEMBLE_TOL = 0.3  # a CI within this distance of alpha = 1 counts as consistent with the ensemble law
PROCEDURAL_TOL = 0.3  # ... of the procedural range [2p, 2p + 1]


def regime_predictions(scheme: str) -> dict[str, tuple[float, float]]:
    """Exponent ranges ``{"ensemble": (lo, hi), "procedural": (lo, hi)}`` for a student block ``scheme``."""
    p = get_tableau(scheme).order
    ensemble = laws.exponent("accumulation-incoherent", ell=1, q=1)
    coherent = laws.exponent("accumulation-coherent", ell=1, q=p + 1)
    incoherent = laws.exponent("accumulation-incoherent", ell=1, q=p + 1)
    return {"ensemble": (ensemble, ensemble), "procedural": (coherent, incoherent)}


def classify(ci_low: float, ci_high: float, scheme: str, certified: bool,
             unjudged: str = "uncertified") -> str:
    """``"ensemble"``, ``"procedural"``, ``"intermediate"``, ``"undecided"`` (an interval wide enough for
    both laws), or ``unjudged`` when ``certified`` is False (never classified: for toy runs, verdict v4 did
    not certify every depth; the language-model ladder passes its own verdict and ``"unconverged"``; the
    asymptotic estimate passes True and labels its reading an estimate)."""
    if not certified:
        return unjudged
    pred = regime_predictions(scheme)
    e_lo, e_hi = pred["ensemble"]
    p_lo, p_hi = pred["procedural"]
    ensemble = ci_low <= e_hi + ENSEMBLE_TOL and ci_high >= e_lo - ENSEMBLE_TOL
    procedural = ci_high >= p_lo - PROCEDURAL_TOL and ci_low <= p_hi + PROCEDURAL_TOL
    if ensemble and procedural:
        return "undecided"
    if ensemble:
        return "ensemble"
    if procedural:
        return "procedural"
    return "intermediate"


def law_gap(depths, teacher_depth: float, scheme: str = "euler") -> float:
    r"""The smallest gap between the readings' plain depth exponents over ``depths`` against a teacher of
    depth ``teacher_depth`` (``inf``: an infinitely deep one): the least-squares slope of
    :math:`A(1/\ell - 1/L_T)^2` (procedural, coherent) minus that of :math:`A(1/\ell - 1/L_T)` (ensemble),
    both evaluated from their derivations.  1.29 over :math:`\ell = 2 \dots 16` against :math:`L_T = 32`;
    1 as :math:`L_T \to \infty`.  NaN when a depth reaches the teacher's (the laws predict zero loss there).

    The procedural law is the Euler block's for every ``scheme``: a block of order :math:`p > 1` has the
    larger leading-order exponent :math:`2p`, but its finite-teacher law carries a floor whose amplitude is
    not derived (``finite-teacher-higher-order``), so the Euler block's gap, the smallest, is the threshold.
    """
    get_tableau(scheme)  # an unknown scheme is named
    ell = np.asarray(depths, float)
    if ell.size < 2 or (math.isfinite(teacher_depth) and np.any(ell >= teacher_depth)):
        return math.nan
    procedural, ensemble = (float(slopes(ell, laws.evaluate(law, ell=ell, L_T=float(teacher_depth), A=1.0)))
                            for law in GAP_LAWS)
    return procedural - ensemble
