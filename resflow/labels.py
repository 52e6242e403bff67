"""What a reader calls each teacher: the one place a teacher spec becomes the words of a table, legend or
title.

The specs are the code's names (``tied``, ``independent``, ``correlated:0.9``, ``fractional:0.75``,
``grouped:4``); a reader meets the experiment as a **smooth** teacher (its layers share one map: a smooth flow
along depth) against a **rough** one (every layer drawn independently).  :func:`teacher_label` spells the code
name out in brackets on the first mention in a table or legend -- ``"smooth (tied)"`` -- and gives the
reader's word alone after it -- ``"smooth"``; :class:`Mentions` keeps track of which teachers a table has
named.

* ``tied``: "smooth (tied)", then "smooth";
* ``independent``: "rough (independent)", then "rough";
* ``correlated:0.9``: "correlated ρ = 0.9 (correlated:0.9)", then "correlated ρ = 0.9";
* ``fractional:0.75``: "fBm H = 0.75 (fractional:0.75)", then "fBm H = 0.75";
* ``grouped:4``: "4 groups (grouped:4)", then "4 groups" (``grouped:4:0.5``: "4 groups, ρ = 0.5");
* anything else (``rhm:3``, an unknown spec): itself.
"""

from __future__ import annotations

from typing import Any

__all__ = ["READER_NAMES", "teacher_label", "series_label", "Mentions"]

READER_NAMES = {"tied": "smooth", "independent": "rough"}  # spec -> the reader's word for the teacher


def _reader_word(spec: str) -> str | None:
    """The reader's words for ``spec`` without the code name, or None where the spec is its own best name."""
    if spec in READER_NAMES:
        return READER_NAMES[spec]
    family, _, arg = spec.partition(":")
    if family == "correlated" and arg:
        return f"correlated ρ = {arg}"
    if family == "fractional" and arg:
        return f"fBm H = {arg}"
    if family == "grouped" and arg:
        groups, _, rho = arg.partition(":")
        return f"{groups} groups" + (f", ρ = {rho}" if rho else "")
    return None


def teacher_label(spec: Any, *, first: bool = True) -> str:
    """The reader's name of the teacher ``spec`` (module table): the code name in brackets on the ``first``
    mention (``"smooth (tied)"``), the reader's word alone after (``"smooth"``); a spec with no reader's word
    (``"rhm:3"``, an unknown one) is returned as it is."""
    spec = str(spec)
    word = _reader_word(spec)
    if word is None:
        return spec
    return f"{word} ({spec})" if first else word


def series_label(fit: Any, *, first: bool = True) -> str:
    """One fitted series in words: its teacher (:func:`teacher_label`), then what else sets it apart -- a
    scheme other than Euler, students of K weight groups, the temperature.  ``fit`` is anything with
    ``target``, ``scheme``, ``student_groups`` and ``temperature``
    (a :class:`~resflow.analysis.SeriesFit`)."""
    parts = [teacher_label(fit.target, first=first)]
    if getattr(fit, "scheme", "euler") != "euler":
        parts.append(str(fit.scheme))
    if getattr(fit, "student_groups", 0):
        parts.append(f"students of {fit.student_groups} weight groups")
    if getattr(fit, "temperature", None) is not None:
        parts.append(f"T = {fit.temperature:g}")
    return ", ".join(parts)


class Mentions:
    """Teacher labels for one table or legend: the code name is spelled out the first time a teacher is named,
    the reader's word alone after (``mentions("tied")`` -> ``"smooth (tied)"``, then ``"smooth"``)."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def __call__(self, spec: Any) -> str:
        spec = str(spec)
        first = spec not in self._seen
        self._seen.add(spec)
        return teacher_label(spec, first=first)

    def series(self, fit: Any) -> str:
        """:func:`series_label` of ``fit``, the code name spelled out on its teacher's first mention."""
        first = str(fit.target) not in self._seen
        self._seen.add(str(fit.target))
        return series_label(fit, first=first)
