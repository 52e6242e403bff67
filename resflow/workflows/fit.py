"""Fit every toy run of a store: what ``resflow fit STORE`` calls.

Each run's fits are a ``fit`` record in the store, with the fit settings and the run's id in its
attrs.  A run already fitted with the same settings is read back, not refitted; new settings add a
new record (nothing is overwritten).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..fitting.fit_records import fits_from_dataset, fits_to_dataset
from ..fitting.fits import FitSettings, SeriesFit, fit_dataset
from ..fitting.separation import Separation, separations
from ..provenance import provenance
from ..records.kinds import FIT, TOY_RUN
from ..store import Store

__all__ = ["RunFits", "fit_store", "latest_fit_records"]


@dataclass(frozen=True, kw_only=True)
class RunFits:
    """The fits of one ``toy-run`` record, and the ``fit`` record that holds them; for a record this resflow
    cannot fit (foreign or damaged), ``skipped`` says why and ``fits`` is empty.  ``separations``: the tied
    minus independent exponents of the fits (:mod:`resflow.fitting.separation`), the first answer of a
    smooth-vs-rough run."""

    run: str
    experiment: str
    fit_record: str
    fits: tuple[SeriesFit, ...]
    reused: bool
    skipped: str | None = None

    @property
    def separations(self) -> tuple[Separation, ...]:
        return tuple(separations(list(self.fits)))


def latest_fit_records(store: Store, *, settings_json: str | None = None) -> dict[str, str]:
    """Run id -> id of its latest ``fit`` record (with exactly these settings, if given)."""
    out: dict[str, str] = {}
    for info in store.records(kind=FIT):  # oldest first: later records win
        attrs = store.attrs(info)
        if settings_json is None or attrs.get("fit_settings") == settings_json:
            out[attrs.get("source_record", "")] = info.id
    return out


def fit_store(store: Path | str | Store, settings: FitSettings | None = None, *,
              run: str | None = None) -> list[RunFits]:
    """Fit (or read back the fits of) every ``toy-run`` record of ``store``, oldest first (only the record
    ``run`` when given; the others are not read).

    A record this resflow cannot fit (written by another version, or damaged) is skipped with the reason in
    :attr:`RunFits.skipped`; if no record could be fitted the call raises :class:`ConfigError`."""
    store = store if isinstance(store, Store) else Store.open(store)
    runs = store.records(kind=TOY_RUN)
    if not runs:
        raise ConfigError(f"no toy runs in store {str(store.path)!r}; `resflow run` writes them.")
    if run is not None:
        if run not in [info.id for info in runs]:
            raise ConfigError(f"--run {run!r} is not a toy-run record of {str(store.path)!r}; it has "
                              f"{', '.join(info.id for info in runs)}.")
        runs = [info for info in runs if info.id == run]
    settings = settings or FitSettings()
    out = []
    for info in runs:
        ds = store.load(info)  # read even when its fits exist: a corrupt record is reported, not hidden
        existing = latest_fit_records(store, settings_json=settings.to_json()).get(info.id)
        experiment = ds.attrs.get("experiment", info.name)
        if existing is not None:
            fits = fits_from_dataset(store.load(existing))
            out.append(RunFits(run=info.id, experiment=experiment, fit_record=existing, fits=tuple(fits),
                               reused=True))
            continue
        try:
            fits = fit_dataset(ds, settings)  # upgrades a record of an earlier version (resflow.records)
        except ConfigError as exc:  # a foreign or damaged record: skip it, name it, go on
            out.append(RunFits(run=info.id, experiment=experiment, fit_record="", fits=(), reused=False,
                               skipped=str(exc)))
            continue
        record = fits_to_dataset(fits, source_record=info.id, settings=settings)
        record.attrs.update(provenance({"fit_settings": settings.to_json(), "run": info.id}))
        fit_id = store.write(record, kind=FIT, name=info.name)
        out.append(RunFits(run=info.id, experiment=experiment, fit_record=fit_id, fits=tuple(fits),
                           reused=False))
    if all(r.skipped for r in out):
        raise ConfigError(f"no toy run of store {str(store.path)!r} could be fitted: "
                          + "; ".join(f"{r.run}: {r.skipped}" for r in out))
    return out
