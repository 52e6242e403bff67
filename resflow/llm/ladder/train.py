"""The depth ladder: language models of one width and one token budget at several depths, trained here.

:class:`LadderConfig` is the configuration of ``resflow run lm-ladder`` (presets in ``sims/lm_ladder.py``);
:func:`train_ladder` trains every model of it into a work directory, model by model (a finished model is never
retrained; an interrupted one resumes from its checkpoint), and measures each on the fixed validation split:
the validation loss per training length, the probes of its residual stream and the loss change when a layer is
skipped (lesion) or two neighbours run in the other order (swap).  Writing the record, fitting and drawing is
:func:`resflow.workflows.run_ladder`.  Design: ``docs/design/lm-ladder.md``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..._atomic import atomic_write
from ..._overrides import field_types, typed_assignment
from ..._validate import check_int, check_real, check_sequence
from ...errors import ConfigError
from ...training.engine import resolve_device
from .corpus import CORPORA, load_corpus
from .depth_basis import DepthBasisModel, unwrap
from .depth_use import ladder_depth_use_for
from .measure import PROBE_METRICS, measure_model
from .model import (
    HEAD_SIZE,
    build_model,
    encode_documents,
    parameter_count,
    tokenizer_sha256,
    train_tokenizer,
)
from .training import LMRecipe, train_model, validation_losses, validation_windows

__all__ = ["LadderConfig", "LadderModel", "TrainedLadder", "train_ladder", "measure_model", "model_name",
           "check_device", "ladder_data", "PROBE_METRICS", "SPEED_ONLY"]

SPEED_ONLY = ("device", "workers")  # settings that change how fast a ladder trains, not its results

RESULT = "result.json"


@dataclass(frozen=True)
class LadderConfig:
    """Everything that defines a ladder: corpus and tokenizer, the models, the recipe, the measurements.

    Every ``width`` x ``depth`` x seed is one model; seed ``s`` draws the initialisation and the data order
    (seeds ``first_seed ... first_seed + seeds - 1``).  ``steps`` x ``batch`` x ``context`` tokens per model;
    ``lengths`` are the shorter budgets the verdict compares (forks, :mod:`resflow.llm.ladder.training`).
    ``corpus`` empty: the pinned default (Shakespeare); a registered name (``"sympy"``) or a path
    (:mod:`resflow.llm.ladder.corpus`).  ``workers`` > 1 trains that many
    models at once in worker processes (on a GPU, where one small model leaves it mostly idle).
    """

    experiment: str = "lm-ladder"
    corpus: str = ""
    vocab_size: int = 512
    widths: tuple[int, ...] = (64,)
    depths: tuple[int, ...] = (1, 2, 3, 4, 6, 8)
    seeds: int = 2
    first_seed: int = 0
    context: int = 128
    steps: int = 1800
    batch: int = 32
    lr: float = 3e-3
    warmup: int = 50
    decay_fraction: float = 0.2
    weight_decay: float = 0.1
    lengths: tuple[float, ...] = (0.25, 0.5, 1.0)
    eval_every: int = 200
    eval_batches: int = 8
    val_tokens: int = 65536
    measure_windows: int = 32
    heal_steps: int = 50
    depth_basis: int = 0
    checkpoint_every: int = 200
    device: str = "auto"
    workers: int = 1

    def __post_init__(self) -> None:
        for name in ("vocab_size", "seeds", "context", "steps", "batch", "eval_every", "eval_batches",
                     "val_tokens", "measure_windows", "checkpoint_every", "workers"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), minimum=1))
        for name in ("first_seed", "warmup", "heal_steps", "depth_basis"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), minimum=0))
        if self.vocab_size < 258:
            raise ConfigError("vocab_size must be at least 258 (256 bytes, the end-of-text token, "
                              f"one merge); got {self.vocab_size}.")
        widths = tuple(check_int("widths", w, minimum=HEAD_SIZE)
                       for w in check_sequence("widths", self.widths, example="(64, 128)"))
        if not widths or any(w % HEAD_SIZE for w in widths) or len(set(widths)) != len(widths):
            raise ConfigError(f"widths must be distinct multiples of the head size {HEAD_SIZE}; "
                              f"got {self.widths}.")
        depths = tuple(sorted(check_int("depths", d, minimum=1)
                              for d in check_sequence("depths", self.depths, example="(1, 2, 4, 8)")))
        if len(set(depths)) != len(depths) or len(depths) < 2:
            raise ConfigError(f"depths must be at least two distinct depths; got {self.depths}.")
        lengths = tuple(sorted(check_real("lengths", v, low=0.0, high=1.0, low_open=True)
                               for v in check_sequence("lengths", self.lengths, example="(0.25, 0.5, 1)")))
        if not lengths or lengths[-1] != 1.0 or len(set(lengths)) != len(lengths):
            raise ConfigError("lengths must be distinct fractions in (0, 1] including 1; "
                              f"got {self.lengths}.")
        object.__setattr__(self, "widths", tuple(sorted(widths)))
        object.__setattr__(self, "depths", depths)
        object.__setattr__(self, "lengths", lengths)
        for name in ("lr", "weight_decay"):
            object.__setattr__(self, name, check_real(name, getattr(self, name), low=0.0))
        object.__setattr__(self, "decay_fraction", check_real("decay_fraction", self.decay_fraction, low=0.0,
                                                              high=1.0, low_open=True))
        if not isinstance(self.corpus, str) or not isinstance(self.device, str):
            raise ConfigError("corpus and device must be strings (corpus: a path or empty for the default).")
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ConfigError(f"device must be auto, cpu, cuda or cuda:N; got {self.device!r}.")
        if self.corpus and self.corpus not in CORPORA and not Path(self.corpus).expanduser().exists():
            raise ConfigError(f"corpus {self.corpus!r} does not exist: it is neither a registered corpus "
                              f"({', '.join(CORPORA)}) nor a path; pass one of those, a directory of "
                              ".txt/.md files, a zip, or leave corpus empty for the pinned default.")
        forks = [round((1 - self.decay_fraction) * round(f * self.steps)) for f in self.lengths[:-1]]
        if len(set(forks)) != len(forks):
            raise ConfigError(f"lengths {self.lengths} of {self.steps} steps fork at the same step "
                              f"({forks}); use lengths further apart or more steps.")
        first_fork = forks[0] if forks else self.steps
        if len(self.lengths) > 1 and first_fork <= self.warmup:
            raise ConfigError(f"the shortest length {self.lengths[0]:g} of {self.steps} steps starts its "
                              f"decay at step {first_fork}, inside the {self.warmup} warmup steps; "
                              "train longer, warm up for fewer steps, or drop the short lengths.")

    @property
    def seed_ids(self) -> range:
        return range(self.first_seed, self.first_seed + self.seeds)

    def models(self) -> list[tuple[int, int, int]]:
        """Every model as ``(width, depth, seed)``, in training order (shallow first)."""
        return [(w, d, s) for w in self.widths for d in self.depths for s in self.seed_ids]

    def recipe(self, device: str) -> LMRecipe:
        return LMRecipe(steps=self.steps, batch=self.batch, context=self.context, lr=self.lr,
                        warmup=self.warmup, decay_fraction=self.decay_fraction,
                        weight_decay=self.weight_decay, lengths=self.lengths, eval_every=self.eval_every,
                        eval_batches=self.eval_batches, checkpoint_every=self.checkpoint_every, device=device)

    @property
    def tokens_per_model(self) -> int:
        return self.steps * self.batch * self.context

    @property
    def progress_total(self) -> int:
        """Steps of the whole ladder, forks included (what the progress bar counts)."""
        per_model = self.steps + sum(round(f * self.steps)
                                     - round((1 - self.decay_fraction) * round(f * self.steps))
                                     for f in self.lengths[:-1])
        return per_model * len(self.models())

    def describe(self) -> str:
        tokens = f"{self.tokens_per_model:,} tokens"
        knob = f", layers smooth in depth (K = {self.depth_basis})" if self.depth_basis else ""
        return f"{len(self.models())} language models, {self.steps} steps ({tokens}) each{knob}"

    @staticmethod
    def keys() -> dict[str, Any]:
        return {k: t for k, t in field_types(LadderConfig).items() if k != "experiment"}

    def with_overrides(self, assignments: list[str]) -> LadderConfig:
        values = dict(typed_assignment(item, self.keys()) for item in assignments)
        return dataclasses.replace(self, **values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def model_name(width: int, depth: int, seed: int) -> str:
    return f"w{width}-l{depth}-s{seed}"


@dataclass
class LadderModel:
    """One trained and measured model of a ladder (what its ``result.json`` holds)."""

    width: int
    depth: int
    seed: int
    parameters: int  # without the embedding
    losses: list[list[float]]  # (length, eval_batch)
    curve_steps: list[int]
    curve_losses: list[float]
    seconds: float
    probe: dict[str, list[float]]  # per-layer means of PROBE_METRICS (depth + 1), NaN where undefined
    early_stop_fraction: float
    angle_early_stop_fraction: float
    clean_loss: float  # on the measurement windows
    lesion: list[float]  # loss increase when layer k is skipped (depth,)
    swap: list[float]  # loss increase when layers k, k + 1 run in the other order (depth - 1,)
    # where it was trained (e.g. "cuda: NVIDIA H200"); "" in results written before it was kept
    device: str = ""
    # its loss on windows of its own training text, per evaluation batch at the whole budget (beside the
    # validation loss: a gap means memorising); [] in results written before it was kept
    train_loss: list[float] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict:
        def finite(v):  # JSON has no NaN or infinity: null, at any depth
            if isinstance(v, dict):
                return {k: finite(x) for k, x in v.items()}
            if isinstance(v, list | tuple):
                return [finite(x) for x in v]
            return None if isinstance(v, float) and not math.isfinite(v) else v
        return finite(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, data: dict) -> LadderModel:
        def nan(v):  # JSON null -> NaN, at any depth
            if isinstance(v, dict):
                return {k: nan(x) for k, x in v.items()}
            return [nan(x) for x in v] if isinstance(v, list) else (float("nan") if v is None else v)
        return cls(**{k: nan(v) for k, v in data.items()})


@dataclass(frozen=True)
class TrainedLadder:
    """Every model of a ladder and what they were trained on."""

    config: LadderConfig
    models: tuple[LadderModel, ...]
    corpus: dict[str, Any]
    tokenizer_sha256: str
    device: str
    run_dir: Path
    # how the models use their depth (resflow.llm.ladder.depth_use.ladder_depth_use); empty: not measured
    depth_use: dict = dataclasses.field(default_factory=dict)


def _device_name(device: str) -> str:
    if device.startswith("cuda"):
        return f"{device}: {torch.cuda.get_device_name(torch.device(device))}"
    import platform

    return f"cpu: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"


def _device(name: str) -> str:
    return str(resolve_device(name))


def _tokenizer(run_dir: Path, corpus, vocab_size: int):
    """The run's tokenizer: trained on the training documents once, then read back (so a resumed run uses
    the same one)."""
    from .model import _transformers

    folder = run_dir / "tokenizer"
    if (folder / "tokenizer.json").is_file():
        return _transformers().PreTrainedTokenizerFast.from_pretrained(str(folder))
    tokenizer = train_tokenizer(corpus.train, vocab_size)
    tmp = run_dir / "tokenizer.tmp"
    tokenizer.save_pretrained(str(tmp))
    tmp.replace(folder)
    return tokenizer


@dataclass(frozen=True)
class _Data:
    """What every model of a ladder is trained and measured on."""

    corpus: Any
    tokenizer: Any
    train_stream: Any
    windows: torch.Tensor
    train_windows: torch.Tensor  # as many windows of the training stream as of the validation one


def ladder_data(config: LadderConfig, run_dir: Path) -> _Data:
    """What every model of the ladder in ``run_dir`` trains and is measured on (the tokenizer trained
    once)."""
    corpus = load_corpus(config.corpus or None)
    tokenizer = _tokenizer(run_dir, corpus, config.vocab_size)
    validation = encode_documents(tokenizer, corpus.validation)
    windows = validation_windows(validation, config.context, config.val_tokens)
    if len(windows) < config.eval_batches:  # before any model trains
        raise ConfigError(f"{len(windows)} validation windows cannot make {config.eval_batches} evaluation "
                          "batches; raise val_tokens, lower eval_batches, or give the corpus more validation "
                          "text.")
    train = encode_documents(tokenizer, corpus.train)
    train_windows = validation_windows(train, config.context, config.val_tokens)
    return _Data(corpus, tokenizer, train, windows, train_windows)


def check_device(config: LadderConfig) -> str:
    """The device ``config`` trains on; a :class:`ConfigError` if it is not available here."""
    return _device(config.device)


def _train_one(config: LadderConfig, run_dir: Path, data: _Data, width: int, depth: int, seed: int,
               device: str, report: Callable[[int], None] | None) -> LadderModel:
    """Train, measure and save one model (resuming its checkpoint); its ``result.json`` is written last."""
    name = model_name(width, depth, seed)
    folder = run_dir / "models" / name
    folder.mkdir(parents=True, exist_ok=True)
    model = build_model(vocab_size=len(data.tokenizer), width=width, depth=depth, context=config.context,
                        seed=seed)
    if config.depth_basis:
        model = DepthBasisModel(model, config.depth_basis)
    trained = train_model(model, data.train_stream, data.windows, config.recipe(device), seed=seed,
                          work_dir=folder, progress=report)
    count = model.parameter_count() if config.depth_basis else parameter_count(model)
    model = unwrap(model)
    measured = measure_model(model, data.windows[: config.measure_windows], name=name, seed=seed)
    on_train = validation_losses(model, data.train_windows, config.eval_batches).tolist()
    entry = LadderModel(width=width, depth=depth, seed=seed, parameters=count,
                        train_loss=on_train,
                        losses=trained.losses.tolist(), curve_steps=list(trained.curve_steps),
                        curve_losses=list(trained.curve_losses), seconds=trained.seconds, **measured,
                        device=_device_name(device))
    model.to("cpu").save_pretrained(str(folder / "model"))
    data.tokenizer.save_pretrained(str(folder / "model"))
    atomic_write(folder / RESULT, json.dumps(entry.to_json(), indent=1))
    (folder / "checkpoint.pt").unlink(missing_ok=True)
    return entry


def _worker(config_json: str, run_dir: str, width: int, depth: int, seed: int, device: str,
            threads: int) -> None:
    """One model in a worker process (``workers`` > 1)."""
    torch.set_num_threads(threads)
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(config_json).items()}
    config = LadderConfig(**fields)
    _train_one(config, Path(run_dir), ladder_data(config, Path(run_dir)), width, depth, seed, device, None)


def train_ladder(config: LadderConfig, run_dir: Path, *,
                 progress: Callable[[int, int, str], None] | None = None) -> TrainedLadder:
    """Train and measure every model of ``config`` in ``run_dir`` (resuming what is there).

    ``progress(steps done, total steps, model name)`` counts the steps of the whole ladder (with ``workers``
    > 1, model by model).  Each model is saved as a HuggingFace directory ``run_dir/models/NAME/model``
    (with the tokenizer).
    """
    device = _device(config.device)
    data = ladder_data(config, run_dir)
    total = config.progress_total
    per_model = total // len(config.models())
    todo = [m for m in config.models() if not (run_dir / "models" / model_name(*m) / RESULT).is_file()]
    done = len(config.models()) - len(todo)
    if progress:
        progress(done * per_model, total, "")
    if config.workers > 1 and len(todo) > 1:
        import concurrent.futures
        import multiprocessing
        import os

        threads = max(1, (os.cpu_count() or 1) // config.workers)
        with concurrent.futures.ProcessPoolExecutor(config.workers,
                                                    mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(_worker, config.to_json(), str(run_dir), *m, device, threads): m
                       for m in todo}
            try:
                for future in concurrent.futures.as_completed(futures):
                    future.result()
                    done += 1
                    if progress:
                        progress(done * per_model, total, model_name(*futures[future]))
            except BaseException:  # a failed model or Ctrl-C: the queued models are not started
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    else:
        for width, depth, seed in todo:
            name = model_name(width, depth, seed)
            report = (lambda taken, base=done * per_model, name=name: progress(base + taken, total, name)
                      ) if progress else None
            _train_one(config, run_dir, data, width, depth, seed, device, report)
            done += 1
    named = [(model_name(*m), *m) for m in config.models()]
    announce = (lambda what: progress(total, total, what)) if progress else None
    depth_use = ladder_depth_use_for(config, run_dir, data, named, device=device, progress=announce)
    results = (run_dir / "models" / model_name(*m) / RESULT for m in config.models())
    models = tuple(LadderModel.from_json(json.loads(path.read_text())) for path in results)
    corpus = data.corpus
    info = {"name": corpus.name, "source": corpus.source, "sha256": corpus.sha256,
            "train_characters": corpus.characters[0], "validation_characters": corpus.characters[1],
            "validation_documents": list(corpus.validation_names),
            "train_tokens": int(len(data.train_stream)),
            "validation_tokens": int(data.windows.shape[0] * config.context)}
    return TrainedLadder(config=config, models=models, corpus=info,
                         tokenizer_sha256=tokenizer_sha256(data.tokenizer), device=device, run_dir=run_dir,
                         depth_use=depth_use)
