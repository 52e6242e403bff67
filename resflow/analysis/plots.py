"""Figures.  Every plot function takes Datasets; :func:`save_figure` stamps provenance on the file.

Figures are built as :class:`matplotlib.figure.Figure` objects without pyplot's global state and
without choosing a backend: they display inline in Jupyter (the last expression of a cell) and
save headless alike, and nothing here changes matplotlib's settings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._atomic import atomic_write
from ..loglog import power_law, power_law_fit
from ..records import best_start, checked_run, trained_cells

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure

__all__ = ["new_figure", "colors", "full_length", "plot_flow_demo", "save_figure", "plot_loss_vs_depth",
           "plot_training_curves", "plot_lesion_profiles", "plot_interventions", "plot_student_angles",
           "plot_experiment"]

FOOTER_ROOM = 0.03  # fraction of the figure height kept free for the provenance footer


def new_figure(ncols: int = 1, *, nrows: int = 1, figsize: tuple[float, float] = (5.5, 4.5)):
    """A :class:`~matplotlib.figure.Figure` (constrained layout, room for the footer) and its axes, flat.

    It displays inline in Jupyter as the last expression of a cell (it has ``_repr_png_``).
    """
    from .figure import InlineFigure

    fig = InlineFigure(figsize=figsize, layout="constrained")
    fig.get_layout_engine().set(rect=(0, FOOTER_ROOM, 1, 1 - FOOTER_ROOM))
    return fig, fig.subplots(nrows, ncols, squeeze=False).ravel()


def colors(name: str, n: int, stop: float = 0.9) -> np.ndarray:
    """``n`` colours evenly spaced on a matplotlib colormap (``"tab10"`` cycles)."""
    import matplotlib

    cmap = matplotlib.colormaps[name]
    if name == "tab10":
        return cmap(np.arange(n) % 10)
    return cmap(np.linspace(0, stop, n))


def save_figure(fig: Figure, path: Path, provenance: dict[str, str]) -> Path:
    """Save ``fig`` with a provenance footer and the full provenance in the PNG's text chunks."""
    footer = (
        f"resflow {provenance.get('resflow_version', '?')} | commit {provenance.get('git_commit', '?')[:12]} | "
        f"torch {provenance.get('torch_version', '?')} | seed {provenance.get('seed', '?')} | "
        f"{provenance.get('created', '')}"
    )
    fig.text(0.01, 0.005, footer, fontsize=6, color="0.4", ha="left", va="bottom")
    metadata = {"Software": "resflow", "Description": json.dumps(provenance, sort_keys=True)}
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    return atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=130, metadata=metadata, format=fmt))


def plot_flow_demo(ds: xr.Dataset) -> Figure:
    """Three panels: stack-vs-ODE convergence, ensemble MSE vs members, teacher update angles."""
    fig, axes = new_figure(3, figsize=(15, 4.6))

    ax = axes[0]
    conv = ds["error"].sel(field="relu2")
    palette = colors("viridis", conv.sizes["scheme"])
    depth = ds["depth"].values
    for color, scheme in zip(palette, conv["scheme"].values, strict=True):
        fits = ds["empirical_order"].sel(scheme=scheme)
        ax.loglog(depth, conv.sel(scheme=scheme), "o-", color=color, ms=3,
                  label=f"{scheme}: p={int(ds['declared_order'].sel(scheme=scheme))}, "
                        f"fit {float(fits.sel(field='relu2')):.2f} (smooth {float(fits.sel(field='softplus2')):.2f})")
    for p in (1, 2, 3, 4):
        ax.loglog(depth, 0.5 * (depth / depth[0]) ** (-p) * float(conv.max()), ":", color="0.7", lw=0.8)
    ax.set(xlabel="depth L (step T/L)", ylabel="relative error vs ODE",
           title="tied stack → its ODE (relu² block; smooth: softplus²)")
    ax.legend(fontsize=6.5, loc="lower left")

    ax = axes[1]
    for noise in ds["noise"].values:
        line, = ax.loglog(ds["members"], ds["ensemble_mse"].sel(noise=noise), "o", ms=4, label=f"{noise}")
        ax.loglog(ds["members"], ds["ensemble_mse_exact"].sel(noise=noise), "-", color=line.get_color(), lw=1)
    ax.set(xlabel="members L", ylabel="MSE of the ensemble mean",
           title="noisy ensemble: points simulated, lines exact")
    ax.legend(fontsize=7)

    ax = axes[2]
    for teacher in ds["teacher"].values:
        ax.plot(ds["layer"], np.degrees(ds["update_angle"].sel(teacher=teacher)), label=str(teacher), lw=1.2)
    ax.axhline(90, color="0.6", ls=":", lw=0.8)
    ax.set(xlabel="layer l", ylabel="mean angle between Δh_l and Δh_{l+1} (deg)", ylim=(0, 100),
           title="teachers: angle of successive updates")
    ax.legend(fontsize=7)
    return fig


