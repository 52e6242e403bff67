"""The Markdown tables of one toy run: first the separation of the smooth and rough readings, then the
exponents with verdict v4 (certified or bound), the exponent along training, the best loss of every depth
over routes with its route spread, the losses by route and by training length, verdict v2 and the
asymptotic estimates, and how the students' errors add along depth (:mod:`resflow.probing.tracking`).

What ``resflow report`` prints for an experiment without a report of its own (``docs/results.md``
quotes these tables beside the commands that print them).
"""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from .. import laws
from ..fitting.allocation import BudgetPlan, plan_next_run
from ..fitting.fits import SeriesFit, fit_dataset
from ..fitting.intervals import exponent_interval
from ..fitting.law_fit import finite_teacher_factor, law_for_target
from ..fitting.separation import separations
from ..labels import Mentions
from ..probing.intervention_rows import intervention_exponents
from ..probing.tracking import accumulation_exponents
from ..records import SERIES_DIMS, best_start, checked_run, is_kl, trained_cells

__all__ = ["run_tables", "certification_tables", "next_run_plan", "construction_table",
           "smoothness_table"]


def _end(value) -> str:
    return f"{value:.2f}" if np.isfinite(value) else ("∞" if value > 0 else "−∞")


def _interval(value, low, high):
    return "–" if not np.isfinite(value) else f"{value:.2f} [{_end(low)}, {_end(high)}]"


def _signed(value) -> str:
    return f"{value:+.3f}" if np.isfinite(value) else ("+∞" if value > 0 else "−∞")


def _percent(value) -> str:
    return "–" if not np.isfinite(value) else f"{value:.1%}"


def certification_tables(ds: xr.Dataset, fits: list[SeriesFit], name) -> list[str]:
    """The answer first: the separation of the readings, then the exponents certified or bound, every depth's
    best loss over routes (``≤``: a bound, the depth not certified), the routes' own losses, and why each
    depth is or is not certified (``name(fit, mentions)`` labels a series, ``mentions`` the table's
    :class:`~resflow.labels.Mentions`: each table spells a teacher's code name out once)."""
    lines = []
    for sep in separations(fits):
        where = "" if len({f.scheme for f in fits}) == 1 else f" ({sep.scheme})"
        lines += [f"**Separation{where}**: {sep.text}.", ""]
    lines += ["| teacher | α [95%] | law α [95%] | standing | routes agree at | route spreads add "
              "| still to come [95%] |",
              "|---|---|---|---|---|---|---|"]
    mentions = Mentions()
    for f in fits:
        lines.append(f"| {name(f, mentions)} | {_interval(f.exponent, f.ci_low, f.ci_high)} | "
                     f"{_interval(f.law_exponent, f.law_ci_low, f.law_ci_high)} | {f.standing} | "
                     f"{', '.join(map(str, f.certified_depths)) or 'none'} | "
                     f"−{f.route_error_low:.3f}, +{f.route_error_high:.3f} | "
                     f"{_signed(f.remaining_drift)} [{_signed(f.remaining_drift_low)}, "
                     f"{_signed(f.remaining_drift_high)}] |")
    lengths = list(fits[0].lengths) if fits else []
    if len(lengths) >= 2 and any(f.length_exponents for f in fits):
        lines += ["", "The exponent along training (replicate mean; each depth's best start at that length), "
                  "its last drift per doubling and the decay ratio of the drift (verdict v4):", "",
                  "| teacher | " + " | ".join(f"α at {v:g}" for v in lengths)
                  + " | drift per doubling [95%] | ratio (bound) | case |",
                  "|---|" + "---|" * (len(lengths) + 3)]
        mentions = Mentions()
        for f in fits:
            cells = " | ".join("–" if not np.isfinite(v) else f"{v:.3f}" for v in f.length_exponents)
            lines.append(f"| {name(f, mentions)} | {cells} | "
                         f"{_signed(f.drift_per_doubling)} [{_signed(f.drift_per_doubling_low)}, "
                         f"{_signed(f.drift_per_doubling_high)}] | {f.drift_ratio:.2f} "
                         f"({f.drift_ratio_high:.2f}) | {f.drift_case} |")
    depths = list(fits[0].depths) if fits else []
    lines += ["", "Best loss per depth over routes and inits (replicate mean; ≤: the routes do not agree, "
              "a bound on the loss the architecture can reach):", "",
              "| teacher | " + " | ".join(f"ℓ = {d}" for d in depths) + " |",
              "|---|" + "---|" * len(depths)]
    mentions = Mentions()
    for f in fits:
        cells = [("" if d in f.certified_depths else "≤ ") + f"{v:.3e}"
                 for d, v in zip(f.depths, f.losses, strict=False)]
        lines.append(f"| {name(f, mentions)} | " + " | ".join(cells) + " |")
    full = ds.sel(length=ds["length"].max())
    present = trained_cells(full)
    if ds.sizes["route"] * ds.sizes["init"] > 1:
        lines += ["", "Each route's best loss per depth (its best init; replicate mean; –: the route does "
                  "not train the depth):", "",
                  "| teacher | route | " + " | ".join(f"ℓ = {d}" for d in ds["depth"].values) + " |",
                  "|---|---|" + "---|" * ds.sizes["depth"]]
        routes = full["final_loss"].where(present).min("init").mean("replicate", skipna=False)
        mentions = Mentions()
        for f in fits:
            one = routes.sel(target=f.target, scheme=f.scheme, student_groups=f.student_groups)
            one = one.sel(temperature=f.temperature) if f.temperature is not None else one.isel(temperature=0)
            for route in ds["route"].values:
                values = one.sel(route=route).values
                cells = " | ".join("–" if not np.isfinite(v) else f"{v:.3e}" for v in values)
                lines.append(f"| {name(f, mentions)} | {route} | {cells} |")
    lines += ["", "Verdict v4 per depth: route spread (worst route's best / best − 1, largest over "
              "replicates, and the upper 95% end of its mean over replicates), spread over inits and over "
              "teachers (sd of log loss), and whether the routes' best students agree within 5%:", "",
              "| teacher | ℓ | route spread [upper] | init spread | teacher spread | init / teacher "
              "| verdict |",
              "|---|---|---|---|---|---|---|"]
    mentions = Mentions()
    for f in fits:
        for d, spread, high, init, teacher, verdict in zip(f.depths, f.route_spread, f.route_spread_high,
                                                           f.init_spread, f.teacher_spread, f.depth_verdicts,
                                                           strict=False):
            ratio = init / teacher if np.isfinite(init) and np.isfinite(teacher) and teacher > 0 else np.nan
            lines.append(f"| {name(f, mentions)} | {d} | {_percent(spread)} [{_percent(high)}] | "
                         f"{'–' if not np.isfinite(init) else f'{init:.3f}'} | "
                         f"{'–' if not np.isfinite(teacher) else f'{teacher:.3f}'} | "
                         f"{'–' if not np.isfinite(ratio) else f'{ratio:.2f}'} | {verdict} |")
    plan = next_run_plan(ds, fits)
    if plan is not None:
        lines += ["", f"**Next run** (verdict v4's budget): {plan.text}."]
    return lines


