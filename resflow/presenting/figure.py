"""The figure type of every resflow plot: a matplotlib ``Figure`` that shows itself inline.

A figure built without pyplot has no inline formatter in IPython unless pyplot was imported
(``import resflow`` never imports it); ``_repr_png_`` makes the last expression of a Jupyter cell
show the picture without choosing a backend or touching matplotlib's settings.  Imported only
when a figure is made (it imports matplotlib).
"""

from __future__ import annotations

import io

from matplotlib.figure import Figure

__all__ = ["InlineFigure"]


class InlineFigure(Figure):
    """:class:`matplotlib.figure.Figure` with ``_repr_png_`` (picklable: defined at module level)."""

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=90)
        return buffer.getvalue()
