"""Measures of trained students: one protocol for everything a run computes on its students after training.

A run keeps every trained student's parameters (``train(..., keep_parameters=True)``).  They become one typed
:class:`TrainedStudents` -- spec, parameters, tableau, failure and teacher of each student, and the fixed
inputs of the hidden-state metrics -- and every registered :class:`Measure` that applies to the run takes one
pass over it, returning its outputs: arrays per student ``(n,)`` or per layer ``(n, max depth + 1)``
(NaN-padded), each named with its label in ``labels``.  :func:`resflow.workflows.run.train_dataset` stores
them in the run's ``toy-run`` record.  Five are built in: teacher tracking (:mod:`resflow.probing.tracking`),
interventions (:mod:`resflow.probing.interventions`), early exit (:mod:`resflow.probing.early_exit`),
constructions (:mod:`resflow.probing.constructions`) and smoothness along depth
(:mod:`resflow.probing.smoothness`).

A new measure is an object with ``name``, ``labels``, ``applies(students)`` and ``measure(students)``, passed
to :func:`register_measure` (``docs/design/extending.md``; ``tests/test_extending.py`` adds one).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from .._plugins import PluginRegistry
from ..dynamics.tableau import ButcherTableau
from ..errors import ConfigError, UnknownNameError
from ..training.block import StudentSpec
from ..training.classes import HierarchyTarget
from ..training.hidden import METRIC_SEED, metric_inputs
from ..training.targets import teacher_key

__all__ = ["TrainedStudent", "TrainedStudents", "Measure", "MEASURES", "register_measure", "chosen_measures",
           "run_measures", "Measurements", "measure_students"]


@dataclass(frozen=True)
class TrainedStudent:
    """One trained student: its place in the run, spec, parameters (in the measures' dtype) and tableau."""

    index: int
    spec: StudentSpec
    parameters: dict[str, torch.Tensor]
    tableau: ButcherTableau
    failed: bool


@dataclass(frozen=True)
class TrainedStudents:
    """The trained students of a run, in the run's order, and what a measure needs beside them.

    ``teachers`` maps the run's teacher keys to teachers (flow teachers, or grammars when ``classifies``);
    ``dtype`` is the measures' precision; :attr:`inputs` the hidden-state metrics' fixed Gaussian inputs and
    :meth:`generator` their seeded generator (a measure that draws more from it, as interventions' corruption
    does, draws after the inputs).  ``probes`` are the hidden-state probes the engine took at the end of
    training (:attr:`resflow.training.TrainingResult.hidden`, e.g. ``update_angle``), read-only.
    """

    specs: tuple[StudentSpec, ...]
    parameters: Mapping[StudentSpec, dict[str, torch.Tensor]]
    failed: np.ndarray
    teachers: Mapping[Hashable, Any]
    dtype: torch.dtype
    probes: Mapping[str, np.ndarray] = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of_result(cls, result, teachers: Mapping[Hashable, Any],
                  dtype: str = "float32") -> TrainedStudents | None:
        """The students of a :class:`~resflow.training.TrainingResult` (None when it kept no parameters)."""
        params = result.parameters
        if not params:
            return None
        return cls(tuple(result.specs), params, np.asarray(result.failed, dtype=bool), teachers,
                   getattr(torch, dtype), probes=dict(result.hidden))

    @property
    def classifies(self) -> bool:
        """Whether the targets are class grammars (students of tokens and labels), not flow teachers."""
        return isinstance(next(iter(self.teachers.values())), HierarchyTarget)

    @property
    def width(self) -> int:
        return next(iter(self.parameters.values()))["W1"].shape[-1]

    def __len__(self) -> int:
        return len(self.specs)

    def __iter__(self) -> Iterator[TrainedStudent]:
        for i, spec in enumerate(self.specs):
            params = {k: v.to(self.dtype) for k, v in self.parameters[spec].items()}
            yield TrainedStudent(i, spec, params, spec.tableau, bool(self.failed[i]))

    def teacher_of(self, spec: StudentSpec) -> Any:
        return self.teachers[teacher_key(spec, self.teachers)]

    def generator(self) -> torch.Generator:
        """The hidden-state metrics' generator, fresh: its first draw is :attr:`inputs`."""
        return torch.Generator().manual_seed(METRIC_SEED)

    @property
    def inputs(self) -> torch.Tensor:
        """The hidden-state metrics' fixed inputs (Gaussian, the students' width), computed once."""
        if "inputs" not in self._cache:
            self._cache["inputs"] = metric_inputs(self.width, self.dtype, self.generator())
        return self._cache["inputs"]

    def per_layer(self, *names: str) -> dict[str, np.ndarray]:
        """NaN arrays ``(n, max depth + 1)`` to fill, by name."""
        layers = max(s.depth for s in self.specs) + 1
        return {name: np.full((len(self), layers), np.nan) for name in names}

    def per_student(self, *names: str) -> dict[str, np.ndarray]:
        """NaN arrays ``(n,)`` to fill, by name."""
        return {name: np.full(len(self), np.nan) for name in names}


class Measure(Protocol):
    """What is computed on trained students: ``labels`` maps each output to its ``(long_name, units)``."""

    name: str
    labels: Mapping[str, tuple[str, str]]

    def applies(self, students: TrainedStudents) -> bool: ...

    def measure(self, students: TrainedStudents) -> dict[str, np.ndarray]: ...


MEASURES: PluginRegistry[Measure] = PluginRegistry("resflow.measures", "a measure of trained students")


def register_measure(measure: Measure) -> Measure:
    """Make ``measure`` run on every run's students it applies to (after those registered before it)."""
    for attribute in ("name", "labels", "applies", "measure"):
        if not hasattr(measure, attribute):
            raise ConfigError(f"a measure needs name, labels, applies() and measure(); {measure!r} has no "
                              f"{attribute}.")
    return MEASURES.claim(measure.name, measure, noun="measure", same=lambda taken, new: taken is new)


MEASURES.bind(register_measure)  # plug-ins: the entry points of "resflow.measures"


def chosen_measures(names: Sequence[str] = ("all",)) -> tuple[Measure, ...]:
    """The registered measures ``names`` asks for, in registration order (``("all",)``: every one); an
    unknown name is an error that lists the registered ones."""
    for name in names:
        if name != "all" and name not in MEASURES:
            raise UnknownNameError.of("measure", name, ["all", *MEASURES])
    return tuple(m for m in MEASURES.values() if "all" in names or m.name in names)


@dataclass(frozen=True)
class Measurements:
    """What the measures found on a run's students: ``outputs`` (name -> ``(n,)`` or ``(n, layers)``, the
    students' order) and ``labels`` (name -> ``(long_name, units)``, of every registered measure, so a record
    describes what a measure that did not apply would have stored)."""

    outputs: dict[str, np.ndarray]
    labels: dict[str, tuple[str, str]]


def run_measures(
    students: TrainedStudents | None, names: Sequence[str] = ("all",)
) -> tuple[dict[str, np.ndarray], dict[str, tuple[str, str]]]:
    """The registered measures ``names`` asks for (:func:`chosen_measures`) that apply to ``students``, in
    registration order: ``(outputs, labels)`` (the labels of every registered measure).  An output a measure
    does not label, or of the wrong length, is an error naming the measure."""
    found = measure_students(students, chosen_measures(names))
    return found.outputs, found.labels


def measure_students(students: TrainedStudents | None, chosen: Sequence[Measure]) -> Measurements:
    """The measures ``chosen`` (registered ones, :func:`chosen_measures`) that apply to ``students``, in
    registration order (:func:`run_measures`, with the measures already resolved)."""
    outputs: dict[str, np.ndarray] = {}
    labels: dict[str, tuple[str, str]] = {}
    for measure in MEASURES.values():
        labels.update(measure.labels)
        if students is None or measure not in chosen or not measure.applies(students):
            continue
        with torch.no_grad():
            found = measure.measure(students)
        for name, values in found.items():
            if name not in measure.labels or np.shape(values)[:1] != (len(students),):
                raise ConfigError(f"the measure {measure.name!r} returned {name!r} "
                                  f"with shape {np.shape(values)}: an output must be in its labels "
                                  f"and have one row per student ({len(students)}).")
        outputs.update(found)
    return Measurements(outputs, labels)
