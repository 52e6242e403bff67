"""Figures.  Every plot function takes Datasets; :func:`save_figure` stamps provenance on the file.

Figures are built as :class:`matplotlib.figure.Figure` objects without pyplot's global state and
without choosing a backend: they display inline in Jupyter (the last expression of a cell) and
save headless alike, and nothing here changes matplotlib's settings.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._atomic import atomic_write
from ..labels import Mentions
from ..loglog import power_law, power_law_fit
from ..records import best_start, checked_run, full_length, trained_cells

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure

__all__ = ["new_figure", "colors", "full_length", "plot_flow_demo", "save_figure", "plot_loss_vs_depth",
           "plot_training_curves", "plot_lesion_profiles", "lesion_summary", "plot_interventions",
           "plot_student_angles", "depth_ticks"]

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


def save_figure(fig: Figure, path: Path, provenance: dict[str, str], *, colours: int | None = None) -> Path:
    """Save ``fig`` with a provenance footer and the full provenance in the PNG's text chunks (the footer
    names the store record, and what redrew it, when ``provenance`` has ``store_record`` and ``drawn_by``).

    ``colours``: write a PNG of that many palette colours (256 keeps line art and text as they are, at about a
    third of the size: figures kept in the docs); the default keeps every colour."""
    footer = (
        f"resflow {provenance.get('resflow_version', '?')} | commit {provenance.get('git_commit', '?')[:12]}"
        f" | torch {provenance.get('torch_version', '?')} | seed {provenance.get('seed', '?')} | "
        f"{provenance.get('created', '')}"
    )
    stamps = (("store_record", "record"), ("drawn_by", "drawn by"))
    footer += "".join(f" | {what} {provenance[key]}" for key, what in stamps if key in provenance)
    fig.text(0.01, 0.005, footer, fontsize=6, color="0.4", ha="left", va="bottom")
    metadata = {"Software": "resflow", "Description": json.dumps(provenance, sort_keys=True)}
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    if colours is None or fmt != "png":
        return atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=130, metadata=metadata, format=fmt))
    return atomic_write(path, lambda tmp: _palette_png(fig, tmp, metadata, colours))


def _palette_png(fig: Figure, path: Path, metadata: dict[str, str], colours: int) -> None:
    """``fig`` as a PNG of ``colours`` palette colours (median cut, no dithering: flat areas stay flat)."""
    import io

    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=130, format="png")
    info = PngInfo()
    for key, value in metadata.items():
        info.add_text(key, value)
    with Image.open(buffer) as image:
        palette = image.convert("RGB").quantize(colours, method=Image.Quantize.MEDIANCUT,
                                                dither=Image.Dither.NONE)
        palette.save(path, format="png", optimize=True, pnginfo=info, dpi=(130, 130))


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
                        f"fit {float(fits.sel(field='relu2')):.2f} "
                        f"(softplus² {float(fits.sel(field='softplus2')):.2f})")
    for p in (1, 2, 3, 4):
        ax.loglog(depth, 0.5 * (depth / depth[0]) ** (-p) * float(conv.max()), ":", color="0.7", lw=0.8)
    ax.set(xlabel="depth L (step T/L)", ylabel="relative error vs ODE",
           title="one shared layer (tied stack) → its ODE: relu² block (softplus²)")
    ax.legend(fontsize=6.5, loc="lower left")

    ax = axes[1]
    for noise in ds["noise"].values:
        line, = ax.loglog(ds["members"], ds["ensemble_mse"].sel(noise=noise), "o", ms=4, label=f"{noise}")
        ax.loglog(ds["members"], ds["ensemble_mse_exact"].sel(noise=noise), "-", color=line.get_color(), lw=1)
    ax.set(xlabel="members L", ylabel="MSE of the ensemble mean",
           title="noisy ensemble: points simulated, lines exact")
    ax.legend(fontsize=7)

    ax = axes[2]
    mentions = Mentions()
    for teacher in ds["teacher"].values:
        ax.plot(ds["layer"], np.degrees(ds["update_angle"].sel(teacher=teacher)),
                label=mentions(teacher), lw=1.2)
    ax.axhline(90, color="0.6", ls=":", lw=0.8)
    ax.set(xlabel="layer l", ylabel="mean angle between Δh_l and Δh_{l+1} (deg)", ylim=(0, 100),
           title="teachers: angle of successive updates")
    ax.legend(fontsize=7)
    return fig


def depth_ticks(ax, depths) -> None:
    import matplotlib.ticker

    ax.set_xticks(list(depths), [str(int(d)) for d in depths])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def _fit_label(fit, mentions: Mentions) -> str:
    """A series in a legend: its teacher (spelled out on first mention), its exponent, and what the
    exponent is."""
    high = f"{fit.ci_high:.2f}" if np.isfinite(fit.ci_high) else "∞"
    text = f"{mentions.series(fit)}: α = {fit.exponent:.2f} [{fit.ci_low:.2f}, {high}]"
    return text + (", certified" if fit.exponent_certified else ", a bound")


def _series_of(ds: xr.Dataset, fit) -> xr.Dataset:
    """The students of one fitted series (its target, scheme, structure and temperature)."""
    one = ds.sel(temperature=fit.temperature) if fit.temperature is not None else ds.isel(temperature=0)
    return one.sel(target=fit.target, scheme=fit.scheme, student_groups=fit.student_groups)


# each route's own best loss, small and light
ROUTE_MARKERS = {"scratch": "o", "continuation": "s", "smooth": "^"}
ROUTE_NAMES = {"smooth": "smooth starts"}  # a route named like a teacher, in words that cannot be read as one
PREVIOUS_MARKER = "_"  # the best student's loss at the previous training length: how far it still fell
LAW_STYLES = ((":", "ensemble law α = {:g}"), ("--", "procedural law, coherent α = {:g}"),
              ("-.", "procedural law, incoherent α = {:g}"))  # the theory's slopes, grey


def plot_loss_vs_depth(ds: xr.Dataset, fits, ax=None):
    """Final test loss vs depth (log-log), with a legend for every mark: every depth's best loss over routes
    (replicate mean, min-max bars over replicates; a filled circle where the depth's routes agree, verdict v4;
    a downward triangle where they do not: a bound on the loss, which lies below), the same student at the
    previous training length (a dash: how far it still fell), each route's own best loss (small, light), the
    least-squares lines (dashed: the exponent is a bound), the extrapolated limits (stars: an estimate), the
    teacher's constructions (open diamonds; :mod:`resflow.probing.constructions`), the theory (grey)."""
    from matplotlib.lines import Line2D

    from ..fitting.regimes import regime_predictions

    if ax is None:
        _, (ax,) = new_figure()
    run = checked_run(ds)
    best = best_start(run)
    lengths = np.sort(run["length"].values)
    previous = float(lengths[-2]) if lengths.size >= 2 else None
    several = run.sizes["route"] * run.sizes["init"] > 1
    palette = colors("tab10", len(fits))
    mentions = Mentions()
    laws_drawn: dict[tuple[str, float], None] = {}
    constructions = False  # drawn: their key
    for k, fit in enumerate(fits):
        color = palette[k]
        series = _series_of(best, fit)
        final = full_length(series)["final_loss"]
        depth = final["depth"].values
        mean = final.mean("replicate").values
        ax.errorbar(depth, mean, yerr=[mean - final.min("replicate").values,
                                       final.max("replicate").values - mean],
                    fmt="none", color=color, capsize=2, lw=0.8)
        certified = np.isin(depth, fit.certified_depths)
        ax.loglog(depth[certified], mean[certified], "o", color=color, ms=6, lw=0)
        ax.loglog(depth[~certified], mean[~certified], "v", color=color, ms=7, lw=0)
        if previous is not None:
            before = series["final_loss"].sel(length=previous).mean("replicate").values
            ax.loglog(depth, before, PREVIOUS_MARKER, color=color, ms=11, mew=1.6, lw=0, alpha=0.8)
        if several:
            full = full_length(_series_of(run, fit))
            routes = full["final_loss"].where(trained_cells(full)).min("init").mean("replicate", skipna=False)
            for route in routes["route"].values:
                ax.loglog(depth, routes.sel(route=route).values, ROUTE_MARKERS.get(str(route), "x"),
                          mfc="none", color=color, ms=4, alpha=0.45, lw=0)
        if np.isfinite(fit.exponent):
            ax.loglog(depth, power_law(power_law_fit(depth, mean), depth), "-" if fit.exponent_certified
                      else "--", color=color, lw=1.3, label=_fit_label(fit, mentions))
        built = full_length(series).get("construction_loss", final * np.nan).mean("replicate").values
        if np.isfinite(built).any():  # the constructions
            constructions = True
            ax.loglog(depth, built, "d:", mfc="none", color=color, ms=6, lw=0.8, alpha=0.8)
        limits = np.asarray(fit.limits, float)  # the asymptotic estimate
        if limits.size == depth.size and np.all(np.isfinite(limits) & (limits > 0)):
            ax.loglog(depth, limits, "*", color=color, ms=7, lw=0, alpha=0.6)
        pred = regime_predictions(fit.scheme)
        for alpha, (style, _) in zip((pred["ensemble"][0], *pred["procedural"]), LAW_STYLES, strict=True):
            if (style, alpha) not in laws_drawn:  # each slope once, from the first series' shallowest loss
                laws_drawn[(style, alpha)] = None
                ax.loglog(depth, mean[0] * (depth / depth[0]) ** (-alpha), style, color="0.55", lw=0.9)
    key = [Line2D([], [], marker="o", color="0.3", lw=0, label="certified depth (its routes agree)"),
           Line2D([], [], marker="v", color="0.3", lw=0, label="not certified: the loss is a bound"),
           Line2D([], [], color="0.3", ls="--", lw=1.3, label="fit; dashed: the exponent is a bound")]
    if previous is not None:
        key.append(Line2D([], [], marker=PREVIOUS_MARKER, color="0.3", ms=11, mew=1.6, lw=0,
                          label=f"same student at {previous / lengths[-1]:g}× the training"))
    key.append(Line2D([], [], marker="*", color="0.3", lw=0, alpha=0.6,
                      label="extrapolated limit (an estimate)"))
    if constructions:
        key.append(Line2D([], [], marker="d", mfc="none", color="0.3", ls=":", lw=0.8,
                          label="construction (built from the teacher, not trained)"))
    if several:
        key += [Line2D([], [], marker=m, mfc="none", color="0.3", lw=0, alpha=0.6,
                       label=f"route {ROUTE_NAMES.get(r, r)}, its best")
                for r, m in ROUTE_MARKERS.items() if r in run["route"].values]
    key += [Line2D([], [], color="0.55", ls=style, lw=0.9, label=text.format(alpha))
            for (style, alpha) in laws_drawn for s, text in LAW_STYLES if s == style]
    ax.set(xscale="log", yscale="log", xlabel="student depth ℓ",
           ylabel=f"final test loss ({ds.attrs.get('loss')})",
           title="loss vs depth: each depth's best student")
    depth_ticks(ax, ds["depth"].values)
    ax.add_artist(ax.legend(handles=key, loc="lower left", fontsize=6.5, framealpha=0.9))
    ax.legend(loc="upper right" if len(fits) <= 2 else "upper center", fontsize=7.5, framealpha=0.9,
              **({} if len(fits) <= 2 else {"bbox_to_anchor": (0.5, -0.13), "frameon": False}))  # many: below
    return ax


