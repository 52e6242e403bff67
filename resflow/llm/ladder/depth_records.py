"""How the ladder's models use their depth, in the ``lm-ladder`` record and its tables.

The measures are :mod:`resflow.llm.ladder.depth_use`'s: the logit lens per state, the pruning curve without
and with healing, and the R² of linear maps from the depth-ℓ model's states to the depth-2ℓ model's.
A record written before they existed has none of these variables, and its tables say so.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from .depth_use import removable_share

__all__ = ["depth_use_variables", "depth_use_tables", "TOLERANCES"]

TOLERANCES = (0.05, 0.2)  # loss increases (nats) at which the removable share of layers is read


def depth_use_variables(trained, widths: list[int], depths: list[int], seeds: list[int],
                        n_layers: int) -> dict:
    """The record's depth-use variables (dims as in :func:`resflow.llm.ladder.records.ladder_dataset`);
    empty when the ladder was not measured."""
    use = trained.depth_use
    if not use or not use.get("models"):
        return {}
    shape = (len(widths), len(depths), len(seeds))
    lens = np.full((*shape, n_layers), np.nan)
    prune = {k: np.full((*shape, n_layers - 1), np.nan) for k in ("prune_loss", "healed_loss", "prune_start")}
    r2 = np.full((*shape, n_layers, n_layers), np.nan)
    from .train import model_name

    for (w, d, s) in ((w, d, s) for w in widths for d in depths for s in seeds):
        one = use["models"].get(model_name(w, d, s))
        if one is None:
            continue
        at = (widths.index(w), depths.index(d), seeds.index(s))
        lens[at][: d + 1] = one["logit_lens"]
        for key in prune:
            values = one[key]
            prune[key][at][: len(values)] = values
        pair = use["pairs"].get((w, d, s))
        if pair is not None:
            pair = np.asarray(pair, float)
            r2[at][: pair.shape[0], : pair.shape[1]] = pair
    seen = {k: np.full(shape, np.nan) for k in ("seen_loss", "unseen_loss", "seen_share")}
    for (w, d, s) in ((w, d, s) for w in widths for d in depths for s in seeds):
        one = use["models"].get(model_name(w, d, s), {})
        for key in seen:
            seen[key][widths.index(w), depths.index(d), seeds.index(s)] = one.get(key, np.nan)
    dims = ("width", "depth", "seed")
    heal = int(trained.config.heal_steps)
    split = {} if np.isnan(seen["seen_share"]).all() else {
        "seen_loss": (dims, seen["seen_loss"], {
            "long_name": "loss on training-text tokens the model was trained to predict", "units": "nat"}),
        "unseen_loss": (dims, seen["unseen_loss"], {
            "long_name": "loss on training-text tokens it never saw as a target", "units": "nat"}),
        "seen_share": (dims, seen["seen_share"], {
            "long_name": "share of the measured training-text tokens seen as a target", "units": "1"})}
    return {
        "logit_lens": ((*dims, "layer"), lens, {
            "long_name": "validation loss of the state h_l read through the final norm and head",
            "units": "nat"}),
        "prune_loss": ((*dims, "removed"), prune["prune_loss"], {
            "long_name": "validation loss with the block of n layers closest in angle removed",
            "units": "nat"}),
        "healed_loss": ((*dims, "removed"), prune["healed_loss"], {
            "long_name": f"validation loss after removing n layers and {heal} healing steps (n = 0: the "
                         "unpruned model after the same fine-tune)", "units": "nat"}),
        "prune_start": ((*dims, "removed"), prune["prune_start"], {
            "long_name": "first layer of the removed block", "units": "1"}),
        "cross_depth_r2": ((*dims, "layer", "deep_layer"), r2, {
            "long_name": "R² of a linear map from state h_i of this model to state h_j of the model of twice "
                         "its depth (same width and seed), held-out tokens", "units": "1"}),
        **split,
    }


def _cell(value: float, digits: int = 3) -> str:
    return "–" if not math.isfinite(value) else f"{value:.{digits}f}"


def _lens_lines(ds: xr.Dataset, depths: list[int]) -> list[str]:
    lines = ["", "Logit lens: the loss of the state h_l read through the model's final norm and head "
             "(nats, mean "
             "over seeds), at relative depth l/ℓ = 0, ½ (interpolated), 1, and the share of the whole fall "
             "from h_0 to h_ℓ made by the first half of the layers:", "",
             "| width | ℓ | h_0 | h_ℓ/2 | h_ℓ | share by half depth |", "|---|---|---|---|---|---|"]
    for w in ds["width"].values:
        for d in depths:
            lens = ds["logit_lens"].sel(width=w, depth=d).mean("seed").values[: d + 1]
            mid = float(np.interp(0.5, np.arange(d + 1) / d, lens))
            share = (lens[0] - mid) / (lens[0] - lens[-1]) if lens[0] != lens[-1] else math.nan
            lines.append(f"| {int(w)} | {d} | {_cell(lens[0])} | {_cell(mid)} | {_cell(lens[-1])} | "
                         f"{_cell(share, 2)} |")
    return lines


def _prune_lines(ds: xr.Dataset, depths: list[int]) -> list[str]:
    heal = "healed" if np.isfinite(ds["healed_loss"].values).any() else None
    head = " | ".join(f"share ≤ {t:g} nats" + (" (healed)" if h else "")
                      for t in TOLERANCES for h in ([False, True] if heal else [False]))
    lines = ["", "Block pruning (the block of n layers whose input and output are closest in angle): the "
             "largest share n/ℓ of layers removable for a loss increase within each tolerance, mean over "
             "seeds; healed: "
             "after the healing fine-tune, against the unpruned model given the same fine-tune; and the loss "
             "increase for removing half the layers (nats):", "",
             f"| width | ℓ | {head} | half removed | half removed, healed | fine-tune alone |",
             "|---|---|" + "---|" * (len(head.split(" | ")) + 3)]
    for w in ds["width"].values:
        for d in depths:
            one = ds.sel(width=w, depth=d)
            cells = []
            for t in TOLERANCES:
                for key in (["prune_loss", "healed_loss"] if heal else ["prune_loss"]):
                    shares = [removable_share(one[key].sel(seed=s).values[:d], d, t)
                              for s in one["seed"].values]
                    cells.append(_cell(float(np.mean(shares)), 2))
            half = d // 2
            clean = one["prune_loss"].values[:, 0]
            raw = float(np.mean(one["prune_loss"].values[:, half] - clean))
            healed = float(np.mean(one["healed_loss"].values[:, half] - one["healed_loss"].values[:, 0]))
            control = float(np.mean(one["healed_loss"].values[:, 0] - clean))
            lines.append(f"| {int(w)} | {d} | " + " | ".join(cells) + f" | {_cell(raw)} | {_cell(healed)} | "
                         f"{_cell(control, 4)} |")
    return lines


def _map_lines(ds: xr.Dataset, depths: list[int]) -> list[str]:
    lines = ["", "Maps across depth (Csordás et al. 2025): for each state h_j of the depth-2ℓ model, the "
             "state h_i of "
             "the depth-ℓ model (same width and seed) whose linear map predicts it best (held-out R²), as "
             "relative depths j/2ℓ → i*/ℓ, per seed; the mean distance |i*/ℓ − j/2ℓ| (0: states at one "
             "relative depth map to each other, the deeper model spreading the same computation over more "
             "layers) beside "
             "its value for a best state drawn at random (chance):", "",
             "| width | ℓ → 2ℓ | seed | j/2ℓ → i*/ℓ | mean distance | chance | mean best R² |",
             "|---|---|---|---|---|---|---|"]
    for w in ds["width"].values:
        for d in depths:
            if 2 * d not in depths:
                continue
            for s in ds["seed"].values:
                r2 = ds["cross_depth_r2"].sel(width=w, depth=d, seed=s).values[: d + 1, : 2 * d + 1]
                if not np.isfinite(r2).any():
                    continue
                best = np.nanargmax(r2, axis=0)  # per deep state j: the shallow state that predicts it best
                deep = np.arange(2 * d + 1) / (2 * d)
                pairs = ", ".join(f"{x:.2f}→{i / d:.2f}" for x, i in zip(deep, best, strict=True))
                distance = float(np.mean(np.abs(best / d - deep)))
                chance = float(np.mean(np.abs(np.arange(d + 1)[:, None] / d - deep[None, :])))
                lines.append(f"| {int(w)} | {d} → {2 * d} | {int(s)} | {pairs} | {distance:.3f} | "
                             f"{chance:.3f} | "
                             f"{float(np.nanmax(r2, axis=0).mean()):.3f} |")
    return lines


def _seen_lines(ds: xr.Dataset, depths: list[int]) -> list[str]:
    if "seen_loss" not in ds:
        return []
    lines = ["", "Memorising or file shift: the loss on tokens of the training text the model was trained to "
             "predict (seen) and on those it never saw as a target (unseen; its data order replayed), beside "
             "the validation loss (mean over seeds, nats): unseen − seen is memorising, validation − unseen "
             "the shift from the training files to the held-out ones:", "",
             "| width | ℓ | seen share | seen | unseen | validation | memorising | file shift |",
             "|---|---|---|---|---|---|---|---|"]
    val = ds["val_loss"].sel(length=1.0).mean(("seed", "batch"))
    for w in ds["width"].values:
        for d in depths:
            one = ds.sel(width=w, depth=d).mean("seed")
            seen, unseen = float(one["seen_loss"]), float(one["unseen_loss"])
            v = float(val.sel(width=w, depth=d))
            lines.append(f"| {int(w)} | {d} | {_cell(float(one['seen_share']), 2)} | {_cell(seen)} | "
                         f"{_cell(unseen)} | {_cell(v)} | {_cell(unseen - seen, 4)} | "
                         f"{_cell(v - unseen, 4)} |")
    return lines


def depth_use_tables(ds: xr.Dataset) -> list[str]:
    """Markdown lines: the logit lens, the pruning shares and the maps across depth (module docstring)."""
    if "logit_lens" not in ds:
        return ["", "The models of this record were not measured for depth use (logit lens, block pruning, "
                "maps across depth): it was written before resflow measured them."]
    depths = [int(d) for d in ds["depth"].values]
    return (_seen_lines(ds, depths) + _lens_lines(ds, depths) + _prune_lines(ds, depths)
            + _map_lines(ds, depths))
