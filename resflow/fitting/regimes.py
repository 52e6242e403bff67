r"""Which regime a fitted depth exponent is consistent with, from the derived laws.

* **ensemble** averaging: local errors of order :math:`\ell^{-1}` (:math:`q = 1`) added
  incoherently, :math:`\alpha = 1`;
* **procedural** assembly with a block of order :math:`p` (declared by its Butcher tableau):
  :math:`q = p + 1`, between coherent (:math:`\alpha = 2p`) and incoherent (:math:`2p + 1`).

Both come from :mod:`resflow.laws` (``accumulation-coherent`` / ``accumulation-incoherent``), and
the order from :data:`resflow.dynamics.TABLEAUX`: nothing here is typed in by hand.
"""

from __future__ import annotations

from .. import laws
from ..dynamics.tableau import get_tableau

__all__ = ["ENSEMBLE_TOL", "PROCEDURAL_TOL", "regime_predictions", "classify"]

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
    both laws), or ``unjudged`` when ``certified`` is False (never classified: for toy runs, verdict v3 did
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
