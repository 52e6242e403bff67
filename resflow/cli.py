"""The ``resflow`` command line.  Bad input exits with status 2 and a one-line message, no traceback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from .errors import ResflowError

app = typer.Typer(
    name="resflow",
    help="How residual networks use depth: discretised flows, noisy ensembles, error-vs-depth laws.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn resflow's input errors into a clean message and exit status 2."""
    try:
        yield
    except ResflowError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(code=2) from None


def _version(value: bool) -> None:
    if value:
        from . import __version__

        console.print(f"resflow {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """resflow command line."""


@app.command()
def tableaux(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List the registered Runge-Kutta schemes (Butcher tableaux)."""
    from .tableau import TABLEAUX

    rows = [
        {"name": t.name, "stages": t.stages, "order": t.order, "reference": t.reference}
        for t in TABLEAUX.values()
    ]
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
def demo(
    out: Annotated[Path, typer.Option(help="Root directory; the run goes into a new subdirectory.")] = Path("results"),
    seed: Annotated[int, typer.Option(help="Seed of every random draw.", min=0)] = 0,
) -> None:
    """Demo of the dynamics core: stack-vs-ODE convergence per scheme, ensembles, teacher angles."""
    with user_errors():
        from .sims.flow_demo import FlowDemoConfig, main

        with console.status("running the flow demo ..."):
            run_dir = main(out, FlowDemoConfig(seed=seed))
        import xarray as xr

        ds = xr.open_dataset(run_dir / "demo.nc", engine="scipy")
        table = Table(title="Tied residual stack vs its ODE: empirical order (slope of error vs depth)")
        for column in ("scheme", "declared order", "relu² block (study)", "softplus² block (smooth)"):
            table.add_column(column)
        for scheme in ds["scheme"].values:
            fits = ds["empirical_order"].sel(scheme=scheme)
            table.add_row(
                str(scheme),
                str(int(ds["declared_order"].sel(scheme=scheme))),
                f"{float(fits.sel(field='relu2')):.2f}",
                f"{float(fits.sel(field='softplus2')):.2f}",
            )
        console.print(table)
        ds.close()
        console.print(f"wrote {run_dir / 'demo.nc'}, {run_dir / 'demo.png'}, {run_dir / 'provenance.json'}")


def main() -> None:  # console-script entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
