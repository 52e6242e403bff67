"""The result store: theory, toy runs, fits, LLM data and probes side by side, as xarray records.

=============  =============================================================================
module         what it holds
=============  =============================================================================
``store``      :class:`Store`: a directory of atomically written zarr records, append-only
``workdirs``   fresh per-run working directories (checkpoints, figures) that never overwrite
=============  =============================================================================

Depends on xarray and zarr only (no torch).  Record kinds and their variables:
``docs/design/store.md``.
"""

from .store import RECORD_KINDS, STORE_VERSION, RecordInfo, Store, StoreError
from .workdirs import new_run_dir

__all__ = ["Store", "StoreError", "RecordInfo", "RECORD_KINDS", "STORE_VERSION", "new_run_dir"]
