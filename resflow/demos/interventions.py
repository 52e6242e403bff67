"""Demo of interventions across depth: what lesioning one layer does to a smooth flow and to an ensemble."""

from __future__ import annotations

import time

import numpy as np
import torch
import xarray as xr

from .._validate import check_int
from ..analysis import Mentions, lesion, new_figure
from ..dynamics import rmsnorm
from ..loglog import slopes
from ..training import Teacher
from .core import DemoResult, finish, register

__all__ = ["lesion_profiles"]


@register
def lesion_profiles(seed: int = 0, *, width: int = 16, batch: int = 256,
                    depths: tuple[int, ...] = (8, 16, 32, 64)) -> DemoResult:
    """(h) Skip one layer of a tied (smooth flow) and an independent (ensemble-like) teacher, each with the
    steps of a flow on [0, 1] (branch scale 1/depth).

    Left: the damage against l/depth (solid: skipped; dashed: the other layers lengthened by
    depth/(depth - 1)).  Right: the mean damage against depth.  Skipping costs about depth^-2 in both;
    rescaling repairs the smooth flow (depth^-4: every layer does what the average one does) and not the
    ensemble (depth^-2: the layer's own noise is lost) -- ``resflow theory lesion-rescaled-ensemble``,
    ``lesion-rescaled-flow``.
    """
    started = time.perf_counter()
    seed, width, batch = (check_int(n, v, minimum=1 if n != "seed" else 0)
                          for n, v in (("seed", seed), ("width", width), ("batch", batch)))
    specs = ("tied", "independent")
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, width, generator=gen)
    profiles = {spec: {} for spec in specs}
    for spec in specs:
        for depth in depths:
            teacher = Teacher(spec, width=width, depth=depth, branch_scale=1.0 / depth, seed=seed)
            steps = teacher.stack.layer_steps()
            profiles[spec][depth] = (lesion(steps, rmsnorm(x), readout=rmsnorm).value,
                                     lesion(steps, rmsnorm(x), rescale=True, readout=rmsnorm).value)
    deepest = depths[-1]
    data = xr.Dataset(
        {"lesion": (("teacher", "depth"), [[profiles[s][d][0].mean() for d in depths] for s in specs],
                    {"long_name": "mean damage of skipping one layer", "units": "1"}),
         "lesion_rescaled": (("teacher", "depth"),
                             [[profiles[s][d][1].mean() for d in depths] for s in specs],
                             {"long_name": "mean damage, the other layers lengthened by depth/(depth - 1)",
                              "units": "1"}),
         "profile": (("teacher", "kind", "layer"), [[profiles[s][deepest][k] for k in (0, 1)] for s in specs],
                     {"long_name": f"damage per skipped layer at depth {deepest}", "units": "1"})},
        coords={"teacher": list(specs),
                "depth": ("depth", list(depths), {"long_name": "depth", "units": "layers"}),
                "kind": ["skipped", "rescaled"], "layer": np.arange(deepest)})
    fig, (left, right) = new_figure(2, figsize=(10, 4.2))
    mentions, right_mentions = Mentions(), Mentions()  # one per legend
    for color, spec in zip(("C0", "C3"), specs, strict=True):
        position = np.arange(deepest) / deepest
        left.semilogy(position, profiles[spec][deepest][0], "-", color=color,
                      label=f"{mentions(spec)}: skipped")
        left.semilogy(position, profiles[spec][deepest][1], "--", color=color,
                      label=f"{mentions(spec)}: rescaled")
        for name, style in (("lesion", "o-"), ("lesion_rescaled", "s--")):
            values = data[name].sel(teacher=spec).values
            right.loglog(depths, values, style, color=color, ms=4,
                         label=f"{right_mentions(spec)}, {'rescaled' if 'rescaled' in name else 'skipped'}: "
                               f"damage ∝ depth^-{slopes(np.array(depths, float), values):.1f}")
    left.set(xlabel="position of the skipped layer l/depth", ylabel="damage", title=f"depth {deepest}")
    right.set(xlabel="depth", ylabel="mean damage", title="against depth")
    left.legend(fontsize=7)
    right.legend(fontsize=7)
    return finish("lesion_profiles",
                  "Skipping a layer: a smooth flow is repaired by rescaling, an ensemble is not",
                  fig, data, started, {"width": width, "batch": batch, "depths": list(depths)}, seed)
