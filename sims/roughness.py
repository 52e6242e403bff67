"""Roughness as a knob: correlated(rho) and fractional(H) teachers, MSE loss; exponents and the
loss-vs-depth curves predicted by ``resflow theory roughness-correlated`` / ``roughness-fractional``
(amplitudes from the two extreme teachers of the same run, :func:`resflow.analysis.roughness_predictions`).
"""

from __future__ import annotations

import dataclasses

from resflow.experiments import Experiment

from .smooth_vs_rough import PRESETS as BASE

PRESETS = {
    # the main job's routes and lengths, one init per route, at its 3k steps on four teachers, two replicates:
    # 34 min on one thread beside another run (the 0.5 preset, six teachers, 2 inits and 4k steps, ran 6960 of
    # its 8000 route-steps in 2 h 04 min beside other jobs). The two extremes (their amplitudes feed the law),
    # a correlation between them and a Hurst index (fractional:0.5 is correlated:0, the independent teacher).
    # With one init the shallowest depth has one start, so this preset bounds exponents and certifies none
    "cpu": dataclasses.replace(
        BASE["cpu"], experiment="roughness", replicates=2, inits=1,
        targets=("correlated:0", "correlated:0.75", "correlated:1", "fractional:0.75"),
    ),
    "paper": dataclasses.replace(
        BASE["paper"], experiment="roughness",
        targets=("correlated:0", "correlated:0.5", "correlated:0.9", "correlated:0.99", "correlated:1",
                 "fractional:0.6", "fractional:0.75", "fractional:0.9"),
    ),
}


def figure(ds, fits):
    from resflow.fitting.roughness import roughness_predictions
    from resflow.presenting.plots import colors, new_figure, plot_loss_vs_depth, plot_training_curves

    fig, axes = new_figure(2, figsize=(12, 4.8))
    plot_loss_vs_depth(ds, fits, axes[0])
    predictions = roughness_predictions(ds)
    order = [f.target for f in fits]
    for color, target in zip(colors("tab10", len(order)), order, strict=True):
        if target in predictions:
            axes[0].loglog(ds["depth"].values, predictions[target], ":", color=color, lw=2)
    axes[0].set_title("loss vs depth (dotted: the roughness law, amplitudes from the two extremes)")
    plot_training_curves(ds, axes[1])
    return fig


def report(ds, record: str) -> str:
    """Markdown tables of a roughness run: exponents measured against the laws, and the crossover depths
    (``resflow report STORE --experiment roughness``)."""
    from resflow.fitting.fits import fit_dataset
    from resflow.fitting.roughness import crossover_depths, roughness_amplitudes, roughness_report
    fits = fit_dataset(ds)
    amps = roughness_amplitudes(ds)
    lines = [f"run {record}; amplitudes from the extremes: A_r = {amps.A_r:.3g}, A_s = {amps.A_s:.3g}, "
             f"alpha_s = {amps.alpha_s:.2f}, L_T = {amps.teacher_depth:g}", "",
             "| teacher | measured α [95% interval] | converged | law α (refined) "
             "| law α (first version) | verdict |",
             "|---|---|---|---|---|---|"]
    for r in roughness_report(ds, fits):
        lines.append(f"| {r['target']} | {r['exponent']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}] | "
                     f"{'yes' if r['converged'] else 'no'} | {r['predicted']:.2f} | "
                     f"{r['predicted_first_version']:.2f} "
                     f"| {r['verdict']} |")
    lines += ["", "| teacher | predicted crossover depth l* | measured l* |", "|---|---|---|"]
    for target, (predicted, measured) in crossover_depths(ds).items():
        lines.append(f"| {target} | {predicted:.2f} | {measured:.2f} |")
    return "\n".join(lines)


EXPERIMENT = Experiment(
    name="roughness",
    summary="Teachers between rough and smooth (correlated:rho, fractional:H): exponents against the "
            "roughness law.",
    presets=PRESETS, figure=figure, report=report,
    costs={"cpu": "34 min on one thread beside the temperature preset on the other core "
                  "(docs/results/roughness.md)"},
)
