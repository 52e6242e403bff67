r"""The ``lm-ladder`` record: its writer and schema, its tables, its figure and its rows in the comparison.

The record holds, per width x depth x seed: the validation loss per training length and evaluation
batch, the validation curve, the residual-stream probes per layer, the lesion and swap loss changes
per layer, the parameters, the training time and where each model was trained.  The depth law fitted
on it is :mod:`resflow.llm.ladder.fit`.
"""

from __future__ import annotations

import json
import math

import numpy as np
import xarray as xr

from ...fitting.regimes import classify
from ...presenting.compare import ComparisonRow, DepthPart
from ...probing.intervention_rows import InterventionRow, intervention_row
from ...records.kinds import LM_LADDER
from .depth_records import depth_use_tables, depth_use_variables
from .fit import equal_parameter_pairs, ladder_fits, ladder_law_fit, width_depth_fit
from .measure import PROBE_METRICS
from .train import TrainedLadder

__all__ = ["ladder_dataset", "ladder_rows", "ladder_depth_parts",
           "ladder_intervention_rows", "ladder_tables", "plot_ladder", "ladder_problems", "KIND"]

KIND = LM_LADDER.name  # the record kind's name (resflow.records.LM_LADDER; kept for resflow <= 0.4 imports)



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
    on_train = np.full((*shape, config.eval_batches), np.nan)
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
        on_train[i, j, k, : len(m.train_loss)] = m.train_loss
    dims = ("width", "depth", "seed")
    labels = {"step_angle": ("angle between successive states h_l, h_l+1", "rad"),
              "update_angle": ("angle between successive updates", "rad"),
              "norm": ("norm of the residual stream", "1"), "update_norm": ("norm of the update", "1"),
              "lesion": ("validation loss change when layer l is skipped", "nat"),
              "swap": ("validation loss change when layers l, l+1 run in the other order", "nat")}
    data = {
        "val_loss": ((*dims, "length", "batch"), loss,
                     {"long_name": "validation loss (mean next-token cross-entropy) per evaluation batch",
                      "units": "nat"}),
        "train_loss": ((*dims, "batch"), on_train,
                       {"long_name": "loss on windows of the training text at the whole budget (NaN: a model "
                                     "written before it was measured)", "units": "nat"}),
        "val_loss_curve": ((*dims, "step"), curve,
                           {"long_name": "validation loss along training", "units": "nat"}),
        "parameters": (("width", "depth"), params,
                       {"long_name": "parameters without the embedding", "units": "1"}),
    }
    for name, values in per_layer.items():
        long_name, units = labels[name]
        data[name] = ((*dims, "layer"), values, {"long_name": long_name, "units": units})
    data["early_stop_fraction"] = (dims, scalars["early_stop_fraction"], {
        "long_name": "fraction of tokens whose updates stop early (2-means of update-size profiles)",
        "units": "1"})
    data["angle_early_stop_fraction"] = (dims, scalars["angle_early_stop_fraction"], {
        "long_name": "fraction of tokens in the early-stop cluster of the study's PCA of step angles",
        "units": "1"})
    data["clean_loss"] = (dims, scalars["clean_loss"],
                          {"long_name": "validation loss on the measurement windows", "units": "nat"})
    data["train_seconds"] = (dims, scalars["train_seconds"], {"long_name": "training time", "units": "s"})
    use = depth_use_variables(trained, widths, depths, seeds, n_layers)
    data.update(use)
    extra = ({"removed": ("removed", np.arange(n_layers - 1), {"long_name": "layers removed n"}),
              "deep_layer": ("deep_layer", np.arange(n_layers),
                             {"long_name": "state index j of the model of twice the depth"})} if use else {})
    ds = xr.Dataset(data, coords={**extra,
        "width": ("width", widths, {"long_name": "model width d", "units": "1"}),
        "depth": ("depth", depths, {"long_name": "decoder layers ℓ", "units": "layers"}),
        "seed": ("seed", seeds, {"long_name": "seed of the initialisation and the data order"}),
        "length": ("length", list(config.lengths), {"long_name": "training length (fraction of the budget)"}),
        "batch": ("batch", np.arange(config.eval_batches),
                  {"long_name": "evaluation batch of validation windows"}),
        "step": ("step", steps, {"long_name": "training step"}),
        "layer": ("layer", np.arange(n_layers), {"long_name": "layer index l"}),
    })
    ds.attrs.update(attrs)
    where = sorted({m.device for m in trained.models if m.device})
    ds.attrs.update({"corpus": json.dumps(trained.corpus), "tokenizer_sha256": trained.tokenizer_sha256,
                     "tokens_per_model": str(config.tokens_per_model), "device": trained.device,
                     "trained_on": "; ".join(where) if len(where) == len({m.device for m in trained.models})
                     else "; ".join([*where, "not recorded for some models "
                                             "(written before resflow kept it)"])})
    return ds


