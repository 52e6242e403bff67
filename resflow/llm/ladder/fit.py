r"""The depth law of a language-model ladder, fitted from its ``lm-ladder`` record.

* :func:`ladder_fits`, per width: the **depth law** :math:`L(\ell) = c\,\ell^{-\alpha} + L_\infty` fitted to
  each seed's losses (:func:`resflow.fitting.fits.fit_offset`), :math:`\alpha` the mean over seeds with the t
  interval over seeds (:func:`resflow.fitting.intervals.over_replicates`; one seed, or a seed whose fit fails,
  is said in ``failure``, never hidden); the **plain exponent** (slope of log loss on log depth) and **verdict
  v2** (:func:`resflow.fitting.verdict.convergence_verdict`) on the training lengths; the **lesion exponent**,
  the slope of the mean lesion loss change against depth.
* :func:`width_depth_fit`, with three widths or more: the Chinchilla form at fixed tokens,
  :math:`c_m m^{-\alpha_m} + c_\ell \ell^{-\alpha_\ell} + L_0`, per seed (multi-start), t intervals over
  seeds.
* :func:`ladder_law_fit`: ``llm-fit``'s law of width, depth and data on the ladder's own grid (the training
  lengths are its data axis), with the Jacobian's standard errors and the fit's own failure checks.

Deterministic functions of the record: ``resflow report`` and ``resflow compare`` call them on the record, so
a ladder has no fit record of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import xarray as xr

from ...fitting.fits import fit_offset
from ...fitting.intervals import exponent_interval, over_replicates
from ...fitting.profile import profile_offset_fit, seed_standard_errors
from ...fitting.verdict import convergence_verdict
from ...loglog import slopes
from ..table.scaling_fit import MAX_EXPONENT

__all__ = ["LadderFit", "ladder_fits", "WidthDepthFit", "width_depth_fit", "MIN_WIDTHS", "MIN_DEPTHS",
           "EqualParameterPair", "equal_parameter_pairs", "PAIR_TOLERANCE", "ladder_law_table",
           "ladder_law_fit"]


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
    # the profile-likelihood fit over depths >= MIN_LAW_DEPTH (resflow.fitting.profile): the offset profiled
    # jointly with alpha; identified only where the losses determine the offset
    law_depths: tuple[int, ...] = ()
    profile_alpha: float = math.nan
    profile_low: float = math.nan
    profile_high: float = math.nan
    profile_limit_low: float = math.nan
    profile_limit_high: float = math.nan
    identified: bool = False
    profile: str = ""  # the interval, or why there is none (a phrase for tables)

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
    with np.errstate(over="ignore", invalid="ignore"):  # the optimiser's trial steps may overflow; they lose
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
        if len(depths) < MIN_DEPTHS:
            failure = f"the depth law needs {MIN_DEPTHS} depths or more (this ladder has {len(depths)})"
        elif not np.all(np.isfinite([p[1] for p in per_seed])):
            failure = "the depth law c ℓ^-α + L∞ did not fit every seed"
        elif max(p[1] for p in per_seed) > MAX_EXPONENT:
            failure = f"the depth law's exponent ran past {MAX_EXPONENT:g} (the losses do not determine it)"
        elif ds.sizes["seed"] < 2:
            failure = "one seed: no interval over seeds (train two or more)"
        elif not math.isfinite(law.low):
            failure = f"no interval over the {ds.sizes['seed']} seeds"
        profile = _profile(depths, by_seed.mean(-1))
        fits.append(LadderFit(
            width=int(width), depths=tuple(depths), losses=tuple(float(v) for v in full.mean(axis=(1, 2))),
            seeds=int(ds.sizes["seed"]), alpha=law.value, alpha_low=law.low, alpha_high=law.high,
            alpha_per_seed=tuple(float(p[1]) for p in per_seed), c=_mean([p[0] for p in per_seed]),
            c_per_seed=tuple(float(p[0]) for p in per_seed),
            limit_per_seed=tuple(float(p[2]) for p in per_seed),
            loss_limit=_mean([p[2] for p in per_seed]), exponent=plain.value, exponent_low=plain.low,
            exponent_high=plain.high, lesion_exponent=lesion_interval.value, lesion_low=lesion_interval.low,
            lesion_high=lesion_interval.high, converged=verdict.converged, verdict=verdict.text,
            failure=failure, **profile))
    return fits


def _profile(depths: list[int], by_seed: np.ndarray) -> dict:
    """The profile-likelihood fields of :class:`LadderFit` from the seed x depth losses (depths >= 2 only)."""
    keep = [i for i, d in enumerate(depths) if d >= MIN_LAW_DEPTH]
    law_depths = tuple(depths[i] for i in keep)
    if len(keep) < 4 or by_seed.shape[0] < 2:
        return {"law_depths": law_depths,
                "profile": f"not fitted: needs four depths >= {MIN_LAW_DEPTH} and two seeds (has "
                           f"{len(keep)} and {by_seed.shape[0]})"}
    means, errors, dof = seed_standard_errors(by_seed[:, keep])
    fit = profile_offset_fit(law_depths, means, errors, dof=dof)
    return {"law_depths": law_depths, "profile_alpha": fit.alpha, "profile_low": fit.alpha_low,
            "profile_high": fit.alpha_high, "profile_limit_low": fit.limit_low,
            "profile_limit_high": fit.limit_high, "identified": fit.identified, "profile": fit.verdict}


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
MIN_LAW_DEPTH = 2  # a one-layer transformer (no induction circuits) does not anchor the profiled depth law
MIN_DEPTHS = 4  # c l^-a + L_inf has three (resflow.fitting.fits.fit_offset needs four points)


def _width_depth_one(m, ell, loss, starts: int = 48, seed: int = 0) -> tuple[np.ndarray, str | None]:
    """Fit one seed: ``theta = (log c_m, alpha_m, log c_l, alpha_l, log L0)`` and why it failed, if it did."""
    from scipy.optimize import least_squares

    logm, logl, logy = np.log(m), np.log(ell), np.log(loss)

    def terms(t):
        return np.exp(t[0] - t[1] * logm), np.exp(t[2] - t[3] * logl), np.exp(t[4]) * np.ones_like(logm)

    def residual(t):
        return np.log(sum(terms(t))) - logy

    rng = np.random.default_rng(seed)
    low, high = (np.array([-4.0, 0.05, -4.0, 0.05, np.log(0.3)]),
                 np.array([8.0, 2.0, 4.0, 2.0, np.log(loss.min())]))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        found = [least_squares(residual, low + (high - low) * rng.random(5), method="trf", max_nfev=3000)
                 for _ in range(starts)]
    found = [r for r in found if np.all(np.isfinite(r.x))]
    if not found:
        return np.full(5, np.nan), "no start converged"
    best = min(found, key=lambda r: r.cost)
    agree = sum(1 for r in found
                if r.cost <= best.cost * (1 + 1e-6) + 1e-15 and abs(r.x[3] - best.x[3]) < 1e-3)
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
                             alpha_l_high=nan, loss_limit=nan,
                             failure=f"needs {MIN_WIDTHS} widths or more (this ladder has {len(widths)})")
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


PAIR_TOLERANCE = 0.02  # two models are of one size when their non-embedding parameters differ by less than 2%


@dataclass(frozen=True)
class EqualParameterPair:
    """A deeper, narrower model beside a shallower, wider one of (nearly) the same non-embedding size:
    depth at fixed size, measured directly.  ``difference`` is the deeper model's validation loss minus the
    wider one's (whole budget; negative: depth pays), the mean over seeds with its t interval (paired by seed,
    which draws the data order)."""

    deep: tuple[int, int]  # (width, depth)
    wide: tuple[int, int]
    parameters: tuple[int, int]
    difference: float
    low: float
    high: float


def equal_parameter_pairs(ds: xr.Dataset, tolerance: float = PAIR_TOLERANCE) -> list[EqualParameterPair]:
    """Every pair of models of a ladder of two widths whose sizes agree within ``tolerance``."""
    params = ds["parameters"]
    models = [(int(w), int(d), int(params.sel(width=w, depth=d))) for w in ds["width"].values
              for d in ds["depth"].values]
    loss = ds["val_loss"].sel(length=1.0)
    pairs = []
    for wa, da, pa in models:
        for wb, db, pb in models:
            if not (wa < wb and da > db) or abs(pa - pb) > tolerance * (pa + pb) / 2:
                continue
            gap = loss.sel(width=wa, depth=da) - loss.sel(width=wb, depth=db)
            gap = gap.transpose("seed", "batch").values
            interval = over_replicates(lambda s: float(np.mean(s)), gap)
            pairs.append(EqualParameterPair(deep=(wa, da), wide=(wb, db), parameters=(pa, pb),
                                            difference=interval.value, low=interval.low, high=interval.high))
    return pairs


def ladder_law_table(ds: xr.Dataset, *, min_depth: int = 2):
    """The ladder as a table of ``llm-fit``'s columns: one row per model and training length, ``d_model`` its
    width, ``n_layers`` its depth (from ``min_depth``), ``num_tokens`` the tokens of that length, ``loss``
    its validation loss (mean over the evaluation batches)."""
    import pandas as pd

    tokens = int(ds.attrs.get("tokens_per_model", 0))
    loss = ds["val_loss"].mean("batch")
    rows = [{"d_model": int(w), "n_layers": int(d), "seed": int(s), "num_tokens": float(length) * tokens,
             "loss": float(loss.sel(width=w, depth=d, seed=s, length=length))}
            for w in ds["width"].values for d in ds["depth"].values if int(d) >= min_depth
            for s in ds["seed"].values for length in ds["length"].values]
    table = pd.DataFrame(rows)
    return table[np.isfinite(table["loss"])].reset_index(drop=True)


def ladder_law_fit(ds: xr.Dataset):
    """``llm-fit``'s law
    :math:`c_m m^{-\\alpha_m} + c_\\ell \\ell^{-\\alpha_\\ell} + c_D D^{-\\alpha_D} + L_0`
    on the ladder's own grid (widths x depths >= 2 x training lengths x seeds;
    :func:`resflow.llm.table.scaling_fit.fit_scaling_law`, Huber on log loss, every point kept), or a reason
    it is not fitted.  The shorter lengths are forks of the long run decayed on their own
    (warmup-stable-decay),
    standing in for runs of that many tokens."""
    from ..table.scaling_fit import PARAMS, ScalingFitSettings, fit_scaling_law

    table = ladder_law_table(ds)
    axes = {"widths": table["d_model"].nunique(), "depths": table["n_layers"].nunique(),
            "lengths": table["num_tokens"].nunique()}
    short = [f"{n} {name}" for name, n in axes.items() if n < 2]
    if short or len(table) <= len(PARAMS) + 1:
        return None, (f"not fitted: the grid has {', '.join(short) or f'{len(table)} points'}; the law needs "
                      "two widths, two depths and two lengths at least, and more points than its 7 "
                      "parameters")
    return fit_scaling_law(table, ScalingFitSettings(exclude_top=0, n_starts=48)), None
