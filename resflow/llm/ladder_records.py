r"""The ``lm-ladder`` record, the depth law fitted on it, its tables, its figure and its comparison row.

The record holds, per width x depth x seed: the validation loss per training length and evaluation
batch, the validation curve, the residual-stream probes per layer, the lesion and swap loss changes
per layer, the parameters and the training time.  The fit of one width (:func:`ladder_fits`):

* the **depth law** :math:`L(\ell) = c\,\ell^{-\alpha} + L_\infty` fitted to each seed's losses
  (:func:`resflow.analysis.fits.fit_offset`), :math:`\alpha` the mean over seeds with the t interval over
  seeds (:func:`resflow.analysis.intervals.over_replicates`); a seed whose fit fails makes the
  interval undefined (said, never hidden);
* the **plain exponent** (slope of log loss on log depth, intervals over seeds) and the **verdict v2**
  (:func:`resflow.analysis.verdict.convergence_verdict`) on the lengths;
* the **lesion exponent**: the slope of the mean lesion loss change over layers against depth.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import xarray as xr

from ..analysis.compare import ComparisonRow, DepthPart
from ..analysis.fits import fit_offset
from ..analysis.intervals import exponent_interval, over_replicates
from ..analysis.interventions import InterventionRow, intervention_row
from ..analysis.regimes import classify
from ..analysis.verdict import convergence_verdict
from ..loglog import slopes
from .ladder import PROBE_METRICS, TrainedLadder

__all__ = ["ladder_dataset", "LadderFit", "ladder_fits", "WidthDepthFit", "width_depth_fit", "MIN_WIDTHS",
           "ladder_rows", "ladder_depth_parts",
           "ladder_intervention_rows", "ladder_tables", "plot_ladder", "ladder_problems", "KIND"]

KIND = "lm-ladder"


def ladder_dataset(trained: TrainedLadder, attrs: dict[str, str]) -> xr.Dataset:
    """The ``lm-ladder`` record of a trained ladder (module docstring)."""
    config = trained.config
    widths, depths, seeds = list(config.widths), list(config.depths), list(config.seed_ids)
    n_layers = max(depths) + 1
    steps = sorted({s for m in trained.models for s in m.curve_steps})
    shape = (len(widths), len(depths), len(seeds))
    loss = np.full((*shape, len(config.lengths), config.eval_batches), np.nan)
    curve = np.full((*shape, len(steps)), np.nan)
    per_layer = {name: np.full((*shape, n_layers), np.nan) for name in (*PROBE_METRICS, "lesion", "swap")}
    scalars = {name: np.full(shape, np.nan) for name in ("early_stop_fraction", "angle_early_stop_fraction",
                                                          "clean_loss", "train_seconds")}
    params = np.zeros((len(widths), len(depths)), np.int64)
    for m in trained.models:
        i, j, k = widths.index(m.width), depths.index(m.depth), seeds.index(m.seed)
        values = np.asarray(m.losses, float)
        loss[i, j, k, :, : values.shape[1]] = values
        curve[i, j, k, [steps.index(s) for s in m.curve_steps]] = m.curve_losses
        for name in PROBE_METRICS:
            per_layer[name][i, j, k, : m.depth + 1] = m.probe[name]
        per_layer["lesion"][i, j, k, : m.depth] = m.lesion
        per_layer["swap"][i, j, k, : m.depth - 1] = m.swap
        scalars["early_stop_fraction"][i, j, k] = m.early_stop_fraction
        scalars["angle_early_stop_fraction"][i, j, k] = m.angle_early_stop_fraction
        scalars["clean_loss"][i, j, k] = m.clean_loss
        scalars["train_seconds"][i, j, k] = m.seconds
        params[i, j] = m.parameters
    dims = ("width", "depth", "seed")
    labels = {"step_angle": ("angle between successive states h_l, h_l+1", "rad"),
              "update_angle": ("angle between successive updates", "rad"),
              "norm": ("norm of the residual stream", "1"), "update_norm": ("norm of the update", "1"),
              "lesion": ("validation loss change when layer l is skipped", "nat"),
              "swap": ("validation loss change when layers l, l+1 run in the other order", "nat")}
    data = {
        "val_loss": ((*dims, "length", "batch"), loss, {"long_name": "validation loss (mean next-token cross-entropy) "
                                                        "per evaluation batch", "units": "nat"}),
        "val_loss_curve": ((*dims, "step"), curve, {"long_name": "validation loss along training", "units": "nat"}),
        "parameters": (("width", "depth"), params, {"long_name": "parameters without the embedding", "units": "1"}),
    }
    for name, values in per_layer.items():
        long_name, units = labels[name]
        data[name] = ((*dims, "layer"), values, {"long_name": long_name, "units": units})
    data["early_stop_fraction"] = (dims, scalars["early_stop_fraction"], {
        "long_name": "fraction of tokens whose updates stop early (2-means of update-size profiles)", "units": "1"})
    data["angle_early_stop_fraction"] = (dims, scalars["angle_early_stop_fraction"], {
        "long_name": "fraction of tokens in the early-stop cluster of the study's PCA of step angles", "units": "1"})
    data["clean_loss"] = (dims, scalars["clean_loss"], {"long_name": "validation loss on the measurement windows",
                                                        "units": "nat"})
    data["train_seconds"] = (dims, scalars["train_seconds"], {"long_name": "training time", "units": "s"})
    ds = xr.Dataset(data, coords={
        "width": ("width", widths, {"long_name": "model width d", "units": "1"}),
        "depth": ("depth", depths, {"long_name": "decoder layers ℓ", "units": "layers"}),
        "seed": ("seed", seeds, {"long_name": "seed of the initialisation and the data order"}),
        "length": ("length", list(config.lengths), {"long_name": "training length (fraction of the budget)"}),
        "batch": ("batch", np.arange(config.eval_batches), {"long_name": "evaluation batch of validation windows"}),
        "step": ("step", steps, {"long_name": "training step"}),
        "layer": ("layer", np.arange(n_layers), {"long_name": "layer index l"}),
    })
    ds.attrs.update(attrs)
    where = sorted({m.device for m in trained.models if m.device})
    ds.attrs.update({"corpus": json.dumps(trained.corpus), "tokenizer_sha256": trained.tokenizer_sha256,
                     "tokens_per_model": str(config.tokens_per_model), "device": trained.device,
                     "trained_on": "; ".join(where) if len(where) == len({m.device for m in trained.models})
                     else "; ".join([*where, "not recorded for some models (written before resflow kept it)"])})
    return ds


def ladder_problems(ds: xr.Dataset) -> list[str]:
    """What an ``lm-ladder`` record lacks (one line each); empty for a well-formed record."""
    need = ("val_loss", "val_loss_curve", "lesion", "swap", "update_angle", "early_stop_fraction")
    problems = [f"lm-ladder record lacks the variable {v!r}" for v in need if v not in ds]
    if "val_loss" in ds and tuple(ds["val_loss"].dims) != ("width", "depth", "seed", "length", "batch"):
        problems.append(f"val_loss has dims {ds['val_loss'].dims}, not (width, depth, seed, length, batch)")
    return problems


@dataclass(frozen=True, kw_only=True)
class LadderFit:
    """The depth law of one width of a ladder (module docstring)."""

    width: int
    depths: tuple[int, ...]
    losses: tuple[float, ...]  # mean over seeds and evaluation batches, full length
    seeds: int
    alpha: float  # of c l^-alpha + L_inf, mean over seeds
    alpha_low: float
    alpha_high: float
    alpha_per_seed: tuple[float, ...]
    c: float  # mean over seeds
    loss_limit: float  # L_inf, mean over seeds
    c_per_seed: tuple[float, ...]
    limit_per_seed: tuple[float, ...]
    exponent: float  # the plain log-log slope
    exponent_low: float
    exponent_high: float
    lesion_exponent: float
    lesion_low: float
    lesion_high: float
    converged: bool
    verdict: str
    failure: str | None  # why the depth law's interval is not a result, or None

    def to_json(self) -> dict:
        def clean(v):
            if isinstance(v, tuple):
                return [clean(x) for x in v]
            return None if isinstance(v, float) and not math.isfinite(v) else v
        return {k: clean(v) for k, v in self.__dict__.items()}

    def curve(self, depths) -> np.ndarray:
        """The fitted law at ``depths``: the mean over seeds of each seed's c ℓ^-α + L∞."""
        d = np.asarray(depths, float)
        return np.mean([c * d ** -a + lim for c, a, lim in zip(self.c_per_seed, self.alpha_per_seed,
                                                                 self.limit_per_seed, strict=True)], axis=0)


