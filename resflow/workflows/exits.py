"""Early exit and accuracy of every trained student of a run, for its record (:mod:`resflow.analysis.early_exit`).

Each student is read out at every layer through its own final readout -- its head for a classifier
(``"confidence"`` rule), its normalised state for a regression student (``"settled"`` rule) -- on the
fixed inputs the other hidden-state metrics use: ``METRIC_BATCH`` Gaussian inputs, or for a
classifier its grammar's fixed sentences (:func:`resflow.training.classes.fixed_sentences`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np
import torch

from ..analysis.early_exit import EXIT_CONFIDENCE, EXIT_SETTLED, exit_layers, exit_summary
from ..dynamics.fields import rmsnorm
from ..dynamics.tableau import get_tableau
from ..training.block import student_forward, student_logits
from ..training.classes import HierarchyTarget, fixed_sentences, one_hot_inputs
from ..training.hidden import metric_inputs
from ..training.targets import teacher_key

__all__ = ["student_exits", "EXIT_RULE_NOTE"]

EXIT_RULE_NOTE = {  # the record's attribute: which rule its exit metrics used
    "ce": f"confidence: first layer whose top class probability through the student's head >= {EXIT_CONFIDENCE}",
    "regression": f"settled: first layer after which every move of rmsnorm(h) <= {EXIT_SETTLED} x its mean move",
}


def student_exits(result, teachers: Mapping[Hashable, object], dtype: str = "float32") -> dict[str, np.ndarray]:
    """Per student (result order): ``exit_share`` per layer (NaN-padded), ``exit_depth``, ``exit_early_fraction``;
    classifiers also ``test_accuracy`` and ``exit_accuracy``.  Failed students stay NaN."""
    params = result.extra.get("parameters")
    if not params:
        return {}
    dt = getattr(torch, dtype)
    n, width = len(result.specs), max(s.depth for s in result.specs) + 1
    classes = isinstance(next(iter(teachers.values())), HierarchyTarget)
    out = {"exit_share": np.full((n, width), np.nan)}
    names = ("exit_depth", "exit_early_fraction") + (("test_accuracy", "exit_accuracy") if classes else ())
    out.update({name: np.full(n, np.nan) for name in names})
    positions = max(t.n_tokens for t in teachers.values()) if classes else 0
    gaussian = None if classes else metric_inputs(next(iter(teachers.values())).width, dt)
    with torch.no_grad():
        for i, spec in enumerate(result.specs):
            if result.failed[i]:
                continue
            student = {k: v.to(dt) for k, v in params[spec].items()}
            tableau = get_tableau(spec.scheme)
            if classes:
                target = teachers[teacher_key(spec, teachers)]
                tokens, labels = fixed_sentences(target, spec.replicate)
                codes = one_hot_inputs(tokens, target.config.hierarchy.vocab, positions, dt)
                states = student_forward(student, codes @ student["embed"].T, tableau, return_states=True)
                probs = torch.softmax(student_logits(states, student["head"]), dim=-1)
                exits = exit_layers(probs, "confidence")
                out["test_accuracy"][i] = float((probs[-1].argmax(-1) == labels).double().mean())
                at_exit = probs[exits, torch.arange(len(exits))].argmax(-1)
                out["exit_accuracy"][i] = float((at_exit == labels).double().mean())
            else:
                states = student_forward(student, gaussian, tableau, return_states=True)
                exits = exit_layers(rmsnorm(states), "settled")
            summary = exit_summary(exits, spec.depth)
            out["exit_share"][i, : spec.depth + 1] = summary["exit_share"]
            out["exit_depth"][i] = summary["exit_depth"]
            out["exit_early_fraction"][i] = summary["exit_early_fraction"]
    return out
