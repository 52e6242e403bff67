"""A griffe extension for the API reference: our docstrings are reST (``:math:``, ``:class:``,
simple tables); mkdocstrings renders Markdown.  Each docstring is converted once, by the same
function that writes ``docs/theory.md`` (``resflow.theory.render.rest_to_markdown``)."""

from __future__ import annotations

from typing import Any

import griffe

from resflow.theory.render import rest_to_markdown


class ReSTToMarkdown(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rest_to_markdown(obj.docstring.value)

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Packages are not visited by ``on_object``: convert their docstrings here."""
        self.on_object(obj=pkg)
