"""``resflow store check`` and ``resflow store gc``: every record loaded and checked against its kind's
schema, defined by its writer; the runs without a record yet listed; what killed writers and idle runs left
removed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..analysis import fit_problems
from ..llm.ladder.records import ladder_problems
from ..records import run_problems
from ..records.kinds import FIT, LM_LADDER, RECORD_KINDS, TOY_RUN
from ..store import Store, StoreReport, Validator
from .unfinished import UnfinishedRun, gc_store, idle_run_dirs, unfinished_runs

__all__ = ["RECORD_VALIDATORS", "StoreCheck", "check_store", "gc_store"]

# every kind checked by what it requires (resflow.records.kinds); three by their writers' fuller checks
RECORD_VALIDATORS: dict[str, Validator] = ({name: kind.problems for name, kind in RECORD_KINDS.items()}
                                           | {TOY_RUN.name: run_problems, FIT.name: fit_problems,
                                              LM_LADDER.name: ladder_problems})


@dataclass
class StoreCheck(StoreReport):
    """What :func:`check_store` found: the store's report (records, unreadable ones, leftovers -- run
    directories that did no work among them) and the runs with work done but no record yet (in progress or
    interrupted)."""

    unfinished: list[UnfinishedRun] = field(default_factory=list)


def check_store(store: Path | str | Store) -> StoreCheck:
    """Load every record of ``store``, check the kinds that have a schema, list the leftovers and the
    unfinished runs; changes nothing."""
    store = store if isinstance(store, Store) else Store.open(store)
    report = store.check(RECORD_VALIDATORS)
    runs = unfinished_runs(store)
    idle = idle_run_dirs(runs)
    idle_paths = {left.path for left in idle}
    return StoreCheck(records=report.records, unreadable=report.unreadable, leftovers=report.leftovers + idle,
                      removed=report.removed, unfinished=[r for r in runs if r.path not in idle_paths])
