"""Redraw the figure of a toy run from its store record: the figures of ``docs/results.md``.

:func:`draw_run_figure` reads the run (``toy-run`` record) and the fits of its latest ``fit`` record with
today's settings (or fits it in memory, writing nothing to the store, when it has none), and draws the figure
its experiment draws at the end of ``resflow run`` (``figure.png``) with today's code, stamped with the run's
provenance, the record's id and the resflow that redrew it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._validate import check_int
from ..errors import ConfigError
from ..experiments import registered
from ..fitting.fit_records import fits_from_dataset
from ..fitting.fits import FitSettings, fit_dataset
from ..presenting.plots import save_figure
from ..provenance import git_commit, package_version
from ..records import load_run
from ..records.kinds import TOY_RUN
from ..store import Store
from .fit import latest_fit_records

__all__ = ["RunFigure", "draw_run_figure"]

# palette colours of a figure kept in the docs: the look of the full PNG at a third of the size
DOCS_COLOURS = 256


def _short(commit: str) -> str:
    """A commit in 12 characters, its ``-dirty`` mark kept."""
    return commit[:12] + ("-dirty" if commit.endswith("-dirty") else "")


@dataclass(frozen=True, kw_only=True)
class RunFigure:
    """The figure :func:`draw_run_figure` wrote: where, from which run, and from which ``fit`` record (None:
    fitted in memory, the run had no fit record with today's settings)."""

    record: str
    experiment: str
    fit_record: str | None
    path: Path


def draw_run_figure(store: Path | str, record: str | None = None, *, path: Path | str,
                    experiment: str | None = None, overwrite: bool = False,
                    colours: int | None = DOCS_COLOURS) -> RunFigure:
    """Draw the figure of the toy run ``record`` of ``store`` (default: its latest run of ``experiment``,
    or its latest toy run) into ``path``.

    Parameters
    ----------
    store : path
        A store (the ``--out`` of ``resflow run``).
    record : str, optional
        A ``toy-run`` record id.
    path : path
        The PNG to write; an existing file is refused unless ``overwrite``.
    experiment : str, optional
        Without ``record``: the latest run of this experiment.
    colours : int or None
        Palette colours of the PNG (:func:`resflow.analysis.save_figure`); None keeps every colour.
    """
    path = Path(path)
    if colours is not None:
        colours = check_int("colours", colours, minimum=2)
        if colours > 256:
            raise ConfigError(f"colours must be at most 256 (a PNG palette); got {colours}. "
                              "Pass None for every colour.")
    if path.exists() and not overwrite:
        raise ConfigError(f"{str(path)!r} exists; choose a new file, or pass overwrite=True to replace it.")
    opened = Store.open(store)
    runs = [r for r in opened.records(kind=TOY_RUN)
            if (r.id == record if record else experiment is None or r.name == experiment)]
    if not runs:
        what = (f"toy-run record {record!r}" if record
                else f"run of {experiment!r}" if experiment else "toy run")
        raise ConfigError(f"no {what} in the store {str(store)!r}; "
                          f"`resflow fit {store}` lists each run's record id.")
    info = max(runs, key=lambda r: r.created)
    ds = load_run(opened, info)  # a record of an earlier version: upgraded to today's shape
    name = ds.attrs.get("experiment", info.name)
    if name not in registered():
        raise ConfigError(f"{info.id} is a run of {name!r}, which this resflow does not know; it knows "
                          f"{', '.join(registered())}.")
    settings = FitSettings()
    fit_record = latest_fit_records(opened, settings_json=settings.to_json()).get(info.id)
    fits = fits_from_dataset(opened.load(fit_record)) if fit_record else fit_dataset(ds, settings)
    figure = registered()[name].figure(ds, fits)
    provenance = {**{k: str(v) for k, v in ds.attrs.items()}, "store_record": info.id,
                  "drawn_by": f"resflow {package_version()} {_short(git_commit())}"}
    if fit_record:
        provenance["fit_record"] = fit_record
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(figure, path, provenance, colours=colours)
    return RunFigure(record=info.id, experiment=name, fit_record=fit_record, path=path)
