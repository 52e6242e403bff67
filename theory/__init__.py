"""Symbolic derivations (sympy) of the error-vs-depth laws; installed as ``resflow.theory``.

One module per law; each ``derive*`` function returns a :class:`Derivation` (expression,
evaluation parameters, loss-vs-depth exponent, assumptions, references).  :data:`LAWS` maps the
public names to those functions; :mod:`resflow.laws` evaluates them numerically *from the derived
expressions* (one source of truth).
"""

from __future__ import annotations

from collections.abc import Callable

from . import (
    accumulation,
    compositional,
    discretisation,
    ensemble,
    finite_teacher,
    interventions,
    kl,
    llm_scaling,
    roughness,
    taylor_matching,
    width,
)
from ._law import Derivation

__all__ = ["Derivation", "LAWS"]

LAWS: dict[str, Callable[[], Derivation]] = {
    "order-conditions": taylor_matching.derive,
    "discretisation-error": discretisation.derive_global,
    "local-error": discretisation.derive_local,
    "accumulation-coherent": accumulation.derive_coherent,
    "accumulation-incoherent": accumulation.derive_incoherent,
    "accumulation-equicorrelated": accumulation.derive_equicorrelated,
    "accumulation-fractional": accumulation.derive_fractional,
    "accumulation-grouped": compositional.derive_grouped,
    "compositional-threshold": compositional.derive_threshold,
    "compositional-composition": compositional.derive_composition,
    "ensemble-equicorrelated": ensemble.derive_equicorrelated,
    "ensemble-fractional": ensemble.derive_fractional,
    "finite-teacher-ensemble": finite_teacher.derive_ensemble,
    "finite-teacher-procedural-coherent": finite_teacher.derive_procedural_coherent,
    "finite-teacher-procedural-incoherent": finite_teacher.derive_procedural_incoherent,
    "finite-teacher-procedural-modified": finite_teacher.derive_procedural_modified,
    "finite-teacher-higher-order": finite_teacher.derive_higher_order_floor,
    "roughness-correlated": roughness.derive_correlated,
    "roughness-fractional": roughness.derive_fractional,
    "roughness-correlated-linear": roughness.derive_correlated_linear,
    "roughness-fractional-linear": roughness.derive_fractional_linear,
    "kl-small-error": kl.derive,
    "lesion-ensemble": interventions.derive_lesion_ensemble,
    "lesion-rescaled-ensemble": interventions.derive_lesion_rescaled_ensemble,
    "swap-ensemble": interventions.derive_swap_ensemble,
    "lesion-flow": interventions.derive_lesion_flow,
    "lesion-rescaled-flow": interventions.derive_lesion_rescaled_flow,
    "swap-flow": interventions.derive_swap_flow,
    "trace-ensemble": interventions.derive_trace_ensemble,
    "trace-flow": interventions.derive_trace_flow,
    "llm-depth-width": llm_scaling.derive,
    "width-limited-block": width.derive_width_limited,
}
"""Law name -> derivation function."""
