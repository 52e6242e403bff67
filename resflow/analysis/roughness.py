"""The roughness law's prediction for a run of correlated and fractional teachers.

``resflow theory roughness-correlated`` / ``roughness-fractional`` need two amplitudes and the
procedural exponent; they are taken from the two extreme teachers of the same run --
``correlated:1`` (tied: :math:`A_s \\ell^{-\\alpha_s}`) and ``correlated:0`` (independent: gives
:math:`A_r`) -- and every other teacher is then predicted with no further fitting.
"""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from .. import laws
from ..loglog import power_law_fit
from .plots import full_length

__all__ = ["roughness_predictions"]


def roughness_predictions(ds: xr.Dataset) -> dict[str, np.ndarray]:
    """Predicted final loss vs depth for every target of a run (empty if an extreme is missing)."""
    targets = [str(t) for t in ds["target"].values]
    if "correlated:0" not in targets or "correlated:1" not in targets:
        return {}
    final = full_length(ds)["final_loss"].isel(scheme=0).mean("replicate")
    depth = final["depth"].values.astype(float)
    teacher_depth = float(json.loads(ds.attrs["config"])["teacher_depth"])
    smooth = power_law_fit(depth, final.sel(target="correlated:1").values)
    alpha_s, a_s = smooth.exponent, smooth.prefactor
    rough = final.sel(target="correlated:0").values
    share = (1 - depth / teacher_depth) / depth
    a_r = float(np.sum(share * (rough - a_s * (depth / teacher_depth) * depth ** (-alpha_s))) / np.sum(share**2))
    out = {}
    for target in targets:
        family, _, value = target.partition(":")
        kw = dict(ell=depth, L_T=teacher_depth, A_r=a_r, A_s=a_s, alpha_s=alpha_s)
        if family == "correlated":
            out[target] = laws.evaluate("roughness-correlated", rho=float(value), **kw)
        elif family == "fractional":
            out[target] = laws.evaluate("roughness-fractional", H=float(value), **kw)
    return out
