"""The Typer application and what every command shares: clean errors, progress, interruption.

Importing it is cheap (typer, rich's console, resflow's errors): a command imports torch, scipy or xarray
inside its function, so ``resflow --help`` and every ``resflow COMMAND --help`` answer at once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from resflow import ResflowError, __version__

__all__ = ["app", "console", "err_console", "user_errors", "progress_bar", "plain_progress", "interruptible",
           "Device", "JsonFlag", "DEVICES", "DEFAULT_STORE"]

# The command-line grammar (docs/cli.md), one definition each: every command that runs work takes --device
# auto|cpu|cuda (default auto); --json is an on/off flag that prints machine output on stdout; --out is a
# store.
DEVICES = ("auto", "cpu", "cuda")
DEFAULT_STORE = Path("results")


def _device(value: str) -> str:
    if value not in DEVICES:
        raise typer.BadParameter(f"{value!r} is not a device; choose auto, cpu or cuda.")
    return value


Device = Annotated[str, typer.Option(metavar="[auto|cpu|cuda]", callback=_device,
                                     help="Where the work runs: auto (cuda when available, else cpu), "
                                          "cpu or cuda.")]
JsonFlag = Annotated[bool, typer.Option("--json",
                                        help="Machine-readable output (JSON) on stdout; messages and "
                                             "progress stay on stderr.")]



def _following_columns(console: Console) -> Console:
    """``console`` with its width read from ``COLUMNS`` (or the terminal) at every print: rich fixes the
    width it finds in ``COLUMNS`` when the console is made, and this one is made once, at import."""
    console._width = console._height = None
    return console


console = _following_columns(Console())  # results (stdout)
# errors and progress (stderr: --json output stays clean)
err_console = _following_columns(Console(stderr=True))
INTERRUPTED = 130  # exit status after Ctrl-C, as a shell reports SIGINT
USAGE = 2  # exit status of bad input, whoever found it (click's parser or resflow)
# difflib ratio of a suggested option: --replicate -> --replicates (0.96), not --device (0.63)
CLOSE_OPTION = 0.75
# click's exceptions where typer raises them: click itself, or the copy of click that recent typer vendors
_click_errors = sys.modules[typer.BadParameter.__module__]


def error_line(message: str) -> None:
    """The one format of every input error: ``error: MESSAGE`` on one line of stderr."""
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def usage_message(exc: Exception) -> str:
    """A click usage error as one line: the argument first, what is wrong (and what was given), the closest
    options of a mistyped one, and where the usage is -- instead of click's usage block."""
    import difflib
    import re

    text = " ".join(exc.format_message().split())
    # "Invalid value for '--seed': ..." -> "--seed: ..."
    text = re.sub(r"^Invalid value for ((?:'[^']*'(?: / )?)+): (.)",
                  lambda m: f"{m.group(1).replace(chr(39), '')}: {m.group(2).lower()}", text)
    errors = getattr(exc.__cause__, "errors", None)  # typer's pydantic coercion: what was given
    if callable(errors) and "got " not in text:
        with suppress(Exception):
            text = f"{text.rstrip('.')}; got {errors()[0]['input']!r}"
    if isinstance(exc, _click_errors.NoSuchOption) and getattr(exc, "possibilities", None):
        close = (difflib.get_close_matches(exc.option_name, exc.possibilities, n=3, cutoff=CLOSE_OPTION)
                 or sorted(exc.possibilities))
        text = f"{exc.message.rstrip('.')}; did you mean {' or '.join(close)}?"
    text = re.sub(r"\.? Did you mean", "; did you mean", text).rstrip(".")
    path = exc.ctx.command_path if exc.ctx is not None else "resflow"
    return f"{text[:1].lower()}{text[1:]} (see `{path} --help`)"


@contextmanager
def one_line_usage_errors() -> Iterator[None]:
    """Click's usage errors (a bad type, an unknown option or command, a missing argument) in the format of
    every other error (:func:`error_line`), exit 2; no-arguments-means-help still prints the help."""
    try:
        yield
    except getattr(_click_errors, "NoArgsIsHelpError", ()):  # click >= 8.2: shows the help
        raise
    except _click_errors.UsageError as exc:
        error_line(usage_message(exc))
        raise typer.Exit(code=USAGE) from None


