"""The depth ladder: language models of one width and token budget at several depths, trained here.

=================  =============================================================================
module             what it holds
=================  =============================================================================
``train``          :class:`LadderConfig` and :func:`train_ladder`: every model trained and measured
``model``          the small decoder-only model trained here (HF Llama), its BPE tokenizer, its
                   residual stream
``training``       training one model: AdamW, warmup-stable-decay, forks for the shorter lengths
``corpus``         text corpora fetched from a package registry, pinned by hash; whole-document splits
``measure``        what is measured of each trained model: probes, lesion and swap loss changes
``fit``            the depth law c l^-a + L_inf per width (t intervals over seeds), the Chinchilla form
``records``        the ``lm-ladder`` record, its tables, figure and comparison rows
=================  =============================================================================

The names of ``train`` are this package's (``from resflow.llm.ladder import LadderConfig`` as before
the ladder was a package).
"""

from .measure import PROBE_METRICS, measure_model
from .train import (
    SPEED_ONLY,
    LadderConfig,
    LadderModel,
    TrainedLadder,
    check_device,
    model_name,
    train_ladder,
)

__all__ = ["LadderConfig", "LadderModel", "TrainedLadder", "train_ladder", "measure_model", "model_name",
           "check_device", "PROBE_METRICS", "SPEED_ONLY"]
