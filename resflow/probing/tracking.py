r"""How a student's errors add up along depth: coherently (the procedural worst case) or incoherently.

A student of depth :math:`\ell` standing in for a teacher of depth :math:`L_T` (:math:`k = L_T/\ell`
teacher layers per student layer, :math:`\ell` dividing :math:`L_T`) is compared with the teacher at
matching times, on the same inputs:

* the **trajectory error** :math:`e_l = \mathbb E\|h^S_l - h^T_{lk}\|^2 / \mathbb E\|h^T_{lk}\|^2`,
  :math:`l = 0..\ell`: does the student follow the teacher's path at the teacher's pace?
* the **path error** :math:`\min_\tau \mathbb E\|h^S_l - h^T(\tau)\|^2 / \mathbb E\|h^T(\tau)\|^2` over the
  teacher's path :math:`h^T(\tau)` (its states joined by straight segments, :math:`\tau \in [0, L_T]`), and
  the **path time** :math:`\tau^*/L_T` where it is reached: a student that follows the teacher's path at
  another pace has a small path error and a path time away from :math:`l/\ell`; one that takes another
  path has a path error as large as its trajectory error;
* the **local error** of layer :math:`l`, :math:`\delta_l = S_l(h^T_{lk}) - h^T_{(l+1)k}`: the student
  layer applied to the teacher's own state, against where the teacher's :math:`k` layers take it;
  beside it the local error of the *Euler student built from the teacher's field*,
  :math:`\delta^E_l = h^T_{lk} + k\,(h^T_{lk+1} - h^T_{lk}) - h^T_{(l+1)k}` (for a tied teacher, one
  step :math:`kH` of its own field: the student the finite-teacher laws describe);
* the **output error** of layer :math:`l`, :math:`p_l`: the teacher's normalised output when only
  layer :math:`l` is replaced by the student's (its local error carried to the output by the rest of
  the teacher), minus the teacher's output;
* their **coherence** :math:`C = \mathbb E\|\sum_l p_l\|^2 / \sum_l \mathbb E\|p_l\|^2`: about
  :math:`\ell` when the layers' errors point the same way (they add coherently), about 1 when they are
  unrelated (incoherently), below 1 when they cancel; and the **linearity**
  :math:`\mathbb E\|\sum_l p_l - \epsilon\|^2 / \mathbb E\|\epsilon\|^2` (:math:`\epsilon` the student's
  own output error): near 0 when the loss is the sum of the layers' errors.

Where the linearity is small, the loss is :math:`\mathbb E\|\epsilon\|^2 \approx C\,\ell\,\overline{\|p\|^2}`:
with :math:`\overline{\|p\|^2} \propto \ell^{-2q}` and :math:`C \propto \ell^{c}` the loss exponent is
:math:`2q - 1 - c` (:math:`c = 1` coherent, :math:`c = 0` incoherent; ``resflow theory
finite-teacher-procedural-modified``).
"""

from __future__ import annotations

import torch

from ..dynamics.fields import rmsnorm
from ..errors import ShapeError
from .metrics import angle

__all__ = ["tracking_metrics", "accumulation_exponents", "TRACKING_LABELS"]

TRACKING_LABELS = {  # name -> (long_name, units)
    "trajectory_error": ("E|h_l - teacher h_(l k)|^2 / E|teacher h_(l k)|^2 "
                         "(student vs teacher at matching times)", "1"),
    "path_error": ("min over the teacher's path of E|h_l - teacher h(tau)|^2 / E|teacher h(tau)|^2", "1"),
    "path_time": ("where on the teacher's path (tau / L_T) the student's h_l is closest", "1"),
    "local_error": ("E|student layer l applied to teacher h_(l k) - teacher h_((l+1) k)|^2", "1"),
    "euler_local_error": ("E|local error of the Euler student built from the teacher's field|^2 "
                          "(tied teacher)", "1"),
    "local_error_angle": ("angle between successive local errors", "rad"),
    "output_error": ("E|teacher output with layer l's local error - teacher output|^2 "
                     "(normalised outputs)", "1"),
    "error_coherence": ("E|sum of the layers' output errors|^2 / their sum of E|.|^2 "
                        "(l: coherent, 1: incoherent)", "1"),
    "error_linearity": ("E|sum of the layers' output errors - the student's output error|^2 / "
                        "E|the student's output error|^2", "1"),
}


