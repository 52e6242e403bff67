r"""How the trained ladder models use their depth, measured on their saved weights (issue 39, point 4).

* **Logit lens** (nostalgebraist 2020): the validation loss of reading the residual stream
  :math:`h_l` through the model's own final norm and head, for every :math:`l = 0 \dots \ell`; the last
  is the model's loss.  Where along relative depth :math:`l/\ell` does the prediction form?
* **Block pruning** (Gromov et al. 2024, arXiv:2403.17887): to remove :math:`n` layers, the block
  :math:`l^*, \dots, l^* + n - 1` whose input :math:`h_{l^*}` and output :math:`h_{l^*+n}` are closest
  in angle (:math:`\arccos(\cos)/\pi`, mean over every token with a nonzero state; the paper uses the
  last token) is cut
  out; the validation loss without healing, and after a short **healing** fine-tune of the pruned
  model (``heal_steps`` AdamW steps on training windows at a tenth of the ladder's learning rate,
  decayed linearly to 0; the paper heals with QLoRA).  The unpruned model gets the same fine-tune
  (``removed = 0``), so that healing is not credited with what more training gives any model.
* **Maps across depth** (Csordás et al. 2025, arXiv:2505.13898): least-squares linear maps (with a
  bias) from each state of the depth-:math:`\ell` model to each state of the depth-:math:`2\ell` model
  of the same width and seed, fitted on the first half of the measurement tokens and scored by
  :math:`R^2` on the second half.  If the deeper model spreads the same computation over more layers,
  the shallow model's state :math:`h_i` predicts best the deep state at the same relative depth,
  :math:`j^* \approx 2i`.

* **Memorising or file shift**: the loss on the first windows of the training text, apart on the tokens the
  model was trained to predict and on those it never saw as a target (:func:`training_coverage` replays its
  data order); unseen minus seen is memorising, the validation loss minus unseen the shift from training files
  to held-out ones.

:func:`measure_depth_use` takes one model; :func:`cross_depth_r2` a pair.  The ladder runs both over a
trained ladder (:func:`resflow.llm.ladder.train.train_ladder`), each result saved once in the run's
``depth-use/`` folder, so that a ladder trained before these existed is measured when it is resumed.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from .model import decoder_layers, residual_stream

__all__ = ["logit_lens", "angular_distances", "prune_block", "measure_depth_use", "cross_depth_r2",
           "removable_share", "ladder_depth_use", "training_coverage", "seen_and_unseen_losses",
           "ladder_depth_use_for", "HEAL_LR_FACTOR", "FOLDER"]

HEAL_LR_FACTOR = 0.1  # healing runs at a tenth of the ladder's learning rate
FOLDER = "depth-use"  # in a ladder's work directory: one JSON file per model and per pair


def _next_token_loss(model, states: torch.Tensor, targets: torch.Tensor) -> float:
    logits = model.lm_head(model.model.norm(states))
    return float(torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), targets.flatten()))


@torch.no_grad()
def logit_lens(model, windows: torch.Tensor) -> list[float]:
    """The loss of each state ``h_0 .. h_depth`` read through the final norm and head (nats)."""
    model.eval()
    states = residual_stream(model, windows[:, :-1])
    return [_next_token_loss(model, h, windows[:, 1:]) for h in states]


def _angles(a: torch.Tensor, b: torch.Tensor) -> float:
    """The mean angle over tokens, in units of π; a zero state (the padding token's embedding) has no
    angle and is left out."""
    a, b = a.double().flatten(0, -2), b.double().flatten(0, -2)
    defined = (a.norm(dim=-1) > 0) & (b.norm(dim=-1) > 0)
    cos = torch.nn.functional.cosine_similarity(a[defined], b[defined], dim=-1).clamp(-1.0, 1.0)
    return float(torch.arccos(cos).mean() / np.pi)


@torch.no_grad()
def angular_distances(model, windows: torch.Tensor) -> np.ndarray:
    """``d[n, l]``: the mean angle (in units of π) between ``h_l`` and ``h_{l+n}`` over every token (NaN
    where ``l + n`` is past the last state)."""
    states = residual_stream(model, windows[:, :-1])
    depth = len(states) - 1
    d = np.full((depth + 1, depth + 1), np.nan)
    for n in range(depth + 1):
        for start in range(depth + 1 - n):
            d[n, start] = _angles(states[start], states[start + n])
    return d


def prune_block(model, start: int, n: int):
    """A copy of ``model`` without layers ``start .. start + n - 1``."""
    pruned = copy.deepcopy(model)
    layers = decoder_layers(pruned)
    keep = [layer for k, layer in enumerate(layers) if not start <= k < start + n]
    pruned.model.layers = torch.nn.ModuleList(keep)
    pruned.config.num_hidden_layers = len(keep)
    return pruned


def _heal(model, stream: torch.Tensor, *, steps: int, lr: float, batch: int, context: int, seed: int) -> None:
    """``steps`` AdamW steps on random training windows, the learning rate decayed linearly from ``lr`` to 0
    and no weight decay: the ladder's own training steps with that schedule (no warmup, all of it decay)."""
    from .training import LMRecipe, _optimizer, _steps

    recipe = LMRecipe(steps=steps, batch=batch, context=context, lr=lr, warmup=0, decay_fraction=1.0,
                      weight_decay=0.0, lengths=(1.0,), eval_every=steps, eval_batches=1,
                      checkpoint_every=steps)
    model.train()
    gen = torch.Generator().manual_seed(7_919 * seed + 5)
    _steps(model, _optimizer(model, recipe), stream, gen, recipe, 0, steps, steps)
    model.eval()


def measure_depth_use(model, windows: torch.Tensor, *, train_stream: np.ndarray | None = None,
                      heal_steps: int = 0, lr: float = 3e-3, batch: int = 32,
                      seed: int = 0) -> dict[str, Any]:
    """The logit lens and the pruning curve of one model on ``windows`` ``(n, T + 1)`` (module docstring).

    ``prune_loss[n]`` is the loss with ``n`` layers removed (``n = 0 .. depth - 1``), ``prune_start[n]`` the
    first removed layer, ``healed_loss[n]`` the loss after healing (``[]`` when ``heal_steps`` is 0).
    """
    from .training import validation_losses

    model.eval()
    depth = len(decoder_layers(model))
    context = windows.shape[1] - 1
    distances = angular_distances(model, windows)

    def loss(m) -> float:
        return float(validation_losses(m, windows, 1)[0])

    starts = [0] + [int(np.nanargmin(distances[n, : depth + 1 - n])) for n in range(1, depth)]
    pruned_loss, healed = [], []
    stream = torch.from_numpy(np.asarray(train_stream).astype(np.int64)) if heal_steps else None
    for n, start in enumerate(starts):
        pruned = prune_block(model, start, n)
        pruned_loss.append(loss(pruned))
        if heal_steps:
            _heal(pruned, stream, steps=heal_steps, lr=HEAL_LR_FACTOR * lr, batch=batch, context=context,
                  seed=seed)
            healed.append(loss(pruned))
        del pruned
    return {"logit_lens": logit_lens(model, windows), "prune_start": starts, "prune_loss": pruned_loss,
            "healed_loss": healed, "heal_steps": heal_steps,
            "angular_distance": [[None if not np.isfinite(v) else float(v) for v in row]
                                 for row in distances]}


@torch.no_grad()
def cross_depth_r2(shallow, deep, windows: torch.Tensor) -> np.ndarray:
    """``r2[i, j]``: how well a linear map (with bias) of the shallow model's state ``h_i`` predicts the deep
    model's state ``h_j``, fitted on the first half of the windows, R² on the second half (module
    docstring)."""
    inputs = windows[:, :-1].to(next(shallow.parameters()).device)
    a = residual_stream(shallow.eval(), inputs).double().cpu().flatten(1, 2)  # (ℓ + 1, tokens, width)
    b = residual_stream(deep.eval(), inputs).double().cpu().flatten(1, 2)
    half = (windows.shape[0] // 2) * (windows.shape[1] - 1)
    if half < 1:
        raise ValueError("cross_depth_r2 needs at least two windows (one half fits, the other scores).")
    r2 = np.full((len(a), len(b)), np.nan)
    for i, x in enumerate(a):
        design = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1)
        target = b.permute(1, 0, 2).flatten(1)  # every deep state at once: (tokens, (2ℓ + 1) · width)
        weights = torch.linalg.lstsq(design[:half], target[:half], driver="gelsd").solution
        residual = (target[half:] - design[half:] @ weights).reshape(-1, len(b), b.shape[-1])
        held = b[:, half:]
        total = ((held - held.mean(1, keepdim=True)) ** 2).sum((1, 2))
        r2[i] = (1.0 - (residual ** 2).sum((0, 2)) / total).numpy()
    return r2


def training_coverage(n_tokens: int, *, steps: int, batch: int, context: int, seed: int) -> np.ndarray:
    """How many times each position of a training stream of ``n_tokens`` was a predicted token while a model
    of ``seed`` trained ``steps`` steps: its data order replayed (the forks draw the same windows as the run
    they leave, so the whole run's windows are the ones its final model saw)."""
    from .training import data_order, window_starts

    gen = data_order(seed)
    count = np.zeros(n_tokens + 1, np.int64)
    for _ in range(steps):
        starts = window_starts(gen, n_tokens, context, batch).numpy()
        np.add.at(count, starts + 1, 1)  # a window starting at s predicts the tokens s + 1 .. s + context
        np.add.at(count, starts + context + 1, -1)
    return np.cumsum(count)[:n_tokens]


@torch.no_grad()
def seen_and_unseen_losses(model, stream: np.ndarray, coverage: np.ndarray, *, context: int,
                           max_tokens: int, chunk: int = 64) -> dict[str, float]:
    """The model's loss on the first windows of its training stream, apart on the tokens it was trained to
    predict (``coverage`` > 0) and those it never saw as a target: their difference is memorising, and the
    unseen tokens' loss against the validation loss is the shift from training files to held-out ones."""
    from .training import _loss, validation_windows

    model.eval()
    device = next(model.parameters()).device
    windows = validation_windows(np.asarray(stream), context, max_tokens)
    losses = torch.cat([_loss(model, windows[i:i + chunk].to(device), "none").cpu()
                        for i in range(0, len(windows), chunk)]).double().numpy()
    targets = np.arange(len(windows))[:, None] * context + np.arange(1, context + 1)[None, :]
    seen = coverage[targets] > 0
    return {"seen_loss": float(losses[seen].mean()) if seen.any() else float("nan"),
            "unseen_loss": float(losses[~seen].mean()) if (~seen).any() else float("nan"),
            "seen_share": float(seen.mean())}


def removable_share(losses: list[float] | np.ndarray, depth: int, tolerance: float) -> float:
    """The largest share ``n / depth`` of layers whose removal raises the loss by at most ``tolerance`` over
    ``losses[0]`` (the model itself, or its healed control), counting only ``n`` reached with every smaller
    ``n`` within the tolerance too."""
    losses = np.asarray(losses, float)
    n = 0
    while n + 1 < len(losses) and np.isfinite(losses[n + 1]) and losses[n + 1] - losses[0] <= tolerance:
        n += 1
    return n / depth


def _load(folder, device: str):
    from .model import _transformers

    return _transformers().LlamaForCausalLM.from_pretrained(str(folder)).to(device).eval()


def ladder_depth_use(run_dir, models: list[tuple[str, int, int, int]], windows: torch.Tensor,
                     train_stream: np.ndarray, *, heal_steps: int, lr: float, batch: int, device: str,
                     steps: int = 0, train_tokens: int = 0, progress=None) -> dict[str, Any]:
    """Every model's :func:`measure_depth_use` and every (ℓ, 2ℓ) pair's :func:`cross_depth_r2` of a trained
    ladder, ``models`` as ``(name, width, depth, seed)``; each computed once and saved in
    ``run_dir/depth-use/`` (a resumed ladder reads what is there).  With ``steps`` (the ladder's), each
    model's :func:`seen_and_unseen_losses` on ``train_tokens`` tokens of its training text too.
    ``progress(name)`` before each."""
    import json
    from pathlib import Path

    from ..._atomic import atomic_write

    run_dir = Path(run_dir)
    out = run_dir / FOLDER
    out.mkdir(exist_ok=True)
    windows = windows.to(device)
    result: dict[str, Any] = {"models": {}, "pairs": {}}
    for name, _, _, seed in models:
        path = out / f"{name}.json"
        if not path.is_file():
            if progress:
                progress(f"depth use {name}")
            measured = measure_depth_use(_load(run_dir / "models" / name / "model", device), windows,
                                         train_stream=train_stream, heal_steps=heal_steps, lr=lr,
                                         batch=batch, seed=seed)
            atomic_write(path, json.dumps(measured))
        result["models"][name] = json.loads(path.read_text())
    coverage: dict[int, np.ndarray] = {}
    for name, _, _, seed in models if steps else []:
        path = out / f"{name}-seen.json"
        if not path.is_file():
            if seed not in coverage:
                coverage[seed] = training_coverage(len(train_stream), steps=steps, batch=batch,
                                                   context=windows.shape[1] - 1, seed=seed)
            model = _load(run_dir / "models" / name / "model", device)
            measured = seen_and_unseen_losses(model, train_stream, coverage[seed],
                                              context=windows.shape[1] - 1,
                                              max_tokens=train_tokens)
            atomic_write(path, json.dumps(measured))
        result["models"][name].update(json.loads(path.read_text()))
    index = {(w, d, s): name for name, w, d, s in models}
    for (w, d, s), name in index.items():
        deep = index.get((w, 2 * d, s))
        if deep is None:
            continue
        key = f"{name}-to-l{2 * d}"
        path = out / f"{key}.json"
        if not path.is_file():
            if progress:
                progress(f"maps {name} -> {deep}")
            r2 = cross_depth_r2(_load(run_dir / "models" / name / "model", device),
                                _load(run_dir / "models" / deep / "model", device), windows)
            atomic_write(path, json.dumps({"shallow": name, "deep": deep, "r2": r2.tolist()}))
        result["pairs"][(w, d, s)] = json.loads(path.read_text())["r2"]
    return result


def ladder_depth_use_for(config, run_dir, data, models: list[tuple[str, int, int, int]], *, device: str,
                         progress=None) -> dict[str, Any]:
    """:func:`ladder_depth_use` with a ladder's settings: ``config`` a
    :class:`resflow.llm.ladder.train.LadderConfig`, ``data`` what its models train on
    (:func:`resflow.llm.ladder.train.ladder_data`)."""
    return ladder_depth_use(run_dir, models, data.windows[: config.measure_windows], data.train_stream,
                            heal_steps=config.heal_steps, lr=config.lr, batch=config.batch, device=device,
                            steps=config.steps, train_tokens=config.val_tokens, progress=progress)
