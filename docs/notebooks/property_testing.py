# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Property-testing the theory with hypothesis
#
# The laws in `resflow theory` are derived symbolically (sympy) and evaluated from the
# derivations.  A property test states what must hold for *every* parameter value and lets
# hypothesis search for a counterexample.  Three examples, from exact to statistical.

# %%
import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import resflow
from resflow import laws

# %% [markdown]
# **1. An exact identity.** The ensemble law evaluated from its derivation equals the closed form
# σ²(ρ + (1 − ρ)/L) and the ensemble's exact MSE, for any L, σ, ρ.

# %%
@settings(max_examples=50, deadline=None)
@given(L=st.integers(1, 500), sigma=st.floats(0.01, 10), rho=st.floats(0, 1))
def ensemble_law_is_exact(L, sigma, rho):
    law = laws.evaluate("ensemble-equicorrelated", L=L, sigma=sigma, rho=rho)
    assert math.isclose(law, sigma**2 * (rho + (1 - rho) / L), rel_tol=1e-12)
    assert math.isclose(resflow.NoisyEnsemble(L, sigma, resflow.Equicorrelated(rho)).exact_mse(), law, rel_tol=1e-12)


ensemble_law_is_exact()
print("exact identity: passed")

# %% [markdown]
# **2. A statistical property, with a tolerance from the sample size.** The mean square of N
# Gaussian draws has relative standard error √(2/N); five of them make a false alarm about one
# in a million per example.

# %%
N = 20_000
TOLERANCE = 5 * math.sqrt(2 / N)


@settings(max_examples=20, deadline=None)
@given(L=st.integers(1, 64), rho=st.floats(0, 1), seed=st.integers(0, 2**31 - 1))
def simulated_ensemble_matches_the_law(L, rho, seed):
    ensemble = resflow.NoisyEnsemble(L, 1.0, resflow.Equicorrelated(rho))
    mse = float(ensemble(torch.zeros(N, dtype=torch.float64), seed=seed).square().mean())
    assert abs(mse / ensemble.exact_mse() - 1) <= TOLERANCE


simulated_ensemble_matches_the_law()
print(f"Monte Carlo within {TOLERANCE:.1%}: passed")

# %% [markdown]
# **3. A property that fails** — and hypothesis finds the smallest counterexample.  "Correlated
# errors always accumulate at least as fast as ℓ⁻²" is false: at ρ = 0 they go as ℓ⁻³.

# %%
@settings(max_examples=50, deadline=None, database=None)
@given(rho=st.floats(0, 1))
def exponent_is_at_most_two(rho):
    assert laws.exponent("accumulation-equicorrelated", ell=16.0, q=2.0, rho=rho) <= 2.0 + 1e-9


try:
    exponent_is_at_most_two()
except AssertionError:
    print("hypothesis found a counterexample (rho near 0: the incoherent law, exponent 3)")

# %% [markdown]
# The local exponent against ρ, from the derivation:

# %%
from resflow.analysis import new_figure

rho = np.linspace(0, 1, 101)
fig, (ax,) = new_figure(1, figsize=(5, 3.5))
ax.plot(rho, laws.exponent("accumulation-equicorrelated", ell=16.0, q=2.0, rho=rho))
ax.set(xlabel="rho", ylabel="local exponent at l = 16", title="from incoherent (3) to coherent (2)")
fig