def next_run_plan(ds: xr.Dataset, fits: list[SeriesFit]) -> BudgetPlan | None:
    """The next run's steps and per-depth budgets from this run's certificates
    (:func:`resflow.fitting.allocation.next_budgets`), or None for a record without a config."""
    config = json.loads(ds.attrs.get("config", "null") or "null")
    if not isinstance(config, dict) or not fits:
        return None
    depths = [int(d) for d in fits[0].depths]
    shares = config.get("budgets") or ()
    if shares and len(shares) != len(depths):
        return None  # a run whose fits do not cover its depths (not the toy run's shape)
    return plan_next_run(depths, int(config["train"]["steps"]), shares, fits)


def run_tables(ds: xr.Dataset, record: str) -> str:
    """Markdown tables of the toy-run Dataset ``ds`` (the record ``record``; all its replicates)."""
    ds = checked_run(ds)
    fits = fit_dataset(ds)
    routes = [str(r) for r in ds["route"].values]
    starts = (f", routes {' + '.join(routes)}, "
              f"{ds.sizes['init']} init{'s' if ds.sizes['init'] > 1 else ''} each")
    n = ds.sizes["replicate"]
    lines = [f"run {record}: {n} replicate{'s' if n > 1 else ''}{starts}", ""]
    dims = list(SERIES_DIMS)
    varying = {d for d in dims if d != "target" and ds.sizes[d] > 1}

    def name(mentions: Mentions, target, scheme=None, temperature=None, groups=None) -> str:
        extra = [str(scheme)] if "scheme" in varying else []
        extra += [f"T = {float(temperature):g}"] if "temperature" in varying else []
        extra += [f"K = {int(groups)}"] if "student_groups" in varying else []
        return ", ".join([mentions(target), *extra])

    def series(f, mentions: Mentions) -> str:
        return name(mentions, f.target, f.scheme, f.temperature, f.student_groups)

    lines += certification_tables(ds, fits, series)
    lines += smoothness_table(ds, name)
    ds = best_start(ds)  # from here on, the student of each cell that reached the best loss
    steps = ds["train_steps"].max("replicate")
    # steps depend on depth, length
    steps = steps.isel({d: 0 for d in steps.dims if d not in ("length", "depth")})
    lines += ["", "Final test loss of the best student of each depth by training length (replicate mean; "
              "steps in brackets):", "",
              "| teacher | length | " + " | ".join(f"ℓ = {int(d)}" for d in ds["depth"].values) + " |",
              "|---|---|" + "---|" * ds.sizes["depth"]]
    mean = ds["final_loss"].mean("replicate").stack(series=dims)
    mentions = Mentions()
    for i in range(mean.sizes["series"]):
        one = mean.isel(series=i)
        label = {d: one[d].item() for d in dims}
        for length in ds["length"].values:
            row = name(mentions, label["target"], label.get("scheme"), label.get("temperature"),
                       label.get("student_groups"))
            cells = [f"{float(one.sel(length=length, depth=d)):.3e} "
                     f"({int(steps.sel(length=length, depth=d)) / 1000:g}k)" for d in ds["depth"].values]
            lines.append(f"| {row} | {float(length):g} | " + " | ".join(cells) + " |")

    lines += construction_table(ds, fits, name)
    interval = _interval
    lines += ["", "Verdict v2 of the best students (has this route stopped improving?): drift of α between "
              "the two longest lengths and the remaining gain by depth:", "",
              "| teacher | drift [90%] | remaining gain by depth (upper 90%) | verdict v2 |",
              "|---|---|---|---|"]
    mentions = Mentions()
    for f in fits:
        gains = ", ".join("∞" if not np.isfinite(g) else f"{g:.0%} ({h:.0%})"
                          for g, h in zip(f.gains, f.gain_highs, strict=True))
        lines.append(f"| {series(f, mentions)} | {interval(f.drift, f.drift_low, f.drift_high)} | {gains} | "
                     f"{f.verdict} |")
    lines += ["", "| teacher | asymptotic α [95%] (estimate) | asymptotic law α [95%] (estimate) "
              "| points to |",
              "|---|---|---|---|"]
    mentions = Mentions()
    for f in fits:
        law = interval(f.asymptotic_law_exponent, f.asymptotic_law_ci_low, f.asymptotic_law_ci_high)
        lines.append(f"| {series(f, mentions)} | "
                     f"{interval(f.asymptotic_exponent, f.asymptotic_ci_low, f.asymptotic_ci_high)} | "
                     f"{law} | {f.asymptotic_regime} |")
    # first structure
    plain = ds.isel(scheme=0, temperature=0, student_groups=0).sel(length=ds["length"].max())
    if "error_coherence" in ds and not is_kl(ds):  # tracking: MSE runs
        full = plain
        lines += ["", "How the errors add along depth (full length, replicate mean; "
                  "resflow.probing.tracking): coherence C of the layers' output errors (ℓ: coherent, 1: "
                  "incoherent), linearity (0: the loss is the sum of the layers' errors), share ε of the "
                  "teacher-field Euler student's local error left, largest trajectory error (at matching "
                  "times) and largest path error (anywhere on the teacher's path) over the middle "
                  "layers:", "",
                  "| teacher | "
                  + " | ".join(f"ℓ = {int(d)}: C, lin., ε, traj., path" for d in ds["depth"].values)
                  + " |",
                  "|---|" + "---|" * ds.sizes["depth"]]
        mentions = Mentions()
        for target in ds["target"].values:
            cells = []
            for d in ds["depth"].values:
                one = full.sel(target=target, depth=d)
                own = one["layer"] < d
                local = one["local_error"].where(own).sum("layer")
                eps = float((local / one["euler_local_error"].where(own).sum("layer")).mean("replicate"))
                inner = (one["layer"] > 0) & (one["layer"] < d)
                traj = (float(one["trajectory_error"].where(inner).mean("replicate").max())
                        if d > 1 else np.nan)
                path = (float(one["path_error"].where(inner).mean("replicate").max())
                        if d > 1 and "path_error" in one else np.nan)
                cells.append(f"{float(one['error_coherence'].mean()):.2f}, "
                             f"{float(one['error_linearity'].mean()):.2f}, "
                             f"{eps:.2g}, {traj:.1e}, {path:.1e}")
            lines.append(f"| {mentions(target)} | " + " | ".join(cells) + " |")
        lines += ["", "| teacher | coherence exponent c [95%] | output-error exponent 2q [95%] "
                  "| implied 2q − 1 − c [95%] | exponent of ε [95%] |", "|---|---|---|---|---|"]
        mentions = Mentions()
        for target in ds["target"].values:
            e = accumulation_exponents(ds, str(target))
            cells = " | ".join(interval(e[k].value, e[k].low, e[k].high)
                               for k in ("coherence", "output_error", "implied", "local_share"))
            lines.append(f"| {mentions(target)} | {cells} |")
    if "lesion" in ds and ds.sizes["depth"] > 2:
        lines += ["", "Interventions on the trained students (full length, replicate intervals; "
                  "resflow.probing.interventions): exponents of the layer-mean damage D ∝ ℓ^-α of "
                  "skipping a layer, of skipping it with the others lengthened by ℓ/(ℓ−1), of swapping "
                  "two adjacent layers; and the repair, rescaled over plain damage at the deepest depth "
                  "(ensemble: the noise share of a layer, of order 1; smooth flow: near 0; laws: resflow "
                  "theory lesion-ensemble ... swap-flow):", "",
                  "| teacher | lesion α [95%] | rescaled lesion α [95%] | swap α [95%] | repair at "
                  f"ℓ = {int(ds['depth'].values[-1])} [95%] |", "|---|---|---|---|---|"]
        mentions = Mentions()
        for target in ds["target"].values:
            e = intervention_exponents(ds, str(target))
            cells = " | ".join(interval(e[k].value, e[k].low, e[k].high)
                               for k in ("lesion", "lesion_rescaled", "swap", "repair"))
            lines.append(f"| {mentions(target)} | {cells} |")
        lines += _intervention_laws(int(ds["depth"].values[-1]))
    if "path_time" in ds and not is_kl(ds):
        full = plain
        lines += ["", "Where on the teacher's path each student state lies (path time τ*/L_T of h_l, "
                  "replicate mean; l/ℓ: at the teacher's pace):", "",
                  "| teacher | depth | path time of h_1 … h_ℓ | l/ℓ |",
                  "|---|---|---|---|"]
        mentions = Mentions()
        for target in ds["target"].values:
            for d in ds["depth"].values:
                times = full["path_time"].sel(target=target, depth=d).mean("replicate").values[1:int(d) + 1]
                lines.append(f"| {mentions(target)} | {int(d)} | {', '.join(f'{t:.2f}' for t in times)} | "
                             f"{', '.join(f'{(i + 1) / d:.2f}' for i in range(int(d)))} |")
    return "\n".join(lines)