def tracking_metrics(student_states: torch.Tensor, teacher_states: torch.Tensor, local_steps: torch.Tensor,
                     propagated: torch.Tensor) -> dict[str, torch.Tensor]:
    """The metrics of the module docstring for one student on ``n`` inputs.

    ``student_states`` ``(l + 1, n, d)``: the student's :math:`h_0..h_\\ell`; ``teacher_states``
    ``(L_T + 1, n, d)``; ``local_steps`` ``(l, n, d)``: student layer :math:`l` applied to the teacher's
    :math:`h_{lk}`; ``propagated`` ``(l, n, d)``: the teacher's final state (not normalised) from each
    ``local_steps[l]`` entering teacher layer :math:`(l+1)k`.  Per-layer metrics come per input
    (``(layers, n)``), the coherence and the linearity as one number each.
    """
    depth, teacher_depth = student_states.shape[0] - 1, teacher_states.shape[0] - 1
    if depth < 1 or teacher_depth % depth or local_steps.shape[0] != depth or propagated.shape[0] != depth:
        raise ShapeError(f"a student of depth {depth} must divide its teacher's depth {teacher_depth} "
                         f"and have {depth} local steps and propagated states; got {local_steps.shape[0]}, "
                         f"{propagated.shape[0]}.")
    k = teacher_depth // depth
    matching = teacher_states[::k]  # (depth + 1, n, d)
    scale = matching.square().sum(-1).mean(-1, keepdim=True)  # E|h^T_{lk}|^2 per layer
    trajectory = (student_states - matching).square().sum(-1) / scale
    local = local_steps - matching[1:]  # delta_l, (depth, n, d)
    first = teacher_states[1::k][:depth]  # h^T_{lk + 1}
    euler = matching[:-1] + k * (first - matching[:-1]) - matching[1:]
    target = rmsnorm(teacher_states[-1])
    outputs = rmsnorm(propagated) - target  # p_l, (depth, n, d)
    student_error = rmsnorm(student_states[-1]) - target
    summed = outputs.sum(0)
    path_error, path_time = _closest_on_path(student_states, teacher_states)
    out = {
        "trajectory_error": trajectory,
        "path_error": path_error[:, None],  # one value per layer, for all inputs
        "path_time": path_time[:, None],
        "local_error": local.square().sum(-1),
        "euler_local_error": euler.square().sum(-1),
        "output_error": outputs.square().sum(-1),
        "error_coherence": summed.square().sum(-1).mean() / outputs.square().sum(-1).mean(-1).sum(),
        "error_linearity": ((summed - student_error).square().sum(-1).mean()
                            / student_error.square().sum(-1).mean()),
    }
    if depth >= 2:
        out["local_error_angle"] = angle(local[:-1], local[1:])
    return out


def _closest_on_path(points: torch.Tensor, path: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each of ``points`` ``(m, n, d)`` (a state per layer, on n inputs), the least mean squared distance
    to the polyline ``path`` ``(P + 1, n, d)`` at one shared position (relative to the path's norm there),
    and the position as a fraction of the path.  Per layer: ``(m,)`` each (one value for all inputs)."""
    start, step = path[:-1], path[1:] - path[:-1]  # (P, n, d)
    rel = points[:, None] - start[None]  # (m, P, n, d)
    u = ((rel * step[None]).sum(-1).mean(-1)
         / step.square().sum(-1).mean(-1).clamp_min(1e-30)).clamp(0.0, 1.0)
    closest = start[None] + u[..., None, None] * step[None]  # (m, P, n, d)
    dist = (points[:, None] - closest).square().sum(-1).mean(-1) / closest.square().sum(-1).mean(-1)
    best = dist.argmin(dim=1)
    index = torch.arange(points.shape[0])
    return dist[index, best], (best + u[index, best]) / (path.shape[0] - 1)


def accumulation_exponents(ds, target: str, *, confidence: float = 0.95) -> dict:
    """How the tracking metrics of one target's students (full length, every replicate) scale with depth:
    intervals (:func:`resflow.fitting.intervals.over_replicates`) of

    * ``coherence``: :math:`c` in :math:`C \\propto \\ell^c` (1 coherent, 0 incoherent);
    * ``output_error``: :math:`2q` in :math:`\\overline{\\|p\\|^2} \\propto \\ell^{-2q}` (one layer's error at
      the output);
    * ``implied``: :math:`2q - 1 - c`, the loss exponent the two imply;
    * ``local_share``: :math:`\\eta` in
      :math:`\\varepsilon = \\sum\\|\\delta\\|^2 / \\sum\\|\\delta^E\\|^2 \\propto \\ell^{\\eta}` (the share
      of the Euler student's local error the trained one leaves; 0 where the finite-teacher factor holds).

    ``ds`` is a ``toy-run`` Dataset with the tracking variables (one scheme, one structure).
    """
    import numpy as np

    from ..fitting.intervals import over_replicates
    from ..loglog import slopes
    from ..records import best_start

    ds = best_start(ds)  # one student per cell: the best route and init
    one = ds.sel(target=target, length=ds["length"].max()).isel(scheme=0, student_groups=0, temperature=0)
    depths = np.asarray(one["depth"].values, float)
    layers = one["layer"].values

    mask = layers[None, None, :] < depths[None, :, None]  # a student's own layers

    def per_layer(name):  # (replicate, depth, layer), NaN beyond the student's depth
        return np.where(mask, one[name].transpose("replicate", "depth", "layer").values, np.nan)

    output = np.nanmean(per_layer("output_error"), axis=-1)
    local = np.nansum(per_layer("local_error"), axis=-1)
    euler = np.nansum(per_layer("euler_local_error"), axis=-1)
    coherence = one["error_coherence"].transpose("replicate", "depth").values
    data = np.stack([coherence, output, local / euler], axis=-1)[..., None]  # (replicate, depth, 3, 1)

    def slope(column, sign):
        return lambda r: float(sign * slopes(depths, r[:, column, 0]))

    out = {"coherence": over_replicates(slope(0, -1), data, confidence=confidence),
           "output_error": over_replicates(slope(1, 1), data, confidence=confidence),
           "local_share": over_replicates(slope(2, -1), data, confidence=confidence)}
    out["implied"] = over_replicates(lambda r: slope(1, 1)(r) - 1 - slope(0, -1)(r), data,
                                     confidence=confidence)
    return out
