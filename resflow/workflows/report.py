"""The Markdown tables of a run in a store: what ``resflow report`` calls.

An experiment with a report of its own (:attr:`resflow.experiments.Experiment.report`: compositional,
group-students, roughness) prints that; every other run prints :func:`resflow.presenting.report.run_tables`
(losses by training length, fits and verdict, asymptotic estimates, accumulation along depth).
Given a ``width`` (a terminal's, or ``COLUMNS``), the Markdown is fitted to it (:func:`fit_markdown`): prose
wrapped at spaces, a table too wide for it written as a list.  :func:`unfinished_note` names the runs of the
store that have no record yet (in progress or interrupted), which a report cannot show.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from ..errors import ConfigError
from ..experiments import registered
from ..presenting.report import run_tables
from ..records import load_run
from ..records.kinds import LM_LADDER, TOY_RUN
from ..store import Store
from .unfinished import IN_PROGRESS, unfinished_runs

__all__ = ["report_run", "fit_markdown", "unfinished_note"]

CELL = re.compile(r"(?<!\\)\|")  # a cell border of a Markdown table row (an escaped \| is text)
# what a wrap keeps on one line: a word, an interval [a, b] whole
UNIT = re.compile(r"(?:\[[^\[\]\n]{0,24}\]|\S)+")


def report_run(store: Path | str, record: str | None = None, *, experiment: str | None = None,
               replicate: int | None = None, width: int | None = None) -> str:
    """Markdown tables of the run ``record`` of ``store``, or of its latest run of ``experiment`` (default:
    its latest toy run).  ``replicate`` keeps one replicate (intervals then from the evaluation batches only),
    to set one teacher of a run beside a one-replicate run of the same teacher seed.  ``width``: no line
    longer (:func:`fit_markdown`); None, the Markdown as written."""
    text = _report(store, record, experiment=experiment, replicate=replicate)
    return text if width is None else fit_markdown(text, width)


def unfinished_note(store: Path | str) -> str:
    """One line naming the runs of ``store`` without a record yet that did some work or are in progress (what
    each is, how far it got), or ``""`` when there are none."""
    runs = [r for r in unfinished_runs(store) if r.work_done or r.state == IN_PROGRESS]
    if not runs:
        return ""
    listed = "; ".join(f"{r.run_id} ({r.state}, {r.progress})" for r in runs)
    return (f"{len(runs)} run{'s' if len(runs) > 1 else ''} without a record yet: {listed}. "
            f"`resflow store check {store}` lists {'them' if len(runs) > 1 else 'it'} "
            "with the command that resumes an interrupted one.")


def _report(store: Path | str, record: str | None, *, experiment: str | None,
            replicate: int | None) -> str:
    opened = Store.open(store)
    runs = [r for r in opened.records(kind=TOY_RUN) + opened.records(kind=LM_LADDER)
            if (r.id == record if record
                else (r.kind == TOY_RUN.name if experiment is None else r.name == experiment))]
    runs.sort(key=lambda r: r.created)
    if not runs:
        what = f"record {record!r}" if record else f"run of {experiment!r}" if experiment else "toy run"
        if note := unfinished_note(store):
            raise ConfigError(f"no {what} in the store {str(store)!r} yet; {note}")
        raise ConfigError(f"no {what} in the store {str(store)!r}; "
                          f"`resflow fit {store}` lists each run's record id "
                          "(give one, or --experiment with a run's name).")
    info = runs[-1]
    if info.kind == LM_LADDER.name:  # the language-model ladder: its own record and tables
        ds = opened.load(info)
        if replicate is not None:
            ds = (ds.sel(seed=[replicate]) if replicate in ds["seed"].values
                  else _no_replicate(ds["seed"], replicate))
        return registered()["lm-ladder"].report(ds, info.id)
    ds = load_run(opened, info)  # a record of an earlier version: upgraded to today's shape
    if replicate is not None:
        have = [int(r) for r in ds["replicate"].values]
        if replicate not in have:
            _no_replicate(ds["replicate"], replicate)
        ds = ds.sel(replicate=[replicate])
    own = registered().get(ds.attrs.get("experiment", info.name))
    return own.report(ds, info.id) if own is not None and own.report is not None else run_tables(ds, info.id)


def fit_markdown(text: str, width: int) -> str:
    """``text`` (Markdown) with no line longer than ``width`` where it can be helped: paragraphs and list
    items wrapped at spaces (never inside a word, unless it is longer than the width), and every table wider
    than the width written as a list: one item per row, named by its first cell, the other cells as
    ``column: value``."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        if lines[i].startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            table = lines[i:j]
            out += table if max(map(len, table)) <= width else _table_as_list(table, width)
            i = j
            continue
        out += _wrap(lines[i], width, "")
        i += 1
    return "\n".join(out)


def _wrap(line: str, width: int, indent: str) -> list[str]:
    """``line`` broken between units (:data:`UNIT`) into lines of at most ``width``; the lines after the first
    start with ``indent`` (default: under the text of a list item).  A unit wider than that is cut."""
    if len(line) <= width:
        return [line]
    lead = re.match(r"\s*(?:[-*] )?", line).group(0)
    indent = indent or " " * len(lead)
    out, current, fresh = [], lead, True
    for unit in UNIT.findall(line[len(lead):]):
        if not fresh and len(current) + 1 + len(unit) > width:
            out.append(current)
            current, fresh = indent, True
        current += unit if fresh else " " + unit
        fresh = False
    out.append(current)
    return [piece for part in out for piece in (textwrap.wrap(part, width, subsequent_indent=indent)
                                                if len(part) > width else [part])]


def _table_as_list(table: list[str], width: int) -> list[str]:
    def cells(row: str) -> list[str]:
        return [c.strip() for c in CELL.split(row.strip().strip("|"))]

    header, rows = cells(table[0]), [cells(r) for r in table[1:] if not re.fullmatch(r"[|\s:-]+", r)]
    out = []
    for row in rows:
        out += _wrap(f"- {header[0]}: {row[0]}", width, "  ")
        for name, value in zip(header[1:], row[1:], strict=False):
            out += _wrap(f"  - {name}: {value}", width, "    ")
    return out


def _no_replicate(values, replicate: int):
    raise ConfigError("replicate must be one of the run's replicates (seeds) "
                      f"{[int(v) for v in values.values]}; got {replicate}.")
