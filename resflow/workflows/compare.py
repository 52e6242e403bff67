"""Theory, toy runs and trained LLMs side by side: what ``resflow compare`` calls.

Toy exponents are read from the ``fit`` records (the latest of each run), never refitted; a run
without one is listed in ``unfitted`` (``resflow fit STORE`` fits it).  An ``llm-fit`` record of a fit
that failed its checks (stored with ``--keep-failed``) is listed in ``failed``, never shown as a result.
An ``lm-ladder`` record (language models trained here) gives one row per width, its depth law fitted from the
record (:func:`resflow.llm.ladder.records.ladder_fits`: deterministic, no fit record of its own), its depth
part for the figure and its deepest models' interventions.  Every toy run and ``probe`` record also gives
signature rows (:mod:`resflow.presenting.signatures`): the three readings side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._specs import is_class_target
from ..errors import ConfigError
from ..fitting.fit_records import fits_from_dataset
from ..llm.ladder.records import ladder_depth_parts, ladder_intervention_rows, ladder_rows
from ..llm.table.comparison import depth_part, fit_failure, llm_row
from ..presenting.compare import ComparisonRow, comparison_figure, theory_rows, toy_rows
from ..presenting.plots import save_figure
from ..presenting.signatures import SignatureRow, probe_signature_rows, toy_signature_rows
from ..probing.intervention_rows import InterventionRow, intervention_rows
from ..provenance import provenance
from ..records.kinds import INTERVENTION, LLM_FIT, LM_LADDER, PROBE, TOY_RUN
from ..store import Store
from .fit import latest_fit_records

__all__ = ["Comparison", "compare_stores"]


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Every row of the comparison, the figure, the toy runs that had no fit record, and the ``llm-fit``
    records not shown because the fit failed its checks (record id, why)."""

    rows: tuple[ComparisonRow, ...]
    figure: Path
    unfitted: tuple[str, ...]
    failed: tuple[tuple[str, str], ...] = ()
    interventions: tuple[InterventionRow, ...] = ()  # toy runs' trained students and intervention records
    signatures: tuple[SignatureRow, ...] = ()  # the three readings' signatures: toy runs and probed models


def compare_stores(stores: Sequence[Path | str], *, figure: Path | str | None = None,
                   progress: Callable[[str, int, int], None] | None = None) -> Comparison:
    """Collect the comparison rows of every store and draw the figure (default: a new work directory
    of the first store; an existing file is never overwritten)."""
    if not stores:
        raise ConfigError("stores must name at least one store directory.")
    report = progress or (lambda store, done, total: None)
    opened = [Store.open(path) for path in stores]
    if figure is not None and Path(figure).exists():
        raise ConfigError(f"{str(figure)!r} exists; choose a new file (nothing is overwritten).")
    toy, llm, parts, unfitted, failed, schemes = [], [], [], [], [], {"euler"}
    interventions: list[InterventionRow] = []
    signatures: list[SignatureRow] = []
    for k, store in enumerate(opened):
        report(str(store.path), k, len(opened))
        latest = latest_fit_records(store)
        for info in store.records(kind=TOY_RUN):
            run = store.load(info)
            if "lesion" in run:  # trained students' interventions (resflow 0.4 on)
                interventions += intervention_rows(run, info.id)
            signatures += toy_signature_rows(run, info.id, info.name)
            if info.id not in latest:
                unfitted.append(info.id)
                continue
            # students of RHM data are read by their drop depth (signatures), not by a power law of depth
            fits = [f for f in fits_from_dataset(store.load(latest[info.id]))
                    if not is_class_target(f.target)]
            schemes.update(f.scheme for f in fits)
            toy += toy_rows(fits, experiment=info.name, record=latest[info.id])
        for info in store.records(kind=LLM_FIT):
            fit = store.load(info)
            failure = fit_failure(fit)
            if failure is not None:  # a failed fit is never shown as a result
                failed.append((info.id, failure))
                continue
            llm.append(llm_row(fit, record=info.id))
            data_id = fit.attrs.get("data_record")
            if data_id:
                parts.append(depth_part(fit, store.load(data_id)))
        for info in store.records(kind=LM_LADDER):  # language models trained here
            ladder = store.load(info)
            llm += ladder_rows(ladder, info.id)
            parts += ladder_depth_parts(ladder)
            interventions += ladder_intervention_rows(ladder, info.id)
        for info in store.records(kind=INTERVENTION):
            interventions += intervention_rows(store.load(info), info.id)
        for info in store.records(kind=PROBE):
            signatures += probe_signature_rows(store.load(info), info.id)
    report("", len(opened), len(opened))
    rows = theory_rows(tuple(sorted(schemes))) + toy + llm
    path = Path(figure) if figure is not None else opened[0].work_dir("compare") / "compare.png"
    save_figure(comparison_figure(rows, parts), path,
                provenance({"stores": [str(s) for s in stores]}, records=[r.record for r in rows]))
    return Comparison(rows=tuple(rows), figure=path, unfitted=tuple(unfitted), failed=tuple(failed),
                      interventions=tuple(interventions), signatures=tuple(signatures))