def construction_table(ds: xr.Dataset, fits: list[SeriesFit], name) -> list[str]:
    """The constructions beside the best trained students (:mod:`resflow.probing.constructions`): per series
    and depth the construction's loss and the trained student's over it (full length, replicate means), and
    the construction's plain and law exponents with intervals over replicates.  Empty when the run has no
    ``construction_loss`` or no construction is defined for it.  ``ds`` is one start per cell
    (:func:`~resflow.records.best_start`), ``fits`` its fits (the teacher's depth); ``name(mentions, target,
    scheme, temperature, groups)`` names a series."""
    if "construction_loss" not in ds or not np.isfinite(ds["construction_loss"].values).any():
        return []
    dims = list(SERIES_DIMS)
    full = ds.sel(length=ds["length"].max()).stack(series=dims)
    depths = [int(d) for d in ds["depth"].values]
    teacher_depth = fits[0].teacher_depth if fits else np.inf  # the run's fits read it from its config
    lines = ["", "Constructions beside the trained students (built from the teacher, not trained: each layer "
             "steps the mean of its k = L_T/ℓ teacher fields by the student's scheme — the block-sum "
             "student of a rough teacher, the teacher-field Euler student of a smooth one; "
             "resflow.probing.constructions). "
             "Per depth: the construction's loss, and the best trained student's over it (full length, "
             "replicate means; below 1: training beat the construction); then the construction's exponents "
             "[95% over replicates] (not defined: –):", "",
             "| teacher | " + " | ".join(f"ℓ = {d}: built, trained/built" for d in depths)
             + " | built α [95%] | built law α [95%] |",
             "|---|" + "---|" * (len(depths) + 2)]
    mentions = Mentions()
    for i in range(full.sizes["series"]):
        one = full.isel(series=i)
        built = one["construction_loss"].transpose("depth", "replicate").values
        if not np.isfinite(built).any():
            continue
        ratio = (one["final_loss"].transpose("depth", "replicate").values / built)
        cells = [("–" if not np.isfinite(b).any() else
                  f"{np.nanmean(b):.2e}, {np.nanmean(r):.2f}") for b, r in zip(built, ratio, strict=True)]
        target = str(one["target"].item())
        if np.isfinite(built).all() and len(depths) >= 2:
            batches = built[:, :, None]
            plain = exponent_interval(depths, batches)
            law = law_for_target(target, teacher_depth)
            factor = finite_teacher_factor(law, depths, teacher_depth) if law is not None else None
            lawful = (exponent_interval(depths, batches, transform=factor)
                      if factor is not None and np.isfinite(factor).all() else None)
            exps = [_interval(plain.value, plain.low, plain.high),
                    "–" if lawful is None else _interval(lawful.value, lawful.low, lawful.high)]
        else:
            exps = ["–", "–"]
        label = {d: one[d].item() for d in dims}
        row = name(mentions, label["target"], label.get("scheme"), label.get("temperature"),
                   label.get("student_groups"))
        lines.append(f"| {row} | " + " | ".join(cells + exps) + " |")
    return lines