def _mean(values) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def _offset_fit(depths, losses) -> tuple[float, float, float]:
    fit = fit_offset(depths, losses)
    return (math.nan, math.nan, math.nan) if fit is None else fit


def ladder_fits(ds: xr.Dataset) -> list[LadderFit]:
    """The depth law of every width of an ``lm-ladder`` record."""
    fits = []
    depths = [int(d) for d in ds["depth"].values]
    for width in ds["width"].values:
        one = ds.sel(width=width)
        full = one["val_loss"].sel(length=1.0).transpose("depth", "seed", "batch").values
        by_seed = full.transpose(1, 0, 2)  # (seed, depth, batch)
        law = over_replicates(lambda s: _offset_fit(depths, s.mean(-1))[1], by_seed)
        per_seed = [_offset_fit(depths, s.mean(-1)) for s in by_seed]
        plain = exponent_interval(depths, full)
        lesion = one["lesion"].mean("layer", skipna=True).transpose("seed", "depth").values
        lesion_interval = over_replicates(
            lambda s: float(slopes(depths, s[:, 0])) if np.all(s > 0) else math.nan, lesion[:, :, None])
        verdict = convergence_verdict(depths, [float(v) for v in one["length"].values],
                                      one["val_loss"].transpose("depth", "seed", "length", "batch").values)
        failure = None
        if not np.all(np.isfinite([p[1] for p in per_seed])):
            failure = "the depth law c ℓ^-α + L∞ did not fit every seed"
        elif ds.sizes["seed"] < 2:
            failure = "one seed: no interval over seeds (train two or more)"
        elif not math.isfinite(law.low):
            failure = f"no interval over the {ds.sizes['seed']} seeds"
        fits.append(LadderFit(
            width=int(width), depths=tuple(depths), losses=tuple(float(v) for v in full.mean(axis=(1, 2))),
            seeds=int(ds.sizes["seed"]), alpha=law.value, alpha_low=law.low, alpha_high=law.high,
            alpha_per_seed=tuple(float(p[1]) for p in per_seed), c=_mean([p[0] for p in per_seed]),
            c_per_seed=tuple(float(p[0]) for p in per_seed), limit_per_seed=tuple(float(p[2]) for p in per_seed),
            loss_limit=_mean([p[2] for p in per_seed]), exponent=plain.value, exponent_low=plain.low,
            exponent_high=plain.high, lesion_exponent=lesion_interval.value, lesion_low=lesion_interval.low,
            lesion_high=lesion_interval.high, converged=verdict.converged, verdict=verdict.text, failure=failure))
    return fits


