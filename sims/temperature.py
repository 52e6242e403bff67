"""KL loss over a grid of teacher temperatures, both teachers: the exponent against temperature."""

from __future__ import annotations

import dataclasses

import numpy as np

from resflow.experiments import Experiment

from .smooth_vs_rough import PRESETS as BASE

PRESETS = {
    # the main job's routes and lengths, one init per route, at its 3k steps on depths 2-8 and three
    # temperatures, two replicates: 31 min on one thread beside another run (the 0.5 preset, 4 temperatures,
    # 2 inits and 5k steps, ran 550 of its 10k route-steps in 13 minutes: about 4 hours). With one init the
    # shallowest depth has one start, so this preset bounds exponents and certifies none
    "cpu": dataclasses.replace(
        BASE["cpu"], experiment="temperature", replicates=2, depths=(2, 4, 8), inits=1,
        train=dataclasses.replace(BASE["cpu"].train, loss="kl", head="learned", steps=3000,
                                  temperatures=(0.03, 0.3, 1.0)),
    ),
    # the same with the teacher's own head at the teacher's temperature (the study's fixed-head runs): the
    # student has only to match the final state, not to sharpen a head of its own
    "cpu-shared-head": dataclasses.replace(
        BASE["cpu"], experiment="temperature", replicates=2, depths=(2, 4, 8),
        train=dataclasses.replace(BASE["cpu"].train, loss="kl", head="shared", steps=8000,
                                  temperatures=(0.03, 0.1, 0.3, 1.0)),
    ),
    # the study's long temperature runs: KL with the teacher's head fixed ("shared"), c = 4, 80k steps,
    # T in logspace(-2, 0, 16)
    "paper": dataclasses.replace(
        BASE["paper"], experiment="temperature",
        train=dataclasses.replace(BASE["paper"].train, loss="kl", head="shared", lr_scale=4.0,
                                  temperatures=tuple(float(t) for t in np.logspace(-2, 0, 16))),
    ),
}


def figure(ds, fits):
    from resflow.analysis import Mentions
    from resflow.fitting.fits import exponent_over_training
    from resflow.presenting.plots import colors, new_figure, plot_loss_vs_depth
    from resflow.probing.groups import one_structure

    fig, axes = new_figure(3, figsize=(16, 4.8))
    plot_loss_vs_depth(ds, fits, axes[0])
    fits = [f for f in fits if f.student_groups == 0]  # panels 2 and 3: the plain students
    alpha = exponent_over_training(one_structure(ds)).isel(scheme=0)
    palette = colors("plasma", alpha.sizes["temperature"], stop=0.85)
    mentions = Mentions()
    for t, style in zip(alpha["target"].values, ("-", "--", ":", "-."), strict=False):
        for color, temp in zip(palette, alpha["temperature"].values, strict=True):
            axes[1].semilogx(np.maximum(alpha["step"].values, 1), alpha.sel(target=t, temperature=temp),
                             style, color=color, lw=1, label=f"{mentions(t)} T={temp:.2g}")
    axes[1].set(xlabel="step", ylabel="depth exponent α", title="exponent against training steps")
    axes[1].legend(fontsize=6, ncol=2)
    ax = axes[2]
    mentions = Mentions()
    for target in sorted({f.target for f in fits}):
        rows = sorted((f for f in fits if f.target == target), key=lambda f: f.temperature)
        ax.errorbar([f.temperature for f in rows], [f.exponent for f in rows],
                    yerr=[[f.exponent - f.ci_low for f in rows], [f.ci_high - f.exponent for f in rows]],
                    fmt="o-", capsize=2, label=mentions(target))
    ax.set(xscale="log", xlabel="teacher temperature T", ylabel="depth exponent α",
           title="exponent vs temperature")
    ax.legend(fontsize=7)
    return fig


EXPERIMENT = Experiment(
    name="temperature",
    summary="KL(teacher || student) over a grid of teacher temperatures, both teachers: exponent against T.",
    presets=PRESETS, figure=figure,
    costs={"cpu": "31 min on one thread beside the roughness preset on the other core "
                  "(docs/results/temperature.md)"},
)
