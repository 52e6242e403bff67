r"""Interventions across depth on transformer models (the ``llm`` extra): lesion, swap, causal tracing.

The same three interventions as :mod:`resflow.probing.interventions`, on a HuggingFace model loaded
offline (:func:`resflow.llm.probes.hf_probe.load_hf`) and one prompt:

* **lesion** layer :math:`l`: its output is its input (the layer skipped); every layer in one
  batched forward (row :math:`l` of the batch skips layer :math:`l`);
* **swap** layers :math:`l, l+1`: the model runs them in the other order (one forward each);
* **trace** (ROME's causal tracing, Meng et al. 2022): the subject's token embeddings get Gaussian
  noise of 3 times the embedding matrix's standard deviation (seeded); then the clean input of layer
  :math:`l` at token position :math:`p` is restored, every position in one batched forward per layer.

What is measured: for a causal LM, the probability of the ``target`` token after the prompt (ROME's
measure); for an encoder (no LM head), the mean square change of the last hidden state at the last
position, as for the toys.  A trace's *recovered share* is
:math:`(p_\mathrm{restored} - p_\mathrm{corrupt}) / (p_\mathrm{clean} - p_\mathrm{corrupt})`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ...errors import ConfigError
from .hf_probe import LAYERS, _module, load_hf

__all__ = ["ModelInterventions", "intervene_model", "NOISE_SCALE"]

ENCODER_LAYERS = {"bert": "encoder.layer", "roberta": "encoder.layer", "distilbert": "transformer.layer"}
NOISE_SCALE = 3.0  # ROME: noise of 3 times the embedding std on the subject's tokens


@dataclass
class ModelInterventions:
    """What :func:`intervene_model` measured on one model and prompt."""

    model: str
    prompt: str
    target: str
    measure: str  # "probability" (causal LM) or "damage" (encoder: mean square change of the last state)
    depth: int
    clean: float  # the measure without intervention (probability; 0 for damage)
    tokens: list[str]
    lesion: np.ndarray | None = None  # (depth,)
    swap: np.ndarray | None = None  # (depth - 1,)
    corrupt: float = float("nan")  # the measure with the subject corrupted and nothing restored
    trace: np.ndarray | None = None  # (depth, n_tokens): the measure with the input of layer l at p restored
    subject: list[int] = field(default_factory=list)  # the corrupted token positions


def _hidden(args, kwargs):
    return args[0] if args else kwargs["hidden_states"]


def _with_hidden(args, kwargs, value):
    if args:
        return (value, *args[1:]), kwargs
    return args, {**kwargs, "hidden_states": value}


def _replace_output(output, value):
    return (value, *output[1:]) if isinstance(output, tuple) else value


def _output_hidden(output):
    return output[0] if isinstance(output, tuple) else output


@contextmanager
def _hooks(handles):
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _layers(model, causal: bool):
    kind = getattr(model.config, "model_type", "")
    layers = _module(model, (LAYERS if causal else ENCODER_LAYERS).get(kind))
    if layers is None or not len(layers):
        raise ConfigError(f"model type {kind!r} has no residual layers resflow knows how to intervene on; "
                          f"known: {', '.join(sorted(LAYERS | ENCODER_LAYERS))}.")
    return layers


def _positions(tokenizer, ids: list[int], subject: str | None) -> list[int]:
    """Token positions of ``subject`` in the prompt (its last occurrence), or [] without a subject."""
    if not subject:
        return []
    for text in (subject, " " + subject):  # BPE tokenizers spell a word after a space differently
        sub = tokenizer(text, add_special_tokens=False)["input_ids"]
        for start in range(len(ids) - len(sub), -1, -1):
            if sub and ids[start:start + len(sub)] == sub:
                return list(range(start, start + len(sub)))
    raise ConfigError(f"subject {subject!r} is not a run of tokens of the prompt; "
                      "pass a word or phrase of it.")


@torch.no_grad()
def intervene_model(model_or_dir: str | Path, prompt: str, *, target: str = "", subject: str | None = None,
                    interventions=("lesion", "swap", "trace"), device: str = "cpu", seed: int = 0,
                    progress: Callable[[str, int, int], None] | None = None) -> ModelInterventions:
    """Lesion, swap and trace every layer of a transformer on one prompt (see the module docstring).

    ``target`` is the continuation whose probability is measured (its first token; a causal LM only);
    ``subject`` the words of the prompt a trace corrupts (required for ``trace``).
    """
    if not isinstance(prompt, str) or not prompt.strip():
        raise ConfigError("prompt must be a non-empty string, e.g. 'The Space Needle is in downtown'.")
    unknown = sorted(set(interventions) - {"lesion", "swap", "trace"})
    if unknown:
        raise ConfigError(f"unknown interventions {unknown}; choose from lesion, swap, trace.")
    report = progress or (lambda what, done, total: None)
    model, tokenizer, causal = load_hf(model_or_dir, device=device)
    layers = _layers(model, causal)
    depth = len(layers)
    enc = tokenizer(prompt, return_tensors="pt").to(device)
    ids = enc["input_ids"][0].tolist()
    if causal:
        if not target:
            raise ConfigError("a causal LM needs --target, the continuation whose probability is measured "
                              "(e.g. ' Seattle').")
        target_ids = tokenizer(target, add_special_tokens=False)["input_ids"]
        if not target_ids:
            raise ConfigError(f"target {target!r} has no tokens; pass a word, e.g. ' Seattle'.")
        target_id = target_ids[0]
    positions = _positions(tokenizer, ids, subject) if "trace" in interventions else []
    if "trace" in interventions and not positions:
        raise ConfigError("a trace needs --subject, the words of the prompt to corrupt "
                          "(e.g. 'The Space Needle').")

    def run(batch: int) -> torch.Tensor:
        """One forward of the prompt repeated ``batch`` times -> the measure's raw output per row."""
        inputs = {k: v.expand(batch, *v.shape[1:]) for k, v in enc.items()}
        out = model(**inputs, use_cache=False) if causal else model(**inputs)
        if causal:
            return torch.softmax(out.logits[:, -1].float(), -1)[:, target_id]
        return out.last_hidden_state[:, -1].float()

    clean_out = run(1)

    def measure(out: torch.Tensor) -> np.ndarray:
        if causal:
            return out.double().cpu().numpy()
        return (out - clean_out).square().mean(-1).double().cpu().numpy()

    result = ModelInterventions(
        model=Path(str(model_or_dir)).name or str(model_or_dir), prompt=prompt, target=target,
        measure="probability" if causal else "damage", depth=depth, clean=float(measure(clean_out)[0]),
        tokens=tokenizer.convert_ids_to_tokens(ids), subject=positions)
    if "lesion" in interventions:
        report("lesion", 0, 1)

        def skip(k):
            def hook(module, args, kwargs, output):
                hidden = _output_hidden(output).clone()
                hidden[k] = _hidden(args, kwargs)[k]
                return _replace_output(output, hidden)
            return hook

        with _hooks([layer.register_forward_hook(skip(k), with_kwargs=True)
                     for k, layer in enumerate(layers)]):
            result.lesion = measure(run(depth))
        report("lesion", 1, 1)
    if "swap" in interventions:
        values = []
        for k in range(depth - 1):
            report("swap", k, depth - 1)
            layers[k], layers[k + 1] = layers[k + 1], layers[k]
            try:
                values.append(measure(run(1))[0])
            finally:
                layers[k], layers[k + 1] = layers[k + 1], layers[k]
        result.swap = np.array(values)
    if "trace" in interventions:
        result.corrupt, result.trace = _trace(model, layers, run, measure, positions, len(ids), seed, report)
    return result


