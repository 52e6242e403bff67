"""Store records: what each kind holds, how it is written, how earlier versions are read, how records merge.

=============  =============================================================================
module         what it holds
=============  =============================================================================
``toy_run``    the ``toy-run`` record of a teacher--student run: :func:`build_dataset` (the one
               place a run becomes a Dataset), its dims (:data:`DIMS`, every one always present),
               :func:`upgrade_run` for records of earlier versions, :func:`load_run`,
               :func:`merge_runs`, :func:`best_start` (one student per cell of a run of
               several routes and inits)
``kinds``      every kind of record, defined once (:class:`RecordKind`: name, summary, writer, what it
               requires, schema version): :data:`TOY_RUN`, :data:`FIT`, ... in :data:`RECORD_KINDS`
=============  =============================================================================

The store itself (:mod:`resflow.store`) knows only xarray and a kind's spelling; writers and readers name a
kind by its constant here.  The other kinds' Datasets are built beside their computation (``fit`` in
:mod:`resflow.analysis`, ``lm-ladder`` in :mod:`resflow.llm`, ...; :attr:`RecordKind.writer`).  Kinds and
variables: ``docs/design/store.md``.
"""

from .kinds import (
    BENCH,
    FIT,
    INTERVENTION,
    LLM_DATA,
    LLM_FIT,
    LM_LADDER,
    PROBE,
    RECORD_KINDS,
    THEORY,
    TOY_RUN,
    RecordKind,
    record_kind,
    register_record_kind,
)
from .toy_run import (
    DIMS,
    SCHEMA,
    SERIES_DIMS,
    START_DIMS,
    best_start,
    build_dataset,
    checked_run,
    full_length,
    is_kl,
    load_run,
    merge_runs,
    one_structure,
    run_problems,
    trained_cells,
    upgrade_run,
)

__all__ = ["RecordKind", "RECORD_KINDS", "record_kind", "register_record_kind", "TOY_RUN", "FIT", "THEORY",
           "LLM_DATA", "LLM_FIT", "PROBE", "BENCH", "INTERVENTION", "LM_LADDER",
           "DIMS", "SERIES_DIMS", "START_DIMS", "SCHEMA", "build_dataset", "run_problems", "checked_run",
           "upgrade_run", "load_run", "merge_runs", "is_kl", "best_start", "trained_cells",
           "full_length", "one_structure"]
