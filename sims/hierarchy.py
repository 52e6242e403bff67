"""The compositional use of depth on data with a known hierarchy: students of Random Hierarchy Model data.

Targets ``rhm:2``, ``rhm:3``, ``rhm:4`` (hierarchy depth L_h; vocabulary 8, 8 classes, 4 synonyms,
binary rules: inputs of 4, 8, 16 tokens; each replicate its own grammar), residual students of
depths 1-8 with a token embedding and a classification head, cross-entropy on fresh sentences
(:mod:`resflow.training.classes`).  Measured: loss and accuracy against depth for each L_h, the depth
at which the loss drops (:mod:`resflow.fitting.hierarchy`) against the threshold hypothesis
(``resflow theory compositional-threshold``), and where each input's readout exits
(:mod:`resflow.probing.early_exit`).
"""

from __future__ import annotations

import dataclasses
import math

from resflow.experiments import Experiment, ExperimentConfig
from resflow.training import TrainConfig

TARGETS = ("rhm:2", "rhm:3", "rhm:4")

CPU_TRAIN = TrainConfig(steps=20_000, batch=128, loss="ce", eval_every=1000, eval_batches=4,
                        eval_batch_size=1024, checkpoint_every=2000)

PRESETS = {
    # cpu: 3 grammars x 6 depths x 3 replicates x 3 lengths on 2 cores in about 8 minutes
    # (docs/results/compositional.md)
    "cpu": ExperimentConfig("hierarchy", targets=TARGETS, width=32, depths=(1, 2, 3, 4, 6, 8), replicates=3,
                            train=CPU_TRAIN),
    # for a GPU: wider students, deeper grammars and stacks, four times the steps
    "gpu": ExperimentConfig("hierarchy", targets=TARGETS + ("rhm:5",), width=64,
                            depths=(1, 2, 3, 4, 6, 8, 12, 16),
                            replicates=3, train=dataclasses.replace(CPU_TRAIN, steps=80_000, batch=256,
                                                                    eval_every=4000, checkpoint_every=4000)),
}


