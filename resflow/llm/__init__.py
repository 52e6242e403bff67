"""The trained-LLM side: depth scaling laws on real model tables, probes of transformer models, and the
language models trained here (the depth ladder).

=================  =============================================================================
module             what it holds
=================  =============================================================================
``data``           scaling tables (the Chinchilla table, or any CSV with a column mapping)
``scaling_fit``    the robust multi-start fit of L(m, l, D), bootstrap, hold-out, exclusion sweep
``comparison``     an ``llm-fit`` record's exponent row and depth part for the comparison
``hf_probe``       hidden-state probes of HuggingFace models (needs the ``llm`` extra)
``interventions``  lesion, swap and ROME's causal trace on HuggingFace models (the ``llm`` extra)
``corpus``         text corpora fetched from a package registry, pinned by hash; whole-document splits
``lm``             the small decoder-only model trained here (HF Llama), its BPE tokenizer, its
                   residual stream
``lm_training``    training one model: AdamW, warmup-stable-decay, forks for the shorter lengths
``ladder``         :class:`LadderConfig` and :func:`train_ladder`: every model trained and measured
``ladder_fit``     the depth law c l^-a + L_inf per width (t intervals over seeds), the Chinchilla form
``ladder_records`` the ``lm-ladder`` record, its tables, figure and comparison rows
=================  =============================================================================

Built on :mod:`resflow.analysis` (the same metrics for transformers as for toy stacks).
"""

from .comparison import depth_part, llm_row
from .data import CHINCHILLA, OPTIONAL_COLUMNS, REQUIRED_COLUMNS, load_scaling_table, parse_column_map, table_dataset
from .hf_probe import probe_hf, read_texts
from .ladder import LadderConfig
from .scaling_fit import PARAMS, LawFit, ScalingFitSettings, bootstrap_fit, exclusion_sweep, fit_scaling_law, predict

__all__ = [
    "CHINCHILLA", "REQUIRED_COLUMNS", "OPTIONAL_COLUMNS", "load_scaling_table", "parse_column_map", "table_dataset",
    "PARAMS", "ScalingFitSettings", "LawFit", "fit_scaling_law", "bootstrap_fit", "exclusion_sweep", "predict",
    "llm_row", "depth_part", "probe_hf", "read_texts", "LadderConfig",
]
