"""What is measured of each trained ladder model on the validation windows: the probes of its residual
stream, and the loss change when a layer is skipped (lesion) or two neighbours run in the other order
(swap)."""

from __future__ import annotations

from typing import Any

import torch

from ...probing.probes import probe_states
from ..probes.interventions import _hooks, _replace_output
from .model import decoder_layers, residual_stream
from .training import validation_losses

__all__ = ["PROBE_METRICS", "measure_model"]

PROBE_METRICS = ("step_angle", "update_angle", "norm", "update_norm")


@torch.no_grad()
def measure_model(model, windows: torch.Tensor, *, name: str = "model", seed: int = 0) -> dict[str, Any]:
    """Probes of the residual stream and lesion/swap loss changes of ``model`` on ``windows``
    ``(n, T + 1)``."""
    model.eval()
    device = next(model.parameters()).device
    windows = windows.to(device)
    depth = len(decoder_layers(model))

    def loss() -> float:
        return float(validation_losses(model, windows, 1)[0])

    clean = loss()
    layers = decoder_layers(model)

    def skip(module, args, kwargs, output):
        return _replace_output(output, args[0] if args else kwargs["hidden_states"])

    lesion = []
    for layer in layers:
        with _hooks([layer.register_forward_hook(skip, with_kwargs=True)]):
            lesion.append(loss() - clean)
    swap = []
    for k in range(depth - 1):
        layers[k], layers[k + 1] = layers[k + 1], layers[k]
        try:
            swap.append(loss() - clean)
        finally:
            layers[k], layers[k + 1] = layers[k + 1], layers[k]
    probe = {m: [float("nan")] * (depth + 1) for m in PROBE_METRICS}
    early = angle_early = float("nan")
    if depth >= 2:  # the probe metrics need two updates at least
        states = residual_stream(model, windows[:, :-1]).float().cpu()
        result = probe_states([states.flatten(1, 2)], name, kind="lm", seed=seed)
        probe = {m: [float(v) for v in result.mean[m]] for m in PROBE_METRICS}
        early, angle_early = result.early_stop_fraction, result.angle_early_stop_fraction
    return {"probe": probe, "early_stop_fraction": float(early),
            "angle_early_stop_fraction": float(angle_early),
            "clean_loss": clean, "lesion": lesion, "swap": swap}