@dataclass(frozen=True, kw_only=True)
class WidthDepthFit:
    """The Chinchilla form at fixed tokens, :math:`c_m m^{-\\alpha_m} + c_\\ell \\ell^{-\\alpha_\\ell} + L_0`,
    fitted per seed over every width x depth; exponents as the mean over seeds with the t interval."""

    alpha_m: float
    alpha_m_low: float
    alpha_m_high: float
    alpha_l: float
    alpha_l_low: float
    alpha_l_high: float
    loss_limit: float
    failure: str | None


MIN_WIDTHS = 3  # a width term c m^-a + L0 has three unknowns


def _width_depth_one(m, ell, loss, starts: int = 48, seed: int = 0) -> tuple[np.ndarray, str | None]:
    """Fit one seed: ``theta = (log c_m, alpha_m, log c_l, alpha_l, log L0)`` and why it failed, if it did."""
    from scipy.optimize import least_squares

    logm, logl, logy = np.log(m), np.log(ell), np.log(loss)

    def terms(t):
        return np.exp(t[0] - t[1] * logm), np.exp(t[2] - t[3] * logl), np.exp(t[4]) * np.ones_like(logm)

    def residual(t):
        return np.log(sum(terms(t))) - logy

    rng = np.random.default_rng(seed)
    low, high = np.array([-4.0, 0.05, -4.0, 0.05, np.log(0.3)]), np.array([8.0, 2.0, 4.0, 2.0, np.log(loss.min())])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        found = [least_squares(residual, low + (high - low) * rng.random(5), method="trf", max_nfev=3000)
                 for _ in range(starts)]
    found = [r for r in found if np.all(np.isfinite(r.x))]
    if not found:
        return np.full(5, np.nan), "no start converged"
    best = min(found, key=lambda r: r.cost)
    agree = sum(1 for r in found if r.cost <= best.cost * (1 + 1e-6) + 1e-15 and abs(r.x[3] - best.x[3]) < 1e-3)
    if agree < 2:
        return best.x, f"only {agree} of {len(found)} starts reached the best optimum"
    share = [np.max(t / sum(terms(best.x))) for t in terms(best.x)[:2]]
    if min(share) < 1e-6 or max(best.x[1], best.x[3]) > 10:
        return best.x, "a term vanished or an exponent ran off (the data do not determine it)"
    return best.x, None


