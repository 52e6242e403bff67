r"""What a run of students on Random Hierarchy Model data says about depth: the depth at which the loss drops.

For each target ``rhm:L`` (hierarchy depth :math:`L_h`) and replicate (its own grammar), the **drop
depth** is the smallest student depth :math:`\ell` whose test loss (full training length) is below
:data:`DROP_FRACTION` of the loss of a uniform guess, :math:`\ln n_c`: the depth from which a student
has learnt at least half of what a guess lacks.  It is a threshold on an absolute scale (the same for
every grammar of ``n_c`` classes), not on the run's own range, so a run in which nothing is learnt
says so: the depth is then *censored*, above the deepest student (``inf``).

:func:`hierarchy_table` gathers, per target, the losses and accuracies against depth, the drop depth
of every replicate and the early-exit numbers of the deepest students, as a Dataset.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from .._specs import is_class_target, parse_rhm_spec
from ..errors import ConfigError
from ..records import best_start

__all__ = ["DROP_FRACTION", "drop_depth", "hierarchy_table"]

DROP_FRACTION = 0.5  # the loss has dropped below this fraction of ln(n_classes)


def drop_depth(depths, losses, classes: int) -> float:
    """The smallest of ``depths`` whose loss is below ``DROP_FRACTION * ln(classes)``; ``inf`` if none is
    (censored: beyond the deepest student); NaN if a loss is not finite."""
    losses = np.asarray(losses, float)
    if not np.all(np.isfinite(losses)):
        return math.nan
    below = [d for d, y in zip(depths, losses, strict=True) if y < DROP_FRACTION * math.log(classes)]
    return float(min(below)) if below else math.inf


def hierarchy_table(ds: xr.Dataset) -> xr.Dataset:
    """Per target of a run on ``rhm:L`` targets (plain students -- or a run's only structure --, first scheme,
    full length): ``loss`` and ``accuracy`` (depth, replicate), ``drop_depth`` (replicate),
    ``hierarchy_depth``, ``classes``, and the deepest students' ``exit_early_fraction`` and ``exit_depth``
    (replicate)."""
    targets = [str(t) for t in ds["target"].values]
    if not targets or not all(is_class_target(t) for t in targets):
        raise ConfigError(f"hierarchy_table reads runs on rhm:L targets; this run has targets {targets}.")
    ds = best_start(ds)
    groups = [int(g) for g in ds["student_groups"].values]
    structure = 0 if 0 in groups else groups[0]  # plain students, or a run of structured ones only
    full = ds.sel(length=ds["length"].max(), student_groups=structure).isel(scheme=0, temperature=0)
    depths = [int(d) for d in full["depth"].values]
    out = []
    for target in targets:
        one = full.sel(target=target)
        grammar = parse_rhm_spec(target)
        loss = one["final_loss"].transpose("depth", "replicate")
        drops = [drop_depth(depths, loss.sel(replicate=r).values, grammar["classes"])
                 for r in one["replicate"].values]
        deepest = one.sel(depth=max(depths))
        out.append(xr.Dataset({
            "loss": loss, "accuracy": one["test_accuracy"].transpose("depth", "replicate"),
            "drop_depth": (("replicate",), drops,
                           {"long_name": f"smallest depth with loss < {DROP_FRACTION} ln n_c "
                                         "(inf: not within the run's depths)"}),
            "hierarchy_depth": grammar["depth"], "classes": grammar["classes"],
            "exit_early_fraction": deepest["exit_early_fraction"], "exit_depth": deepest["exit_depth"],
        }).drop_vars([c for c in ("target", "scheme", "student_groups", "temperature", "length")
                      if c in one.coords], errors="ignore"))
    table = xr.concat(out, dim=xr.DataArray(targets, dims="target", name="target"))
    table.attrs = {"store_record": ds.attrs.get("store_record", ""), "drop_fraction": DROP_FRACTION,
                   "scheme": str(ds["scheme"].values[0]), "student_groups": structure}
    return table
