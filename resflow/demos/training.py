"""Demos with teachers and students: the angles that tell the readings apart, a seconds-long
training on smooth and rough teachers, and the depth scaling law of trained LLMs."""

from __future__ import annotations

import time

import numpy as np
import torch
import xarray as xr

from .._validate import check_int
from ..analysis import Mentions, colors, construction_loss, new_figure, step_angles, update_angles
from ..errors import ConfigError, FitFailedError
from ..experiments import ExperimentConfig
from ..loglog import slopes
from ..training import Teacher, TrainConfig, train
from .core import DemoResult, finish, register

__all__ = ["teacher_angles", "smooth_vs_rough", "llm_depth_fit"]


@register
def teacher_angles(seed: int = 0, *, width: int = 32, depth: int = 64, batch: int = 256,
                   teachers: tuple[str, ...] = ("tied", "correlated:0.9", "independent")) -> DemoResult:
    """(d) Per-layer step and update angles of tied (smooth) and independent (rough) teachers.

    Successive updates of a smooth flow point the same way (small update angles: procedural); those
    of independent layers are near-orthogonal (about 90°: an ensemble of unrelated steps).
    """
    started = time.perf_counter()
    seed = check_int("seed", seed, minimum=0)
    gen = torch.Generator().manual_seed(seed)
    steps, updates = [], []
    for spec in teachers:
        teacher = Teacher(spec, width=width, depth=depth, seed=seed)
        with torch.no_grad():
            states = teacher.hidden_states(teacher.sample_inputs(batch, seed=gen))
        steps.append(np.degrees(step_angles(states).mean(dim=-1).numpy()))
        updates.append(np.degrees(update_angles(states).mean(dim=-1).numpy()))
    data = xr.Dataset(
        {"step_angle": (("teacher", "layer"), np.stack(steps), {"long_name": "angle between h_l and h_l+1",
                                                                 "units": "degree"}),
         "update_angle": (("teacher", "update"), np.stack(updates), {
             "long_name": "angle between successive updates", "units": "degree"})},
        coords={"teacher": list(teachers), "layer": np.arange(depth), "update": np.arange(depth - 1)})
    fig, (left, right) = new_figure(2, figsize=(10, 4.2))
    mentions = Mentions()
    for color, spec, s, u in zip(colors("tab10", len(teachers)), teachers, steps, updates, strict=True):
        left.plot(s, color=color)
        right.plot(u, color=color, label=f"{mentions(spec)}: mean {np.mean(u):.0f}°")
    left.set(xlabel="layer l", ylabel="degrees", title="step angle θ(h_l, h_l+1)")
    right.axhline(90, color="0.6", ls=":", lw=0.8)
    right.set(xlabel="layer l", ylabel="degrees", title="update angle θ(Δh_l, Δh_l+1)")
    right.legend(fontsize=8)
    return finish("teacher_angles", "Smooth teachers take aligned steps; rough ones take orthogonal steps",
                  fig, data, started,
                  {"width": width, "depth": depth, "batch": batch, "teachers": list(teachers)}, seed)


