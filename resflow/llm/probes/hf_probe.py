"""Probing HuggingFace transformer models with :mod:`resflow.probes` (needs the ``llm`` extra).

Causal LMs (GPT-NeoX/Pythia, OPT, Llama, Qwen2, ...) and encoders (BERT family) are loaded from a
local directory or the hub cache with ``local_files_only=True`` (nothing is downloaded), run with
``output_hidden_states=True`` under ``torch.no_grad`` in batches, and aggregated token by token
(padding excluded) with bounded memory.

The final-norm caveat: many implementations return the last hidden state *after* the final norm,
which inflates the last step angle.  A forward hook on the final norm records its input and output;
if the output is the returned last state, ``last_state_after_final_norm`` is True and every metric
is also computed with the pre-norm state as :math:`h_L` (``prenorm``).  For causal LMs two per-layer
losses are computed: the logit lens (final norm + unembedding of :math:`h_l`) and the last-layer
lens (:math:`h_l` fed through the last block, then final norm + unembedding, by substituting the
last block's input).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ...errors import ConfigError
from ...probing.probes import ProbeAccumulator, ProbeResult

__all__ = ["read_texts", "load_hf", "probe_hf"]

FINAL_NORM = {"gpt_neox": "gpt_neox.final_layer_norm", "opt": "model.decoder.final_layer_norm",
              "llama": "model.norm", "qwen2": "model.norm", "mistral": "model.norm",
              "gpt2": "transformer.ln_f"}
LAYERS = {"gpt_neox": "gpt_neox.layers", "opt": "model.decoder.layers", "llama": "model.layers",
          "qwen2": "model.layers", "mistral": "model.layers", "gpt2": "transformer.h"}


def read_texts(path: str | Path) -> list[str]:
    """Non-empty lines of a UTF-8 text file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"texts file {str(path)!r} does not exist; "
                          "pass a UTF-8 file with one text per line.")
    texts = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not texts:
        raise ConfigError(f"texts file {str(path)!r} is empty; it needs at least one non-empty line.")
    return texts


def _module(model, dotted: str | None):
    if not dotted:
        return None
    obj = model
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def load_hf(model_or_dir: str | Path, *, device: str = "cpu", dtype: torch.dtype = torch.float32):
    """Load model and tokenizer from a local directory or the hub cache (never downloads)."""
    try:
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError("probing transformer models needs the llm extra: "
                          "pip install 'resflow[llm]'.") from exc
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    source = str(model_or_dir)
    if ((source.startswith((".", "/", "~")) or Path(source).exists())
            and not Path(source).expanduser().is_dir()):
        raise ConfigError(f"model directory {source!r} does not exist; pass a directory with config.json and "
                          "weights, or a model name in the local hub cache.")
    try:
        config = transformers.AutoConfig.from_pretrained(source, local_files_only=True)
        causal = any(a.endswith("ForCausalLM") for a in (config.architectures or [])) or config.is_decoder
        cls = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
        model = cls.from_pretrained(source, local_files_only=True, dtype=dtype).to(device).eval()
        tokenizer = transformers.AutoTokenizer.from_pretrained(source, local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"cannot load {source!r} as a transformers model offline ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0]}).") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    return model, tokenizer, causal


@torch.no_grad()
def probe_hf(model_or_dir: str | Path, texts: list[str], *, max_tokens: int = 4096, batch_size: int = 8,
             max_length: int = 128, device: str = "cpu", dtype: torch.dtype = torch.float32,
             losses: bool = True, seed: int = 0) -> ProbeResult:
    """Probe a transformer on ``texts`` (at most ``max_tokens`` tokens in all)."""
    if not texts:
        raise ConfigError("no texts to probe; pass a non-empty list or --texts FILE.")
    model, tokenizer, causal = load_hf(model_or_dir, device=device, dtype=dtype)
    kind = getattr(model.config, "model_type", "")
    norm = _module(model, FINAL_NORM.get(kind)) if causal else None
    layers = _module(model, LAYERS.get(kind)) if causal else None
    captured: dict[str, torch.Tensor] = {}
    hook = None
    if norm is not None:
        hook = norm.register_forward_hook(lambda m, i, o: captured.update(pre=i[0], post=o))
    acc: ProbeAccumulator | None = None
    after_norm = None
    used = 0
    try:
        for start in range(0, len(texts), batch_size):
            if used >= max_tokens:
                break
            enc = tokenizer(texts[start:start + batch_size], return_tensors="pt", padding=True,
                            truncation=True, max_length=max_length).to(device)
            out = model(**enc, output_hidden_states=True)
            if getattr(out, "hidden_states", None) is None:
                raise ConfigError(f"{model_or_dir!r} returned no hidden states; it cannot be probed.")
            states = torch.stack(out.hidden_states)  # (L + 1, B, T, d)
            mask = enc["attention_mask"].bool()
            prenorm = None
            if "pre" in captured and captured["post"].shape == states[-1].shape:
                after = bool(torch.allclose(captured["post"].float(), states[-1].float(), atol=1e-5))
                after_norm = after if after_norm is None else (after_norm and after)
                if after:
                    prenorm = captured["pre"][mask].float()
            flat = states[:, mask].float()  # (L + 1, n_tokens, d)
            take = min(flat.shape[1], max_tokens - used)
            if acc is None:
                acc = ProbeAccumulator(flat.shape[0] - 1, seed=seed)
            acc.add(flat[:, :take], prenorm_last=None if prenorm is None else prenorm[:take])
            used += take
            if causal and losses:
                _layer_losses(model, enc, states, out.logits, norm, layers, acc, after_norm)
    finally:
        if hook is not None:
            hook.remove()
    if acc is None:
        raise ConfigError("no tokens were probed.")
    name = Path(str(model_or_dir)).name or str(model_or_dir)
    return acc.result(name, kind="causal-lm" if causal else "encoder", last_state_after_final_norm=after_norm)


def _layer_losses(model, enc, states, logits, norm, layers, acc: ProbeAccumulator, after_norm) -> None:
    """Add the logit-lens and last-layer-lens next-token losses of every layer."""
    ids, mask = enc["input_ids"], enc["attention_mask"]
    target = ids[:, 1:]
    valid = (mask[:, 1:] * mask[:, :-1]).bool()
    count = int(valid.sum())
    if count == 0:
        return
    head = model.get_output_embeddings()
    n_states = states.shape[0]

    def ce(lg):
        flat = torch.nn.functional.cross_entropy(lg[:, :-1].float().transpose(1, 2), target, reduction="none")
        return float(flat[valid].sum())

    logit_lens = np.full(n_states, np.nan)
    for layer in range(n_states):
        if layer == n_states - 1:
            logit_lens[layer] = ce(logits)  # the model's own output
        elif norm is not None and head is not None:
            logit_lens[layer] = ce(head(norm(states[layer])))
    acc.add_loss("logit_lens", logit_lens, count)
    if layers is None or not len(layers):
        return
    last_block = layers[-1]
    last_layer_lens = np.full(n_states, np.nan)
    for layer in range(n_states - 1):
        replacement = states[layer]

        def substitute(module, args, kwargs, replacement=replacement):
            if args:
                return (replacement, *args[1:]), kwargs
            kwargs = dict(kwargs)
            kwargs["hidden_states"] = replacement
            return args, kwargs

        handle = last_block.register_forward_pre_hook(substitute, with_kwargs=True)
        try:
            last_layer_lens[layer] = ce(model(**enc).logits)
        finally:
            handle.remove()
    acc.add_loss("last_layer_lens", last_layer_lens, count)
