"""The small decoder-only language model trained here, its tokenizer, and its residual stream.

The model is HuggingFace's Llama (``transformers.LlamaForCausalLM``) with a tiny configuration:
pre-norm residual blocks ``h <- h + attn(norm(h)); h <- h + mlp(norm(h))`` (RMSNorm, rotary
positions, SwiGLU MLP of 8/3 the width, rounded up to a multiple of 8), tied input and output
embeddings, no dropout.  A maintained implementation, and a saved model is an ordinary HF directory:
``resflow probe DIR`` and ``resflow intervene DIR`` read it like any checkpoint.

:func:`residual_stream` returns the states :math:`h_0, \\dots, h_\\ell` a probe sees: the input of
every decoder layer and the input of the final norm (the stream before the final norm).
The tokenizer is a byte-level BPE trained with HF ``tokenizers`` on the training documents only.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import torch

from ...errors import ConfigError

__all__ = ["HEAD_SIZE", "EOS", "require_llm", "train_tokenizer", "tokenizer_sha256", "encode_documents",
           "model_config", "build_model", "decoder_layers", "residual_stream", "parameter_count"]

HEAD_SIZE = 32
EOS = "<|endoftext|>"


def require_llm() -> None:
    """Raise a :class:`ConfigError` naming the fix unless transformers and tokenizers import."""
    _transformers()
    try:
        import tokenizers  # noqa: F401
    except ImportError as exc:
        raise ConfigError("the language-model ladder needs the llm extra: "
                          "pip install 'resflow[llm]'.") from exc


def _transformers():
    try:
        import transformers
    except ImportError as exc:
        raise ConfigError("the language-model ladder needs the llm extra: "
                          "pip install 'resflow[llm]'.") from exc
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return transformers


def train_tokenizer(documents, vocab_size: int):
    """A byte-level BPE of ``vocab_size`` tokens (one of them ``EOS``) trained on ``documents``, as a
    ``transformers.PreTrainedTokenizerFast`` (saved with the model)."""
    transformers = _transformers()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if not isinstance(vocab_size, int) or vocab_size < 257 + 1:
        raise ConfigError("vocab_size must be an int of at least 258 "
                          f"(256 bytes, the end-of-text token and one merge); got {vocab_size!r}.")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(list(documents), trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=EOS, pad_token=EOS,
                                                bos_token=EOS, unk_token=None)


def tokenizer_sha256(tokenizer) -> str:
    """A hash of the tokenizer's vocabulary and merges (the same training gives the same hash)."""
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    return hashlib.sha256(json.dumps(spec["model"], sort_keys=True).encode()).hexdigest()


def encode_documents(tokenizer, documents) -> np.ndarray:
    """One token stream: every document's tokens followed by ``EOS`` (int32)."""
    eos = tokenizer.convert_tokens_to_ids(EOS)
    ids: list[int] = []
    for encoding in tokenizer.backend_tokenizer.encode_batch(list(documents)):
        ids.extend(encoding.ids)
        ids.append(eos)
    return np.asarray(ids, dtype=np.int32)


def model_config(*, vocab_size: int, width: int, depth: int, context: int):
    """The Llama configuration of a ladder model (module docstring)."""
    transformers = _transformers()
    if width % HEAD_SIZE:
        raise ConfigError(f"width must be a multiple of the head size {HEAD_SIZE}; got {width}.")
    mlp = -(-8 * width // 3 // 8) * 8
    return transformers.LlamaConfig(
        vocab_size=vocab_size, hidden_size=width, intermediate_size=mlp, num_hidden_layers=depth,
        num_attention_heads=width // HEAD_SIZE, num_key_value_heads=width // HEAD_SIZE,
        max_position_embeddings=context,
        rms_norm_eps=1e-5, tie_word_embeddings=True, attention_dropout=0.0, initializer_range=0.02,
        bos_token_id=0, eos_token_id=0, pad_token_id=0, architectures=["LlamaForCausalLM"])


def build_model(*, vocab_size: int, width: int, depth: int, context: int, seed: int):
    """A freshly initialised ladder model; the initialisation is drawn from ``seed`` alone."""
    transformers = _transformers()
    config = model_config(vocab_size=vocab_size, width=width, depth=depth, context=context)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.LlamaForCausalLM(config)
    return model


def decoder_layers(model) -> torch.nn.ModuleList:
    return model.model.layers


def parameter_count(model, *, embedding: bool = False) -> int:
    """Parameters of the model; without the (tied) embedding unless ``embedding``."""
    total = sum(p.numel() for p in model.parameters())
    return total if embedding else total - model.model.embed_tokens.weight.numel()


def residual_stream(model, input_ids: torch.Tensor) -> torch.Tensor:
    """The states ``(depth + 1, batch, tokens, width)``: the input of each decoder layer, then the input of
    the final norm."""
    captured: list[torch.Tensor] = []

    def grab(module, args, kwargs):
        captured.append((args[0] if args else kwargs["hidden_states"]).detach())

    hooks = [layer.register_forward_pre_hook(grab, with_kwargs=True) for layer in decoder_layers(model)]
    hooks.append(model.model.norm.register_forward_pre_hook(grab, with_kwargs=True))
    try:
        model(input_ids=input_ids, use_cache=False)
    finally:
        for hook in hooks:
            hook.remove()
    return torch.stack(captured)
