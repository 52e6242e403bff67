"""``resflow store check``: every record loaded and checked against its kind's schema, defined by its writer."""

from __future__ import annotations

from pathlib import Path

from ..analysis import fit_problems
from ..llm.ladder_records import ladder_problems
from ..records import run_problems
from ..store import Store, StoreReport, Validator

__all__ = ["RECORD_VALIDATORS", "check_store"]

RECORD_VALIDATORS: dict[str, Validator] = {"toy-run": run_problems, "fit": fit_problems, "lm-ladder": ladder_problems}


def check_store(store: Path | str | Store) -> StoreReport:
    """Load every record of ``store``, check the kinds that have a schema, list the leftovers; changes nothing."""
    store = store if isinstance(store, Store) else Store.open(store)
    return store.check(RECORD_VALIDATORS)
