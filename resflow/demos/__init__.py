"""Classroom demos: each a public function that returns a figure and its data in seconds.

==========================  ==========================================================================
demo                        what it shows
==========================  ==========================================================================
``stack_to_ode``            a tied residual stack converges to its ODE; Euler, midpoint, RK4 and their orders
``error_accumulation``      local errors adding coherently (loss ~ l^-2) or incoherently (l^-3)
``ensemble_averaging``      a noisy ensemble averages as 1/l down to a plateau set by the correlation rho
``teacher_angles``          tied vs independent teachers: per-layer step and update angles
``smooth_vs_rough``         a seconds-long training on a smooth (tied) and a rough (independent) teacher
``roughness_knob``          the exponent and the crossover depth vs rho, from theory, with a Monte Carlo check
``lesion_profiles``         skipping one layer: rescaling repairs a smooth flow (l^-4), not an ensemble (l^-2)
``llm_depth_fit``           the depth scaling law fitted on the Chinchilla table (when the data is at hand)
==========================  ==========================================================================

Modules: ``core`` (:class:`DemoResult`, the registry), ``flows`` (a, b), ``noise`` (c, f),
``training`` (d, e, g), ``interventions`` (h), ``__main__`` (run them all, print their seconds).

Every demo takes a ``seed`` (and a few sizes, checked with the package's shared validators), is
built on resflow's public API (nothing is re-implemented for teaching), and returns a
:class:`DemoResult` whose ``figure`` displays inline in Jupyter (no backend is chosen) and whose
``data`` is an :class:`xarray.Dataset` with provenance attrs.  ``resflow demo --list`` lists them,
``resflow demo NAME --out STORE`` saves one into the store's work directory, ``python -m resflow.demos``
runs them all.
"""

from .core import DEMOS, DemoResult, run_demo
from .flows import error_accumulation, stack_to_ode
from .interventions import lesion_profiles
from .noise import ensemble_averaging, roughness_knob
from .training import llm_depth_fit, smooth_vs_rough, teacher_angles

__all__ = ["DEMOS", "DemoResult", "run_demo", "stack_to_ode", "error_accumulation", "ensemble_averaging",
           "teacher_angles", "smooth_vs_rough", "roughness_knob", "lesion_profiles", "llm_depth_fit"]