def ladder_problems(ds: xr.Dataset) -> list[str]:
    """What an ``lm-ladder`` record lacks (one line each); empty for a well-formed record."""
    need = LM_LADDER.requires
    problems = [f"lm-ladder record lacks the variable {v!r}" for v in need if v not in ds]
    if "val_loss" in ds and tuple(ds["val_loss"].dims) != ("width", "depth", "seed", "length", "batch"):
        problems.append(f"val_loss has dims {ds['val_loss'].dims}, not (width, depth, seed, length, batch)")
    return problems


def ladder_rows(ds: xr.Dataset, record: str) -> list[ComparisonRow]:
    """The depth-law exponent of every width, as rows of ``resflow compare`` (a failed fit says so)."""
    rows = []
    for fit in ladder_fits(ds):
        # the profile interval (offset free, depths >= 2): a ladder whose losses do not determine L∞ says so
        ok = fit.identified
        regime = (classify(fit.profile_low, fit.profile_high, "euler", fit.converged, "unconverged") if ok
                  else f"no result: {fit.profile}")
        depths = ", ".join(map(str, fit.law_depths))
        rows.append(ComparisonRow(source="llm",
                                  name=f"lm-ladder d={fit.width} ({fit.seeds} seeds, ℓ = {depths}, "
                                       "c ℓ^-α + L∞, profile)",
                                  loss="cross-entropy", scheme="transformer", exponent=fit.profile_alpha,
                                  ci_low=fit.profile_low if ok else math.nan,
                                  ci_high=fit.profile_high if ok else math.nan,
                                  converged=fit.converged, regime=regime, record=record))
    return rows


def ladder_depth_parts(ds: xr.Dataset) -> list[DepthPart]:
    """Each model's loss minus the fitted L∞ against its depth, with the fitted c ℓ^-α, per width (for
    the comparison figure, beside the depth part of a Chinchilla-form fit)."""
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
                             one["lesion"].sel(width=w).values[:deepest],
                             one["swap"].sel(width=w).values[:deepest - 1],
                             None, record) for w in ds["width"].values]


def _number(value: float, digits: int = 3) -> str:
    return "–" if not math.isfinite(value) else f"{value:.{digits}f}"


def _interval(value: float, low: float, high: float) -> str:
    if not math.isfinite(value):
        return "–"
    return f"{value:.2f} [{low:.2f}, {high:.2f}]" if math.isfinite(low) else f"{value:.2f} [–]"


def _memorising(ds: xr.Dataset, depths: list[int], corpus: dict) -> list[str]:
    """Passes over the training text, and each model's loss on its training text minus its validation loss."""
    tokens, train = int(ds.attrs.get("tokens_per_model", 0)), corpus.get("train_tokens")
    lines = ["", f"Passes over the training text per model: {tokens / train:.2f}." if train else ""]
    if "train_loss" not in ds or not np.isfinite(ds["train_loss"].values).any():
        return lines + ["The models of this record were not measured on their training text "
                        "(written before resflow kept it)."]
    gap = ds["train_loss"].mean(("seed", "batch")) - ds["val_loss"].sel(length=1.0).mean(("seed", "batch"))
    lines += ["Loss on windows of the training text minus the validation loss, whole budget (nats; mean over "
              "seeds; well below 0: the model fits its training text better than new text):", "",
              "| width | " + " | ".join(f"ℓ = {d}" for d in depths) + " |", "|---" * (len(depths) + 1) + "|"]
    for w in ds["width"].values:
        lines.append(f"| {int(w)} | " + " | ".join(f"{v:+.4f}" for v in gap.sel(width=w).values) + " |")
    return lines


