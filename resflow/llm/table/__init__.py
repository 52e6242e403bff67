"""Depth scaling laws fitted on tables of trained language models (the Chinchilla table, or a user's CSV).

=================  =============================================================================
module             what it holds
=================  =============================================================================
``data``           scaling tables (the Chinchilla table, or any CSV with a column mapping)
``scaling_fit``    the robust multi-start fit of L(m, l, D), bootstrap, hold-out, exclusion sweep
``comparison``     an ``llm-fit`` record's exponent row and depth part for the comparison
=================  =============================================================================
"""