def _structure_note(ds: xr.Dataset) -> str:
    """The panels that show one student structure say which (the first: plain when the run has them)."""
    if ds["student_groups"].values.tolist() == [0]:
        return ""
    first = int(ds["student_groups"].values[0])
    return " (plain students)" if first == 0 else f" (students of {first} weight groups)"


TEACHER_STYLES = ("-", "--", ":", "-.")  # one line style per teacher where colour shows depth


def plot_training_curves(ds: xr.Dataset, ax=None):
    """Replicate-mean test loss against step (log loss, linear steps: the evaluations are evenly spaced) of
    the full-length students: colour is depth, line style the teacher, each explained in the legend."""
    from matplotlib.lines import Line2D

    if ax is None:
        _, (ax,) = new_figure()
    curves = full_length(best_start(ds))["test_loss"].mean("replicate").isel(scheme=0, student_groups=0,
                                                                             temperature=0)
    depths = curves["depth"].values
    palette = colors("viridis", len(depths))
    targets = curves["target"].values
    for t, target in enumerate(targets):
        for color, depth in zip(palette, depths, strict=True):
            ax.semilogy(curves["step"].values, curves.sel(target=target, depth=depth), TEACHER_STYLES[t % 4],
                        color=color, lw=1.2)
    mentions = Mentions()
    handles = [Line2D([], [], color="0.2", ls=TEACHER_STYLES[t % 4], lw=1.2, label=mentions(target))
               for t, target in enumerate(targets)]
    handles += [Line2D([], [], color=color, lw=2, label=f"ℓ = {int(depth)}")
                for color, depth in zip(palette, depths, strict=True)]
    ax.set(xlabel="training step", ylabel="test loss (replicate mean)",
           title="training curves" + _structure_note(ds))
    ax.legend(handles=handles, fontsize=7.5, ncol=2, loc="lower left", framealpha=0.9)
    return ax