def smoothness_table(ds: xr.Dataset, name) -> list[str]:
    """How smoothly each route's students vary along depth (:mod:`resflow.probing.smoothness`) beside the loss
    they reached: per series, depth and route the mean ``weight_variation`` and the geometric-mean final loss
    over replicates and inits (full length).  Empty without ``weight_variation``."""
    if "weight_variation" not in ds or not np.isfinite(ds["weight_variation"].values).any():
        return []
    full = ds.sel(length=ds["length"].max())
    full = full.where(trained_cells(full))
    routes = [str(r) for r in ds["route"].values]
    lines = ["", "Smoothness of the trained weights along depth (resflow.probing.smoothness): total "
             "variation Σ_l |θ_{l+1} − θ_l| / mean |θ_l| of each route's students, and the loss they reached "
             "(full length; mean and geometric mean over replicates and inits). A smooth field keeps the "
             "variation of order 1 as ℓ grows, independent layers make it grow as ℓ:", "",
             "| teacher | depth | " + " | ".join(f"{r}: variation, loss" for r in routes) + " |",
             "|---|---|" + "---|" * len(routes)]
    mentions = Mentions()
    stacked = full.stack(series=list(SERIES_DIMS))
    for i in range(stacked.sizes["series"]):
        one = stacked.isel(series=i)
        label = {d: one[d].item() for d in SERIES_DIMS}
        row = name(mentions, label["target"], label.get("scheme"), label.get("temperature"),
                   label.get("student_groups"))
        for d in ds["depth"].values:
            cells = []
            for r in routes:
                here = one.sel(depth=d, route=r)
                variation = float(here["weight_variation"].mean())
                loss = float(np.exp(np.log(here["final_loss"]).mean()))
                shown = "–" if not np.isfinite(variation) else f"{variation:.2f}"
                cells.append("–" if not np.isfinite(loss) else f"{shown}, {loss:.3e}")
            lines.append(f"| {row} | {int(d)} | " + " | ".join(cells) + " |")
    return lines


