"""Coverage of resflow's intervals at the presets' sample sizes, beside the estimators issue 53 replaced.

Planted data with a known truth (tests/test_coverage.py asserts the same rates within three binomial
standard errors); each row prints the share of draws whose 95% interval holds the truth.  The replaced
estimators are rebuilt here from the package's pieces for the comparison only: the percentile bootstrap
over evaluation batches (one replicate), the plain percentile bootstrap over replicates, and the Huber
scaling-law fit's standard errors by the least-squares formula.  About three minutes on one core.

    python benchmarks/coverage.py [--draws 1000]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd
from scipy import stats

import resflow
from resflow.fitting.intervals import exponent_interval
from resflow.llm.table import scaling_fit
from resflow.loglog import slopes

DEPTHS = np.array([2.0, 4.0, 8.0, 16.0])


def losses(rng, replicates, batches, spread=0.1):
    own = 1.2 + spread * rng.standard_normal(replicates)
    mean = 0.5 * np.exp(0.3 * rng.standard_normal(replicates))[None] * DEPTHS[:, None] ** -own[None]
    return mean[..., None] * (1 + 0.05 * rng.standard_normal((DEPTHS.size, replicates, batches)))


def percentile_over_batches(one, rng, samples=2000):
    """The replaced one-replicate interval: percentiles of the slope over batch resamples."""
    picks = rng.integers(0, one.shape[-1], (samples, one.shape[-1]))
    boot = np.array([slopes(DEPTHS, one[:, pick].mean(axis=-1)) for pick in picks])
    return np.quantile(boot, [0.025, 0.975])


def batches_rows(draws, rng):
    for batches in (2, 4, 8, 16):
        new = old = 0
        for _ in range(draws):
            data = losses(rng, 1, batches, spread=0.0)
            fit = exponent_interval(DEPTHS, data)
            new += fit.low <= 1.2 <= fit.high
            low, high = percentile_over_batches(data[:, 0], rng, samples=500)
            old += low <= 1.2 <= high
        yield (f"| one replicate, {batches} evaluation batches ({draws} draws) | jackknife t | "
               f"{new / draws:.3f} | percentile bootstrap: {old / draws:.3f} |")


def replicate_rows(draws, rng):
    for n in (2, 3, 5, 8):
        covered = 0
        for _ in range(draws):
            fit = exponent_interval(DEPTHS, losses(rng, n, 8))
            covered += fit.low <= 1.2 <= fit.high
        yield f"| {n} replicates ({draws} draws) | t over replicates | {covered / draws:.3f} | – |"


def bootstrap_rows(draws, rng):
    for n in (5, 8, 10, 16):
        values = rng.standard_normal((draws, n))
        picks = rng.integers(0, n, (1000, n))
        boot = values[:, picks].mean(axis=-1)
        plain = np.quantile(boot, [0.025, 0.975], axis=1)
        z = math.sqrt(n / (n - 1)) * stats.t.ppf(0.975, n - 1)
        expanded = np.quantile(boot, [stats.norm.cdf(-z), stats.norm.cdf(z)], axis=1)
        rate = lambda ends: float(np.mean((ends[0] <= 0) & (0 <= ends[1])))  # noqa: E731
        shown = "reported" if n >= 10 else "not reported (below 10 replicates)"
        yield (f"| {n} replicates, bootstrap beside the t ({draws} draws) | expanded percentile, {shown} | "
               f"{rate(expanded):.3f} | plain percentile: {rate(plain):.3f} |")


def huber_rows(draws, rng):
    truth = dict(c_m=40.0, alpha_m=0.6, c_l=1.5, alpha_l=0.7, c_D=400.0, alpha_D=0.3, L0=1.8)
    grid = np.meshgrid([256, 512, 768, 1024, 1536, 2048, 3072, 4096.0], [4, 8, 12, 16, 24, 32, 48.0],
                       [1e9, 3e9, 1e10, 3e10, 1e11], indexing="ij")
    m, ell, tokens = (g.ravel() for g in grid)
    mean = (40 * m ** -0.6 + 1.5 * ell ** -0.7 + 400 * tokens ** -0.3 + 1.8)
    theta = np.array([math.log(40.0), 0.6, math.log(1.5), 0.7, math.log(400.0), 0.3, math.log(1.8)])
    settings = scaling_fit.ScalingFitSettings(loss="huber", n_starts=1, exclude_top=0)
    new = dict.fromkeys(("alpha_m", "alpha_l", "alpha_D"), 0)
    old = dict(new)
    for _ in range(draws):
        table = pd.DataFrame(dict(d_model=m, n_layers=ell, num_tokens=tokens,
                                  loss=mean * np.exp(0.01 * rng.standard_normal(m.size))))
        fit = scaling_fit.fit_scaling_law(table, settings, extra_starts=[theta])
        logm, logl, logd, logy = scaling_fit._columns(table, settings)
        resid = np.log(sum(scaling_fit._terms(fit.theta, logm, logl, logd))) - logy
        jac = scaling_fit._jacobian(fit.theta, logm, logl, logd)
        least_squares = np.sqrt(np.diag(float(resid @ resid) / (len(resid) - 7) * np.linalg.inv(jac.T @ jac)))
        for k, name in ((1, "alpha_m"), (3, "alpha_l"), (5, "alpha_D")):
            new[name] += abs(fit.params[name] - truth[name]) <= 1.96 * fit.se[name]
            old[name] += abs(fit.params[name] - truth[name]) <= 1.96 * least_squares[k]
    for name in new:
        yield (f"| Huber scaling-law fit, {name}, {m.size} points ({draws} draws) | sandwich SE | "
               f"{new[name] / draws:.3f} | least-squares SE: {old[name] / draws:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"resflow {resflow.__version__}, seed {args.seed}; three binomial standard errors at 95%: "
          f"{3 * math.sqrt(0.95 * 0.05 / args.draws):.3f} at {args.draws} draws, "
          f"{3 * math.sqrt(0.95 * 0.05 / (args.draws // 5)):.3f} at {args.draws // 5}")
    print("| interval | estimator | coverage of 95% | replaced estimator |")
    print("|---|---|---|---|")
    for rows in (replicate_rows(args.draws, rng), batches_rows(args.draws // 4, rng),
                 bootstrap_rows(args.draws * 4, rng), huber_rows(args.draws // 5, rng)):
        for row in rows:
            print(row, flush=True)


if __name__ == "__main__":
    main()
