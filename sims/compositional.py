"""The third use of depth: students of teachers made of K functional groups.

Targets ``tied`` (one group: K = 1) and ``grouped:K`` (K contiguous groups of layers, tied within a
group, a different map in each): the loss of Euler students against depth, across K, with the
grouped-accumulation law and the threshold hypothesis (``resflow theory accumulation-grouped``,
``compositional-threshold``).  Student depths run from below to above K.
"""

from __future__ import annotations

import dataclasses
import json

from resflow.experiments import Experiment, ExperimentConfig
from resflow.noise import parse_correlation

from .smooth_vs_rough import CPU_TRAIN, PAPER_TRAIN, figure

TARGETS = ("tied", "grouped:2", "grouped:4", "grouped:8")

PRESETS = {
    # cpu: 6k steps of the smooth-vs-rough cpu recipe and two replicates: within 15 minutes on 2 cores
    # (80 students of depths 1-16 at about 0.13 s a step here; 10k steps took 22 minutes by estimate)
    "cpu": ExperimentConfig("compositional", targets=TARGETS, width=16, teacher_depth=32,
                            depths=(1, 2, 4, 8, 16), replicates=2,
                            train=dataclasses.replace(CPU_TRAIN, steps=6_000)),
    # the study's toy model and recipe (as smooth-vs-rough's paper preset), K up to 16 of 128 layers
    "paper": ExperimentConfig("compositional", targets=("tied", "grouped:4", "grouped:8", "grouped:16"),
                              width=32, teacher_depth=128, depths=(2, 4, 8, 16, 32, 48), replicates=3,
                              train=PAPER_TRAIN),
}

def groups_of(target: str) -> int:
    """K of a target: ``tied`` is one group, ``grouped:K[:RHO]`` is K (read by the one spec parser)."""
    return getattr(parse_correlation(target), "groups", 1)


def report(ds, record: str) -> str:
    """Markdown tables of a compositional run (``resflow report STORE --experiment compositional``): losses
    against depth per K with the fits and verdicts, the exponent over the depths at or above K, and each
    grouped teacher's loss relative to the tied one against the law's 1/K."""
    import numpy as np
    import xarray as xr

    from resflow import laws
    from resflow.fitting.fits import fit_dataset
    from resflow.loglog import power_law_fit
    from resflow.probing.groups import one_structure, split_update_angles
    from resflow.records import best_start
    ds = one_structure(ds)  # the plain students (group-structured ones: the group-students report)
    fits = {f.target: f for f in fit_dataset(ds)}
    depths = list(fits[next(iter(fits))].depths)
    lines = [f"run {record} ({ds.attrs.get('steps_done')} steps, {ds.sizes['replicate']} replicates)", "",
             "| teacher | K | " + " | ".join(f"ℓ = {d}" for d in depths)
             + " | α [95%] | α over ℓ ≥ K [95%] | verdict |", "|---" * (len(depths) + 5) + "|"]
    for target, fit in fits.items():
        k = groups_of(target)
        deep = [(d, y) for d, y in zip(fit.depths, fit.losses, strict=True) if d >= k]
        if len(deep) >= 3:
            above = power_law_fit([d for d, _ in deep], [y for _, y in deep])
            above_text = f"{above.exponent:.2f} [{above.ci_low:.2f}, {above.ci_high:.2f}]"
        else:
            above_text = "–"
        lines.append(f"| {target} | {k} | " + " | ".join(f"{y:.2e}" for y in fit.losses)
                     + f" | {fit.exponent:.2f} [{fit.ci_low:.2f}, {fit.ci_high:.2f}] | {above_text} | "
                     f"{'converged' if fit.converged else fit.verdict} |")
    tied = np.array(fits["tied"].losses)
    lines += ["", "Loss of each grouped teacher's students relative to the tied teacher's, at the same depth "
              "(the grouped-accumulation law, ρ = 1: 1/K for ℓ ≥ K):", "",
              "| teacher | law (ℓ ≥ K) | " + " | ".join(f"ℓ = {d}" for d in depths) + " |",
              "|---" * (len(depths) + 2) + "|"]
    for target, fit in fits.items():
        k = groups_of(target)
        if k == 1:
            continue
        law = float(laws.evaluate("accumulation-grouped", ell=float(2 * k), q=2, rho=1.0, K=k)
                    / laws.evaluate("accumulation-grouped", ell=float(2 * k), q=2, rho=1.0, K=1))
        ratio = np.array(fit.losses) / tied
        lines.append(f"| {target} | {law:.3f} | " + " | ".join(f"{r:.2f}" for r in ratio) + " |")
    deepest = max(depths)
    lines += ["", f"Signatures (the probe metrics used for transformers) at depth {deepest}, full length, "
              "replicate mean: update angles (rad) between successive layers inside one of the teacher's K "
              "groups and across a boundary, and the early-stop fraction — of the trained students "
              "(1024 fixed inputs) and of the teachers (the teacher probe, 1024 inputs):", "",
              "| teacher | student within | student at a boundary | student early-stop | teacher within | "
              "teacher at a boundary | teacher early-stop |", "|---|---|---|---|---|---|---|"]
    # the best route and init of each cell
    full = best_start(ds).sel(length=1.0, depth=deepest).isel(scheme=0)
    if "early_stop_fraction" not in full:  # a record written before the early-stop fraction was recorded
        full["early_stop_fraction"] = xr.full_like(full["final_loss"], np.nan)

    def number(value, digits=2):
        return "–" if np.isnan(value) else f"{value:.{digits}f}"

    for target in fits:
        k = groups_of(target)
        one = full.sel(target=target)
        student = split_update_angles(one["update_angle"].mean("replicate").values, deepest, k)
        t = teacher_signature(target, json.loads(ds.attrs["config"]))
        lines.append(f"| {target} | {number(student[0])} | {number(student[1])} | "
                     f"{number(float(one['early_stop_fraction'].mean()))} | {number(t['within'], 3)} | "
                     f"{number(t['boundary'])} | {number(t['early_stop'])} |")
    return "\n".join(lines)


def teacher_signature(target: str, config: dict) -> dict[str, float]:
    """The group signature of the run's ``target`` teacher (replicate 0) on 1024 Gaussian inputs, as `resflow
    probe teacher:SPEC` measures it."""
    import torch

    from resflow.analysis import states_group_signature
    from resflow.training import Teacher

    teacher = Teacher(target, width=int(config["width"]), depth=int(config["teacher_depth"]),
                      seed=int(config.get("teacher_seed", 0)))
    with torch.no_grad():
        states = teacher.hidden_states(teacher.sample_inputs(1024, seed=0))
    return states_group_signature(states, groups_of(target))


EXPERIMENT = Experiment(
    name="compositional",
    summary="Euler students of teachers made of K functional groups (tied within a group, distinct maps "
            "between): the loss against depth below and above K.",
    presets=PRESETS, figure=figure, report=report,
    notes={"cpu": "smooth-vs-rough's cpu recipe at 6k steps, 2 replicates (15 minutes on 2 cores)",
           "paper": "smooth-vs-rough's paper preset (arXiv:2602.05970 toy model) with grouped teachers"},
    costs={"cpu": "8 min 18 s with the earlier Adam recipe (docs/results/compositional.md); "
                  "not remeasured with SOAP"},
)
