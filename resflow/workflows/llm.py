"""Fit the depth scaling law to a trained-LLM table: what ``resflow llm-fit`` calls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import FitFailedError
from ..llm.table.data import CHINCHILLA, load_scaling_table, table_dataset
from ..llm.table.scaling_fit import (
    LawFit,
    ScalingFitSettings,
    bootstrap_fit,
    exclusion_sweep,
    fit_dataset_record,
    fit_scaling_law,
    holdout_validation,
)
from ..provenance import provenance
from ..records.kinds import LLM_DATA, LLM_FIT
from ..store import Store

__all__ = ["LLMFitResult", "fit_llm_table"]


@dataclass(frozen=True, kw_only=True)
class LLMFitResult:
    """The fit, the exclusion sweep (if asked for) and the ``llm-data``/``llm-fit`` records written."""

    fit: LawFit
    sweep: tuple[LawFit, ...]
    data_record: str
    fit_record: str

    def to_json(self) -> dict:
        out = {**self.fit.to_json(), "record": self.fit_record, "data_record": self.data_record}
        if self.sweep:
            out["sweep"] = [{"excluded": f.excluded, "n_points": f.n_points, "alpha_l": f.params["alpha_l"],
                             "alpha_l_se": f.se["alpha_l"], "starts_agree": f.starts_agree,
                             "failure": f.failure}
                            for f in self.sweep]
        return out


def fit_llm_table(data: Path | str | None = None, *, columns: dict[str, str] | None = None,
                  download: bool = False, settings: ScalingFitSettings | None = None,
                  bootstrap: int = 0, holdout: int = 0,
                  sweep_exclusions: bool = False, out: Path | str = "results", keep_failed: bool = False,
                  progress: Callable[[str, int, int], None] | None = None) -> LLMFitResult:
    """Fit :math:`L(m, \\ell, D)` to a table and write the table and the fit into the store ``out``.

    Nothing is written until every fit has finished: an interrupted call leaves the store as it was.

    Parameters
    ----------
    data : path, optional
        A CSV; default ``$RESFLOW_DATA_DIR/chinchilla_depth_width.csv`` (or the pinned download).
    columns : dict, optional
        ``{expected: actual}`` column names, e.g. ``{"n_layers": "depth"}``.
    settings : ScalingFitSettings, optional
        Loss, starts, depth offset, how many highest-loss points to exclude (default: the study's 40 on
        the Chinchilla table, none on any other).
    bootstrap, holdout : int
        Bootstrap resamples (percentile intervals) and held-out validation splits; 0 for none.
    sweep_exclusions : bool
        Also fit with 0, 5, 10, 20, 30, 40, 60 points excluded.
    keep_failed : bool
        Write a fit that failed its checks (``LawFit.failure``), marked as failed; by default such a fit
        raises :class:`~resflow.errors.FitFailedError` and nothing is written.
    progress : callable, optional
        ``progress(stage, done, total)``.
    """
    settings = settings or ScalingFitSettings()
    report = progress or (lambda stage, done, total: None)
    table = load_scaling_table(data, columns=columns, download=download)
    report("fit", 0, 1)
    fit = fit_scaling_law(table, settings)
    report("fit", 1, 1)
    if fit.failure and not keep_failed:
        raise FitFailedError(
            f"the fit failed: {fit.failure}. Nothing was written. Try more starts (--starts 64 or more), "
            "--loss squared, or fewer excluded points, and check the table's columns and units; "
            "--keep-failed stores the fit marked as failed.")
    if bootstrap:
        bootstrap_fit(table, fit, bootstrap, progress=lambda done, total: report("bootstrap", done, total))
    if holdout:
        report("hold-out", 0, 1)
        fit.holdout = holdout_validation(table, settings, splits=holdout)
        report("hold-out", 1, 1)
    sweep = exclusion_sweep(table, settings) if sweep_exclusions else []
    store = Store.open(out, create=True)
    prov = provenance({"settings": settings.__dict__, "data": table.attrs.get("path"),
                       "bootstrap": bootstrap}, seed=settings.seed)
    is_chinchilla = bool(table.attrs.get("chinchilla"))
    data_ds = table_dataset(table, source=CHINCHILLA["source"] if is_chinchilla else str(table.attrs["path"]),
                            license=CHINCHILLA["license"] if is_chinchilla else "as given by the user")
    data_ds.attrs.update(prov)
    data_record = store.write(data_ds, kind=LLM_DATA, name="chinchilla" if is_chinchilla else "user-table")
    fit_ds = fit_dataset_record(fit, data_record)
    fit_ds.attrs.update(prov)
    fit_record = store.write(fit_ds, kind=LLM_FIT, name="depth-scaling")
    return LLMFitResult(fit=fit, sweep=tuple(sweep), data_record=data_record, fit_record=fit_record)
