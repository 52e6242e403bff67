"""The figure of a sweep along one key: α and law α against the key's value, per teacher.

Each exponent is drawn with its interval; a certified one (verdict v4: routes agree, drift settled) as a
filled
marker, a bound as an open one, and the legend says which.  The caller passes the fits of each value
(:func:`resflow.workflows.axis_report` merges and fits a sweep's cells).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..labels import teacher_label
from .plots import colors, new_figure

__all__ = ["plot_axis"]


def plot_axis(key: str, fits_by_value: Mapping[str, Sequence]):
    """α (left) and law α (right) of every teacher against the value of ``key`` (module docstring)."""
    fig, (plain, law) = new_figure(2, figsize=(9.0, 4.0))
    values = list(fits_by_value)
    numeric = all(_is_number(v) for v in values)
    x = {v: float(v) if numeric else i for i, v in enumerate(values)}
    targets = sorted({(f.target, f.scheme) for fits in fits_by_value.values() for f in fits})
    palette = colors("tab10", len(targets))
    for (target, scheme), colour in zip(targets, palette, strict=True):
        for ax, (name, low, high) in ((plain, ("exponent", "ci_low", "ci_high")),
                                      (law, ("law_exponent", "law_ci_low", "law_ci_high"))):
            pts = [(x[v], getattr(f, name), getattr(f, low), getattr(f, high), f.exponent_certified)
                   for v, fits in fits_by_value.items() for f in fits
                   if (f.target, f.scheme) == (target, scheme)]
            xs, ys, lo, hi, certified = (np.array(c) for c in zip(*pts, strict=True))
            label = teacher_label(target) + ("" if scheme == "euler" else f" ({scheme})")
            ax.plot(xs, ys, color=colour, lw=1, alpha=0.6)
            ax.errorbar(xs, ys, yerr=[ys - lo, hi - ys], fmt="none", ecolor=colour, capsize=3)
            for done, face, what in ((True, colour, "certified"), (False, "white", "bound")):
                pick = certified == done
                if pick.any():
                    ax.plot(xs[pick], ys[pick], "o", color=colour, mfc=face, ms=7, label=f"{label}: {what}")
    for ax, title in ((plain, "plain α"), (law, "law α (finite-teacher factor divided out)")):
        ax.set_xlabel(key)
        ax.set_ylabel("α [95%]")
        ax.set_title(title, fontsize=10)
        if numeric:
            ax.set_xscale("log", base=2)
            ax.set_xticks([x[v] for v in values], values)
        else:
            ax.set_xticks(range(len(values)), values)
    plain.legend(fontsize=7)
    return fig


def _is_number(value: str) -> bool:
    try:
        return float(value) > 0
    except ValueError:
        return False
