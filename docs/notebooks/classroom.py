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
# # How residual networks use depth — a lesson in seven pictures
#
# A residual network updates its hidden state layer by layer, `h_{l+1} = h_l + f_l(h_l)`.
# Two readings of that line predict different returns on depth:
#
# * **a discretised flow** (an ODE solver): the layers are small steps along one smooth vector
#   field; more layers mean smaller steps and the error falls fast — as ℓ⁻² or ℓ⁻³ for Euler steps;
# * **an ensemble**: the layers are many noisy, roughly independent contributions; more layers
#   average the noise and the error falls only as 1/ℓ.
#
# Each picture below is one call to `resflow.demos` and takes seconds.

# %%
import resflow
import resflow.demos as demos

list(demos.DEMOS)

# %% [markdown]
# ## 1. A residual stack is an ODE solver
# With tied weights the stack is Euler's method (or midpoint, or RK4) on one vector field: the
# error against the exact solution falls as depth⁻ᵖ for a method of order p.

# %%
demos.stack_to_ode()

# %% [markdown]
# ## 2. Local errors add up coherently or not
# Each layer makes a local error of size ℓ⁻². If the errors point the same way (a smooth target)
# they add to ℓ⁻¹ (loss ℓ⁻²); in random directions they partly cancel (loss ℓ⁻³).

# %%
demos.error_accumulation()

# %% [markdown]
# ## 3. Averaging noisy layers
# Independent noisy layers average as 1/ℓ; correlated ones stop improving at a plateau ρ.

# %%
demos.ensemble_averaging()

# %% [markdown]
# ## 4. Telling the readings apart from the inside
# Smooth teachers take aligned steps (small angles between successive updates); rough teachers
# take near-orthogonal steps.

# %%
demos.teacher_angles()

# %% [markdown]
# ## 5. Training students on smooth and rough teachers
# A seconds-long version of the main experiment: the smooth teacher's loss falls faster with depth.

# %%
demos.smooth_vs_rough()

# %% [markdown]
# ## 6. The roughness knob
# Between the two readings: the correlation ρ between layers' errors moves the exponent from the
# ensemble's to the flow's, beyond a crossover depth ℓ* = (1 − ρ)/ρ.

# %%
demos.roughness_knob()

# %% [markdown]
# ## 7. Trained language models
# The depth term of a scaling law fitted on the Chinchilla models (needs the table; resflow does
# not ship it — set `RESFLOW_DATA_DIR`).

# %%
result = None
try:
    result = demos.llm_depth_fit()
except resflow.ConfigError as exc:
    print(exc)
result
