r"""Fit :math:`L(m, \ell, D) =
c_m m^{-\alpha_m} + c_\ell (\ell - k)^{-\alpha_\ell} + c_D D^{-\alpha_D} + L_0`.

Following the fitting advice of Besiroglu et al. 2024 (Epoch AI's Chinchilla replication): the
objective is a Huber loss (default :math:`\delta = 10^{-3}`) on the residuals of **log** loss,
minimised by ``scipy.optimize.least_squares`` (trust-region reflective, analytic Jacobian) from
many random starting points; the best is reported with the number of starts that reached it.
Parameters are :math:`\theta = (\log c_m, \alpha_m, \log c_\ell, \alpha_\ell, \log c_D, \alpha_D,
\log L_0)`, so every coefficient stays positive.  Uncertainty:

* standard errors from the Jacobian of the log-loss residuals at the optimum: for the squared loss
  :math:`s^2 (J^\top J)^{-1}` with :math:`s^2 = \sum r_i^2/(n - 7)`, for the Huber loss the sandwich
  covariance of an M-estimator (:func:`_covariance`; since issue 53 -- the least-squares formula
  understated the Huber fit's errors), mapped to :math:`c` and :math:`L_0` by the delta method.  The
  Jacobian is the model's own, :math:`\partial r_i/\partial\theta`: the one ``least_squares``
  returns for a robust loss is rescaled by the loss's weights, and mixing it with the unweighted
  :math:`s^2` inflated the Huber fit's :math:`\alpha_\ell` error about 2.3-fold (0.65 against
  0.29 and a bootstrap SD of 0.22 at the study's cut; ``docs/llm-fit.md``);
* a nonparametric bootstrap (rows resampled with replacement, refit from the optimum) with
  percentile intervals;
* held-out validation over random splits, and a sweep over how many highest-loss points are
  excluded (the study drops them; the result is known to depend on it).

A fit that cannot be trusted says so (:attr:`LawFit.failure`): fewer than :data:`MIN_AGREE` starts
reached the best optimum, a term of the law vanishes at every point of the table (its coefficient
underflowed, so its exponent is not determined), an exponent ran past :data:`MAX_EXPONENT`, or the
standard errors are not finite.  The study's exclusion of the 40 highest losses applies to the
Chinchilla table only; any other table is fitted whole unless ``exclude_top`` says otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import xarray as xr
from scipy.optimize import least_squares

from ..._validate import check_choice, check_int, check_real
from ...errors import ConfigError

__all__ = ["PARAMS", "STUDY_CUT", "MIN_AGREE", "MAX_EXPONENT", "ScalingFitSettings", "LawFit",
           "fit_scaling_law", "excluded_points", "diagnose", "bootstrap_fit", "holdout_validation",
           "exclusion_sweep", "predict", "fit_dataset_record"]

PARAMS = ("c_m", "alpha_m", "c_l", "alpha_l", "c_D", "alpha_D", "L0")
LOG_PARAMS = {"c_m": 0, "c_l": 2, "c_D": 4, "L0": 6}  # theta index holding the log of the parameter
STUDY_CUT = 40  # the study's exclusion on the Chinchilla table (203 of 245 points kept)
MIN_AGREE = 2  # starts that must reach the best optimum for it to count as found
MAX_EXPONENT = 10.0  # an exponent beyond this has run off: the term is not determined by the data
NEGLIGIBLE = 1e-6  # a term below this share of the loss at every point has vanished
TERMS = (("width", "c_m", "alpha_m"), ("depth", "c_l", "alpha_l"), ("data", "c_D", "alpha_D"))


@dataclass(frozen=True)
class ScalingFitSettings:
    loss: str = "huber"
    huber_delta: float = 1e-3
    n_starts: int = 64
    depth_offset: float = 0.0
    exclude_top: int | None = None  # None: the study's STUDY_CUT on the Chinchilla table, 0 on any other
    seed: int = 0

    def __post_init__(self) -> None:
        check_choice("loss", self.loss, ("huber", "squared"))
        object.__setattr__(self, "huber_delta",
                           check_real("huber_delta", self.huber_delta, low=0, low_open=True))
        object.__setattr__(self, "n_starts", check_int("n_starts", self.n_starts, minimum=1))
        if self.exclude_top is not None:
            object.__setattr__(self, "exclude_top", check_int("exclude_top", self.exclude_top, minimum=0))
        object.__setattr__(self, "depth_offset", check_real("depth_offset", self.depth_offset, low=0))


@dataclass
class LawFit:
    params: dict[str, float]
    se: dict[str, float]
    theta: np.ndarray
    cost: float
    n_points: int
    excluded: int
    starts_agree: int
    n_starts: int
    rms_log_residual: float
    settings: ScalingFitSettings
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    bootstrap: np.ndarray | None = None
    holdout: dict[str, float] | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    failure: str | None = None  # why the fit cannot be trusted; None for a fit that passed every check

    def to_json(self) -> dict:
        out: dict = {}
        for name in PARAMS:
            out[name] = self.params[name]
            out[f"{name}_se"] = self.se[name]
            if name in self.ci:
                out[f"{name}_ci"] = list(self.ci[name])
        out.update(n_points=self.n_points, excluded=self.excluded, starts_agree=self.starts_agree,
                   n_starts=self.n_starts, rms_log_residual=self.rms_log_residual, loss=self.settings.loss,
                   huber_delta=self.settings.huber_delta, depth_offset=self.settings.depth_offset,
                   failure=self.failure)
        if self.holdout is not None:
            out["holdout"] = self.holdout
        if self.seconds:
            out["seconds"] = self.seconds
        return out


def _columns(table: pd.DataFrame, settings: ScalingFitSettings):
    ell = table["n_layers"].to_numpy(float) - settings.depth_offset
    if np.any(ell <= 0):
        raise ConfigError(f"depth offset {settings.depth_offset} is not below every depth (min "
                          f"{table['n_layers'].min():g}); choose a smaller --depth-offset.")
    return (np.log(table["d_model"].to_numpy(float)), np.log(ell),
            np.log(table["num_tokens"].to_numpy(float)), np.log(table["loss"].to_numpy(float)))


def _terms(theta, logm, logl, logd):
    return (np.exp(theta[0] - theta[1] * logm), np.exp(theta[2] - theta[3] * logl),
            np.exp(theta[4] - theta[5] * logd), np.full_like(logm, np.exp(theta[6])))


def predict(params: dict[str, float], m, ell, D, depth_offset: float = 0.0) -> np.ndarray:
    """The fitted law at widths ``m``, depths ``ell`` and tokens ``D``."""
    m, ell, D = (np.asarray(v, float) for v in (m, ell, D))
    return (params["c_m"] * m ** -params["alpha_m"]
            + params["c_l"] * (ell - depth_offset) ** -params["alpha_l"]
            + params["c_D"] * D ** -params["alpha_D"] + params["L0"])


def _jacobian(theta, logm, logl, logd) -> np.ndarray:
    r""":math:`\partial r_i / \partial \theta` of the log-loss residuals, ``(n, 7)``."""
    t = _terms(theta, logm, logl, logd)
    total = sum(t)
    return np.column_stack([t[0] / total, -logm * t[0] / total, t[1] / total, -logl * t[1] / total,
                            t[2] / total, -logd * t[2] / total, t[3] / total])


def _solve(theta0, logm, logl, logd, logy, settings: ScalingFitSettings):
    def residual(theta):
        return np.log(sum(_terms(theta, logm, logl, logd))) - logy

    def jacobian(theta):
        return _jacobian(theta, logm, logl, logd)

    kwargs = ({"loss": "huber", "f_scale": settings.huber_delta} if settings.loss == "huber"
              else {"loss": "linear"})
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # wild random starts; they lose
        return least_squares(residual, theta0, jac=jacobian, method="trf", x_scale="jac", max_nfev=2000,
                             ftol=1e-12, xtol=1e-12, gtol=1e-12, **kwargs)


def _starts(n: int, rng: np.random.Generator) -> np.ndarray:
    # ranges cover the published Chinchilla-style fits with wide margins (coefficients in log space)
    low = np.array([0.0, 0.05, -2.0, 0.05, 0.0, 0.05, np.log(0.5)])
    high = np.array([12.0, 1.5, 8.0, 2.0, 12.0, 1.0, np.log(3.0)])
    return low + (high - low) * rng.random((n, 7))


def excluded_points(table: pd.DataFrame, settings: ScalingFitSettings) -> int:
    """How many highest-loss points ``settings`` excludes from ``table``: ``exclude_top`` when given,
    else the study's :data:`STUDY_CUT` for the Chinchilla table (``table.attrs["chinchilla"]``) and 0 for
    any other."""
    if settings.exclude_top is not None:
        return settings.exclude_top
    return STUDY_CUT if table.attrs.get("chinchilla") else 0


def _prepare(table: pd.DataFrame, settings: ScalingFitSettings) -> pd.DataFrame:
    """The points fitted: every point whose loss is below the ``n``-th largest loss (``excluded_points``).

    This is the study's rule (Liu et al. 2026, repository liuyz0/DepthScaling, Scaling/bootstrap.py:
    keep ``loss < sorted(loss)[-40]``), so points tied with the cut are dropped too: on the
    Chinchilla table, 40 excluded leave 203 points (three rows share the 40th-largest loss).
    """
    n = excluded_points(table, settings)
    if n == 0:
        return table
    if n > len(table):
        raise ConfigError(f"--exclude-top {n} is more than the {len(table)} points of the table; "
                          "choose a smaller number (0 keeps them all).")
    threshold = np.sort(table["loss"].to_numpy(float))[-n]
    keep = table[table["loss"] < threshold]
    if len(keep) <= len(PARAMS) + 1:
        raise ConfigError(
            f"--exclude-top {n} leaves {len(keep)} of {len(table)} points, too few for "
            f"{len(PARAMS)} parameters; choose a smaller number."
        )
    return keep


def diagnose(theta, se: dict[str, float], agree: int, n_starts: int, logm, logl, logd) -> str | None:
    """Why a fit cannot be trusted, in one line, or None (see the module docstring for the checks)."""
    reasons = []
    if agree < MIN_AGREE:
        reasons.append(f"only {agree} of {n_starts} starts reached the best optimum, so it is not confirmed")
    terms = _terms(theta, logm, logl, logd)
    total = sum(terms)
    params, _ = _natural(theta, np.zeros(len(PARAMS)))
    for (name, coef, alpha), term in zip(TERMS, terms[:3], strict=True):
        if not np.max(term / total) >= NEGLIGIBLE:
            reasons.append(f"the {name} term vanishes ({coef} = {params[coef]:.3g}, "
                           f"so {alpha} is not determined)")
        elif abs(params[alpha]) > MAX_EXPONENT:
            reasons.append(f"{alpha} = {params[alpha]:.3g} ran past {MAX_EXPONENT:g}")
    if not all(np.isfinite(v) for v in se.values()):
        reasons.append("the standard errors are not finite (the data do not determine every parameter)")
    return "; ".join(reasons) or None


def fit_scaling_law(table: pd.DataFrame, settings: ScalingFitSettings = ScalingFitSettings(),
                    extra_starts: list[np.ndarray] | None = None) -> LawFit:
    """Multi-start robust fit; see the module docstring.  ``extra_starts``: more starting points
    (parameter vectors ``theta``), e.g. the optimum of a related fit."""
    t0 = time.perf_counter()
    data = _prepare(table, settings)
    logm, logl, logd, logy = _columns(data, settings)
    rng = np.random.default_rng(settings.seed)
    starts = list(_starts(settings.n_starts, rng)) + list(extra_starts or [])
    results = [_solve(x0, logm, logl, logd, logy, settings) for x0 in starts]
    results = [r for r in results if np.all(np.isfinite(r.x))]
    if not results:
        raise ConfigError("no start converged; the data may not follow the law (check units and columns).")
    best = min(results, key=lambda r: r.cost)
    agree = sum(1 for r in results if r.cost <= best.cost * (1 + 1e-6) + 1e-15
                and abs(r.x[3] - best.x[3]) < 1e-3)
    resid = best.fun  # the raw log-loss residuals (least_squares applies the robust loss to the cost only)
    jac = _jacobian(best.x, logm, logl, logd)  # not best.jac: for a robust loss that one is reweighted
    try:
        se_theta = np.sqrt(np.clip(np.diag(_covariance(resid, jac, settings)), 0, None))
    except np.linalg.LinAlgError:
        se_theta = np.full(len(PARAMS), np.nan)
    n = len(resid)
    params, se = _natural(best.x, se_theta)
    fit = LawFit(params=params, se=se, theta=best.x, cost=float(best.cost), n_points=n,
                 excluded=excluded_points(table, settings), starts_agree=agree, n_starts=len(results),
                 rms_log_residual=float(np.sqrt(np.mean(resid**2))), settings=settings,
                 failure=diagnose(best.x, se, agree, len(results), logm, logl, logd))
    fit.seconds["fit"] = time.perf_counter() - t0
    return fit


def _covariance(resid: np.ndarray, jac: np.ndarray, settings: ScalingFitSettings) -> np.ndarray:
    r"""The covariance of :math:`\theta` at the optimum.  Squared loss: :math:`s^2 (J^\top J)^{-1}`,
    :math:`s^2 = \sum r_i^2/(n - p)`.  Huber loss: the sandwich of an M-estimator,
    :math:`\tfrac{n}{n-p} A^{-1} B A^{-1}` with :math:`A = \sum_i \psi'(r_i) J_i J_i^\top`,
    :math:`B = \sum_i \psi(r_i)^2 J_i J_i^\top` and :math:`\psi` the residual clipped at :math:`\pm\delta`
    (Huber 1967; White 1980).  The squared loss's formula applied to the Huber fit covered the truth 89-93%
    of the time at 95% on planted tables (``docs/design/intervals.md``): a Huber fit is less efficient than
    least squares where the residuals are Gaussian."""
    n, p = jac.shape
    if settings.loss != "huber":
        return float(resid @ resid) / max(n - p, 1) * np.linalg.inv(jac.T @ jac)
    inside = np.abs(resid) <= settings.huber_delta
    if inside.sum() < p:  # too few residuals inside the quadratic part to measure the curvature
        return np.full((p, p), np.inf)
    psi = np.clip(resid, -settings.huber_delta, settings.huber_delta)
    bread = np.linalg.inv(jac[inside].T @ jac[inside])
    meat = (jac * psi[:, None] ** 2).T @ jac
    return n / max(n - p, 1) * bread @ meat @ bread


def _natural(theta, se_theta):
    params, se = {}, {}
    for k, name in enumerate(PARAMS):
        if name in LOG_PARAMS:
            params[name] = float(np.exp(theta[k]))
            with np.errstate(invalid="ignore"):  # a vanished coefficient with an unbounded error: NaN
                se[name] = float(params[name] * se_theta[k])  # delta method
        else:
            params[name] = float(theta[k])
            se[name] = float(se_theta[k])
    return params, se


def bootstrap_fit(table: pd.DataFrame, fit: LawFit, resamples: int = 1000, *, seed: int = 0,
                  confidence: float = 0.95, progress: Callable[[int, int], None] | None = None) -> LawFit:
    """Percentile intervals from ``resamples`` row resamples, each refit from the optimum.

    ``progress(done, total)`` is called after every resample.
    """
    t0 = time.perf_counter()
    data = _prepare(table, fit.settings)
    logm, logl, logd, logy = _columns(data, fit.settings)
    rng = np.random.default_rng(seed)
    samples = np.empty((resamples, 7))
    n = len(logy)
    for b in range(resamples):
        idx = rng.integers(0, n, n)
        res = _solve(fit.theta, logm[idx], logl[idx], logd[idx], logy[idx], fit.settings)
        samples[b] = [np.exp(v) if name in LOG_PARAMS else v for name, v in zip(PARAMS, res.x, strict=True)]
        if progress is not None:
            progress(b + 1, resamples)
    q = ((1 - confidence) / 2, (1 + confidence) / 2)
    fit.bootstrap = samples
    fit.ci = {name: tuple(float(v) for v in np.quantile(samples[:, k], q)) for k, name in enumerate(PARAMS)}
    fit.seconds["bootstrap"] = time.perf_counter() - t0
    return fit


def holdout_validation(table: pd.DataFrame, settings: ScalingFitSettings, splits: int = 5,
                       test_fraction: float = 0.2, *, seed: int = 0) -> dict[str, float]:
    """Fit on random training splits; RMS of log-loss residuals on the held-out points."""
    data = _prepare(table, settings)
    full = fit_scaling_law(data, ScalingFitSettings(**{**settings.__dict__, "exclude_top": 0}))
    rng = np.random.default_rng(seed)
    train_rms, test_rms, alpha_l = [], [], []
    for _ in range(splits):
        order = rng.permutation(len(data))
        cut = int(round(len(data) * (1 - test_fraction)))
        train, test = data.iloc[order[:cut]], data.iloc[order[cut:]]
        fit = fit_scaling_law(train, ScalingFitSettings(**{**settings.__dict__, "exclude_top": 0,
                                                    "n_starts": max(8, settings.n_starts // 4)}),
                              extra_starts=[full.theta])
        pred = predict(fit.params, test["d_model"], test["n_layers"], test["num_tokens"],
                       settings.depth_offset)
        test_rms.append(float(np.sqrt(np.mean((np.log(pred) - np.log(test["loss"].to_numpy())) ** 2))))
        train_rms.append(fit.rms_log_residual)
        alpha_l.append(fit.params["alpha_l"])
    return {"splits": splits, "test_fraction": test_fraction, "train_rms_log": float(np.mean(train_rms)),
            "test_rms_log": float(np.mean(test_rms)), "test_rms_log_sd": float(np.std(test_rms, ddof=1)),
            "alpha_l_mean": float(np.mean(alpha_l)), "alpha_l_sd": float(np.std(alpha_l, ddof=1))}


def exclusion_sweep(table: pd.DataFrame, settings: ScalingFitSettings,
                    exclusions=(0, 5, 10, 20, 30, 40, 60)) -> list[LawFit]:
    """One fit per number of excluded highest-loss points."""
    return [fit_scaling_law(table, ScalingFitSettings(**{**settings.__dict__, "exclude_top": n}))
            for n in exclusions if n < len(table) - 8]


def fit_dataset_record(fit: LawFit, data_record: str | None = None) -> xr.Dataset:
    """An ``llm-fit`` record: parameters, standard errors, intervals, bootstrap samples, settings."""
    ds = xr.Dataset(
        {
            "value": (("param",), [fit.params[p] for p in PARAMS],
                      {"long_name": "fitted parameter", "units": "1"}),
            "se": (("param",), [fit.se[p] for p in PARAMS],
                   {"long_name": "standard error (Jacobian)", "units": "1"}),
        },
        coords={"param": ("param", list(PARAMS), {"long_name": "parameter of the scaling law"})},
        attrs={"settings": str(fit.settings), "n_points": str(fit.n_points), "excluded": str(fit.excluded),
               "starts_agree": f"{fit.starts_agree}/{fit.n_starts}", "data_record": data_record or "",
               "failure": fit.failure or "",
               "law": "L = c_m m^-alpha_m + c_l (ell - k)^-alpha_l + c_D D^-alpha_D + L0"},
    )
    if fit.ci:
        ds["ci_low"] = (("param",), [fit.ci[p][0] for p in PARAMS], {"long_name": "2.5% bootstrap quantile",
                                                                     "units": "1"})
        ds["ci_high"] = (("param",), [fit.ci[p][1] for p in PARAMS], {"long_name": "97.5% bootstrap quantile",
                                                                      "units": "1"})
        ds["bootstrap"] = (("sample", "param"), fit.bootstrap,
                           {"long_name": "bootstrap refits", "units": "1"})
    return ds