def width_depth_fit(ds: xr.Dataset) -> WidthDepthFit:
    """The Chinchilla form without its data term (the tokens are fixed) on a ladder with a width axis; refused
    (``failure``) with fewer than :data:`MIN_WIDTHS` widths or two seeds."""
    nan = math.nan
    widths = [int(w) for w in ds["width"].values]
    if len(widths) < MIN_WIDTHS:
        return WidthDepthFit(alpha_m=nan, alpha_m_low=nan, alpha_m_high=nan, alpha_l=nan, alpha_l_low=nan,
                             alpha_l_high=nan, loss_limit=nan, failure=f"needs {MIN_WIDTHS} widths or more (this "
                                                                        f"ladder has {len(widths)})")
    full = ds["val_loss"].sel(length=1.0).mean("batch").transpose("seed", "width", "depth").values
    m, ell = np.meshgrid(np.asarray(widths, float), ds["depth"].values.astype(float), indexing="ij")
    fits = [_width_depth_one(m.ravel(), ell.ravel(), one.ravel()) for one in full]
    failures = sorted({f for _, f in fits if f})
    thetas = np.array([t for t, _ in fits])
    alpha_m = over_replicates(lambda i: float(thetas[int(i[0]), 1]), np.arange(len(fits))[:, None])
    alpha_l = over_replicates(lambda i: float(thetas[int(i[0]), 3]), np.arange(len(fits))[:, None])
    failure = "; ".join(failures) or (None if len(fits) >= 2 else "one seed: no interval over seeds")
    return WidthDepthFit(alpha_m=alpha_m.value, alpha_m_low=alpha_m.low, alpha_m_high=alpha_m.high,
                         alpha_l=alpha_l.value, alpha_l_low=alpha_l.low, alpha_l_high=alpha_l.high,
                         loss_limit=float(np.exp(thetas[:, 4]).mean()), failure=failure)


def ladder_rows(ds: xr.Dataset, record: str) -> list[ComparisonRow]:
    """The depth-law exponent of every width, as rows of ``resflow compare`` (a failed fit says so)."""
    rows = []
    for fit in ladder_fits(ds):
        ok = fit.failure is None
        regime = classify(fit.alpha_low, fit.alpha_high, "euler", fit.converged) if ok else f"no result: {fit.failure}"
        rows.append(ComparisonRow(source="llm", name=f"lm-ladder d={fit.width} ({fit.seeds} seeds, c ℓ^-α + L∞)",
                                  loss="cross-entropy", scheme="transformer", exponent=fit.alpha,
                                  ci_low=fit.alpha_low if ok else math.nan, ci_high=fit.alpha_high if ok else math.nan,
                                  converged=fit.converged, regime=regime, record=record))
    return rows