def ladder_tables(ds: xr.Dataset, record: str) -> str:
    """Markdown tables of a ladder: losses by depth and length, the depth law, the signatures per depth."""
    fits = ladder_fits(ds)
    depths = [int(d) for d in ds["depth"].values]
    corpus = json.loads(ds.attrs.get("corpus", "{}"))
    lines = [f"run {record}: {ds.sizes['seed']} seeds per model, "
             f"{int(ds.attrs.get('tokens_per_model', 0)):,} tokens per model, "
             f"corpus {corpus.get('name', '?')} ({corpus.get('train_tokens', '?')} training tokens)"
             + _knob(ds), "",
             "Validation loss (nats per token; mean over seeds):", "",
             "| width | length | " + " | ".join(f"ℓ = {d}" for d in depths) + " |",
             "|---" * (len(depths) + 2) + "|"]
    mean = ds["val_loss"].mean(("seed", "batch"))
    for w in ds["width"].values:
        for length in ds["length"].values:
            row = mean.sel(width=w, length=length).values
            lines.append(f"| {int(w)} | {float(length):g} | " + " | ".join(f"{v:.4f}" for v in row) + " |")
    lines += _memorising(ds, depths, corpus)
    pairs = equal_parameter_pairs(ds)
    if pairs:
        lines += ["", "Depth at fixed size: each deeper, narrower model beside a shallower, wider one of the "
                  "same non-embedding parameters (within 2%); its validation loss minus the wider one's, "
                  "whole budget "
                  "(mean over seeds, paired by seed; negative: the depth pays):", "",
                  "| deeper (width, ℓ) | wider (width, ℓ) | parameters | loss difference [95%] |",
                  "|---|---|---|---|"]
        lines += [f"| {p.deep} | {p.wide} | {p.parameters[0]:,} / {p.parameters[1]:,} | "
                  f"{p.difference:+.4f} [{p.low:+.4f}, {p.high:+.4f}] |" for p in pairs]
    lines += ["", "The depth law L = c ℓ^-α + L∞ (per seed; t interval over seeds), its profile-likelihood "
              "fit (depths ≥ 2, the offset profiled jointly with α over 0 to the smallest loss; "
              "\"not identified\" where the losses do not determine the offset), the plain slope, "
              "the lesion exponent and the verdict:", "",
              "| width | α [95%] | α per seed | L∞ | profile α, ℓ ≥ 2, L∞ free [95%] | plain slope [95%] | "
              "lesion α [95%] | verdict |",
              "|---|---|---|---|---|---|---|---|"]
    for f in fits:
        # a failed fit shows no interval (one seed's would be evaluation noise only)
        alpha = (f"{_number(f.alpha, 2)} ({f.failure})" if f.failure
                 else _interval(f.alpha, f.alpha_low, f.alpha_high))
        lines.append(f"| {f.width} | {alpha} | {', '.join(_number(a, 2) for a in f.alpha_per_seed)} | "
                     f"{_number(f.loss_limit)} | {f.profile} | "
                     f"{_interval(f.exponent, f.exponent_low, f.exponent_high)} | "
                     f"{_interval(f.lesion_exponent, f.lesion_low, f.lesion_high)} | {f.verdict} |")
    if ds.sizes["seed"] < 2:
        lines += ["", "One seed: the plain slope's and the lesion exponent's intervals are evaluation noise "
                  "only (bootstrap over the evaluation batches), not seed to seed."]
    both = width_depth_fit(ds)
    chinchilla = (f"not fitted: {both.failure}" if both.failure and not math.isfinite(both.alpha_l) else
                  f"α_m = {_interval(both.alpha_m, both.alpha_m_low, both.alpha_m_high)}, α_ℓ = "
                  f"{_interval(both.alpha_l, both.alpha_l_low, both.alpha_l_high)}, L0 = "
                  f"{_number(both.loss_limit)}" + (f" (failed: {both.failure})" if both.failure else ""))
    lines += ["", "The Chinchilla form at fixed tokens, c_m m^-α_m + c_ℓ ℓ^-α_ℓ + L0 "
              "(per seed; t interval over seeds): " + chinchilla]
    lines += ["", _law_line(ds)]
    lines += ["", "Signatures per depth (mean over seeds; the residual stream on the measurement windows): "
              "median layer's update angle (rad), early-stop fractions (update sizes; the study's step-angle "
              "PCA), mean lesion and swap loss change (nats):", "",
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
    return "\n".join(lines + _lesion_by_relative_depth(ds, depths) + depth_use_tables(ds))


def _knob(ds: xr.Dataset) -> str:
    order = json.loads(ds.attrs.get("config", "{}")).get("depth_basis", 0)
    return (f"; layers smooth in depth: K = {order} Legendre coefficients per weight "
            "(resflow.llm.ladder.depth_basis)") if order else "; independent layers"


def _law_line(ds: xr.Dataset) -> str:
    """``llm-fit``'s law of width, depth and data on the ladder's grid, in one line."""
    fit, why = ladder_law_fit(ds)
    head = "The law of width, depth and data on the ladder's grid, c_m m^-α_m + c_ℓ ℓ^-α_ℓ + c_D D^-α_D + L0 "
    if fit is None:
        return head + f"(the training lengths as D): {why}."
    p, se = fit.params, fit.se
    values = ", ".join(f"{name} = {_number(p[key], 2)} ± {_number(1.96 * se[key], 2)}" for name, key in
                       (("α_m", "alpha_m"), ("α_ℓ", "alpha_l"), ("α_D", "alpha_D"), ("L0", "L0")))
    return (head + f"({fit.n_points} points: widths x depths ≥ 2 x training lengths x seeds; Huber on log "
            "loss, "
            f"± 1.96 Jacobian standard errors): {values}; "
            + (f"not to be trusted: {fit.failure}." if fit.failure else "every check of the fit passed."))


def _lesion_by_relative_depth(ds: xr.Dataset, depths: list[int]) -> list[str]:
    """The lesion loss change against relative depth: layer l of a depth-ℓ model sits at (l + 1/2)/ℓ; the mean
    over seeds and over the layers in each quarter of relative depth (– where a model has no layer there)."""
    quarters = ("0–¼", "¼–½", "½–¾", "¾–1")
    lines = ["", "Lesion loss change by relative depth (l + ½)/ℓ, mean over seeds and the layers in each "
             "quarter (nats): do the layers at one relative depth of a deep model behave like those of a "
             "shallow one?",
             "", "| width | ℓ | " + " | ".join(quarters) + " |", "|---|---|" + "---|" * len(quarters)]
    for w in ds["width"].values:
        for d in depths:
            per_layer = ds["lesion"].sel(width=w, depth=d).mean("seed").values[:d]
            where = np.floor((np.arange(d) + 0.5) / d * 4).astype(int)
            cells = [_number(float(per_layer[where == q].mean()), 3) if (where == q).any() else "–"
                     for q in range(4)]
            lines.append(f"| {int(w)} | {d} | " + " | ".join(cells) + " |")
    lines += ["", "Swap loss change by relative depth (l + 1)/ℓ, where layers l and l + 1 meet; mean over "
              "seeds and the swaps in each quarter (nats):", "",
              "| width | ℓ | " + " | ".join(quarters) + " |", "|---|---|" + "---|" * len(quarters)]
    for w in ds["width"].values:
        for d in depths:
            per_swap = ds["swap"].sel(width=w, depth=d).mean("seed").values[: d - 1]
            where = np.minimum(np.floor((np.arange(d - 1) + 1) / d * 4).astype(int), 3)
            cells = [_number(float(per_swap[where == q].mean()), 3) if (where == q).any() else "–"
                     for q in range(4)]
            lines.append(f"| {int(w)} | {d} | " + " | ".join(cells) + " |")
    return lines


def plot_ladder(ds: xr.Dataset, fits=None):
    """Four panels: loss against depth with the depth law, validation curves, update angles and lesion
    profiles against relative layer l/ℓ (one line per depth)."""
    from ...presenting.plots import colors, depth_ticks, new_figure

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
            axes[2].plot((np.arange(d - 1) + 1) / d,
                         one["update_angle"].sel(depth=d).mean("seed").values[: d - 1],
                         "o-", color=color, ms=3)
        axes[3].plot((np.arange(d) + 0.5) / d, one["lesion"].sel(depth=d).mean("seed").values[:d], "o-",
                     color=color, ms=3)
    axes[1].set(xlabel="step", ylabel="validation loss", title=f"training (d={width})")
    axes[1].legend(fontsize=7)
    axes[2].set(xlabel="relative layer l/ℓ", ylabel="update angle (rad)", title="update angles")
    axes[3].set(yscale="log", xlabel="relative layer l/ℓ", ylabel="loss change (nats)",
                title="lesion profiles")
    return fig
