"""Interventions across depth on models: what ``resflow intervene`` calls.

A model is a resflow teacher (``teacher:tied``, ``teacher:grouped:4``, ...: lesion, rescaled lesion,
swap and a trace that restores each layer's clean update, on Gaussian inputs) or a HuggingFace model
(a directory or a name in the local hub cache: lesion, swap and ROME's causal trace on one prompt).
Each model becomes one ``intervention`` record (``resflow.analysis.intervention_dataset``: the same
schema for both); nothing is written until every model is done.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import xarray as xr

from ..dynamics import rmsnorm
from ..errors import ConfigError
from ..presenting.plots import plot_interventions, save_figure
from ..probing.interventions import PROFILE_LABELS, intervention_dataset, stack_profiles
from ..provenance import provenance
from ..records.kinds import INTERVENTION
from ..store import Store
from ..training.block import student_steps
from ..training.engine import resolve_device
from ..training.hidden import metric_inputs
from ..training.teacher import Teacher
from .measures import TrainedStudents
from .probe import TEACHER_PREFIX

__all__ = ["InterventionRun", "intervene_teacher", "intervene_models", "StudentInterventions",
           "STUDENT_INTERVENTIONS", "STUDY_PROMPT", "student_interventions"]

#: the study's Fig. 6 prompt, target and subject (after ROME)
STUDY_PROMPT = ("The Space Needle is in downtown", " Seattle", "The Space Needle")
TOY_NOISE = 3.0  # the corruption of a toy input: Gaussian noise of 3 times the inputs' unit std, as ROME


@dataclass(frozen=True)
class InterventionRun:
    """One ``intervention`` record per model, in the order given."""

    datasets: tuple[xr.Dataset, ...]
    records: tuple[str, ...]
    figure: Path | None = None


@torch.no_grad()
def intervene_teacher(spec: str, *, n_inputs: int = 1024, seed: int = 0, **overrides) -> xr.Dataset:
    """Lesion (plain and rescaled), swap and trace (clean update restored) every layer of a resflow teacher,
    on ``n_inputs`` Gaussian inputs; the damage is the mean square change of its normalised output."""
    teacher = Teacher(spec, **overrides)
    gen = torch.Generator().manual_seed(seed)
    x = teacher.sample_inputs(n_inputs, seed=gen)
    noisy = x + TOY_NOISE * teacher.sample_inputs(n_inputs, seed=gen)
    profiles = stack_profiles(teacher.stack.layer_steps(), rmsnorm(x), rmsnorm(noisy), readout=rmsnorm)
    return intervention_dataset(
        model=f"{TEACHER_PREFIX}{spec}", measure="damage", depth=teacher.depth, **profiles,
        attrs={"inputs": str(n_inputs), "corruption": f"x + {TOY_NOISE:g} N(0, I)", "trace_measure":
               "recovered share of the clean output (clean update of layer l restored)", "seed": str(seed)})


class StudentInterventions:
    """The measure (:class:`~resflow.workflows.measures.Measure`): every profile of
    :data:`resflow.analysis.PROFILE_LABELS` for every trained student of a run, on the hidden-state metrics'
    fixed inputs and their corruption (drawn next from the same generator), NaN-padded per layer."""

    name = "interventions"
    labels = PROFILE_LABELS

    def applies(self, students: TrainedStudents) -> bool:
        return not students.classifies  # measured on Gaussian inputs against no grammar

    def measure(self, students: TrainedStudents) -> dict[str, np.ndarray]:
        gen = students.generator()
        x = metric_inputs(students.width, students.dtype, gen)  # then the corruption, from the same generator
        noisy = x + TOY_NOISE * torch.randn(x.shape, generator=gen, dtype=x.dtype)
        out = students.per_layer(*PROFILE_LABELS)
        for student in students:
            steps = student_steps(student.parameters, student.tableau)
            for name, values in stack_profiles(steps, rmsnorm(x), rmsnorm(noisy), readout=rmsnorm).items():
                out[name][student.index, :student.spec.depth] = values
        return out


STUDENT_INTERVENTIONS = StudentInterventions()


def student_interventions(result, dtype: str = "float32") -> dict[str, np.ndarray]:
    """Deprecated since resflow 0.5:
    ``STUDENT_INTERVENTIONS.measure(TrainedStudents.of_result(result, teachers, dtype))`` (the measure of
    :mod:`resflow.workflows.measures`)."""
    warnings.warn("student_interventions is deprecated since resflow 0.5; use resflow.workflows.intervene."
                  "STUDENT_INTERVENTIONS.measure(TrainedStudents.of_result(...)).",
                  DeprecationWarning, stacklevel=2)
    students = TrainedStudents.of_result(result, {}, dtype)
    return {} if students is None else STUDENT_INTERVENTIONS.measure(students)


def intervene_models(models: Sequence[str], *, prompt: str = STUDY_PROMPT[0], target: str = STUDY_PROMPT[1],
                     subject: str | None = STUDY_PROMPT[2],
                     interventions: Sequence[str] = ("lesion", "swap", "trace"),
                     n_inputs: int = 1024, device: str = "auto", seed: int = 0, out: Path | str = "results",
                     progress: Callable[[str, int, int], None] | None = None) -> InterventionRun:
    """Intervene on every model and write one ``intervention`` record each into the store ``out``."""
    if not models:
        raise ConfigError("models must name at least one model or teacher (e.g. teacher:tied).")
    report = progress or (lambda model, done, total: None)
    hf_device = resolve_device(device)  # before any work: --device cuda without a GPU is refused
    datasets = []
    for k, name in enumerate(models):
        report(name, k, len(models))
        if name.startswith(TEACHER_PREFIX):
            ds = intervene_teacher(name[len(TEACHER_PREFIX):], n_inputs=n_inputs, seed=seed)
        else:
            from ..llm.probes.interventions import intervene_model

            result = intervene_model(name, prompt, target=target, subject=subject,
                                     interventions=interventions, device=hf_device, seed=seed,
                                     progress=lambda what, done, total, k=k, name=name:
                                     report(f"{name}: {what} {done}/{total}", k, len(models)))
            ds = intervention_dataset(
                model=result.model, measure=result.measure, depth=result.depth, lesion=result.lesion,
                swap=result.swap, trace=result.trace,
                tokens=result.tokens if result.trace is not None else None,
                attrs={"prompt": prompt, "target": target, "subject": subject or "",
                       "clean": f"{result.clean:.6g}", "corrupt": f"{result.corrupt:.6g}",
                       "corrupted_positions": str(result.subject), "seed": str(seed)})
        datasets.append(ds)
    report("", len(models), len(models))
    store = Store.open(out, create=True)
    records = []
    for ds in datasets:
        # teachers: the CPU
        ran_on = "cpu" if ds.attrs["model"].startswith(TEACHER_PREFIX) else str(hf_device)
        ds.attrs.update(provenance({"model": ds.attrs["model"], "seed": seed, "device": ran_on}))
        records.append(store.write(ds, kind=INTERVENTION, name=ds.attrs["model"].replace("/", "-")))
    figure = save_figure(plot_interventions(datasets), store.work_dir("intervene") / "interventions.png",
                         provenance({"models": list(models), "records": records}, seed=seed))
    return InterventionRun(tuple(datasets), tuple(records), figure)