def ladder_depth_parts(ds: xr.Dataset) -> list[DepthPart]:
    """Each model's loss minus the fitted L∞ against its depth, with the fitted c ℓ^-α, per width (for the
    comparison figure, beside the depth part of a Chinchilla-form fit)."""
    parts = []
    for fit in ladder_fits(ds):
        if not math.isfinite(fit.alpha):
            continue
        full = ds["val_loss"].sel(width=fit.width, length=1.0).mean("batch").transpose("depth", "seed").values
        ell = np.repeat(np.asarray(fit.depths, float), full.shape[1])
        measured = full.reshape(-1) - fit.loss_limit
        grid = np.linspace(min(fit.depths), max(fit.depths), 100)
        parts.append(DepthPart(label=f"lm-ladder d={fit.width}: c ℓ^-α, α = {fit.alpha:.2f}", ell=ell,
                               measured=np.where(measured > 0, measured, np.nan), grid=grid,
                               fitted=fit.curve(grid) - fit.loss_limit))
    return parts


def ladder_intervention_rows(ds: xr.Dataset, record: str) -> list[InterventionRow]:
    """The deepest model of each width in the interventions table of ``resflow compare`` (seed means)."""
    deepest = int(ds["depth"].max())
    one = ds.sel(depth=deepest).mean("seed")
    return [intervention_row("lm ladder", f"lm-ladder d={int(w)}", deepest, "loss change",
                             one["lesion"].sel(width=w).values[:deepest], one["swap"].sel(width=w).values[:deepest - 1],
                             None, record) for w in ds["width"].values]


def _number(value: float, digits: int = 3) -> str:
    return "–" if not math.isfinite(value) else f"{value:.{digits}f}"


def _interval(value: float, low: float, high: float) -> str:
    if not math.isfinite(value):
        return "–"
    return f"{value:.2f} [{low:.2f}, {high:.2f}]" if math.isfinite(low) else f"{value:.2f} [–]"


