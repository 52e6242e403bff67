"""The Typer application and what every command shares: clean errors, progress, interruption."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from resflow import ResflowError, __version__

__all__ = ["app", "console", "err_console", "user_errors", "progress_bar", "interruptible", "Device", "JsonFlag",
           "DEVICES", "DEFAULT_STORE"]

# The command-line grammar (docs/cli.md), one definition each: every command that runs work takes --device
# auto|cpu|cuda (default auto); --json is an on/off flag that prints machine output on stdout; --out is a store.
DEVICES = ("auto", "cpu", "cuda")
DEFAULT_STORE = Path("results")


def _device(value: str) -> str:
    if value not in DEVICES:
        raise typer.BadParameter(f"{value!r} is not a device; choose auto, cpu or cuda.")
    return value


Device = Annotated[str, typer.Option(metavar="[auto|cpu|cuda]", callback=_device,
                                     help="Where the work runs: auto (cuda when available, else cpu), cpu or cuda.")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable output (JSON) on stdout; messages and "
                                                      "progress stay on stderr.")]

app = typer.Typer(
    name="resflow",
    help="How residual networks use depth: discretised flows, noisy ensembles, error-vs-depth laws.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: flags shown as flags, values by their metavar
)
console = Console()  # results (stdout)
err_console = Console(stderr=True)  # errors and progress (stderr: --json output stays clean)
INTERRUPTED = 130  # exit status after Ctrl-C, as a shell reports SIGINT


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn resflow's input errors into a clean message and exit status 2."""
    try:
        yield
    except ResflowError as exc:
        from rich.markup import escape

        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)  # the message as written
        raise typer.Exit(code=2) from None


@contextmanager
def interruptible(after: str) -> Iterator[None]:
    """On Ctrl-C: say what survived and how to go on (``after``), exit 130 without a traceback."""
    try:
        yield
    except KeyboardInterrupt:
        from rich.markup import escape

        err_console.print(f"[yellow]interrupted[/]: {escape(after)}", highlight=False)
        raise typer.Exit(code=INTERRUPTED) from None


@contextmanager
def progress_bar(description: str, total: float | None = None) -> Iterator[Callable[..., None]]:
    """A progress bar with ETA on stderr; yields ``update(done, total=None, description=None, note="")``."""
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[note]}")]
    with Progress(*columns, console=err_console, transient=False) as bar:
        task = bar.add_task(description, total=total, note="")

        def update(done: float, total: float | None = None, description: str | None = None, note: str = "") -> None:
            fields = {"completed": done, "note": note}
            if total is not None:
                fields["total"] = total
            if description is not None:
                fields["description"] = description
            bar.update(task, **fields)

        yield update


def _version(value: bool) -> None:
    if value:
        console.print(f"resflow {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """resflow command line."""
