r"""The convergence verdict: does the exponent still move when training is twice as long?

A decaying learning rate flattens any loss curve, so "the loss stopped falling" is necessary but
not sufficient.  Every student of a run therefore has a copy trained for half the steps, with the
same schedule compressed to its length (``length = 0.5``; :mod:`resflow.sim.engine`).  A series is
**converged** only if, from the half-length to the full-length students,

* its exponent moved by less than the half-width of its own interval, and
* no depth's loss improved by more than ``loss_tolerance`` (relative), and
* no student failed.

Otherwise its exponent is reported as a bound with the verdict "not converged", and the reason.
Without half-length students the verdict is "not checked" (never converged).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..loglog import slopes

__all__ = ["Verdict", "convergence_verdict", "LOSS_TOLERANCE"]

LOSS_TOLERANCE = 0.10  # a run twice as long may lower no depth's loss by more than 10%


@dataclass(frozen=True, kw_only=True)
class Verdict:
    converged: bool
    text: str
    half_exponent: float
    exponent_shift: float  # full-length exponent minus half-length exponent
    loss_improvement: float  # largest relative drop of a depth's loss from half to full length


def convergence_verdict(depths, full: np.ndarray, half: np.ndarray | None, exponent: float, half_width: float,
                        *, failed: bool = False, loss_tolerance: float = LOSS_TOLERANCE) -> Verdict:
    """The verdict from the replicate-mean final losses per depth of the full- and half-length students."""
    if failed:
        return Verdict(converged=False, text="not converged: a student failed", half_exponent=math.nan,
                       exponent_shift=math.nan, loss_improvement=math.nan)
    if half is None or not np.all(np.isfinite(half)):
        return Verdict(converged=False, text="not checked: no half-length students (train with lengths 0.5, 1)",
                       half_exponent=math.nan, exponent_shift=math.nan, loss_improvement=math.nan)
    half_exponent = slopes(depths, half)
    shift = exponent - half_exponent
    improvement = float(np.max(1.0 - np.asarray(full) / np.asarray(half)))
    reasons = []
    if not abs(shift) < half_width:
        reasons.append(f"the exponent moved {shift:+.2f} from half to full length, more than its interval's "
                       f"half-width {half_width:.2f}")
    if improvement > loss_tolerance:
        depth = int(np.asarray(depths)[np.argmax(1.0 - np.asarray(full) / np.asarray(half))])
        reasons.append(f"the depth-{depth} loss still fell {improvement:.0%} from half to full length "
                       f"(tolerance {loss_tolerance:.0%})")
    text = "converged" if not reasons else "not converged (the exponent is a bound): " + "; ".join(reasons)
    return Verdict(converged=not reasons, text=text, half_exponent=float(half_exponent), exponent_shift=float(shift),
                   loss_improvement=improvement)