def _intervention_laws(deepest: int) -> list[str]:
    """The theory's rows of the interventions table, evaluated from the derivations
    (``theory/interventions.py``)."""
    def alpha(name, **values):
        return f"{float(laws.exponent(name, ell=deepest, **values)):.2f}"

    return [f"| law: noisy ensemble | {alpha('lesion-ensemble', m=1.0, sigma=1.0)} (lesion-ensemble) | "
            f"{alpha('lesion-rescaled-ensemble', sigma=1.0, rho=0.0)} at ℓ = {deepest} "
            "(lesion-rescaled-ensemble) | "
            "no damage (swap-ensemble) | σ²(1−ρ)/(m²+σ²) · ℓ/(ℓ−1): of order 1 |",
            f"| law: Euler flow | {alpha('lesion-flow', a=1.0, h=1.0)} (lesion-flow) | "
            f"{alpha('lesion-rescaled-flow', a=1.0, abar=0.5, h=1.0)} (lesion-rescaled-flow; "
            "more where a = ā, "
            f"4 for an autonomous field) | {alpha('swap-flow', c=1.0, gamma=1)} smooth, "
            f"{alpha('swap-flow', c=1.0, gamma=0)} independent layers (swap-flow) | "
            "(a − ā)²/a²: 0 for an autonomous field |"]
