"""The kinds of store record, each defined once: its name, what it holds, who writes it, its required parts.

A record's kind is the first part of its id (``toy-run--smooth-vs-rough--...``) and says how to read it.  The
store (:mod:`resflow.store`) knows only xarray and checks a kind's spelling; the kinds themselves are here,
and every writer and reader names a kind by its constant (``store.write(ds, kind=TOY_RUN, ...)``,
``store.records(kind=FIT)``), never by a bare string.  ``requires`` lists the variables and dims every
record of the kind has (``resflow store check`` reports what a record lacks), ``schema`` the version of that
layout.

Writers: the toy-run record is built here (:func:`resflow.records.build_dataset`); the others are built
beside their computation, in the layer that has it (:attr:`RecordKind.writer` names the function).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._plugins import PluginRegistry
from ..errors import ConfigError, UnknownNameError

__all__ = ["RecordKind", "RECORD_KINDS", "record_kind", "TOY_RUN", "FIT", "THEORY", "LLM_DATA", "LLM_FIT",
           "PROBE", "BENCH", "INTERVENTION", "LM_LADDER", "OPTIMUM", "register_record_kind"]


@dataclass(frozen=True)
class RecordKind:
    """One kind of store record (the module docstring): ``str(kind)`` is its name."""

    name: str
    summary: str
    writer: str  # the function that builds its Dataset, dotted ("" where none is written yet)
    requires: tuple[str, ...] = ()  # variables ("test_loss") and dims ("dim depth") every record of it has
    schema: int = 1  # the layout's version, written into each record as ``store_schema`` (absent: 1)

    def __str__(self) -> str:
        return self.name

    @property
    def variables(self) -> tuple[str, ...]:
        """The variables every record of the kind has."""
        return tuple(p for p in self.requires if not p.startswith("dim "))

    @property
    def dims(self) -> tuple[str, ...]:
        """The dims every record of the kind has."""
        return tuple(p[len("dim "):] for p in self.requires if p.startswith("dim "))

    def problems(self, ds) -> list[str]:
        """What ``ds`` lacks of :attr:`requires` (empty: nothing)."""
        out = []
        for part in self.requires:
            if part.startswith("dim "):
                if part[4:] not in ds.dims:
                    out.append(part)
            elif part not in ds.data_vars:
                out.append(part)
        return out


TOY_RUN = RecordKind("toy-run", "a teacher-student run: every student's losses, curves, hidden-state metrics "
                     "and measures", "resflow.records.toy_run.build_dataset",
                     ("final_loss_batch", "failed", "test_loss", "dim target", "dim scheme", "dim depth",
                      "dim replicate", "dim length", "dim eval_batch"))
FIT = RecordKind("fit", "the depth-exponent fits of one toy-run record",
                 "resflow.fitting.fit_records.fits_to_dataset",
                 ("exponent", "ci_low", "ci_high", "converged", "dim series"))
THEORY = RecordKind("theory",
                    "a law evaluated from its derivation (reserved: laws are recomputed, not stored)", "")
LLM_DATA = RecordKind("llm-data", "a table of trained language models (the Chinchilla table or the user's)",
                      "resflow.llm.table.data.table_dataset", ("dim model",))
LLM_FIT = RecordKind("llm-fit", "the law-aware depth-scaling fit of a table of language models",
                     "resflow.llm.table.scaling_fit.fit_dataset_record")
PROBE = RecordKind("probe", "hidden-state metrics of transformer models or teachers",
                   "resflow.probing.probes.probe_dataset")
BENCH = RecordKind("bench", "the engine's benchmark on this machine", "resflow.workflows.bench.bench_dataset",
                   ("dim row",))
INTERVENTION = RecordKind("intervention", "lesion, swap and trace profiles of one model or teacher",
                          "resflow.probing.interventions.intervention_dataset", ("dim layer",))
LM_LADDER = RecordKind("lm-ladder",
                       "the language-model ladder: every model's losses, probes and interventions",
                       "resflow.llm.ladder.records.ladder_dataset",
                       ("val_loss", "val_loss_curve", "lesion", "swap", "update_angle",
                        "early_stop_fraction"))

OPTIMUM = RecordKind("optimum", "every depth's optimum of a toy run reached by full-batch L-BFGS in float64 "
                     "(the ground truth of its certificate)", "resflow.workflows.optimum.reach_optima",
                     ("test_loss", "train_loss", "start_loss", "dim target", "dim depth", "dim replicate",
                      "dim start"))

RECORD_KINDS: PluginRegistry[RecordKind] = PluginRegistry("resflow.record_kinds", "a RecordKind")


def register_record_kind(kind: RecordKind) -> RecordKind:
    """Make ``kind`` a record kind the store writes and ``resflow store check`` checks (a name taken by
    another is refused)."""
    if not isinstance(kind, RecordKind):
        raise ConfigError(f"register_record_kind takes a RecordKind; got {kind!r:.80}.")
    return RECORD_KINDS.claim(kind.name, kind, noun="record kind")


RECORD_KINDS.bind(register_record_kind)  # plug-ins: the entry points of "resflow.record_kinds"
for _kind in (TOY_RUN, FIT, THEORY, LLM_DATA, LLM_FIT, PROBE, BENCH, INTERVENTION, LM_LADDER, OPTIMUM):
    register_record_kind(_kind)


def record_kind(name: str) -> RecordKind:
    """The kind called ``name`` (a did-you-mean error for another)."""
    if name not in RECORD_KINDS:
        raise UnknownNameError.of("record kind", name, RECORD_KINDS)
    return RECORD_KINDS[name]
