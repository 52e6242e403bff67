"""Where the next run's steps go: to the depths that verdict v4 did not certify.

A depth is not certified when its routes disagree (:mod:`resflow.fitting.certification`), and an exponent
when that happens at some depth or when it is still moving with training (:mod:`resflow.fitting.drift`): the
first is answered by training that depth longer, the second by training every depth longer, neither by
training a certified depth longer.  :func:`next_budgets` plans one doubling for the uncertified depths
and keeps every certified depth at the steps it already had: ``train.steps`` doubles and a certified
depth's share (``ExperimentConfig.budgets``) halves.  Continuation parents need nothing more: a deep
student continues from the run's own half-depth student at whatever length that one trains.

A depth that failed for a reason more steps cannot fix (one start and nothing to compare it with, a
student that failed) is named in ``other`` and left at its steps: it needs another route or init, or a
look at why the student failed.

The cost is an *estimate*: a student's step costs in proportion to its depth (the per-route, per-depth
costs in ``docs/benchmarks.md`` are close to it), so a run costs about
:math:`\\sum_\\ell \\ell \\, b_\\ell \\, S` per student; ``cost_ratio`` is the next run's over this one's.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BudgetPlan", "next_budgets", "plan_next_run", "LONGER_HELPS"]

#: the beginnings of the certification reasons that more steps can answer (DepthCertificate.reasons)
LONGER_HELPS = ("the routes disagree", "the inits (one route) disagree", "the exponent still moves")


@dataclass(frozen=True, kw_only=True)
class BudgetPlan:
    """The next run's ``train.steps`` and per-depth ``budgets`` (shares of the steps, depth order), which
    depths get more steps (``longer``), which cannot be helped by steps (``other``), and the estimated cost
    of the next run over this one's.  ``overrides`` are the ``--set`` assignments; empty when nothing is
    left to train longer."""

    depths: tuple[int, ...]
    steps: int
    budgets: tuple[float, ...]
    longer: tuple[int, ...]
    other: tuple[int, ...]
    cost_ratio: float

    @property
    def overrides(self) -> tuple[str, ...]:
        if not self.longer:
            return ()
        shares = ",".join(f"{b:g}" for b in self.budgets)
        return (f"train.steps={self.steps}", f"budgets={shares}")

    @property
    def text(self) -> str:
        if not self.longer:
            left = (f"; ℓ = {', '.join(map(str, self.other))} need another route or init, not more steps"
                    if self.other else "")
            return "no depth would gain from more steps" + left
        sets = " ".join(f"--set {o}" for o in self.overrides)
        which = ("every depth twice as long" if self.longer == self.depths else
                 f"ℓ = {', '.join(map(str, self.longer))} twice as long, the other depths as long as now")
        words = (f"train {which}: {sets} "
                 f"(about {self.cost_ratio:.2f}× this run's cost, an estimate ∝ depth × steps)")
        if self.other:
            words += f"; ℓ = {', '.join(map(str, self.other))} need another route or init, not more steps"
        return words


def _reason_helped(reason: str) -> bool:
    return any(key in reason for key in LONGER_HELPS)


def next_budgets(depths, steps: int, budgets, reasons) -> BudgetPlan:
    """Plan one doubling of training for the depths whose certification failed for a reason steps answer.

    ``depths`` and ``budgets`` (shares of ``steps``, empty for "every depth the whole run") are the run's;
    ``reasons`` maps each depth to the reasons it is not certified, gathered over every series of the run
    (empty or missing: certified).  The next run has twice the steps, an uncertified depth keeps its share
    (twice its steps) and every other depth half its share (its steps unchanged); if no depth then has the
    whole run, the steps shrink so that the largest share is 1.
    """
    depths = tuple(int(d) for d in depths)
    if not depths:
        raise ValueError("depths: at least one depth is needed to plan a run; got none.")
    shares = tuple(float(b) for b in budgets) or (1.0,) * len(depths)
    if len(shares) != len(depths):
        raise ValueError(f"budgets: one share per depth ({len(depths)} depths {depths}); got {len(shares)}.")
    if int(steps) < 1:
        raise ValueError(f"steps: the run's train.steps, a positive integer; got {steps!r}.")
    reasons = {int(d): tuple(r) for d, r in dict(reasons).items()}
    longer = tuple(d for d in depths if any(_reason_helped(r) for r in reasons.get(d, ())))
    other = tuple(d for d in depths if reasons.get(d) and d not in longer)
    if not longer:
        return BudgetPlan(depths=depths, steps=int(steps), budgets=shares, longer=(), other=other,
                          cost_ratio=1.0)
    given = {d: int(round(b * steps)) for d, b in zip(depths, shares, strict=True)}  # steps each had
    wanted = {d: 2 * given[d] if d in longer else given[d] for d in depths}
    new_steps = max(wanted.values())
    new_shares = tuple(wanted[d] / new_steps for d in depths)
    before = sum(d * given[d] for d in depths)
    after = sum(d * wanted[d] for d in depths)
    return BudgetPlan(depths=depths, steps=new_steps, budgets=tuple(round(b, 6) for b in new_shares),
                      longer=longer, other=other, cost_ratio=after / before)


#: the part of an exponent's certificate that says it is still moving (ExponentCertificate.reasons)
STILL_MOVES = "the exponent still moves"


def plan_next_run(depths, steps: int, budgets, fits) -> BudgetPlan:
    """:func:`next_budgets` from a run's fits (:class:`~resflow.fitting.fits.SeriesFit`): a depth's reasons
    are the verdicts of every series that did not certify it, and every depth of a series whose exponent is
    still moving gets that reason too."""
    reasons: dict[int, list[str]] = {int(d): [] for d in depths}
    for f in fits:
        for d, verdict in zip(f.depths, f.depth_verdicts, strict=True):
            if d not in f.certified_depths and int(d) in reasons:
                reasons[int(d)].append(verdict)
        if STILL_MOVES in f.certificate:
            for d in f.depths:
                if int(d) in reasons:
                    reasons[int(d)].append(STILL_MOVES)
    return next_budgets(depths, steps, budgets, reasons)
