"""Rich tables that fit the width they are given (a terminal's, ``COLUMNS``, or 80 in a log).

Rich squeezes a table that is too wide by cutting its cells mid-word, with an ellipsis where a number was.
:func:`print_table` prints a table as it is where it fits; where it does not, with its cells wrapped between
units -- words, and intervals such as ``[-0.88, 4.03]`` kept whole -- headers first; and where even that does
not fit, as a plain list: one item per row, named by its first cell, the other cells as ``column: value``.
Every value is printed, and no line is longer than the width.
"""

from __future__ import annotations

import re

__all__ = ["print_table", "column_widths", "markdown_width"]

# a wrap keeps on one line: a word, an interval [a, b] whole
UNIT = re.compile(r"(?:\[[^\[\]\n]{0,24}\]|\S)+")


def _text(cell):
    from rich.text import Text

    return cell.copy() if isinstance(cell, Text) else Text.from_markup(str(cell))


def _len(text: str) -> int:
    from rich.cells import cell_len

    return cell_len(text)


def _natural(text: str) -> int:
    return max((_len(line) for line in text.split("\n")), default=0)


def _shortest(text: str) -> int:
    """The narrowest column ``text`` wraps into without cutting a unit: its longest unit."""
    return max((_len(u) for u in UNIT.findall(text)), default=0)


def column_widths(table, width: int) -> list[int] | None:
    """Column widths (without padding) at which ``table`` fits ``width`` with no unit cut, or None when it
    cannot.  Cells wrap only where their headers' wrapping is not enough; the room left goes to the columns in
    proportion to what they lack of their whole width."""
    cells = [[_text(c).plain for c in column.cells] for column in table.columns]
    headers = [_text(column.header).plain for column in table.columns]
    # the default box: a border between columns and at each edge, padding 1
    room = width - (3 * len(headers) + 1)
    whole = [max(_natural(h), *map(_natural, c)) for h, c in zip(headers, cells, strict=True)]
    # first the headers wrap, then the cells too
    steps = ([max(_shortest(h), *map(_natural, c)) for h, c in zip(headers, cells, strict=True)],
             [max(_shortest(h), *map(_shortest, c)) for h, c in zip(headers, cells, strict=True)])
    if sum(whole) <= room:
        return whole
    for least in steps:
        if sum(least) <= room:
            lack = [w - s for w, s in zip(whole, least, strict=True)]
            spare = room - sum(least)
            return [s + spare * gap // max(sum(lack), 1) for s, gap in zip(least, lack, strict=True)]
    return None


def _wrapped(cell, width: int, indent: str = ""):
    """``cell`` as rich text broken into lines of at most ``width`` between units (styles kept), the lines
    after the first starting with ``indent``; a unit wider than that is cut (folded)."""
    from rich.text import Text

    text = _text(cell)
    cuts, line_start = [], 0
    for match in UNIT.finditer(text.plain):
        taken = indent if cuts else ""
        if _len(taken + text.plain[line_start:match.end()]) > width and match.start() > line_start:
            cuts.append(match.start())
            line_start = match.start()
    lines = []
    for k, line in enumerate(text.divide(cuts)):
        line.rstrip()
        line = Text(indent) + line if k else line
        lines += line.wrap(_console(), width, overflow="fold") if line.cell_len > width else [line]
    return Text("\n").join(lines)


def _console():
    from rich.console import Console

    return Console(width=10_000)


def print_table(table, console) -> None:
    """Print ``table`` on ``console`` within its width (module docstring)."""
    from rich.table import Table

    width = console.width
    widths = column_widths(table, width)
    if widths is not None:
        fitted = Table(title=table.title)
        for column, fixed in zip(table.columns, widths, strict=True):
            fitted.add_column(_wrapped(column.header, fixed), width=fixed, overflow="fold")
        for row in zip(*(c.cells for c in table.columns), strict=True):
            fitted.add_row(*(_wrapped(cell, fixed) for cell, fixed in zip(row, widths, strict=True)))
        console.print(fitted)
        return
    lines = _wrapped(table.title, width).plain.split("\n") if table.title else []
    headers = [_text(c.header).plain for c in table.columns]
    for row in zip(*(c.cells for c in table.columns), strict=True):
        values = [" ".join(_text(v).plain.split()) for v in row]
        lines += _wrapped(values[0], width, "  ").plain.split("\n")
        for name, value in zip(headers[1:], values[1:], strict=True):
            lines += _wrapped(f"  {name}: {value}", width, "      ").plain.split("\n")
    console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)


def markdown_width(console) -> int | None:
    """The width Markdown output is fitted to: the terminal's, or ``COLUMNS`` where it is set; None (the
    Markdown as written, for a file) when the output is not a terminal and no width is asked for."""
    import os

    return console.width if console.is_terminal or os.environ.get("COLUMNS", "").isdigit() else None
