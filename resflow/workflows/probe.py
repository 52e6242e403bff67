"""Probe the hidden states of models: what ``resflow probe`` calls.

A model is a resflow teacher (``teacher:tied``, ``teacher:correlated:0.9``, ...) probed on Gaussian
inputs, or a HuggingFace model (a directory or a name in the local hub cache) probed on texts.
The probes are written as one ``probe`` record, with the study's panels as a figure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import ConfigError
from ..presenting.plots import save_figure
from ..presenting.probe_figure import plot_probes
from ..probing.probes import ProbeResult, probe_dataset, probe_states, step_size_slope
from ..provenance import provenance
from ..records.kinds import PROBE
from ..store import Store
from ..training.engine import resolve_device
from ..training.teacher import Teacher

__all__ = ["ProbeRun", "probe_teacher", "probe_models", "TEACHER_PREFIX"]

TEACHER_PREFIX = "teacher:"


@dataclass(frozen=True, kw_only=True)
class ProbeRun:
    """The probes of every model, the ``probe`` record and the figure written."""

    results: tuple[ProbeResult, ...]
    record: str
    figure: Path
    step_size_slope: float | None  # across models of different depth (about -1 when steps shrink like 1/L)


def probe_teacher(spec: str, *, n_inputs: int = 4096, batch: int = 1024, seed: int = 0,
                  **overrides) -> ProbeResult:
    """Probe a resflow teacher (``tied``, ``independent``, ``correlated:0.9``, ``fractional:0.75``) on
    Gaussian inputs."""
    teacher = Teacher(spec, **overrides)
    gen = torch.Generator().manual_seed(seed)

    def batches():
        left = n_inputs
        while left > 0:
            size = min(batch, left)
            with torch.no_grad():
                yield teacher.hidden_states(teacher.sample_inputs(size, seed=gen))
            left -= size

    return probe_states(batches(), f"{TEACHER_PREFIX}{spec}", kind="teacher", seed=seed)


def probe_models(models: Sequence[str], *, texts: Path | str | None = None, max_tokens: int = 4096,
                 batch_size: int = 8, device: str = "auto", bf16: bool = False, normalise: bool = False,
                 out: Path | str = "results",
                 progress: Callable[[str, int, int], None] | None = None) -> ProbeRun:
    """Probe every model and write one ``probe`` record (and its figure) into the store ``out``.

    ``progress(model, done, total)`` is called before and after each model.  Nothing is written
    until every model is probed: an interrupted call leaves the store as it was.
    """
    if not models:
        raise ConfigError("models must name at least one model or teacher (e.g. teacher:tied).")
    report = progress or (lambda model, done, total: None)
    # resolved before any work: --device cuda without a GPU is refused, not run on the CPU; teachers are
    # probed on the CPU whatever the device, and the provenance says where each kind ran
    hf_device = str(resolve_device(device))
    results = []
    for k, name in enumerate(models):
        report(name, k, len(models))
        if name.startswith(TEACHER_PREFIX):
            results.append(probe_teacher(name[len(TEACHER_PREFIX):], n_inputs=max_tokens))
            continue
        from ..llm.probes.hf_probe import probe_hf, read_texts

        if texts is None:
            raise ConfigError(f"probing {name!r} needs --texts FILE (one text per line).")
        results.append(probe_hf(name, read_texts(texts), max_tokens=max_tokens, batch_size=batch_size,
                                device=hf_device, dtype=torch.bfloat16 if bf16 else torch.float32))
    report("", len(models), len(models))
    store = Store.open(out, create=True)
    devices = {"teachers": "cpu", "models": hf_device}
    prov = provenance({"models": list(models), "texts": str(texts), "max_tokens": max_tokens,
                       "device": devices}, seed=0)
    ds = probe_dataset(results)
    ds.attrs.update(prov)
    record = store.write(ds, kind=PROBE, name="probe")
    figure = save_figure(plot_probes(results, normalise=normalise), store.work_dir("probe") / "probe.png",
                         prov)
    slope = step_size_slope(results) if len({r.n_layers for r in results}) >= 2 else None
    return ProbeRun(results=tuple(results), record=record, figure=figure, step_size_slope=slope)