def ladder_tables(ds: xr.Dataset, record: str) -> str:
    """Markdown tables of a ladder: losses by depth and length, the depth law, the signatures per depth."""
    fits = ladder_fits(ds)
    depths = [int(d) for d in ds["depth"].values]
    corpus = json.loads(ds.attrs.get("corpus", "{}"))
    lines = [f"run {record}: {ds.sizes['seed']} seeds per model, {int(ds.attrs.get('tokens_per_model', 0)):,} tokens "
             f"per model, corpus {corpus.get('name', '?')} ({corpus.get('train_tokens', '?')} training tokens)", "",
             "Validation loss (nats per token; mean over seeds):", "",
             "| width | length | " + " | ".join(f"ℓ = {d}" for d in depths) + " |", "|---" * (len(depths) + 2) + "|"]
    mean = ds["val_loss"].mean(("seed", "batch"))
    for w in ds["width"].values:
        for length in ds["length"].values:
            row = mean.sel(width=w, length=length).values
            lines.append(f"| {int(w)} | {float(length):g} | " + " | ".join(f"{v:.4f}" for v in row) + " |")
    lines += ["", "The depth law L = c ℓ^-α + L∞ (per seed; t interval over seeds), the plain slope, the lesion "
              "exponent and the verdict:", "",
              "| width | α [95%] | α per seed | L∞ | plain slope [95%] | lesion α [95%] | verdict |",
              "|---|---|---|---|---|---|---|"]
    for f in fits:
        alpha = _interval(f.alpha, f.alpha_low, f.alpha_high) + (f" ({f.failure})" if f.failure else "")
        lines.append(f"| {f.width} | {alpha} | {', '.join(_number(a, 2) for a in f.alpha_per_seed)} | "
                     f"{_number(f.loss_limit)} | {_interval(f.exponent, f.exponent_low, f.exponent_high)} | "
                     f"{_interval(f.lesion_exponent, f.lesion_low, f.lesion_high)} | {f.verdict} |")
    both = width_depth_fit(ds)
    lines += ["", "The Chinchilla form at fixed tokens, c_m m^-α_m + c_ℓ ℓ^-α_ℓ + L0 (per seed; t interval over "
              "seeds): " + (f"not fitted: {both.failure}" if both.failure and not math.isfinite(both.alpha_l) else
                            f"α_m = {_interval(both.alpha_m, both.alpha_m_low, both.alpha_m_high)}, α_ℓ = "
                            f"{_interval(both.alpha_l, both.alpha_l_low, both.alpha_l_high)}, L0 = "
                            f"{_number(both.loss_limit)}" + (f" (failed: {both.failure})" if both.failure else ""))]
    lines += ["", "Signatures per depth (mean over seeds; the residual stream on the measurement windows): median "
              "layer's update angle (rad), early-stop fractions (update sizes; the study's step-angle PCA), mean "
              "lesion and swap loss change (nats):", "",
              "| width | ℓ | update angle (middle layer) | early-stop | angle early-stop | lesion | swap |",
              "|---|---|---|---|---|---|---|"]
    for w in ds["width"].values:
        for d in depths:
            one = ds.sel(width=w, depth=d)
            middle = one["update_angle"].isel(layer=max(0, (d - 2) // 2)).mean("seed")
            lines.append(f"| {int(w)} | {d} | {_number(float(middle), 2)} | "
                         f"{_number(float(one['early_stop_fraction'].mean()))} | "
                         f"{_number(float(one['angle_early_stop_fraction'].mean()))} | "
                         f"{_number(float(one['lesion'].mean(('seed', 'layer'))), 4)} | "
                         f"{_number(float(one['swap'].mean(('seed', 'layer'))), 4)} |")
    return "\n".join(lines)


def plot_ladder(ds: xr.Dataset, fits=None):
    """Four panels: loss against depth with the depth law, validation curves, update angles and lesion
    profiles against relative layer l/ℓ (one line per depth)."""
    from ..analysis.plots import colors, depth_ticks, new_figure

    fits = fits if fits is not None else ladder_fits(ds)
    fig, axes = new_figure(4, figsize=(19, 4.3))
    depths = [int(d) for d in ds["depth"].values]
    shades = colors("viridis", len(depths))
    ax = axes[0]
    for f, marker in zip(fits, "osD^v", strict=False):
        full = ds["val_loss"].sel(width=f.width, length=1.0).mean("batch")
        for s in ds["seed"].values:
            ax.plot(depths, full.sel(seed=s).values, marker, color="0.6", ms=3)
        label = f"d={f.width}: α={_number(f.alpha, 2)}, L∞={_number(f.loss_limit, 2)}"
        ax.plot(depths, f.losses, marker + "-", label=label)
        if math.isfinite(f.alpha):
            grid = np.linspace(min(depths), max(depths), 100)
            ax.plot(grid, f.curve(grid), ":", color="k", lw=1)
    ax.set(xscale="log", xlabel="depth ℓ", ylabel="validation loss (nats)",
           title="loss against depth (dotted: the depth law)")
    depth_ticks(ax, depths)
    ax.legend(fontsize=7)
    width = fits[0].width
    one = ds.sel(width=width)
    for d, color in zip(depths, shades, strict=True):
        curve = one["val_loss_curve"].sel(depth=d).mean("seed")
        axes[1].plot(one["step"].values[1:], curve.values[1:], color=color, label=f"ℓ={d}")
        if d >= 2:  # update angle l is between the updates of layers l and l + 1 (l = 0 .. d - 2)
            axes[2].plot((np.arange(d - 1) + 1) / d, one["update_angle"].sel(depth=d).mean("seed").values[: d - 1],
                         "o-", color=color, ms=3)
        axes[3].plot((np.arange(d) + 0.5) / d, one["lesion"].sel(depth=d).mean("seed").values[:d], "o-",
                     color=color, ms=3)
    axes[1].set(xlabel="step", ylabel="validation loss", title=f"training (d={width})")
    axes[1].legend(fontsize=7)
    axes[2].set(xlabel="relative layer l/ℓ", ylabel="update angle (rad)", title="update angles")
    axes[3].set(yscale="log", xlabel="relative layer l/ℓ", ylabel="loss change (nats)", title="lesion profiles")
    return fig
