"""Store records: what each kind holds, how it is written, how earlier versions are read, how records merge.

=============  =============================================================================
module         what it holds
=============  =============================================================================
``toy_run``    the ``toy-run`` record of a teacher--student run: :func:`build_dataset` (the one
               place a run becomes a Dataset), its dims (:data:`DIMS`, every one always present),
               :func:`upgrade_run` for records of earlier versions, :func:`load_run`,
               :func:`merge_runs`, :func:`best_start` (one student per cell of a run of
               several routes and inits)
=============  =============================================================================

The store itself (:mod:`resflow.store`) knows only xarray; the ``fit`` record lives with its writer in
:mod:`resflow.analysis` (``fit_records``).  Kinds and variables: ``docs/design/store.md``.
"""

from .toy_run import (
    DIMS,
    SCHEMA,
    SERIES_DIMS,
    START_DIMS,
    best_start,
    build_dataset,
    checked_run,
    is_kl,
    load_run,
    merge_runs,
    run_problems,
    trained_cells,
    upgrade_run,
)

__all__ = ["DIMS", "SERIES_DIMS", "START_DIMS", "SCHEMA", "build_dataset", "run_problems", "checked_run",
           "upgrade_run", "load_run", "merge_runs", "is_kl", "best_start", "trained_cells"]
