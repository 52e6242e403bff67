"""The main job: students of a rough (independent) and a smooth (tied) teacher, MSE loss.

``resflow run smooth-vs-rough --preset cpu`` (what ``make demo`` runs) or ``--preset paper``.
How the cpu preset was chosen: ``docs/cpu-preset.md``.
"""

from __future__ import annotations

import dataclasses

from resflow.experiments import Experiment, ExperimentConfig
from resflow.sim.config import TrainConfig

CPU_TRAIN = TrainConfig(
    steps=20_000, batch=512, loss="mse", lr_scale=8.0, constant_fraction=0.5, decay="geometric",
    final_lr_fraction=0.01, eval_every=500, eval_batches=4, eval_batch_size=4096, checkpoint_every=1000,
)
# The study's recipe (Liu, Kangaslahti, Liu & Gore, arXiv:2602.05970, toy model): Adam,
# lr = c * 6e-4 / sqrt(depth) with c = 2 for MSE, constant for 80% of training then linear decay to
# 10%; 80k steps for the MSE runs; batch 1024; a learned head's lr not depth-scaled (TrainConfig's
# default).  Test losses on fresh batches.
PAPER_TRAIN = TrainConfig(
    steps=80_000, batch=1024, loss="mse", lr_base=6e-4, lr_scale=2.0, constant_fraction=0.8, decay="linear",
    final_lr_fraction=0.1, eval_every=2000, eval_batches=8, eval_batch_size=8192, checkpoint_every=2000,
)

PRESETS = {
    "cpu": ExperimentConfig("smooth-vs-rough", targets=("independent", "tied"), width=16, teacher_depth=32,
                            depths=(2, 4, 8, 16), replicates=3, train=CPU_TRAIN),
    # the cpu preset trained twice as long (its half-length students are the cpu preset's full length):
    # with the cpu preset, the exponents along the doublings 10k, 20k, 40k steps (docs/results.md)
    "cpu-long": ExperimentConfig("smooth-vs-rough", targets=("independent", "tied"), width=16, teacher_depth=32,
                                 depths=(2, 4, 8, 16), replicates=3,
                                 train=dataclasses.replace(CPU_TRAIN, steps=40_000, checkpoint_every=2000)),
    # the study's toy model: d = 32 (hidden 4d), teachers of depth 128 with W2 / sqrt(128), students of
    # depths 6-48; three replicates
    "paper": ExperimentConfig("smooth-vs-rough", targets=("independent", "tied"), width=32, teacher_depth=128,
                              depths=(6, 12, 16, 24, 32, 48), replicates=3, train=PAPER_TRAIN),
}


def figure(ds, fits):
    from resflow.analysis.plots import plot_experiment

    return plot_experiment(ds, fits)


EXPERIMENT = Experiment(
    name="smooth-vs-rough",
    summary="Euler students of a rough (independent) and a smooth (tied) teacher, MSE on the final state: "
            "the ensemble law (alpha = 1) against the procedural one (alpha = 2-3).",
    presets=PRESETS, figure=figure,
    notes={"cpu": "2-core CPU, minutes; chosen in docs/cpu-preset.md",
           "cpu-long": "the cpu preset, 40k steps (about twice its time)",
           "paper": "the study's toy model (width 32, teacher 128, depths 6-48, batch 1024); for a GPU"},
)
