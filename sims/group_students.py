"""The study's remedy, measured: students whose weights are shared within K groups of layers.

Plain Euler students (every layer its own weights) and group-structured ones (``student_groups=4``:
four MLPs, each applied to a contiguous quarter of the layers) learn a teacher of four functional
groups (``grouped:4``) and a rough one (``independent``), side by side: same teachers, data and
initial draws.  Does the structure that matches the target change the depth exponent?  On the rough
target it cannot represent the teacher's layer-to-layer changes; on the grouped one it is the
teacher's own structure.  ``resflow report STORE --experiment group-students`` prints the tables:
losses, the exponents per structure and the paired difference Δα (grouped minus plain) with its
interval over replicates, and the signatures of the trained students (update angles within a group
and at a boundary, early-stop fraction).
"""

from __future__ import annotations

import dataclasses

from resflow.experiments import Experiment, ExperimentConfig

from .smooth_vs_rough import CPU_TRAIN, PAPER_TRAIN, figure

K = 4

PRESETS = {
    # cpu: the compositional experiment's recipe (smooth-vs-rough's cpu recipe at 6k steps), 3 replicates
    "cpu": ExperimentConfig("group-students", targets=(f"grouped:{K}", "independent"), width=16,
                            teacher_depth=32, depths=(2, 4, 8, 16), replicates=3, student_groups=(0, K),
                            train=dataclasses.replace(CPU_TRAIN, steps=6_000)),
    # the study's toy model and recipe
    "paper": ExperimentConfig("group-students", targets=(f"grouped:{K}", "independent"), width=32,
                              teacher_depth=128, depths=(4, 8, 16, 24, 32, 48), replicates=3,
                              student_groups=(0, K), train=PAPER_TRAIN),
}

def teacher_built_losses(target: str, depths, *, width: int = 16, teacher_depth: int = 32,
                         replicates: int = 3, teacher_seed: int = 0, inputs: int = 8192) -> dict[int, float]:
    """Replicate-mean MSE of :func:`teacher_built_student` against its teacher (teacher seeds
    ``teacher_seed + r``, as a run's replicates ``r``), per depth."""
    import numpy as np
    import torch

    from resflow.dynamics.tableau import get_tableau
    from resflow.sims.compositional import groups_of
    from resflow.training import Teacher, mse_loss, student_forward, teacher_built_student

    out = {}
    for depth in depths:
        values = []
        for replicate in range(replicates):
            teacher = Teacher(target, width=width, depth=teacher_depth, seed=teacher_seed + replicate)
            x = teacher.sample_inputs(inputs, seed=1000 + replicate)
            with torch.no_grad():
                built = teacher_built_student(teacher, depth, groups_of(target))
                h = student_forward(built, x, get_tableau("euler"))
                values.append(float(mse_loss(h, teacher(x))))
        out[int(depth)] = float(np.mean(values))
    return out