class Commands(TyperGroup):
    """The root group: usage errors on one line (:func:`one_line_usage_errors`), and Ctrl-C anywhere --
    while a command imports its libraries too -- exits 130 with one line instead of a traceback (a command's
    own :func:`interruptible` says more: what was kept and how to go on)."""

    def make_context(self, info_name: str | None, args: list[str], parent: typer.Context | None = None,
                     **extra: Any) -> typer.Context:
        with one_line_usage_errors(), interrupted_at_once("while the command line loaded; nothing was done"):
            return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: typer.Context) -> Any:
        with (one_line_usage_errors(),
              interrupted_at_once("before the command finished; run it again to go on")):
            return super().invoke(ctx)


@contextmanager
def interrupted_at_once(what: str) -> Iterator[None]:
    """Ctrl-C where no command says more (:func:`interruptible`): ``interrupted WHAT`` and exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        err_console.print(f"[yellow]interrupted[/] {what}", highlight=False)
        raise typer.Exit(code=INTERRUPTED) from None


app = typer.Typer(
    name="resflow",
    cls=Commands,
    help="How residual networks use depth: discretised flows, noisy ensembles, error-vs-depth laws.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: flags shown as flags, values by their metavar
)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn resflow's input errors into a clean message and exit status 2."""
    try:
        yield
    except ResflowError as exc:
        error_line(str(exc))  # the message as written
        raise typer.Exit(code=USAGE) from None


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
    """Progress for a log (stderr not a terminal): one plain line -- what, done/total, share, elapsed, ETA
    and the note -- at every ``every_share`` of the work or every ``every_seconds``, whichever comes first,
    and when the work is done; the same ``update`` as :func:`progress_bar`."""
    import time

    from rich.text import Text

    clock = clock or time.monotonic
    start = clock()
    # "from": the work done before this process started (a resumed run) and when it was first seen: the ETA
    # counts the rate since then, not the resumed steps as if done in no time
    state = {"total": total, "description": description, "step": -1, "at": start, "note": "", "from": None}

    def line(done: float) -> None:
        elapsed = clock() - start
        total, parts = state["total"], [f"{state['description']}: {done:g}"]
        if total:
            share = min(done / total, 1.0)
            parts[0] += f"/{total:g} ({100 * share:.0f}%)"
            parts.append(f"{_clock(elapsed)} elapsed")
            first, since = state["from"]
            if 0 < share < 1 and done > first:
                parts.append(f"ETA {_clock((clock() - since) * (total - done) / (done - first))}")
        else:
            parts.append(f"{_clock(elapsed)} elapsed")
        if state["note"]:
            parts.append(Text.from_markup(state["note"]).plain)
        err_console.print(", ".join(parts), markup=False, highlight=False, soft_wrap=True)
        state["at"] = clock()

    def update(done: float, total: float | None = None, description: str | None = None,
               note: str = "") -> None:
        if total is not None:
            state["total"] = total
        if description is not None:
            state["description"] = description
        state["note"] = note
        if state["from"] is None:
            state["from"] = (0.0, start) if not state["total"] or done / state["total"] < 0.02 else (
                done, clock())
        step = int((done / state["total"]) / every_share + 1e-9) if state["total"] else 0  # which 5% it is in
        if step > state["step"] or clock() - state["at"] >= every_seconds:
            state["step"] = max(step, state["step"])
            line(done)

    yield update


@contextmanager
def progress_bar(description: str, total: float | None = None) -> Iterator[Callable[..., None]]:
    """A progress bar with ETA on stderr; yields ``update(done, total=None, description=None, note="")``.
    Where stderr is not a terminal (a log, a pipe) it prints plain lines instead (:func:`plain_progress`).

    The bar appears at the first ``update``, when the work has started: input refused before then (a bad
    table, no run to resume) is one error line, never a bar stuck at 0% above it."""
    if not err_console.is_terminal:
        with plain_progress(description, total) as update:
            yield update
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    columns = [TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
               TextColumn("{task.fields[note]}")]
    bar = Progress(*columns, console=err_console, transient=False)
    task = bar.add_task(description, total=total, note="")

    def update(done: float, total: float | None = None, description: str | None = None,
               note: str = "") -> None:
        if not bar.live.is_started:
            bar.start()
        fields = {"completed": done, "note": note}
        if total is not None:
            fields["total"] = total
        if description is not None:
            fields["description"] = description
        bar.update(task, **fields)

    try:
        yield update
    finally:
        if bar.live.is_started:
            bar.stop()


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
