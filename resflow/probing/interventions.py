r"""Interventions across depth on any residual stack: lesion a layer, swap two, restore a clean state.

A stack is given as its **layer steps**: ``steps[k](h)`` is the state after layer :math:`k` from the
state ``h`` before it (any leading axes), so :math:`h_{k+1} = \mathrm{steps}[k](h_k)`.  Adapters build
them for a trained student (:func:`resflow.training.student_steps`), a teacher or any
:class:`~resflow.ResidualStack` (:meth:`~resflow.ResidualStack.layer_steps`), or plain functions (the
laws' models in ``theory/interventions.py``); transformers go through :mod:`resflow.llm.probes.interventions`.

=============  ===========================================================================
intervention   what the copy of the stack does
=============  ===========================================================================
``lesion``     layer :math:`l` is skipped (:math:`h_{l+1} = h_l`); with ``rescale`` the other
               layers' updates are multiplied by :math:`\ell/(\ell-1)`
``swap``       layers :math:`l` and :math:`l+1` run in the other order
``trace``      the input is corrupted; at layer :math:`l` the clean state (``restore="state"``)
               or the clean update (``restore="update"``) is put back
=============  ===========================================================================

Every copy runs in one batched pass (a leading axis of copies, one per intervened layer), so a profile
over :math:`\ell` layers costs one forward of :math:`\ell` copies, not :math:`\ell` forwards.  The
*damage* is :math:`D_l = \mathrm{mean}\,|r(y'_l) - r(y)|^2` over inputs and coordinates, :math:`r` the
readout (identity, or e.g. ``rmsnorm`` for a student's normalised output); a trace reports the
*recovered share* :math:`1 - |r(y_l^{\mathrm{restored}}) - r(y)|^2 / |r(y^{\mathrm{corrupt}}) - r(y)|^2`.
Deterministic: no randomness beyond the inputs the caller passes.  ``keep_outputs=True`` keeps every
copy's output :math:`y'` (one per intervened layer) in :attr:`InterventionProfile.outputs`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from .._plugins import PluginRegistry
from .._validate import check_choice
from ..errors import ConfigError, ShapeError

__all__ = ["Step", "InterventionProfile", "run_steps", "lesion", "swap", "trace",
           "intervention_dataset", "stack_profiles", "PROFILE_LABELS", "StackIntervention",
           "STACK_INTERVENTIONS", "register_intervention"]

Step = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class InterventionProfile:
    """One intervention's effect, layer by layer (``layer`` = :math:`l`, ``position`` = :math:`l/\\ell`)."""

    intervention: str  # a key of PROFILE_LABELS: lesion, lesion_rescaled, swap, trace
    depth: int
    layer: np.ndarray  # (n,) int
    value: np.ndarray  # (n,) damage D_l (lesion, swap) or recovered share (trace)
    quantity: str  # "damage" or "recovered share"
    attrs: dict[str, str] = field(default_factory=dict)
    # (n, ...) with keep_outputs
    outputs: torch.Tensor | None = field(default=None, repr=False, compare=False)

    @property
    def position(self) -> np.ndarray:
        """:math:`l/\\ell`, the layer index normalised by the depth (the study's Fig. 6 axis)."""
        return self.layer / self.depth


def _check(steps: Sequence[Step], h0: torch.Tensor, minimum: int = 1) -> list[Step]:
    steps = list(steps)
    if len(steps) < minimum:
        raise ConfigError(f"steps must hold at least {minimum} layer step(s); got {len(steps)}.")
    if not all(callable(s) for s in steps):
        raise ConfigError("steps must be callables h -> next h, one per layer "
                          "(e.g. resflow.training.student_steps).")
    if not isinstance(h0, torch.Tensor) or h0.ndim < 1:
        raise ShapeError("h0 must be a tensor of input states (..., width).")
    return steps


def run_steps(steps: Sequence[Step], h0: torch.Tensor) -> torch.Tensor:
    """The output :math:`h_\\ell` of the stack (no intervention)."""
    h = h0
    for step in steps:
        h = step(h)
    return h


def _damage(y: torch.Tensor, clean: torch.Tensor, readout: Callable) -> np.ndarray:
    """Mean square difference of the readouts over all but the leading (copies) axis."""
    diff = readout(y) - readout(clean)
    return diff.square().flatten(1).mean(1).double().cpu().numpy()


def _identity(h: torch.Tensor) -> torch.Tensor:
    return h


@torch.no_grad()
def lesion(steps: Sequence[Step], h0: torch.Tensor, *, rescale: bool = False, readout: Callable | None = None,
           keep_outputs: bool = False) -> InterventionProfile:
    """Damage of skipping each layer :math:`l = 0..\\ell-1` (with ``rescale``, the other layers' updates
    lengthened by :math:`\\ell/(\\ell - 1)`), all layers in one batched pass."""
    steps = _check(steps, h0, minimum=2 if rescale else 1)
    readout = readout or _identity
    depth = len(steps)
    clean = run_steps(steps, h0)
    h = h0.expand(depth, *h0.shape).clone()  # copy c lesions layer c
    scale = depth / (depth - 1) if rescale else 1.0
    for k, step in enumerate(steps):
        nxt = step(h)
        if rescale:
            nxt = h + scale * (nxt - h)
        nxt[k] = h[k]  # copy k skips layer k
        h = nxt
    return InterventionProfile("lesion_rescaled" if rescale else "lesion", depth, np.arange(depth),
                               _damage(h, clean[None], readout), "damage",
                               outputs=h if keep_outputs else None)


