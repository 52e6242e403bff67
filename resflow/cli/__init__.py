"""The ``resflow`` command line: each command parses, calls one public function, prints.

==============  ==================================================================================
module          commands
==============  ==================================================================================
``app``         the Typer application; clean errors (exit 2), progress with ETA, Ctrl-C (exit 130)
``simulate``    ``run``, ``fit``, ``report``, ``demo`` (:mod:`resflow.workflows`),
                ``bench`` (:func:`resflow.training.run_bench`)
``sweeps``      ``sweep`` (:func:`resflow.workflows.run_sweep`; an axis preset sweeps its own grid)
``optima``      ``optimum`` (:func:`resflow.workflows.reach_optima`: a run's optima by L-BFGS)
``models``      ``llm-fit``, ``probe``, ``compare``
``listing``     ``tableaux``, ``theory``
``stores``      ``store check``, ``store gc`` (:class:`resflow.store.Store`)
``fit_tables``  what a run or fit prints: the separation, the exponents, verdict v2, why a series is a bound
``tables``      rich tables fitted to the width they are given: wrapped at spaces, or a list
``names``       names in help (entry points, a checked list: no torch); ``run --list``, ``--list-keys``,
                ``demo --list``
``__main__``    ``python -m resflow.cli``
==============  ==================================================================================

Importing the command line loads none of torch, scipy or xarray (``tests/test_cli.py`` checks it): help and
usage errors answer at once, and names shown in help come from entry points or a list a test checks against
the registry.  The command line imports only public names (``resflow`` and its subpackages), never a module's
internals; ``tests/test_architecture.py`` checks it.
"""

import sys

INTERRUPTED = 130  # as resflow.cli.app.INTERRUPTED: the exit status a shell reports for SIGINT
LOADING_INTERRUPTED = "interrupted while the command line loaded; nothing was done\n"

try:  # light: the commands import torch, scipy and xarray inside their functions, when they run
    # registers the commands, in this order
    from . import simulate, sweeps, optima, models, listing, stores  # noqa: F401, I001
    from .app import app
except KeyboardInterrupt:  # Ctrl-C while the command line loads: one line and exit 130, never a traceback
    if hasattr(sys, "ps1"):  # an interactive session: an interrupted import is the user's to see
        raise
    sys.stderr.write(LOADING_INTERRUPTED)
    raise SystemExit(INTERRUPTED) from None

__all__ = ["app", "main"]


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """A warning on the command line is one line (``warning: ...``), not a source location and its code."""
    return f"warning: {message}\n"


def main() -> None:  # console-script entry point (pyproject.toml) and ``python -m resflow.cli``
    import warnings

    warnings.formatwarning = _one_line_warning  # e.g. a deprecated --set key: what to write instead
    try:
        app()  # builds the click commands (typer reads their annotations: help text, names), then runs one
    # Ctrl-C while the commands are built; once one runs, resflow.cli.app handles it
    except KeyboardInterrupt:
        sys.stderr.write(LOADING_INTERRUPTED)
        raise SystemExit(INTERRUPTED) from None