@register
def smooth_vs_rough(seed: int = 0, *, steps: int = 600, depths: tuple[int, ...] = (1, 2, 4, 8),
                    width: int = 4, teacher_depth: int = 16, lr_scale: float = 64.0) -> DemoResult:
    """(e) Students of several depths trained for seconds on a smooth (tied) and a rough (independent)
    teacher.

    A toy version of the main experiment (``resflow run smooth-vs-rough``): one replicate, width 4,
    600 steps at a large learning rate, so the students are far from trained and the slopes are
    rough (about 1.1 for the rough teacher and 1.6 for the smooth one at seed 0, against 1.24 and 3.17
    for the 48k-step run, itself a bound, docs/results.md); the smooth
    teacher's loss already falls faster.  The recipe is :meth:`resflow.TrainConfig.classroom` at a fifth of
    its steps and twice its learning rate; that recipe at its own size (width 8, 3000 steps) is the Python
    example of :func:`resflow.train`.  Beside each teacher's students, open diamonds on a dotted line are
    its *constructions* (:func:`resflow.analysis.construction_loss`): students built from the teacher, not
    trained, whose losses follow the laws (about ℓ^-1 rough, ℓ^-2 smooth, before the finite teacher's factor).
    """
    started = time.perf_counter()
    seed, steps = check_int("seed", seed, minimum=0), check_int("steps", steps, minimum=1)
    train_config = TrainConfig.classroom(steps=steps, lr_scale=lr_scale)
    config = ExperimentConfig(experiment="smooth-vs-rough", width=width, teacher_depth=teacher_depth,
                              depths=depths, replicates=1, seed=seed, teacher_seed=seed, lengths=(1.0,),
                              train=train_config)
    result = train(config.student_specs(), config.teachers(), config.train, seed=seed)
    final = dict(zip(((spec.target, spec.depth) for spec in result.specs), result.final_batches.mean(axis=1),
                     strict=True))
    targets, ell = list(config.targets), np.array(config.depths, float)
    loss = np.array([[final[(t, d)] for d in config.depths] for t in targets])
    teachers = {key[0]: teacher for key, teacher in config.teachers().items()}
    x = torch.randn((8192, width), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    built = np.array([[construction_loss(teachers[t].double(), d, "euler", x) for d in config.depths]
                      for t in targets], dtype=float)
    data = xr.Dataset({"final_loss": (("target", "depth"), loss,
                                      {"long_name": "final test loss (MSE)", "units": "1"}),
                       "construction_loss": (("target", "depth"), built, {
                           "long_name": "loss of the construction (built from the teacher, not trained)",
                           "units": "1"})},
                      coords={"target": targets, "depth": ell})
    fig, (ax,) = new_figure(1, figsize=(5.5, 4.2))
    mentions = Mentions()
    palette = colors("tab10", len(targets))
    for color, target, curve, reference in zip(palette, targets, loss, built, strict=True):
        ax.loglog(ell, curve, "o-", color=color,
                  label=f"{mentions(target)} teacher: loss ∝ ℓ^-{float(slopes(ell, curve)):.2f}")
        ax.loglog(ell, reference, "d:", mfc="none", color=color,
                  label=f"its construction (not trained): ℓ^-{float(slopes(ell, reference)):.2f}")
    ax.set(xlabel="student depth ℓ", ylabel="final test loss", title=f"{steps} steps, width {width}")
    ax.legend(fontsize=8)
    return finish("smooth_vs_rough", "Smooth teachers reward depth more than rough ones", fig, data, started,
                  config.to_dict(), seed)


@register
def llm_depth_fit(seed: int = 0, *, data: str | None = None, starts: int = 16) -> DemoResult:
    """(g) The depth scaling law L = c_m m^-a_m + c_l l^-a_l + c_D D^-a_D + L0 on the Chinchilla table.

    Needs the table (``data=PATH``, or ``$RESFLOW_DATA_DIR``; resflow never ships it): without it a
    clear :class:`~resflow.errors.ConfigError` says where to put it.  A fit that fails its checks
    (``LawFit.failure``) raises :class:`~resflow.errors.FitFailedError` instead of drawing.
    """
    from ..llm import ScalingFitSettings, fit_scaling_law, load_scaling_table, predict

    started = time.perf_counter()
    seed, starts = check_int("seed", seed, minimum=0), check_int("starts", starts, minimum=1)
    try:
        table = load_scaling_table(data)
    except ConfigError as exc:
        raise ConfigError(f"the llm_depth_fit demo needs the Chinchilla table: {exc}") from None
    fit = fit_scaling_law(table, ScalingFitSettings(n_starts=starts, seed=seed))
    if fit.failure:  # a demo never draws a failed fit as if it were a result
        raise FitFailedError(f"the llm_depth_fit demo's fit failed: {fit.failure}; "
                             "try more starts (starts=64).")
    m, ell, tokens, loss = (table[c].to_numpy(float) for c in ("d_model", "n_layers", "num_tokens", "loss"))
    predicted = predict(fit.params, m, ell, tokens)
    depth_term = fit.params["c_l"] * ell ** -fit.params["alpha_l"]
    out = xr.Dataset({"loss": (("model",), loss), "predicted": (("model",), predicted),
                      "depth_term": (("model",), depth_term, {"long_name": "c_l l^-alpha_l"})},
                     coords={"n_layers": (("model",), ell), "d_model": (("model",), m)},
                     attrs={k: float(v) for k, v in fit.params.items()})
    fig, (left, right) = new_figure(2, figsize=(10, 4.2))
    # the fit's own cut
    used = loss < np.sort(loss)[-fit.excluded] if fit.excluded else np.ones(loss.size, bool)
    left.loglog(loss[used], predicted[used], "o", ms=3, alpha=0.6, label="fitted")
    left.loglog(loss[~used], predicted[~used], "x", ms=3, color="0.6", label=f"excluded ({fit.excluded})")
    left.legend(fontsize=8)
    lims = [loss.min(), loss.max()]
    left.plot(lims, lims, color="0.5", lw=0.8)
    left.set(xlabel="final loss", ylabel="fitted law",
             title=f"{fit.n_points} models ({fit.excluded} excluded)")
    order = np.argsort(ell)
    right.loglog(ell[order], depth_term[order], "-")
    right.set(xlabel="layers l", ylabel="c_l l^-α_l",
              title=f"depth term: α_l = {fit.params['alpha_l']:.2f} ± {fit.se['alpha_l']:.2f}")
    return finish("llm_depth_fit", "Trained LLMs: the depth term of the scaling law", fig, out, started,
                  {"data": str(table.attrs.get("path", "")), "starts": starts}, seed)
