"""Early exit and accuracy of every trained student of a run, for its record
(:mod:`resflow.probing.early_exit`).

Each student is read out at every layer through its own final readout -- its head for a classifier
(``"confidence"`` rule), its normalised state for a regression student (``"settled"`` rule) -- on the
fixed inputs the other hidden-state metrics use: ``METRIC_BATCH`` Gaussian inputs, or for a
classifier its grammar's fixed sentences (:func:`resflow.training.classes.fixed_sentences`).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from ..dynamics.fields import rmsnorm
from ..probing.early_exit import EXIT_CONFIDENCE, EXIT_LABELS, EXIT_SETTLED, exit_layers, exit_summary
from ..training.block import student_forward, student_logits
from ..training.classes import fixed_sentences, one_hot_inputs
from .measures import TrainedStudents

__all__ = ["EarlyExit", "EARLY_EXIT", "EXIT_RULE_NOTE", "student_exits"]

EXIT_RULE_NOTE = {  # the record's attribute: which rule its exit metrics used
    "ce": ("confidence: first layer whose top class probability through the student's head "
           f">= {EXIT_CONFIDENCE}"),
    "regression": ("settled: first layer after which every move of rmsnorm(h) "
                   f"<= {EXIT_SETTLED} x its mean move"),
}


class EarlyExit:
    """The measure (:class:`~resflow.workflows.measures.Measure`): per student ``exit_share`` per layer
    (NaN-padded), ``exit_depth``, ``exit_early_fraction``; classifiers also ``test_accuracy`` and
    ``exit_accuracy``.  Failed students stay NaN."""

    name = "early-exit"
    labels = EXIT_LABELS

    def applies(self, students: TrainedStudents) -> bool:
        return True

    def measure(self, students: TrainedStudents) -> dict[str, np.ndarray]:
        classes = students.classifies
        out = students.per_layer("exit_share")
        names = (("exit_depth", "exit_early_fraction")
                 + (("test_accuracy", "exit_accuracy") if classes else ()))
        out.update(students.per_student(*names))
        positions = max(t.n_tokens for t in students.teachers.values()) if classes else 0
        for student in students:
            if student.failed:
                continue
            spec, params, tableau, i = student.spec, student.parameters, student.tableau, student.index
            if classes:
                target = students.teacher_of(spec)
                tokens, labels = fixed_sentences(target, spec.replicate)
                codes = one_hot_inputs(tokens, target.config.hierarchy.vocab, positions, students.dtype)
                states = student_forward(params, codes @ params["embed"].T, tableau, return_states=True)
                probs = torch.softmax(student_logits(states, params["head"]), dim=-1)
                exits = exit_layers(probs, "confidence")
                out["test_accuracy"][i] = float((probs[-1].argmax(-1) == labels).double().mean())
                at_exit = probs[exits, torch.arange(len(exits))].argmax(-1)
                out["exit_accuracy"][i] = float((at_exit == labels).double().mean())
            else:
                states = student_forward(params, students.inputs, tableau, return_states=True)
                exits = exit_layers(rmsnorm(states), "settled")
            summary = exit_summary(exits, spec.depth)
            out["exit_share"][i, : spec.depth + 1] = summary["exit_share"]
            out["exit_depth"][i] = summary["exit_depth"]
            out["exit_early_fraction"][i] = summary["exit_early_fraction"]
        return out


EARLY_EXIT = EarlyExit()


def student_exits(result, teachers, dtype: str = "float32") -> dict[str, np.ndarray]:
    """Deprecated since resflow 0.5:
    ``EARLY_EXIT.measure(TrainedStudents.of_result(result, teachers, dtype))``."""
    warnings.warn("student_exits is deprecated since resflow 0.5; "
                  "use resflow.workflows.exits.EARLY_EXIT.measure(TrainedStudents.of_result(...)).",
                  DeprecationWarning, stacklevel=2)
    students = TrainedStudents.of_result(result, teachers, dtype)
    return {} if students is None else EARLY_EXIT.measure(students)
