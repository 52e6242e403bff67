"""The trained-LLM side: depth scaling laws on real model tables, and probes of transformer models.

=================  =============================================================================
module             what it holds
=================  =============================================================================
``data``           scaling tables (the Chinchilla table, or any CSV with a column mapping)
``scaling_fit``    the robust multi-start fit of L(m, l, D), bootstrap, hold-out, exclusion sweep
``comparison``     an ``llm-fit`` record's exponent row and depth part for the comparison
``hf_probe``       hidden-state probes of HuggingFace models (needs the ``llm`` extra)
``interventions``  lesion, swap and ROME's causal trace on HuggingFace models (the ``llm`` extra)
=================  =============================================================================

Built on :mod:`resflow.analysis` (the same metrics for transformers as for toy stacks).
"""

from .comparison import depth_part, llm_row
from .data import CHINCHILLA, OPTIONAL_COLUMNS, REQUIRED_COLUMNS, load_scaling_table, parse_column_map, table_dataset
from .hf_probe import probe_hf, read_texts
from .scaling_fit import PARAMS, LawFit, ScalingFitSettings, bootstrap_fit, exclusion_sweep, fit_scaling_law, predict

__all__ = [
    "CHINCHILLA", "REQUIRED_COLUMNS", "OPTIONAL_COLUMNS", "load_scaling_table", "parse_column_map", "table_dataset",
    "PARAMS", "ScalingFitSettings", "LawFit", "fit_scaling_law", "bootstrap_fit", "exclusion_sweep", "predict",
    "llm_row", "depth_part", "probe_hf", "read_texts",
]
