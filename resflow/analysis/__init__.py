"""Analysis: what a run, a probe or a model says about how depth is used -- the public names of three rooms.

=================  ==========================================================================
room               what it holds
=================  ==========================================================================
``fitting``        depth exponents of a run, their intervals, verdicts v4 and v2, the separation of the
                   readings, the laws' regimes, fit records (:mod:`resflow.fitting`)
``probing``        hidden-state metrics and probes, functional groups, early exit, lesion/swap/trace,
                   tracking a teacher along depth (:mod:`resflow.probing`)
``presenting``     the run's tables and figure, the theory--toy--LLM comparison, signatures, plots
                   (:mod:`resflow.presenting`)
=================  ==========================================================================

``from resflow.analysis import fit_dataset`` is the way in; the rooms' modules are the place to read
(the module paths of 0.4, ``resflow.analysis.fits`` and the like, were dropped before 0.5 was released).
What a reader calls each teacher is :mod:`resflow.labels`.
"""

from ..fitting.allocation import BudgetPlan, next_budgets, plan_next_run
from ..fitting.certification import (
    ROUTE_TOLERANCE,
    DepthCertificate,
    ExponentCertificate,
    certify_depths,
    certify_exponent,
    route_error,
)
from ..fitting.drift import EXPONENT_TOLERANCE, RemainingDrift, remaining_drift
from ..fitting.extrapolation import TAIL_TOLERANCE, TailTest, tail_test
from ..fitting.fit_records import FIT_SCHEMA, fit_problems, fits_from_dataset, fits_to_dataset
from ..fitting.fits import FitSettings, SeriesFit, exponent_over_training, fit_dataset, fit_exponent
from ..fitting.intervals import ExponentInterval, exponent_interval
from ..fitting.law_fit import finite_teacher_factor, law_for_target
from ..fitting.profile import ProfileFit, profile_offset_fit, seed_standard_errors
from ..fitting.regimes import classify, law_gap, regime_predictions
from ..fitting.roughness import roughness_predictions
from ..fitting.separation import Separation, separations
from ..fitting.verdict import Verdict, convergence_verdict
from ..labels import Mentions, series_label, teacher_label
from ..presenting.compare import ComparisonRow, DepthPart, comparison_figure, theory_rows, toy_rows
from ..presenting.plots import colors, new_figure, plot_flow_demo, save_figure
from ..presenting.report import run_tables
from ..presenting.run_figure import headline, plot_experiment
from ..probing.constructions import (
    CONSTRUCTION_LABELS,
    construction_fields,
    construction_loss,
    construction_output,
)
from ..probing.groups import (
    boundary_pairs,
    exponent_difference,
    group_signature,
    one_structure,
    split_update_angles,
    states_group_signature,
)
from ..probing.intervention_rows import InterventionRow, intervention_exponents, intervention_rows
from ..probing.interventions import (
    PROFILE_LABELS,
    InterventionProfile,
    intervention_dataset,
    lesion,
    run_steps,
    stack_profiles,
    swap,
    trace,
)
from ..probing.metrics import METRIC_LABELS, METRICS, angle, step_angles, token_metrics, update_angles
from ..probing.probes import (
    SIGNATURE_LABELS,
    ProbeAccumulator,
    ProbeResult,
    angle_early_stop_fraction,
    early_stop_fraction,
    probe_dataset,
    probe_states,
    state_signature,
    step_size_slope,
)
from ..probing.tracking import TRACKING_LABELS, tracking_metrics

__all__ = [
    "exponent_difference",
    "run_tables",
    "BudgetPlan", "next_budgets", "plan_next_run",
    "ROUTE_TOLERANCE", "DepthCertificate", "certify_depths", "route_error", "ExponentCertificate",
    "certify_exponent", "EXPONENT_TOLERANCE", "RemainingDrift", "remaining_drift",
    "TAIL_TOLERANCE", "TailTest", "tail_test",
    "Separation", "separations", "law_gap",
    "ProfileFit", "profile_offset_fit", "seed_standard_errors",
    "InterventionProfile", "lesion", "swap", "trace", "run_steps", "intervention_dataset",
    "stack_profiles", "PROFILE_LABELS", "intervention_exponents",
    "InterventionRow", "intervention_rows",
    "METRICS", "METRIC_LABELS", "angle", "step_angles", "update_angles", "token_metrics",
    "ProbeAccumulator", "ProbeResult", "probe_states", "early_stop_fraction", "step_size_slope",
    "probe_dataset", "angle_early_stop_fraction",
    "state_signature", "SIGNATURE_LABELS", "boundary_pairs", "split_update_angles", "group_signature",
    "states_group_signature", "one_structure",
    "TRACKING_LABELS", "tracking_metrics",
    "CONSTRUCTION_LABELS", "construction_fields", "construction_output", "construction_loss",
    "FitSettings", "SeriesFit", "fit_dataset", "fit_exponent", "fits_to_dataset", "fits_from_dataset",
    "FIT_SCHEMA", "fit_problems",
    "exponent_over_training", "regime_predictions", "classify", "roughness_predictions", "ExponentInterval",
    "exponent_interval", "finite_teacher_factor", "law_for_target", "Verdict", "convergence_verdict",
    "ComparisonRow", "DepthPart", "theory_rows", "toy_rows", "comparison_figure",
    "new_figure", "colors", "save_figure", "plot_experiment", "plot_flow_demo", "headline",
    "teacher_label", "series_label", "Mentions",
]
