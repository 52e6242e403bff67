"""``resflow bench``: the engine's speed against this machine's matmul rate and the per-student loop.

One process measures, in rounds: the float32 matmul rate of the machine (a ``SGEMM_SIZE`` square
matmul, the same threads and device as training), the batched engine (:class:`~resflow.training.Trainer`)
and the per-student loop (:class:`~resflow.training.reference_loop.ReferenceLoop`) on each case.  A
shared machine drifts, so every ratio is taken within a round (engine time against the sgemm rate
and the loop of that round) and the median over rounds is reported.  FLOPs are counted
analytically: forward :math:`4Bdh` per student, layer and stage, backward twice that, teachers
forward only.  Peak memory: above the level before the case, sampled from ``/proc/self/statm``
every 2 ms (CPU), or ``torch.cuda.max_memory_allocated`` (GPU).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import ConfigError
from .block import StudentSpec
from .config import TrainConfig
from .engine import Trainer, resolve_device
from .reference_loop import ReferenceLoop
from .teacher import Teacher

__all__ = ["BenchCase", "BenchRow", "CASES", "run_bench", "sgemm_gflops", "bench_meta",
           "PrecisionCheck", "precision_check"]

SGEMM_SIZE = 1024


@dataclass(frozen=True, kw_only=True)
class BenchCase:
    """Students and teachers timed together: both teachers, Euler students, one bank."""

    name: str
    width: int
    teacher_depth: int
    depths: tuple[int, ...]
    replicates: int
    batch: int
    steps: int  # timed steps per round (after warm-up)
    loaded: bool = False  # timed beside a busy competing process (one core's worth of pure Python)
    quiet: str | None = None  # the case it is the loaded twin of (its slowdown is reported against it)

    def build(self, device: str) -> tuple[list[StudentSpec], dict[str, Teacher], TrainConfig]:
        targets = ("independent", "tied")
        teachers = {(t, r): Teacher(t, width=self.width, depth=self.teacher_depth, seed=r) for t in targets
                    for r in range(self.replicates)}
        specs = [StudentSpec(t, "euler", d, r) for t in targets for d in self.depths
                 for r in range(self.replicates)]
        config = TrainConfig(steps=10**6, batch=self.batch, device=device, eval_every=10**6, eval_batches=1,
                             eval_batch_size=64)
        return specs, teachers, config


CASES = {
    # the students of the smooth-vs-rough cpu preset's full-length run: width 16 (hidden 64), teacher 32,
    # depths 2-16, 3 replicates (each its own teachers and data), batch 512
    "cpu-preset": BenchCase(name="cpu-preset", width=16, teacher_depth=32, depths=(2, 4, 8, 16), replicates=3,
                            batch=512, steps=20),
    # the study's shapes: width 32 (hidden 128), teacher 128, depths 6-48, batch 1024 (one replicate)
    "study": BenchCase(name="study", width=32, teacher_depth=128, depths=(6, 12, 16, 24, 32, 48),
                       replicates=1, batch=1024, steps=4),
    # the cpu preset's step beside one busy process (a `while True: pass` started with the case): what a
    # user's laptop sees; the engine's thread count follows the free cores (resflow.training.threads)
    "cpu-preset-loaded": BenchCase(name="cpu-preset-loaded", width=16, teacher_depth=32, depths=(2, 4, 8, 16),
                                   replicates=3, batch=512, steps=20, loaded=True, quiet="cpu-preset"),
}
WARM_UP_S = 1.0  # seconds of steps before timing: the governor has looked at the machine at least once


@dataclass(frozen=True, kw_only=True)
class BenchRow:
    """One (case, engine) of the bench, medians over rounds."""

    case: str
    engine: str
    ms_per_step: float
    gflops: float  # analytic FLOPs of one step, in GFLOP
    gflops_per_s: float
    fraction_of_sgemm: float
    speedup_vs_loop: float | None
    peak_mem_mb: float | None
    sgemm_gflops_per_s: float
    students: int
    rounds: int
    steps_per_round: int
    device: str
    threads: int  # torch threads during the timed steps (the governor's choice, last round)
    # a loaded case: its time over its quiet twin's, median over rounds
    slowdown_vs_quiet: float | None = None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def sgemm_gflops(device: torch.device, size: int = SGEMM_SIZE, repeats: int = 10) -> float:
    """The float32 matmul rate (GFLOP/s) of a ``size`` square matmul on ``device``, best of ``repeats``."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn((size, size), generator=gen).to(device)
    b = torch.randn((size, size), generator=gen).to(device)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * size**3 / best / 1e9


