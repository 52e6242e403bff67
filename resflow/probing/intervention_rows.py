"""Interventions read back from records, in numbers comparable across toys and transformers.

:func:`intervention_exponents`: how a toy run's lesion, rescaled lesion and swap damage scale with depth (with
intervals over replicates); :class:`InterventionRow` (:func:`intervention_row`, :func:`intervention_rows`):
one stack's interventions as scale-free numbers, from an ``intervention`` record, a ``toy-run`` record or
the language-model ladder's.  The interventions themselves are :mod:`resflow.probing.interventions`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..labels import teacher_label

__all__ = ["intervention_exponents", "InterventionRow", "intervention_row", "intervention_rows"]


def _plain_full_length(ds):
    """A toy run's plain students of its first scheme and temperature, trained the whole run (the best start
    of each cell)."""
    from ..records import best_start

    one = best_start(ds)
    return one.sel(length=one["length"].max(), student_groups=0).isel(scheme=0, temperature=0)


def intervention_exponents(ds, target: str, *, confidence: float = 0.95) -> dict:
    """How the interventions on one target's trained students (full length, first scheme and temperature,
    plain students, every replicate) scale with depth: intervals over replicates
    (:func:`resflow.fitting.intervals.over_replicates`) of the exponents of the layer-mean damage,
    :math:`D \\propto \\ell^{-\\alpha}`, of ``lesion``, ``lesion_rescaled`` and ``swap``, and ``repair``: the
    rescaled over the plain lesion damage at the deepest depth (ensemble: the noise share of a layer's update,
    of order 1; a smooth flow: near 0).  Depths below 2 are left out (no rescaling, no swap)."""
    from ..fitting.intervals import over_replicates
    from ..loglog import slopes

    one = _plain_full_length(ds).sel(target=target)
    one = one.sel(depth=[d for d in one["depth"].values if d >= 2])
    depths = np.asarray(one["depth"].values, float)
    names = ("lesion", "lesion_rescaled", "swap")
    means = np.stack([one[name].mean("layer", skipna=True).transpose("replicate", "depth").values
                      for name in names], axis=-1)[..., None]  # (replicate, depth, 3, 1)

    def exponent(column):
        return lambda r: float(slopes(depths, r[:, column, 0])) if np.all(r[:, column, 0] > 0) else np.nan

    out = {name: over_replicates(exponent(k), means, confidence=confidence) for k, name in enumerate(names)}
    out["repair"] = over_replicates(lambda r: float(r[-1, 1, 0] / r[-1, 0, 0]), means, confidence=confidence)
    return out


@dataclass(frozen=True)
class InterventionRow:
    """One stack's interventions in scale-free numbers, comparable across toys and transformers: the mean
    lesion damage (a causal LM: the target probability lost), its profile's max over mean (1: every layer
    alike), the swap over the lesion damage, and the rescaled over the plain lesion damage (toys)."""

    source: str  # "toy run" or "model"
    name: str
    depth: int
    measure: str
    lesion_mean: float
    flatness: float
    swap_share: float
    repair: float
    record: str

    def to_json(self) -> dict:
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                for k, v in self.__dict__.items()}


def intervention_row(source, name, depth, measure, lesion_values, swap_values, rescaled_values, record
                     ) -> InterventionRow:
    """The :class:`InterventionRow` of one stack from its per-layer lesion, swap and rescaled-lesion values
    (``swap_values``, ``rescaled_values`` None where not measured)."""
    lost = np.asarray(lesion_values, float)
    mean = float(np.nanmean(lost)) if np.isfinite(lost).any() else float("nan")
    swap_mean = (float(np.nanmean(swap_values)) if swap_values is not None and np.isfinite(swap_values).any()
                 else float("nan"))
    rescaled = float(np.nanmean(rescaled_values)) if rescaled_values is not None else float("nan")
    with np.errstate(invalid="ignore", divide="ignore"):
        return InterventionRow(source, name, int(depth), measure, mean,
                               float(np.nanmax(np.abs(lost)) / abs(mean)),
                               swap_mean / mean, rescaled / mean, record)


def intervention_rows(ds, record: str) -> list[InterventionRow]:
    """The :class:`InterventionRow` of an ``intervention`` record, or one per target of a ``toy-run`` record
    with intervention profiles (its deepest students: full length, plain, first scheme, replicate means)."""
    if "replicate" not in ds.dims:  # an intervention record
        lesion_values, swap_values = ds["lesion"].values if "lesion" in ds else [np.nan], \
            ds["swap"].values if "swap" in ds else None
        if ds.attrs.get("measure") == "probability":
            clean = float(ds.attrs.get("clean", "nan"))
            lesion_values = clean - np.asarray(lesion_values, float)
            swap_values = None if swap_values is None else clean - np.asarray(swap_values, float)
        rescaled = ds["lesion_rescaled"].values if "lesion_rescaled" in ds else None
        return [intervention_row("model", ds.attrs.get("model", record),
                                 int(ds.attrs.get("depth", ds.sizes["layer"])),
                                 ds.attrs.get("measure", "damage"),
                                 lesion_values, swap_values, rescaled, record)]
    if "lesion" not in ds:
        return []
    one = _plain_full_length(ds)
    deepest = int(one["depth"].max())
    one = one.sel(depth=deepest).mean("replicate")
    return [intervention_row("toy run", f"{teacher_label(target)} student", deepest, "damage",
                             one["lesion"].sel(target=target).values, one["swap"].sel(target=target).values,
                             one["lesion_rescaled"].sel(target=target).values, record)
            for target in one["target"].values]