@torch.no_grad()
def swap(steps: Sequence[Step], h0: torch.Tensor, *, readout: Callable | None = None,
         keep_outputs: bool = False) -> InterventionProfile:
    """Damage of running layers :math:`l` and :math:`l+1` in the other order, :math:`l = 0..\\ell-2`."""
    steps = _check(steps, h0, minimum=2)
    readout = readout or _identity
    depth = len(steps)
    clean = run_steps(steps, h0)
    h = h0.expand(depth - 1, *h0.shape).clone()  # copy c swaps layers c and c + 1
    for k, step in enumerate(steps):
        nxt = step(h)
        if k + 1 < depth:  # copy k runs layer k + 1 here ...
            nxt[k] = steps[k + 1](h[k])
        if k >= 1:  # ... and copy k - 1 runs layer k - 1
            nxt[k - 1] = steps[k - 1](h[k - 1])
        h = nxt
    return InterventionProfile("swap", depth, np.arange(depth - 1), _damage(h, clean[None], readout),
                               "damage", outputs=h if keep_outputs else None)


@torch.no_grad()
def trace(steps: Sequence[Step], h0: torch.Tensor, corrupt: torch.Tensor, *, restore: str = "state",
          readout: Callable | None = None, keep_outputs: bool = False) -> InterventionProfile:
    """Recovered share of the clean output when the input ``h0`` is replaced by ``corrupt`` and, at layer
    :math:`l`, the clean state :math:`h_l` (``restore="state"``, :math:`l = 0..\\ell`: restoring
    :math:`h_0` undoes the corruption, so the share is 1 there) or the clean update of layer :math:`l`
    (``restore="update"``, :math:`l = 0..\\ell-1`) is put back."""
    steps = _check(steps, h0)
    check_choice("restore", restore, ("state", "update"))
    if not isinstance(corrupt, torch.Tensor) or corrupt.shape != h0.shape:
        raise ShapeError(f"corrupt must have the shape of h0 {tuple(h0.shape)}; got "
                         f"{tuple(getattr(corrupt, 'shape', ()))}.")
    readout = readout or _identity
    depth = len(steps)
    states = [h0]
    for step in steps:
        states.append(step(states[-1]))
    clean = states[-1]
    broken = _damage(run_steps(steps, corrupt)[None], clean[None], readout)[0]
    copies = depth + 1 if restore == "state" else depth
    h = corrupt.expand(copies, *corrupt.shape).clone()
    if restore == "state":
        h[0] = h0
    for k, step in enumerate(steps):
        nxt = step(h)
        if restore == "state":
            nxt[k + 1] = states[k + 1]
        else:
            nxt[k] = h[k] + (states[k + 1] - states[k])
        h = nxt
    left = _damage(h, clean[None], readout)
    share = 1.0 - left / broken if broken > 0 else np.full(copies, np.nan)
    return InterventionProfile("trace", depth, np.arange(copies), share, "recovered share",
                               {"restore": restore, "corrupted_damage": f"{broken:.6g}"},
                               outputs=h if keep_outputs else None)


def intervention_dataset(*, model: str, measure: str, depth: int, lesion=None, lesion_rescaled=None,
                         swap=None, trace=None, tokens=None, attrs: dict | None = None, **profiles):
    """One ``intervention`` store record: the profiles of one model (toy or transformer, the same schema).

    Dims ``layer`` (:math:`l = 0..\\ell-1`, with coordinate ``position`` = :math:`l/\\ell`) and ``token``
    (the trace's restored positions, with ``token_text``; a toy stack has one, ``x``); variables
    ``lesion``, ``lesion_rescaled``, ``swap`` (NaN at the last layer, which has no successor) and
    ``trace`` (``layer``, ``token``), each present when measured, and any other registered intervention's
    profile (``profiles``, by name: :data:`STACK_INTERVENTIONS`); attrs ``model``, ``measure`` and what the
    caller passes (prompt, target, subject, clean and corrupted measures, provenance).
    """
    import xarray as xr

    units = {"damage": "1", "probability": "1"}[measure]
    what = ("mean square change of the output" if measure == "damage"
            else "probability of the target token after the prompt")
    data = {}
    if unknown := sorted(set(profiles) - set(STACK_INTERVENTIONS)):
        raise ConfigError(f"no registered intervention is called {', '.join(unknown)}; known: "
                          f"{', '.join(STACK_INTERVENTIONS)}.")
    per_layer = {"lesion": lesion, "lesion_rescaled": lesion_rescaled, "swap": swap, **profiles}
    for name, values in per_layer.items():
        long_name = STACK_INTERVENTIONS[name].what
        if values is None:
            continue
        full = np.full(depth, np.nan)
        full[:len(values)] = values
        data[name] = ("layer", full, {"long_name": f"{what}, {long_name}", "units": units})
    coords = {"layer": ("layer", np.arange(depth), {"long_name": "layer index l"}),
              "position": ("layer", np.arange(depth) / depth, {"long_name": "layer index over depth, l/ell",
                                                               "units": "1"})}
    if trace is not None:
        trace = np.asarray(trace, float).reshape(depth, -1)
        tokens = list(tokens) if tokens is not None else ["x"] * trace.shape[1]
        data["trace"] = (("layer", "token"), trace, {
            "long_name": f"{what}, input corrupted, the clean input of layer l at the token restored",
            "units": units})
        coords["token"] = ("token", np.arange(trace.shape[1]), {"long_name": "token position"})
        coords["token_text"] = ("token", [str(t) for t in tokens], {"long_name": "the token"})
    return xr.Dataset(data, coords=coords, attrs={**(attrs or {}), "model": model, "measure": measure,
                                                  "depth": str(depth)})