def plot_student_angles(ds: xr.Dataset, ax=None):
    """Mean successive-update angle over the middle layers of trained students, against depth (replicate mean;
    bars: the range over replicates)."""
    if ax is None:
        _, (ax,) = new_figure()
    angles = full_length(best_start(ds))["update_angle"].isel(scheme=0, student_groups=0, temperature=0)
    mentions = Mentions()
    for target in angles["target"].values:
        values = []
        for depth in angles["depth"].values:
            # (replicate, update)
            a = angles.sel(target=target, depth=depth).values[:, : max(int(depth) - 1, 1)]
            middle = a[:, a.shape[1] // 4: max(3 * a.shape[1] // 4, a.shape[1] // 4 + 1)]
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a replicate without a finite angle: NaN
                values.append(np.degrees(np.nanmean(middle, axis=1)))
        values = np.array(values)  # (depth, replicate)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, low, high = np.nanmean(values, 1), np.nanmin(values, 1), np.nanmax(values, 1)
        line, = ax.semilogx(angles["depth"].values, mean, "o-", label=mentions(target))
        if values.shape[1] > 1:
            ax.fill_between(angles["depth"].values, low, high, color=line.get_color(), alpha=0.15, lw=0)
    ax.axhline(90, color="0.6", ls=":", lw=0.9, label="90°: unrelated updates (ensemble)")
    ax.set(xlabel="student depth ℓ", ylabel="middle layers' mean angle (degrees)", ylim=(0, 135),
           title="trained students: angle between successive updates" + _structure_note(ds))
    depth_ticks(ax, angles["depth"].values)
    ax.legend(fontsize=7.5, loc="lower right", framealpha=0.9)
    return ax


def lesion_summary(ds: xr.Dataset) -> xr.Dataset:
    """The damage of skipping layer l of the deepest trained students (full length, first scheme, structure
    and temperature), each replicate's profile divided by its mean over layers:
    ``profile (target, replicate, layer)``, and its ``mean``, ``low`` and ``high`` over replicates
    ``(target, layer)``; ``position`` is l/ℓ."""
    import xarray as xr

    damage = full_length(best_start(ds))["lesion"].isel(scheme=0, student_groups=0, temperature=0)
    deepest = int(damage["depth"].max())
    profile = damage.sel(depth=deepest).isel(layer=slice(0, deepest))
    profile = profile / profile.mean("layer")
    return xr.Dataset({"profile": profile, "mean": profile.mean("replicate"), "low": profile.min("replicate"),
                       "high": profile.max("replicate")},
                      coords={"position": ("layer", np.arange(deepest) / deepest)}, attrs={"depth": deepest})


def plot_lesion_profiles(ds: xr.Dataset, ax=None):
    """Damage of skipping layer l of the deepest trained students against l/ℓ (the study's Fig. 6 axis),
    each replicate's profile divided by its mean over layers (flat: every layer matters alike, as in an
    ensemble or an autonomous flow); one line per teacher, the mean over replicates, and a band over their
    range."""
    from matplotlib.patches import Patch

    if ax is None:
        _, (ax,) = new_figure()
    summary = lesion_summary(ds)
    n = summary.sizes["replicate"]
    mentions = Mentions()
    handles = []
    for color, target in zip(colors("tab10", summary.sizes["target"]), summary["target"].values, strict=True):
        one = summary.sel(target=target)
        line, = ax.plot(summary["position"], one["mean"], "o-", ms=3.5, lw=1.5, color=color,
                        label=mentions(target))
        handles.append(line)
        if n > 1:
            ax.fill_between(summary["position"], one["low"], one["high"], color=color, alpha=0.18, lw=0)
    if n > 1:
        handles.append(Patch(color="0.5", alpha=0.3, label=f"range over {n} replicates (line: their mean)"))
    handles.append(ax.axhline(1.0, color="0.6", ls=":", lw=0.9, label="1: every layer matters alike"))
    ax.set(xlabel="position of the skipped layer l/ℓ", ylabel="damage / its mean over layers",
           title=f"trained students (ℓ = {summary.attrs['depth']}): skipping one layer"
                 + _structure_note(ds))
    ax.legend(handles=handles, fontsize=7.5, loc="best", framealpha=0.9)
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
        what = ("probability of the target" if ds.attrs["measure"] == "probability"
                else "damage: low is recovered")
        right.set(yticks=range(ds.sizes["token"]), yticklabels=[str(t) for t in ds["token_text"].values],
                  xlabel="layer l whose input is restored",
                  title=f"causal trace: {ds.attrs['model']} ({what})")
        fig.colorbar(image, ax=right)
    else:
        right.set(xlabel="position l/ℓ of the restored update", ylabel="recovered share",
                  title="trace: the clean update of layer l restored")
        right.legend(fontsize=7)
    return fig
