r"""Early exit: at which layer a residual stack's readout of an input is final, input by input.

Every layer's state is read out with the stack's own final readout (one shared head: the "logit
lens" of :mod:`resflow.llm.probes.hf_probe`; per-layer heads are not trained), and an **exit rule** gives each
input the layer :math:`e \in \{0, \dots, \ell\}` from which its readout may be taken:

* ``"confidence"`` (classifiers): the first layer whose top class probability reaches
  :data:`EXIT_CONFIDENCE` (:math:`\ell` if none does) -- the rule of early-exit networks, and
  causal: it needs no later layer;
* ``"settled"`` (any readout, e.g. a regression student's normalised state): the first layer after
  which the readout moves, at every later layer, by at most :data:`EXIT_SETTLED` times its mean
  move per layer along the whole stack -- "its updates stopped", the study's early-stop tokens, read
  from the whole path (not a deployable rule: it looks ahead).

An input whose exit :math:`e \le \ell / 2` **exits early** (the study's early-stop tokens: updates
concentrated in the first half, 0.4% of Pythia-410m's tokens); :func:`exit_summary` gives the
fraction, the mean exit depth :math:`e / \ell` and the share of inputs exiting at every layer.
"""

from __future__ import annotations

import numpy as np
import torch

from .._validate import check_choice, check_real
from ..errors import ConfigError

__all__ = ["EXIT_CONFIDENCE", "EXIT_SETTLED", "EXIT_RULES", "EXIT_LABELS", "exit_layers", "exit_summary"]

EXIT_CONFIDENCE = 0.9  # "confidence": top class probability to reach
EXIT_SETTLED = 0.1  # "settled": later moves below this fraction of the input's mean move per layer
EXIT_RULES = ("confidence", "settled")

EXIT_LABELS = {
    "exit_share": ("share of inputs whose readout exits at this layer (early-exit rule of the run)", "1"),
    "exit_depth": ("mean exit layer over depth, e / l (early-exit rule of the run)", "1"),
    "exit_early_fraction": ("fraction of inputs exiting in the first half of the layers, e <= l/2", "1"),
    "test_accuracy": ("accuracy of the final readout on fresh inputs", "1"),
    "exit_accuracy": ("accuracy of the readout at each input's exit layer, on fresh inputs", "1"),
}


def exit_layers(readouts: torch.Tensor, rule: str, threshold: float | None = None) -> torch.Tensor:
    """Each input's exit layer ``(B,)`` (long) from its readouts at every layer ``(L + 1, B, C)``: class
    probabilities for ``"confidence"``, any readout vectors for ``"settled"`` (module docstring)."""
    check_choice("rule", rule, EXIT_RULES)
    if not isinstance(readouts, torch.Tensor) or readouts.ndim != 3 or readouts.shape[0] < 2:
        raise ConfigError("readouts must be a tensor (layers + 1, inputs, outputs) with at least two layers.")
    depth = readouts.shape[0] - 1
    if rule == "confidence":
        tau = EXIT_CONFIDENCE if threshold is None else check_real("threshold", threshold, low=0.0, high=1.0)
        reached = readouts.max(dim=-1).values >= tau  # (L + 1, B)
        never = torch.full_like(reached[0], depth, dtype=torch.int)
        return torch.where(reached.any(0), reached.int().argmax(0), never).long()
    tau = EXIT_SETTLED if threshold is None else check_real("threshold", threshold, low=0.0)
    moves = (readouts[1:] - readouts[:-1]).square().mean(-1).sqrt()  # (L, B): the move made by layer l + 1
    scale = moves.mean(0)  # the input's mean move per layer
    moving = moves > tau * scale  # (L, B); an input that never moves exits at 0
    # exit after the last layer that still moves the readout: e = 1 + index of the last moving layer (0: none)
    last = depth - moving.flip(0).int().argmax(0)
    return torch.where(moving.any(0), last, torch.zeros_like(last)).long()


def exit_summary(exits: torch.Tensor, depth: int) -> dict[str, np.ndarray | float]:
    """``exit_share`` (depth + 1,) -- the share of inputs exiting at every layer --, ``exit_depth`` (the mean
    of e / depth) and ``exit_early_fraction`` (e <= depth / 2) of exit layers ``exits`` (B,)."""
    exits = exits.detach().cpu().long()
    share = torch.bincount(exits, minlength=depth + 1).double() / len(exits)
    return {"exit_share": share.numpy(), "exit_depth": float(exits.double().mean() / depth),
            "exit_early_fraction": float((2 * exits <= depth).double().mean())}