def _trace(model, layers, run, measure, positions, n_tokens, seed, report):
    """ROME's causal trace: (measure with the subject corrupted, measure with (layer, position) restored)."""
    embed = model.get_input_embeddings()
    gen = torch.Generator().manual_seed(seed)
    scale = NOISE_SCALE * float(embed.weight.float().std())
    noise = torch.randn((len(positions), embed.weight.shape[1]), generator=gen) * scale
    noise = noise.to(embed.weight.device, embed.weight.dtype)

    def corrupt_hook(module, args, output):
        output = output.clone()
        output[:, positions] = output[:, positions] + noise
        return output

    clean_inputs = []

    def capture(module, args, kwargs):
        clean_inputs.append(_hidden(args, kwargs)[0].clone())

    with _hooks([layer.register_forward_pre_hook(capture, with_kwargs=True) for layer in layers]):
        run(1)
    with _hooks([embed.register_forward_hook(corrupt_hook)]):
        corrupted = float(measure(run(1))[0])
        table = np.full((len(layers), n_tokens), np.nan)
        for k, layer in enumerate(layers):
            report("trace", k, len(layers))

            def restore(module, args, kwargs, k=k):
                hidden = _hidden(args, kwargs).clone()
                rows = torch.arange(n_tokens)
                hidden[rows, rows] = clean_inputs[k][rows]  # row p restores position p
                return _with_hidden(args, kwargs, hidden)

            with _hooks([layer.register_forward_pre_hook(restore, with_kwargs=True)]):
                table[k] = measure(run(n_tokens))
    report("trace", len(layers), len(layers))
    return corrupted, table
