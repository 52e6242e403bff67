"""Presenting: the tables and figures a reader sees, built from fits and probes.

=================  ==========================================================================
module             what it holds
=================  ==========================================================================
``report``         the Markdown tables of one toy run (what ``resflow report`` prints)
``run_figure``     the standard figure of a run: the headline (separated or not), then four panels
``plots``          figures (``matplotlib.figure.Figure``, no pyplot state), their panels, provenance stamping
``probe_figure``   the figure of ``resflow probe``: metrics against layer, models overlaid
``axis_figure``    the figure of a sweep along one key: α and law α against its value, bounds drawn open
``compare``        theory, toy and LLM exponents side by side
``signatures``     the three readings side by side: angles, early stop, early exit, groups, drop depth
``figure``         the figure type: a ``Figure`` that shows itself inline in Jupyter (``_repr_png_``)
=================  ==========================================================================

What a reader calls each teacher is :mod:`resflow.labels`.  The public names are re-exported by
:mod:`resflow.analysis`.
"""