def figure(ds, fits):
    """Loss and accuracy against depth for each L_h (replicates as points, their mean as a line) and the
    deepest students' exit layers."""
    import numpy as np

    from resflow._specs import is_class_target
    from resflow.fitting.hierarchy import DROP_FRACTION, hierarchy_table
    from resflow.presenting.figure import InlineFigure
    from resflow.records import best_start

    if not all(is_class_target(str(t)) for t in ds["target"].values):  # run with teachers: the usual figure
        from .smooth_vs_rough import figure as teacher_figure

        return teacher_figure(ds, fits)
    table = hierarchy_table(ds)
    ds = best_start(ds)  # the students themselves: the best route and init of each cell
    fig = InlineFigure(figsize=(13, 4))
    axes = fig.subplots(1, 3)
    depths = table["depth"].values
    for target in table["target"].values:
        one = table.sel(target=target)
        label = f"$L_h$ = {int(one['hierarchy_depth'])}"
        for ax, name in ((axes[0], "loss"), (axes[1], "accuracy")):
            line, = ax.plot(depths, one[name].mean("replicate"), "o-", label=label)
            for r in one["replicate"].values:
                ax.plot(depths, one[name].sel(replicate=r), ".", color=line.get_color(), alpha=0.4)
        deepest = ds.sel(target=target, depth=depths.max(), length=ds["length"].max()).isel(
            scheme=0, student_groups=0, temperature=0)
        share = deepest["exit_share"].mean("replicate").values[: int(depths.max()) + 1]
        axes[2].plot(np.arange(len(share)), share, "o-", label=label)
    classes = int(table["classes"].max())
    axes[0].axhline(math.log(classes), color="0.6", ls=":", label="uniform guess")
    axes[0].axhline(DROP_FRACTION * math.log(classes), color="0.6", ls="--", label="drop threshold")
    axes[0].set(yscale="log", xlabel="student depth ℓ", ylabel="test cross-entropy (nats)",
                title="loss against depth")
    axes[1].axhline(1 / classes, color="0.6", ls=":", label="chance")
    axes[1].set(xlabel="student depth ℓ", ylabel="test accuracy", title="accuracy against depth",
                ylim=(0, 1.02))
    axes[2].set(xlabel="exit layer e", ylabel="share of inputs",
                title=f"exit layers at ℓ = {int(depths.max())} (confidence rule)")
    for ax in axes:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def report(ds, record: str) -> str:
    """Markdown tables of a hierarchy run (``resflow report STORE --experiment hierarchy``)."""
    import numpy as np

    from resflow._specs import is_class_target
    from resflow.fitting.fits import fit_dataset
    from resflow.fitting.hierarchy import DROP_FRACTION, hierarchy_table
    from resflow.fitting.intervals import over_replicates
    from resflow.presenting.report import run_tables

    if not all(is_class_target(str(t)) for t in ds["target"].values):  # run with teachers: the usual tables
        return run_tables(ds, record)
    table = hierarchy_table(ds)
    fits = {f.target: f for f in fit_dataset(ds)  # the series hierarchy_table reads
            if f.scheme == table.attrs["scheme"] and f.student_groups == table.attrs["student_groups"]}

    def with_interval(values) -> str:  # replicate mean [95% t interval over replicates, within [0, 1]]
        values = np.asarray(values, float)
        if values.size < 2:
            return f"{values.mean():.3f} (one replicate: no interval)"
        interval = over_replicates(lambda v: float(v[0]), values[:, None])
        return f"{interval.value:.3f} [{max(interval.low, 0.0):.3f}, {min(interval.high, 1.0):.3f}]"

    depths = [int(d) for d in table["depth"].values]
    head = " | ".join(f"ℓ = {d}" for d in depths)
    lines = [f"run {record} ({ds.attrs.get('steps_done')} steps, {ds.sizes['replicate']} replicates)", "",
             f"Test cross-entropy (nats; uniform guess ln {int(table['classes'].max())} = "
             f"{math.log(int(table['classes'].max())):.3f}), replicate mean, and the convergence "
             "verdict:", "",
             f"| target | L_h | {head} | verdict |", "|---" * (len(depths) + 3) + "|"]
    for target in table["target"].values:
        one, fit = table.sel(target=target), fits[str(target)]
        lines.append(f"| {target} | {int(one['hierarchy_depth'])} | "
                     + " | ".join(f"{v:.3g}" for v in one["loss"].mean("replicate").values)
                     + f" | {'converged' if fit.converged else fit.verdict} |")
    lines += ["", "Test accuracy on 1024 fresh sentences per student, replicate mean:", "",
              f"| target | {head} |", "|---" * (len(depths) + 1) + "|"]
    for target in table["target"].values:
        accuracy = table.sel(target=target)["accuracy"].mean("replicate").values
        lines.append(f"| {target} | " + " | ".join(f"{v:.3f}" for v in accuracy) + " |")
    lines += ["", f"Drop depth (smallest ℓ with loss < {DROP_FRACTION} ln n_c; > {max(depths)}: "
              "not within the run) per replicate, against the threshold hypothesis "
              "(`compositional-threshold`: flat until ℓ ≈ L_h); and where the deepest students' inputs "
              "exit (the record's exit rule; replicate mean, t interval over replicates clipped to [0, 1]):",
              "",
              "| target | L_h | drop depth per replicate | hypothesis | exits in the first half [95%] "
              "| mean exit e/ℓ [95%] |",
              "|---|---|---|---|---|---|"]
    for target in table["target"].values:
        one = table.sel(target=target)
        drops = ", ".join(f"> {max(depths)}" if np.isinf(d) else f"{d:.0f}" for d in one["drop_depth"].values)
        lines.append(f"| {target} | {int(one['hierarchy_depth'])} | {drops} | "
                     f"≈ {int(one['hierarchy_depth'])} | "
                     f"{with_interval(one['exit_early_fraction'])} | {with_interval(one['exit_depth'])} |")
    lengths = [float(v) for v in ds["length"].values]
    by_length = {length: hierarchy_table(ds.sel(length=[length])) for length in lengths}
    lines += ["", "Drop depth per replicate at each training length (the verdict's shorter runs: a drop "
              "that moves to smaller depths as training goes on):", "",
              "| target | " + " | ".join(f"length {v:g}" for v in lengths) + " |",
              "|---" * (len(lengths) + 1) + "|"]
    for target in table["target"].values:
        cells = [", ".join(f"> {max(depths)}" if np.isinf(d) else f"{d:.0f}"
                           for d in by_length[v].sel(target=target)["drop_depth"].values) for v in lengths]
        lines.append(f"| {target} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


EXPERIMENT = Experiment(
    name="hierarchy",
    summary="Residual students with a token embedding and a classification head on Random Hierarchy Model "
            "data of hierarchy depths 2-4: the depth at which the loss drops, against L_h; early exit per "
            "input.",
    presets=PRESETS, figure=figure, report=report,
    notes={"cpu": "v = 8, n_c = 8, m = 4, s = 2; width 32, depths 1-8, 3 replicates (own grammars), Adam",
           "gpu": "adds L_h = 5 (32 tokens), width 64, depths to 16, 80k steps; for a GPU"},
    costs={"cpu": "8 min 49 s (docs/results/compositional.md)"},
)
