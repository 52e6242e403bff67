"""The trained-LLM side: depth scaling laws on real model tables, probes of transformer models, and the
language models trained here (the depth ladder).

=================  =============================================================================
room               what it holds
=================  =============================================================================
``table``          scaling tables (the Chinchilla table or a CSV), the fit of L(m, l, D), comparison rows
``probes``         hidden-state probes, lesion, swap and causal trace of HuggingFace models (``llm`` extra)
``ladder``         the depth ladder trained here: corpus, model, training, the depth law, its record
=================  =============================================================================

Built on :mod:`resflow.probing` (the same metrics for transformers as for toy stacks), :mod:`resflow.fitting`
and :mod:`resflow.presenting`.  The modules of 0.4 (``resflow.llm.scaling_fit``,
``resflow.llm.ladder_fit``, ...) still import, with a FutureWarning naming the new path.
"""

from .ladder.train import LadderConfig
from .probes.hf_probe import probe_hf, read_texts
from .table.comparison import depth_part, llm_row
from .table.data import (
    CHINCHILLA,
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    load_scaling_table,
    parse_column_map,
    table_dataset,
)
from .table.scaling_fit import (
    PARAMS,
    LawFit,
    ScalingFitSettings,
    bootstrap_fit,
    exclusion_sweep,
    fit_scaling_law,
    predict,
)

__all__ = [
    "CHINCHILLA", "REQUIRED_COLUMNS", "OPTIONAL_COLUMNS",
    "load_scaling_table", "parse_column_map", "table_dataset",
    "PARAMS", "ScalingFitSettings", "LawFit",
    "fit_scaling_law", "bootstrap_fit", "exclusion_sweep", "predict",
    "llm_row", "depth_part", "probe_hf", "read_texts", "LadderConfig",
]