def depth_ticks(ax, depths) -> None:
    import matplotlib.ticker

    ax.set_xticks(list(depths), [str(int(d)) for d in depths])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def _series_label(fit) -> str:
    parts = [fit.target]
    if fit.scheme != "euler":
        parts.append(fit.scheme)
    if fit.student_groups:
        parts.append(f"students of {fit.student_groups} weight groups")
    if fit.temperature is not None:
        parts.append(f"T={fit.temperature:g}")
    return " ".join(parts)


def full_length(ds: xr.Dataset) -> xr.Dataset:
    """The students trained for the whole run (``length`` = its largest value)."""
    return ds.sel(length=ds["length"].max())


def _fit_label(fit) -> str:
    text = f"{_series_label(fit)}: α={fit.exponent:.2f} [{fit.ci_low:.2f}, {fit.ci_high:.2f}]"
    if np.isfinite(fit.law_exponent):
        text += f", law α={fit.law_exponent:.2f} [{fit.law_ci_low:.2f}, {fit.law_ci_high:.2f}]"
    return text + (" (certified)" if fit.certified else " (bound)")


def _series_of(ds: xr.Dataset, fit) -> xr.Dataset:
    """The students of one fitted series (its target, scheme, structure and temperature)."""
    one = ds.sel(temperature=fit.temperature) if fit.temperature is not None else ds.isel(temperature=0)
    return one.sel(target=fit.target, scheme=fit.scheme, student_groups=fit.student_groups)


ROUTE_MARKERS = {"scratch": "o", "continuation": "s", "smooth": "^"}  # each route's own best loss, small and light


def plot_loss_vs_depth(ds: xr.Dataset, fits, ax=None):
    """Final test loss vs depth (log-log): every depth's best loss over routes (replicate mean, min-max bars over
    replicates; a filled circle where verdict v3 certified the depth, a downward triangle where it did not: a
    bound), each route's own best loss as small light markers, the least-squares lines (dashed: the exponent
    is a bound), the extrapolated limits of the best students (stars: the asymptotic estimate), and the
    theory's slopes (grey)."""
    from .regimes import regime_predictions

    if ax is None:
        _, (ax,) = new_figure()
    run = checked_run(ds)
    best = best_start(run)
    several = run.sizes["route"] * run.sizes["init"] > 1
    palette = colors("tab10", len(fits))
    for k, fit in enumerate(fits):
        color = palette[k]
        final = full_length(_series_of(best, fit))["final_loss"]
        depth = final["depth"].values
        mean = final.mean("replicate").values
        ax.errorbar(depth, mean, yerr=[mean - final.min("replicate").values, final.max("replicate").values - mean],
                    fmt="none", color=color, capsize=2, lw=0.8)
        certified = np.isin(depth, fit.certified_depths)
        ax.loglog(depth[certified], mean[certified], "o", color=color, ms=5, lw=0)
        ax.loglog(depth[~certified], mean[~certified], "v", color=color, ms=6, lw=0)
        if several:
            full = full_length(_series_of(run, fit))
            routes = full["final_loss"].where(trained_cells(full)).min("init").mean("replicate", skipna=False)
            for route in routes["route"].values:
                ax.loglog(depth, routes.sel(route=route).values, ROUTE_MARKERS.get(str(route), "x"), mfc="none",
                          color=color, ms=4, alpha=0.45, lw=0)
        if np.isfinite(fit.exponent):
            ax.loglog(depth, power_law(power_law_fit(depth, mean), depth), "-" if fit.certified else "--",
                      color=color, lw=1.2, label=_fit_label(fit))
        limits = np.asarray(fit.limits, float)
        if limits.size == depth.size and np.all(np.isfinite(limits) & (limits > 0)):  # the asymptotic estimate
            ax.loglog(depth, limits, "*", color=color, ms=6, lw=0, alpha=0.6)
        pred = regime_predictions(fit.scheme)
        if k == 0 or fit.scheme != fits[k - 1].scheme:
            anchor = mean[0]
            for alpha, style in ((pred["ensemble"][0], ":"), (pred["procedural"][0], "--"),
                                 (pred["procedural"][1], "-.")):
                ax.loglog(depth, anchor * (depth / depth[0]) ** (-alpha), style, color="0.55", lw=0.8)
    from matplotlib.lines import Line2D

    key = [Line2D([], [], marker="o", color="0.3", lw=0, label="certified depth (routes agree)"),
           Line2D([], [], marker="v", color="0.3", lw=0, label="not certified: a bound"),
           Line2D([], [], marker="*", color="0.3", lw=0, alpha=0.6, label="extrapolated limit (estimate)"),
           Line2D([], [], color="0.55", ls=":", lw=0.8, label="laws: ensemble α = 1 (··), procedural 2p (−−), "
                                                              "2p+1 (−·)")]
    if several:
        key += [Line2D([], [], marker=m, mfc="none", color="0.3", lw=0, alpha=0.6, label=f"route {r}")
                for r, m in ROUTE_MARKERS.items() if r in run["route"].values]
    ax.set(xscale="log", yscale="log", xlabel="student depth ℓ", ylabel=f"final test loss ({ds.attrs.get('loss')})",
           title="loss vs depth: the best loss over routes")
    depth_ticks(ax, ds["depth"].values)
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(handles=handles + key, fontsize=6.5)
    return ax


