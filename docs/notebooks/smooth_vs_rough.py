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
# # Smooth vs rough targets: the main experiment from Python
#
# A researcher's path through resflow: configure the `smooth-vs-rough` experiment, train students
# of several depths against a smooth (tied) and a rough (independent) teacher, fit the depth
# exponents with their intervals and the convergence verdict, and look at the figure.
#
# The `cpu` preset takes about half an hour on two cores; set `RESFLOW_NOTEBOOK_FAST=1` (the test
# suite does) to run a seconds-long version of the same code.

# %%
import os
import tempfile

import resflow

FAST = os.environ.get("RESFLOW_NOTEBOOK_FAST") == "1"
config = resflow.preset("smooth-vs-rough", "cpu")
if FAST:
    config = config.with_overrides(["train.steps=60", "train.eval_every=30", "train.batch=32", "width=4",
                                    "teacher_depth=8", "depths=2,4,8", "replicates=2", "train.eval_batches=2",
                                    "train.eval_batch_size=128", "train.device=cpu"])
print(config.experiment, len(config.student_specs()), "students,", config.train.steps, "steps")

# %% [markdown]
# Every run goes into a **store**: a directory of xarray records (the run, its fits) with their
# provenance.  Here a temporary one.

# %%
store = tempfile.mkdtemp(prefix="resflow-store-")
result = resflow.run_experiment(config, out=store)
result.dataset

# %% [markdown]
# The fits: `exponent` is the mean over replicates of minus their log-log slopes; `law_exponent`
# divides out the finite teacher first; `converged` is the verdict from the students trained a
# quarter, half and all of their steps; `asymptotic_exponent` is the exponent of the losses
# extrapolated along training (an estimate).

# %%
import pandas as pd

pd.DataFrame([f.to_json() for f in result.fits])[
    ["target", "exponent", "ci_low", "ci_high", "law_exponent", "converged", "asymptotic_exponent", "verdict"]]

# %% [markdown]
# The figure is a `matplotlib.figure.Figure`: the last expression of a cell shows it inline.

# %%
from resflow.analysis import plot_experiment

plot_experiment(result.dataset, result.fits)

# %% [markdown]
# The same fits read back from the store (no refitting), ready to compare with theory and LLM fits:

# %%
[(f.target, round(f.exponent, 2)) for run in resflow.fit_store(store) for f in run.fits]
