"""The result store: theory, toy runs, fits, LLM data and probes side by side, as xarray records.

=============  =============================================================================
module         what it holds
=============  =============================================================================
``store``      :class:`Store`: a directory of atomically written zarr records, append-only;
               ``check``/``gc`` for what killed writers leave behind
``workdirs``   fresh per-run working directories (checkpoints, figures) that never overwrite
=============  =============================================================================

Depends on xarray and zarr only (no torch).  Record kinds and their variables:
``docs/design/store.md``.
"""

from .store import (
           RECORD_KINDS,
           RECORD_SCHEMAS,
           STORE_VERSION,
           Leftover,
           RecordInfo,
           Store,
           StoreError,
           StoreReport,
           schema_problems,
)
from .workdirs import new_run_dir

__all__ = ["Store", "StoreError", "RecordInfo", "Leftover", "StoreReport", "RECORD_KINDS", "RECORD_SCHEMAS",
           "STORE_VERSION", "schema_problems", "new_run_dir"]