def _structure_note(ds: xr.Dataset) -> str:
    """The panels that show one student structure say which (the first: plain when the run has them)."""
    if ds["student_groups"].values.tolist() == [0]:
        return ""
    first = int(ds["student_groups"].values[0])
    return " (plain students)" if first == 0 else f" (students of {first} weight groups)"


def plot_training_curves(ds: xr.Dataset, ax=None):
    """Replicate-mean test loss against step, one line per depth and target (full-length students)."""
    if ax is None:
        _, (ax,) = new_figure()
    styles = ["-", "--", ":", "-."]
    curves = full_length(best_start(ds))["test_loss"].mean("replicate").isel(scheme=0, student_groups=0,
                                                                             temperature=0)
    depths = curves["depth"].values
    palette = colors("viridis", len(depths))
    for t, target in enumerate(curves["target"].values):
        for color, depth in zip(palette, depths, strict=True):
            ax.loglog(np.maximum(curves["step"].values, 1), curves.sel(target=target, depth=depth),
                      styles[t % 4], color=color, lw=1, label=f"{target} ℓ={depth}" if t < 2 else None)
    ax.set(xlabel="step", ylabel="test loss (replicate mean)",
           title="training curves" + _structure_note(ds))
    ax.legend(fontsize=6, ncol=2)
    return ax


