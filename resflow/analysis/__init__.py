"""Analysis: what a run, a probe or a model says about how depth is used.

=================  ==========================================================================
module             what it holds
=================  ==========================================================================
``metrics``        hidden-state metrics (angles, norms, progress): one definition for every model
``probes``         streaming aggregation of the metrics over tokens, early stopping, probe records
``groups``         update angles within a functional group of layers and across its boundaries
``early_exit``     where each input's readout exits along depth: confidence and settled rules
``hierarchy``      students of Random Hierarchy Model data: losses, accuracies, the depth at which the loss drops
``signatures``     the three readings side by side: angles, early stop, early exit, groups, drop depth
``interventions``  lesion, swap and trace across depth on any residual stack, batched over layers
``fits``           depth exponents of a run from every depth's best loss over routes: plain, law-aware,
                   offset, asymptotic; verdicts v3 and v2; the regime
``certification``  verdict v3: a depth is certified when its training routes agree and every tail passes
``separation``     the first answer: tied minus independent exponents, paired, and whether they separate
``intervals``      one estimator and its interval from independent replicates (Student t; batch bootstrap)
``law_fit``        the finite-teacher factor of the law-aware fit
``verdict``        the convergence verdict (v2): the exponent's drift and every depth's remaining gain
``extrapolation``  the loss along training lengths: its limit, the remaining gain, the asymptotic exponent;
                   the tail test of verdict v3
``tracking``       a student against its teacher along depth: local errors and how coherently they add
``fit_records``    fits as ``fit`` store records and back
``regimes``        the regime an exponent is consistent with (from the derived laws)
``roughness``      the roughness law's predictions for a run of correlated/fractional teachers
``compare``        theory, toy and LLM exponents side by side
``report``         the Markdown tables of one toy run (what ``resflow report`` prints)
``labels``         what a reader calls each teacher: "smooth (tied)" on first mention, "smooth" after
``plots``          figures (``matplotlib.figure.Figure``, no pyplot state), their panels, provenance stamping
``run_figure``     the standard figure of a run: the headline (separated or not), then four panels
``figure``         the figure type: a ``Figure`` that shows itself inline in Jupyter (``_repr_png_``)
=================  ==========================================================================

Works on tensors of hidden states and on labelled Datasets; it trains nothing and opens no store.
"""

from .certification import ROUTE_TOLERANCE, DepthCertificate, certify_depths, route_error
from .compare import ComparisonRow, DepthPart, comparison_figure, theory_rows, toy_rows
from .extrapolation import TAIL_TOLERANCE, TailTest, tail_test
from .fit_records import FIT_SCHEMA, fit_problems, fits_from_dataset, fits_to_dataset
from .fits import FitSettings, SeriesFit, exponent_over_training, fit_dataset, fit_exponent
from .groups import (
    boundary_pairs,
    exponent_difference,
    group_signature,
    one_structure,
    split_update_angles,
    states_group_signature,
)
from .intervals import ExponentInterval, exponent_interval
from .interventions import (
    PROFILE_LABELS,
    InterventionProfile,
    InterventionRow,
    intervention_dataset,
    intervention_exponents,
    intervention_rows,
    lesion,
    run_steps,
    stack_profiles,
    swap,
    trace,
)
from .labels import Mentions, series_label, teacher_label
from .law_fit import finite_teacher_factor, law_for_target
from .metrics import METRIC_LABELS, METRICS, angle, step_angles, token_metrics, update_angles
from .plots import colors, new_figure, plot_flow_demo, save_figure
from .probes import (
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
from .regimes import classify, regime_predictions
from .report import run_tables
from .roughness import roughness_predictions
from .run_figure import headline, plot_experiment
from .separation import SEPARATION_MARGIN, Separation, separations
from .tracking import TRACKING_LABELS, tracking_metrics
from .verdict import Verdict, convergence_verdict

__all__ = [
    "exponent_difference",
    "run_tables",
    "ROUTE_TOLERANCE", "DepthCertificate", "certify_depths", "route_error", "TAIL_TOLERANCE", "TailTest", "tail_test",
    "SEPARATION_MARGIN", "Separation", "separations",
    "InterventionProfile", "lesion", "swap", "trace", "run_steps", "intervention_dataset",
    "stack_profiles", "PROFILE_LABELS", "intervention_exponents",
    "InterventionRow", "intervention_rows",
    "METRICS", "METRIC_LABELS", "angle", "step_angles", "update_angles", "token_metrics",
    "ProbeAccumulator", "ProbeResult", "probe_states", "early_stop_fraction", "step_size_slope", "probe_dataset",
    "angle_early_stop_fraction",
    "state_signature", "SIGNATURE_LABELS", "boundary_pairs", "split_update_angles", "group_signature",
    "states_group_signature", "one_structure",
    "TRACKING_LABELS", "tracking_metrics",
    "FitSettings", "SeriesFit", "fit_dataset", "fit_exponent", "fits_to_dataset", "fits_from_dataset", "FIT_SCHEMA",
    "fit_problems",
    "exponent_over_training", "regime_predictions", "classify", "roughness_predictions", "ExponentInterval",
    "exponent_interval", "finite_teacher_factor", "law_for_target", "Verdict", "convergence_verdict",
    "ComparisonRow", "DepthPart", "theory_rows", "toy_rows", "comparison_figure",
    "new_figure", "colors", "save_figure", "plot_experiment", "plot_flow_demo", "headline",
    "teacher_label", "series_label", "Mentions",
]
