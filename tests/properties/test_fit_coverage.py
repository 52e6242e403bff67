"""The depth-exponent fit on synthetic power laws: it recovers the planted exponent, and its 95%
interval (Student-t over replicates) covers the truth at close to the nominal rate.

Each draw is an experiment of R replicates: replicate r's loss at depth l is
``A_r l^-alpha exp(eta_rl)`` with a replicate-level amplitude ``A_r`` (its own teacher) and
independent log-normal noise ``eta`` (evaluation noise), which is the model the interval assumes.
"""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from resflow.fitting.intervals import exponent_interval

from .strategies import examples, seeds

DRAWS = 400  # experiments per example; coverage is a binomial proportion over them
Z = 4.0  # a false alarm per example ~6e-5


@settings(max_examples=examples(12))
@given(alpha=st.floats(0.3, 3.5), sigma=st.floats(0.005, 0.3), replicates=st.integers(2, 8),
       depths=st.sampled_from([(2, 4, 8, 16), (3, 6, 12, 24, 48), (1, 2, 3, 4, 6, 8)]), seed=seeds)
def test_interval_covers_the_planted_exponent_at_the_nominal_rate(alpha, sigma, replicates, depths, seed):
    rng = np.random.default_rng(seed)
    ell = np.asarray(depths, float)
    covered, estimates = 0, []
    for _ in range(DRAWS):
        amplitude = np.exp(rng.normal(0.0, 0.5, replicates))
        noise = rng.normal(0.0, sigma, (ell.size, replicates))
        losses = amplitude[None, :] * ell[:, None] ** -alpha * np.exp(noise)
        interval = exponent_interval(ell, losses[:, :, None], samples=20, seed=0)
        covered += interval.low <= alpha <= interval.high
        estimates.append(interval.value)
    rate = covered / DRAWS
    assert abs(rate - 0.95) <= Z * math.sqrt(0.95 * 0.05 / DRAWS), (rate, alpha, sigma, replicates)
    # recovery: the noise has the same law at every depth, so the log of the replicate-mean curve is
    # -alpha log l plus a depth-independent mean and the slope is unbiased: the mean estimate is
    # within Z of its standard errors of the truth
    estimates = np.asarray(estimates)
    assert abs(estimates.mean() - alpha) <= Z * estimates.std(ddof=1) / math.sqrt(DRAWS)