def plot_student_angles(ds: xr.Dataset, ax=None):
    """Mean successive-update angle over the middle layers of trained students, against depth."""
    if ax is None:
        _, (ax,) = new_figure()
    angles = full_length(best_start(ds))["update_angle"].isel(scheme=0, student_groups=0, temperature=0)
    for target in angles["target"].values:
        values = []
        for depth in angles["depth"].values:
            a = angles.sel(target=target, depth=depth).mean("replicate").values[: max(int(depth) - 1, 1)]
            middle = a[len(a) // 4: max(3 * len(a) // 4, len(a) // 4 + 1)]
            values.append(np.degrees(np.nanmean(middle)) if np.isfinite(middle).any() else np.nan)
        ax.semilogx(angles["depth"].values, values, "o-", label=str(target))
    ax.axhline(90, color="0.6", ls=":", lw=0.8)
    ax.set(xlabel="student depth ℓ", ylabel="update angle, middle layers (deg)", ylim=(0, 135),
           title="trained students: angle of successive updates" + _structure_note(ds))
    depth_ticks(ax, angles["depth"].values)
    ax.legend(fontsize=7)
    return ax


def plot_lesion_profiles(ds: xr.Dataset, ax=None):
    """Damage of skipping layer l of the trained students against l/ℓ (the study's Fig. 6 axis), each
    profile divided by its mean over layers (flat: every layer matters alike, as in an ensemble or an
    autonomous flow), one colour per teacher, lighter for shallower students; replicate means, full length."""
    if ax is None:
        _, (ax,) = new_figure()
    damage = full_length(best_start(ds))["lesion"].isel(scheme=0, student_groups=0, temperature=0).mean("replicate")
    depths = [int(d) for d in damage["depth"].values if d >= 2]
    palette = colors("tab10", damage.sizes["target"])
    for color, target in zip(palette, damage["target"].values, strict=True):
        for k, depth in enumerate(depths):
            values = damage.sel(target=target, depth=depth).values[:depth]
            ax.plot(np.arange(depth) / depth, values / np.nanmean(values), "o-", ms=2.5, lw=1, color=color,
                    alpha=0.35 + 0.65 * (k + 1) / len(depths), label=f"{target}" if k == len(depths) - 1 else None)
    ax.axhline(1.0, color="0.6", ls=":", lw=0.8)
    ax.set(xlabel="position of the skipped layer l/ℓ", ylabel="damage / its mean over layers",
           title=f"trained students: skipping one layer (depths {', '.join(map(str, depths))})"
                 + _structure_note(ds))
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7)
    return ax


def plot_interventions(datasets):
    """``intervention`` records side by side (the study's Fig. 6 in manner): left, the damage of skipping
    layer l against l/ℓ, each model's profile over its mean (a causal LM: the fall of the target's
    probability); right, the trace of the last transformer (the measure with the clean input of layer l at
    each token restored), or the toys' recovered share against l/ℓ."""
    fig, (left, right) = new_figure(2, figsize=(12, 4.6))
    palette = colors("tab10", max(len(datasets), 1))
    tokens = [ds for ds in datasets if "token_text" in ds.coords and ds.sizes.get("token", 1) > 1]
    for color, ds in zip(palette, datasets, strict=False):
        if "lesion" not in ds:
            continue
        values = ds["lesion"].values
        if ds.attrs.get("measure") == "probability":
            values = float(ds.attrs.get("clean", "nan")) - values  # the probability lost
        left.plot(ds["position"].values, values / np.nanmean(values), "o-", ms=2.5, lw=1, color=color,
                  label=f"{ds.attrs['model']} (ℓ = {ds.attrs['depth']})")
        if not tokens and "trace" in ds:
            right.plot(ds["position"].values, ds["trace"].values[:, 0], "o-", ms=2.5, lw=1, color=color,
                       label=ds.attrs["model"])
    left.axhline(1.0, color="0.6", ls=":", lw=0.8)
    left.set(xlabel="position of the skipped layer l/ℓ", ylabel="damage / its mean over layers",
             title="skipping one layer")
    left.legend(fontsize=7)
    if tokens:
        ds = tokens[-1]
        image = right.imshow(ds["trace"].values.T, aspect="auto", origin="upper", cmap="viridis")
        what = "probability of the target" if ds.attrs["measure"] == "probability" else "damage: low is recovered"
        right.set(yticks=range(ds.sizes["token"]), yticklabels=[str(t) for t in ds["token_text"].values],
                  xlabel="layer l whose input is restored", title=f"causal trace: {ds.attrs['model']} ({what})")
        fig.colorbar(image, ax=right)
    else:
        right.set(xlabel="position l/ℓ of the restored update", ylabel="recovered share",
                  title="trace: the clean update of layer l restored")
        right.legend(fontsize=7)
    return fig


def plot_experiment(ds: xr.Dataset, fits):
    """The standard figure of a run: loss vs depth, training curves, angles, and (when the record has them)
    the lesion profiles of the trained students."""
    ds = checked_run(ds)
    lesions = "lesion" in ds and ds["depth"].max() >= 2
    fig, axes = new_figure(4 if lesions else 3, figsize=(21 if lesions else 16, 4.8))
    plot_loss_vs_depth(ds, fits, axes[0])
    plot_training_curves(ds, axes[1])
    plot_student_angles(ds, axes[2])
    if lesions:
        plot_lesion_profiles(ds, axes[3])
    return fig
