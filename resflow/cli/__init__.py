"""The ``resflow`` command line: each command parses, calls one public function, prints.

============  ==================================================================================
module        commands
============  ==================================================================================
``app``       the Typer application; clean errors (exit 2), progress with ETA, Ctrl-C (exit 130)
``simulate``  ``run``, ``fit``, ``demo`` (:mod:`resflow.workflows`), ``bench`` (:func:`resflow.training.run_bench`)
``models``    ``llm-fit``, ``probe``, ``compare``
``listing``   ``tableaux``, ``theory``
``stores``    ``store check``, ``store gc`` (:class:`resflow.store.Store`)
``__main__``  ``python -m resflow.cli``
============  ==================================================================================

The command line imports only public names (``resflow`` and its subpackages), never a module's
internals; ``tests/test_architecture.py`` checks it.
"""

from . import simulate, models, listing, stores  # noqa: F401, I001  (registers the commands, in this order)
from .app import app

__all__ = ["app", "main"]


def main() -> None:  # console-script entry point
    app()
