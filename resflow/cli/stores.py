"""``resflow store check`` and ``resflow store gc``: a store's health, and what killed writers left."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import app, console, user_errors

store_app = typer.Typer(help="Inspect a store and clean up after killed writers.", no_args_is_help=True)
app.add_typer(store_app, name="store")

StorePath = Annotated[Path, typer.Argument(help="A store directory (the --out of `resflow run`).")]


def _print_leftovers(report, removable_label: str, *, applied: bool = False) -> None:
    """One line per leftover: what gc does (or did, ``applied``) with it, and why a kept one is kept."""
    for left in report.leftovers:
        who = f"writer {left.writer}" if left.writer else "writer unknown"
        if left.removable and applied and left.path not in report.removed:
            state = "could not be removed (permissions?)"
        elif left.removable:
            state = removable_label
        elif left.writer_alive:
            state = "kept: its writer is running"
        else:
            state = left.kept_because or ("kept: written on another host (or its PID reused) and less than "
                                          "a day old")
        console.print(f"  {left.what} {left.path.name} ({who}, {left.age_s:.0f} s old): {state}",
                      highlight=False)


@store_app.command()
def check(store: StorePath) -> None:
    """Load every record; list unreadable records, leftovers of killed writers, and runs in progress or
    interrupted (changes nothing)."""
    from resflow.workflows import check_store

    with user_errors():
        report = check_store(store)
        console.print(f"{store}: {report.records} records, {report.records - len(report.unreadable)} "
                      f"readable, {len(report.leftovers)} leftovers, {len(report.unfinished)} "
                      "unfinished runs", highlight=False)
        for record, error in report.unreadable.items():
            console.print(f"  [red]unreadable[/] {record}: {error}", highlight=False)
        _print_leftovers(report, f"removable by `resflow store gc {store}`")
        for unfinished in report.unfinished:
            console.print("\n".join(f"  {line}" for line in unfinished.lines()), highlight=False,
                          markup=False)
        if not report.ok:
            raise typer.Exit(code=1)


@store_app.command()
def gc(
    store: StorePath,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would be removed.")] = False,
) -> None:
    """Remove partial records of killed writers and the directories of runs that did no work (never a
    finished record, never a live writer's, never a checkpoint)."""
    from resflow.workflows import gc_store

    with user_errors():
        report = gc_store(store, dry_run=dry_run)
        label = "would be removed" if dry_run else "removed"
        console.print(f"{store}: {len(report.removed)} leftovers {label}, "
                      f"{len(report.leftovers) - len(report.removed)} kept", highlight=False)
        _print_leftovers(report, label, applied=not dry_run)
