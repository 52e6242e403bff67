"""Benchmark: batched engine vs the per-student reference loop, measured in one run.

``python -m resflow.sims.bench_engine [--steps N]`` prints the time per step of both engines on the
same students (both teachers, Euler, depths 2-16, width 16, teacher depth 32, batch 512, three
seeds) and their ratio, plus the batched engine at the study's scale (width 32, teacher 128,
depths 6-48, one seed).
"""

from __future__ import annotations

import argparse

import torch

from resflow import Teacher
from resflow.engine import train, train_reference
from resflow.students import StudentSpec
from resflow.training import TrainConfig


def _time_per_step(fn, steps: int) -> float:
    result = fn()
    return result.wall_time / steps


def main(steps: int = 100) -> dict[str, float]:
    cfg = TrainConfig(steps=steps, batch=512, eval_every=10**9, eval_batches=1, eval_batch_size=64)
    small = {k: Teacher(k, width=16, depth=32, seed=0) for k in ("independent", "tied")}
    specs = [StudentSpec(t, "euler", d, s) for t in small for d in (2, 4, 8, 16) for s in range(3)]
    batched = _time_per_step(lambda: train(specs, small, cfg), steps)
    reference = _time_per_step(lambda: train_reference(specs, small, cfg), steps)
    paper = {k: Teacher(k, width=32, depth=128, seed=0) for k in ("independent", "tied")}
    paper_specs = [StudentSpec(t, "euler", d, 0) for t in paper for d in (6, 12, 16, 24, 32, 48)]
    study = _time_per_step(lambda: train(paper_specs, paper, TrainConfig(steps=max(steps // 4, 5), batch=1024,
                                                                          eval_every=10**9, eval_batches=1,
                                                                          eval_batch_size=64)), max(steps // 4, 5))
    out = {"batched_s_per_step": batched, "reference_s_per_step": reference, "speedup": reference / batched,
           "study_scale_s_per_step": study, "threads": torch.get_num_threads()}
    print(f"cpu preset students ({len(specs)}): batched {batched * 1e3:.1f} ms/step, per-student loop "
          f"{reference * 1e3:.1f} ms/step, speed-up x{reference / batched:.2f} (torch threads: {out['threads']})")
    print(f"study scale (width 32, teacher 128, depths 6-48, batch 1024, 1 seed, both teachers): "
          f"{study * 1e3:.0f} ms/step")
    return out


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=100)
    main(parser.parse_args().steps)
