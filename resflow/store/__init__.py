"""The result store: theory, toy runs, fits, LLM data and probes side by side, as xarray records.

=============  =============================================================================
module         what it holds
=============  =============================================================================
``store``      :class:`Store`: a directory of atomically written zarr records, append-only;
               ``check``/``gc`` for what killed writers leave behind
``workdirs``   fresh per-run working directories (checkpoints, figures) that never overwrite;
               ``run.lock``, held while a run works: in progress or interrupted, told apart
=============  =============================================================================

Depends on xarray and zarr only (no torch) and knows no record's variables: what each kind holds, how
earlier versions are read and how records merge live with their writers (:mod:`resflow.records`,
``resflow.fitting.fit_records``; ``docs/design/store.md``).
"""

from .store import (
           KIND_PATTERN,
           STORE_VERSION,
           Leftover,
           RecordInfo,
           Store,
           StoreError,
           StoreReport,
           Validator,
)
from .workdirs import RUN_LOCK, RunBusyError, lock_holder, new_run_dir, run_lock

__all__ = ["Store", "StoreError", "RecordInfo", "Leftover", "StoreReport", "KIND_PATTERN",
           "STORE_VERSION", "Validator", "new_run_dir", "run_lock", "lock_holder", "RUN_LOCK",
           "RunBusyError"]
