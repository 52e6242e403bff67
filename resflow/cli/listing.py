"""``resflow tableaux`` and ``resflow theory``: the registries of schemes and derived laws."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from .app import app, console, user_errors


@app.command()
def tableaux(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List the registered Runge-Kutta schemes (Butcher tableaux)."""
    from resflow.dynamics import TABLEAUX

    rows = [{"name": t.name, "stages": t.stages, "order": t.order, "reference": t.reference}
            for t in TABLEAUX.values()]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="Registered explicit Runge-Kutta schemes")
    for column in ("name", "stages", "order", "reference"):
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(row[c]) for c in ("name", "stages", "order", "reference")))
    console.print(table)


@app.command()
def theory(
    name: Annotated[str | None, typer.Argument(help="A law name; omit to list them all.")] = None,
    latex: Annotated[bool, typer.Option("--latex", help="Print LaTeX instead of pretty text.")] = False,
    as_json: Annotated[bool, typer.Option("--json",
                                          help="Machine-readable output (a list of objects).")] = False,
) -> None:
    """List the derived error-vs-depth laws, or print one (pretty, --latex or --json)."""
    with user_errors():
        import sympy as sp

        from resflow import laws

        selected = laws.names() if name is None else [laws.derivation(name).name]
        if as_json:
            typer.echo(json.dumps([laws.describe(n).to_json() for n in selected], indent=2))
            return
        if name is None and not latex:
            table = Table(title="Derived laws (resflow theory NAME for one; --latex, --json)")
            for column in ("name", "law", "loss-vs-depth exponent"):
                table.add_column(column)
            for n in selected:
                d = laws.derivation(n)
                text = laws.exponent_text(n) or "-"
                title = {"derived": d.title, "hypothesis": f"[yellow](hypothesis)[/] {d.title}",
                         "not observed": f"[red](not observed)[/] {d.title}"}[d.status]
                table.add_row(n, title,
                              text if len(text) <= 40 else f"local, depends on the depth (theory {n})")
            console.print(table)
            return
        for n in selected:
            d = laws.derivation(n)
            if latex:
                typer.echo(f"% {n}: {d.title}\n{laws.describe(n).latex}")
                continue
            console.rule(f"[bold]{n}")
            console.print(d.title + {"derived": "", "hypothesis": "  [yellow](hypothesis, not derived)[/]",
                                     "not observed": "  [red](hypothesis, not observed so far)[/]"}[d.status],
                          highlight=False)
            if d.evidence:
                from rich.markup import escape

                console.print(f"[dim]evidence:[/] {escape(d.evidence)}", highlight=False)
            typer.echo(sp.pretty(d.expression, use_unicode=True))
            for label, step in d.steps:
                console.print(f"[dim]{label}:[/]", highlight=False)
                typer.echo(sp.pretty(step, use_unicode=True))
            if d.exponent is not None:
                typer.echo("loss-vs-depth exponent:")
                typer.echo(sp.pretty(d.exponent, use_unicode=True))
            console.print(f"[dim]assumptions:[/] {d.assumptions}", highlight=False)
