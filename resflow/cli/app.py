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

__all__ = ["app", "console", "err_console", "user_errors", "progress_bar", "plain_progress", "interruptible",
           "Device", "JsonFlag", "DEVICES", "DEFAULT_STORE"]

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


PLAIN_EVERY_SHARE = 0.05  # a plain progress line at every 5% of the work ...
PLAIN_EVERY_SECONDS = 60.0  # ... or every minute, whichever comes first


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s"


@contextmanager
def plain_progress(description: str, total: float | None = None, *, clock: Callable[[], float] | None = None,
                   every_share: float = PLAIN_EVERY_SHARE,
                   every_seconds: float = PLAIN_EVERY_SECONDS) -> Iterator[Callable[..., None]]:
    """Progress for a log (stderr not a terminal): one plain line -- what, done/total, share, elapsed, ETA and
    the note -- at every ``every_share`` of the work or every ``every_seconds``, whichever comes first, and when
    the work is done; the same ``update`` as :func:`progress_bar`."""
    import time

    from rich.text import Text

    clock = clock or time.monotonic
    start = clock()
    state = {"total": total, "description": description, "step": -1, "at": start, "note": ""}

    def line(done: float) -> None:
        elapsed = clock() - start
        total, parts = state["total"], [f"{state['description']}: {done:g}"]
        if total:
            share = min(done / total, 1.0)
            parts[0] += f"/{total:g} ({100 * share:.0f}%)"
            parts.append(f"{_clock(elapsed)} elapsed")
            if 0 < share < 1:
                parts.append(f"ETA {_clock(elapsed * (1 - share) / share)}")
        else:
            parts.append(f"{_clock(elapsed)} elapsed")
        if state["note"]:
            parts.append(Text.from_markup(state["note"]).plain)
        err_console.print(", ".join(parts), markup=False, highlight=False, soft_wrap=True)
        state["at"] = clock()

    def update(done: float, total: float | None = None, description: str | None = None, note: str = "") -> None:
        if total is not None:
            state["total"] = total
        if description is not None:
            state["description"] = description
        state["note"] = note
        step = int((done / state["total"]) / every_share + 1e-9) if state["total"] else 0  # which 5% it is in
        if step > state["step"] or clock() - state["at"] >= every_seconds:
            state["step"] = max(step, state["step"])
            line(done)

    yield update


@contextmanager
def progress_bar(description: str, total: float | None = None) -> Iterator[Callable[..., None]]:
    """A progress bar with ETA on stderr; yields ``update(done, total=None, description=None, note="")``.
    Where stderr is not a terminal (a log, a pipe) it prints plain lines instead (:func:`plain_progress`)."""
    if not err_console.is_terminal:
        with plain_progress(description, total) as update:
            yield update
        return
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