def report(ds, record: str) -> str:
    """Markdown tables of a group-students run (``resflow report STORE --experiment group-students``)."""
    import json

    import numpy as np

    from resflow.analysis import exponent_difference, fit_dataset, group_signature
    from resflow.records import best_start
    from resflow.sims.compositional import groups_of

    fits = fit_dataset(ds)
    depths = list(fits[0].depths)
    structured = [g for g in ds["student_groups"].values.tolist() if g]
    lines = [f"run {record} ({ds.attrs.get('steps_done')} steps, {ds.sizes['replicate']} replicates)", "",
             "| teacher | students | " + " | ".join(f"ℓ = {d}" for d in depths) + " | α [95%] | verdict |",
             "|---" * (len(depths) + 4) + "|"]
    for f in fits:
        kind = f"{f.student_groups} weight groups" if f.student_groups else "plain"
        lines.append(f"| {f.target} | {kind} | " + " | ".join(f"{y:.2e}" for y in f.losses)
                     + f" | {f.exponent:.2f} [{f.ci_low:.2f}, {f.ci_high:.2f}] | "
                     f"{'converged' if f.converged else f.verdict} |")
    lines += ["", "Paired difference of exponents, Δα = α(weight groups) − α(plain) "
              "(t over replicates):", "",
              "| teacher | students | Δα, all depths [95%] | Δα over ℓ ≥ K [95%] |",
              "|---|---|---|---|"]
    for target in ds["target"].values.tolist():
        for g in structured:
            every = exponent_difference(ds, target, g)
            deep = [d for d in depths if d >= g]
            above = exponent_difference(ds, target, g, deep) if len(deep) >= 2 else None
            deep_cell = ("–" if above is None
                         else f"{above.value:+.2f} [{above.low:+.2f}, {above.high:+.2f}]")
            lines.append(f"| {target} | {g} weight groups | "
                         f"{every.value:+.2f} [{every.low:+.2f}, {every.high:+.2f}] | "
                         + deep_cell + " |")
    ds = best_start(ds)  # from here on the students themselves: the best route and init of each cell
    curves = ds["test_loss"].sel(length=ds["length"].max()).isel(scheme=0).mean("replicate")
    shown = ([s for s in curves["step"].values.tolist() if s and s % 1000 == 0]
             or curves["step"].values.tolist()[1:])
    lines += ["", "Test loss during training (replicate mean, full-length students):", "",
              "| teacher | students | depth | " + " | ".join(f"step {s}" for s in shown) + " |",
              "|---" * (len(shown) + 3) + "|"]
    for target in ds["target"].values.tolist():
        for g in ds["student_groups"].values.tolist():
            for d in depths:
                row = curves.sel(target=target, student_groups=g, depth=d).sel(step=shown).values
                lines.append(f"| {target} | {f'{g} weight groups' if g else 'plain'} | {d} | "
                             + " | ".join(f"{v:.2e}" for v in row) + " |")
    settings = json.loads(ds.attrs.get("config", "{}"))
    for target in [t for t in ds["target"].values.tolist() if t.startswith("grouped:")]:
        teacher_depth = settings.get("teacher_depth", 32)
        built = teacher_built_losses(target, [d for d in depths if d >= groups_of(target)] + [teacher_depth],
                                     width=settings.get("width", 16), teacher_depth=teacher_depth,
                                     replicates=ds.sizes["replicate"],
                                     teacher_seed=settings.get("teacher_seed", 0))
        lines += ["", f"A group-structured student built from the {target} teacher's own group fields, "
                  "untrained (`teacher_built_student`; replicate mean over the same teacher seeds, 8192 "
                  "inputs): the loss a group-structured student can reach at each depth without learning "
                  "anything:", "",
                  "| | " + " | ".join(f"ℓ = {d}" for d in built) + " |", "|---" * (len(built) + 1) + "|",
                  "| teacher-built, untrained | " + " | ".join(f"{v:.2e}" for v in built.values()) + " |"]
    signature = group_signature(ds, K).sel(length=ds["length"].max(), depth=max(depths)).isel(scheme=0)
    early = ds["early_stop_fraction"].sel(length=ds["length"].max(), depth=max(depths)).isel(scheme=0)
    lines += ["", f"Signatures of the trained students at depth {max(depths)} (replicate means; "
              f"angles in rad; pairs of layers inside one of the teacher's {K} groups and across a "
              "boundary):", "",
              "| teacher | students | angle within a group | angle at a boundary | early-stop fraction |",
              "|---|---|---|---|---|"]
    for target in ds["target"].values.tolist():
        for g in ds["student_groups"].values.tolist():
            one = signature.sel(target=target, student_groups=g).mean("replicate")
            fraction = float(np.mean(early.sel(target=target, student_groups=g).values))
            lines.append(f"| {target} | {f'{g} weight groups' if g else 'plain'} | "
                         f"{float(one['angle_within']):.2f} | "
                         f"{float(one['angle_boundary']):.2f} | {fraction:.2f} |")
    return "\n".join(lines)


EXPERIMENT = Experiment(
    name="group-students",
    summary=f"Plain students against students whose weights are shared within {K} groups of layers, on a "
            f"teacher of {K} functional groups and on a rough one: does the structure change the exponent?",
    presets=PRESETS, figure=figure, report=report,
    costs={"cpu": "9 min 47 s with the earlier Adam recipe (docs/results/compositional.md); "
                  "not remeasured with SOAP"},
    notes={"cpu": "the compositional cpu recipe (6k steps), 3 replicates",
           "paper": "the study's toy model and recipe (arXiv:2602.05970) with grouped students"},
)