@dataclass(frozen=True)
class StackIntervention:
    """An intervention every stack's profile includes (:func:`stack_profiles`):
    ``profile(steps, h0, corrupt, readout)`` gives one value per layer it applies to (at most :math:`\\ell`;
    the rest are NaN), ``label`` its long name in a ``toy-run`` record, ``what`` its clause in an
    ``intervention`` record ("layer l skipped"); ``minimum_depth`` the shallowest stack it applies to
    (shallower ones get NaN)."""

    name: str
    label: str
    what: str
    profile: Callable[..., np.ndarray]
    minimum_depth: int = 1


#: the interventions every stack gets, by name (``toy-run`` records hold their profiles per trained student,
#: ``intervention`` records per model); :func:`register_intervention` adds one
STACK_INTERVENTIONS: PluginRegistry[StackIntervention] = PluginRegistry("resflow.interventions",
                                                                       "a StackIntervention")


class _ProfileLabels(Mapping):
    """name -> (long name, units) of every registered profile: a view of :data:`STACK_INTERVENTIONS`."""

    def __getitem__(self, name: str) -> tuple[str, str]:
        return (STACK_INTERVENTIONS[name].label, "1")

    def __iter__(self):
        return iter(STACK_INTERVENTIONS)

    def __len__(self) -> int:
        return len(STACK_INTERVENTIONS)


#: name -> (long name, units) of every registered profile, kept in step with :data:`STACK_INTERVENTIONS`
PROFILE_LABELS: Mapping[str, tuple[str, str]] = _ProfileLabels()


def register_intervention(intervention: StackIntervention) -> StackIntervention:
    """Make every later profile of a stack include ``intervention`` (a name taken by another is refused)."""
    if not isinstance(intervention, StackIntervention):
        raise ConfigError(f"register_intervention takes a StackIntervention; got {intervention!r:.80}.")
    return STACK_INTERVENTIONS.claim(intervention.name, intervention, noun="intervention")


STACK_INTERVENTIONS.bind(register_intervention)  # plug-ins: the entry points of "resflow.interventions"


for _builtin in (
    StackIntervention("lesion", "damage of skipping layer l (mean square change of the normalised output)",
                      "layer l skipped",
                      lambda steps, h0, corrupt, readout: lesion(steps, h0, readout=readout).value),
    StackIntervention("lesion_rescaled",
                      "damage of skipping layer l, the other updates lengthened by ell/(ell - 1)",
                      "layer l skipped, the other updates lengthened by ell/(ell - 1)",
                      lambda steps, h0, corrupt, readout: lesion(steps, h0, rescale=True,
                                                                 readout=readout).value,
                      minimum_depth=2),
    StackIntervention("swap", "damage of running layers l and l + 1 in the other order",
                      "layers l and l + 1 run in the other order",
                      lambda steps, h0, corrupt, readout: swap(steps, h0, readout=readout).value,
                      minimum_depth=2),
    StackIntervention("trace", "recovered share of the clean output, input corrupted, the clean update of "
                      "layer l restored",
                      "input corrupted, the clean input of layer l at the token restored",
                      lambda steps, h0, corrupt, readout: trace(steps, h0, corrupt, restore="update",
                                                                readout=readout).value),
):
    register_intervention(_builtin)


def stack_profiles(steps: Sequence[Step], h0: torch.Tensor, corrupt: torch.Tensor, *,
                   readout: Callable | None = None) -> dict[str, np.ndarray]:
    """Every registered profile (:data:`STACK_INTERVENTIONS`) of one stack, each of length :math:`\\ell`, NaN
    where it does not apply (``swap`` at the last layer; a one-layer stack has NaN for the rescaled lesion and
    the swap)."""
    depth = len(steps)
    out = {}
    for name, intervention in STACK_INTERVENTIONS.items():
        full = np.full(depth, np.nan)
        if depth >= intervention.minimum_depth:
            values = np.asarray(intervention.profile(steps, h0, corrupt, readout), float)
            full[:len(values)] = values
        out[name] = full
    return out