class _PeakMemory:
    """Peak memory above the level at entry (MB): CUDA allocator stats, or sampled RSS on Linux."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.peak = device, None

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        elif Path("/proc/self/statm").exists():
            self.base, self.top, self.running = self._rss(), 0, True

            def sample() -> None:
                while self.running:
                    self.top = max(self.top, self._rss())
                    time.sleep(0.002)

            self.thread = threading.Thread(target=sample, daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            self.peak = (torch.cuda.max_memory_allocated(self.device) - self.base) / 2**20
        elif hasattr(self, "thread"):
            self.running = False
            self.thread.join()
            self.peak = max(self.top - self.base, 0) / 2**20


def _timed(step: Callable[[torch.Tensor], None], batches: list[torch.Tensor], device: torch.device,
           warm_up_s: float = 0.0) -> float:
    """Seconds per step over ``batches`` (after one warm-up step, repeated for at least ``warm_up_s``)."""
    t0 = time.perf_counter()
    step(batches[0])
    while time.perf_counter() - t0 < warm_up_s:
        step(batches[0])
    _sync(device)
    t0 = time.perf_counter()
    for x in batches[1:]:
        step(x)
    _sync(device)
    return (time.perf_counter() - t0) / (len(batches) - 1)


@contextlib.contextmanager
def _competitor(on: bool):
    """A busy process (pure Python, one core) for the duration of the block, when ``on``."""
    if not on:
        yield
        return
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.2)  # running before the first timed step
        yield
    finally:
        busy.kill()
        busy.wait()


def run_bench(device: str = "auto", *, cases: tuple[str, ...] = tuple(CASES), rounds: int = 3,
              progress: Callable[[str, int, int], None] | None = None) -> list[BenchRow]:
    """Time the batched engine and the per-student loop on ``cases`` (see the module docstring)."""
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise ConfigError(f"unknown bench case(s) {unknown}; choose from {', '.join(CASES)}.")
    if not isinstance(rounds, int) or rounds < 1:
        raise ConfigError(f"rounds must be a positive integer; got {rounds!r}.")
    dev = resolve_device(device)
    report = progress or (lambda what, done, total: None)
    trainers, steps = {}, {}
    for name in cases:
        specs, teachers, config = CASES[name].build(str(dev))
        trainers[name] = Trainer(specs, teachers, config)
        state = trainers[name].init(0)
        # the engine as train() drives it: its own data stream, teachers run ahead (PREFETCH batches)
        steps[name] = {"batched": lambda x, t=trainers[name], s=state: t.step(s, *t.next_batch(s))}
        if not CASES[name].loaded:  # the loop is the reference of the quiet case only
            steps[name]["loop"] = ReferenceLoop(specs, teachers, config).step
    times: dict[tuple[str, str], list[float]] = {}
    sgemm: list[float] = []
    memory: dict[tuple[str, str], float | None] = {}
    threads: dict[str, int] = {}
    total, done = rounds * (1 + sum(len(steps[name]) for name in cases)), 0
    for _ in range(rounds):
        report("sgemm", done, total)
        sgemm.append(sgemm_gflops(dev))
        done += 1
        for name in cases:
            case = CASES[name]
            gen = torch.Generator().manual_seed(1)
            batches = [torch.randn((case.replicates, case.batch, case.width), generator=gen).to(dev)
                       for _ in range(case.steps + 1)]
            for engine, step in steps[name].items():
                report(f"{name} {engine}", done, total)
                with _competitor(case.loaded), trainers[name].threads, _PeakMemory(dev) as peak:
                    seconds = _timed(step, batches, dev, WARM_UP_S if engine == "batched" else 0.0)
                    if engine == "batched":
                        threads[name] = torch.get_num_threads()
                times.setdefault((name, engine), []).append(seconds)
                memory[(name, engine)] = peak.peak if memory.get((name, engine)) is None else max(
                    memory[(name, engine)], peak.peak or 0.0)
                done += 1
    report("done", total, total)
    rows = []
    for name in cases:
        trainer = trainers[name]
        flops = trainer.flops_per_step(CASES[name].batch)
        quiet = CASES[name].quiet if CASES[name].quiet in cases else None
        for engine in steps[name]:
            per_round = times[(name, engine)]
            loop_ratio = ([loop / mine for loop, mine in zip(times[(name, "loop")], per_round, strict=True)]
                          if (name, "loop") in times else None)
            slowdown = ([mine / calm for mine, calm in zip(per_round, times[(quiet, engine)], strict=True)]
                        if quiet and (quiet, engine) in times else None)
            fractions = [flops / seconds / 1e9 / rate for seconds, rate in zip(per_round, sgemm, strict=True)]
            rows.append(BenchRow(
                case=name, engine=engine, ms_per_step=statistics.median(per_round) * 1e3, gflops=flops / 1e9,
                gflops_per_s=flops / statistics.median(per_round) / 1e9,
                fraction_of_sgemm=statistics.median(fractions),
                speedup_vs_loop=(None if engine == "loop" or loop_ratio is None
                                 else statistics.median(loop_ratio)),
                peak_mem_mb=memory[(name, engine)], sgemm_gflops_per_s=statistics.median(sgemm),
                students=len(trainer.order), rounds=rounds, steps_per_round=CASES[name].steps,
                device=str(dev), threads=threads[name] if engine == "batched" else torch.get_num_threads(),
                slowdown_vs_quiet=None if slowdown is None else statistics.median(slowdown),
            ))
    return rows


@dataclass(frozen=True, kw_only=True)
class PrecisionCheck:
    """The same short run in two settings (e.g. float32 vs TF32 matmuls, eager vs CUDA graphs)."""

    reference: str
    other: str
    steps: int
    max_relative_difference: float  # of the final test losses, over students
    median_relative_difference: float
    reference_ms_per_step: float
    other_ms_per_step: float

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def precision_check(device: str = "cuda", *, case: str = "study", steps: int = 300,
                    other: dict[str, bool] | None = None) -> PrecisionCheck:
    """Train ``case`` for ``steps`` steps twice -- as configured, then with ``other`` TrainConfig
    settings (default ``{"tf32": True}``) -- and compare the students' final test losses."""
    from .driver import train

    other = other or {"tf32": True}
    specs, teachers, config = CASES[case].build(str(resolve_device(device)))
    config = dataclasses.replace(config, steps=steps, eval_every=steps, eval_batches=2, eval_batch_size=1024,
                                 tf32=False, cuda_graphs=False)
    results = [train(specs, teachers, c, seed=0) for c in (config, dataclasses.replace(config, **other))]
    a, b = (r.final_batches.mean(axis=1) for r in results)
    rel = abs(b - a) / abs(a)
    return PrecisionCheck(reference="float32, eager", other=", ".join(f"{k}={v}" for k, v in other.items()),
                          steps=steps, max_relative_difference=float(rel.max()),
                          median_relative_difference=float(statistics.median(rel.tolist())),
                          reference_ms_per_step=results[0].wall_time / steps * 1e3,
                          other_ms_per_step=results[1].wall_time / steps * 1e3)


def bench_meta() -> dict:
    """The machine and versions a bench ran on."""
    return {"torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
            "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "cuda_device": torch.cuda.get_device_name() if torch.cuda.is_available() else None}
