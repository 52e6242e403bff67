"""Probes and interventions of HuggingFace transformer models (needs the ``llm`` extra).

=================  =============================================================================
module             what it holds
=================  =============================================================================
``hf_probe``       hidden-state probes of HuggingFace models, with :mod:`resflow.probing`'s metrics
``interventions``  lesion, swap and ROME's causal trace on HuggingFace models
=================  =============================================================================
"""
