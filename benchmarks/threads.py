"""The engine's thread count on a quiet and on a busy machine: the measurements behind
resflow.training.threads.

    python benchmarks/threads.py [--rounds 3] [--steps 20] [--competitor python|torch]

Times a step of the cpu preset's students (``resflow bench``'s ``cpu-preset`` case) with the torch thread
count fixed at 1 and at every core, and chosen by the engine
(:class:`~resflow.training.threads.ThreadGovernor`), on the quiet machine and beside one busy process
(``python``: a ``while True: pass``; ``torch``: a second process doing 1-thread matmuls).  Variants are
interleaved within each round, so the machine's drift touches them alike; the medians over rounds, and the
ratios the issue asks for, are printed:

* quiet cost: chosen / best fixed count, quiet (the target: at most 1.10);
* loaded slowdown: chosen loaded / chosen quiet (the target: at most 2.5), and the same for each fixed count.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

from resflow.training import Trainer
from resflow.training.bench import CASES, WARM_UP_S, _timed
from resflow.training.threads import ThreadGovernor

COMPETITORS = {
    "python": "while True: pass",
    "torch": "import torch\ntorch.set_num_threads(1)\na = torch.randn(512, 512)\nwhile True: a @ a",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--competitor", choices=sorted(COMPETITORS), default="python")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    case = CASES["cpu-preset"]
    specs, teachers, config = case.build("cpu")
    trainer = Trainer(specs, teachers, config)
    state = trainer.init(0)
    gen = torch.Generator().manual_seed(1)
    batches = [torch.randn((case.replicates, case.batch, case.width), generator=gen)
               for _ in range(args.steps + 1)]

    def step(x):
        trainer.step(state, *trainer.next_batch(state))

    variants = {f"fixed {n}": n for n in sorted({1, cores})} | {"chosen": None}
    times: dict[tuple[str, str], list[float]] = {}
    chosen_threads: dict[str, list[int]] = {"quiet": [], "loaded": []}
    for r in range(args.rounds):
        for load in ("quiet", "loaded"):
            command = [sys.executable, "-c", COMPETITORS[args.competitor]]
            busy = (subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    if load == "loaded" else None)
            try:
                time.sleep(0.5 if busy else 0.0)
                for name, fixed in variants.items():
                    governor = ThreadGovernor("cpu", fixed=fixed, most=cores)
                    trainer.threads = governor
                    with governor:
                        seconds = _timed(step, batches, torch.device("cpu"), WARM_UP_S)
                        if fixed is None:
                            chosen_threads[load].append(torch.get_num_threads())
                    times.setdefault((name, load), []).append(seconds)
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    ms = {key: statistics.median(v) * 1e3 for key, v in times.items()}
    print(f"torch {torch.__version__}, {cores} cores, competitor {args.competitor!r}, "
          f"{args.rounds} rounds of {args.steps} steps "
          f"(cpu-preset case: {len(trainer.order)} students, batch {case.batch})")
    print(f"{'threads':<10}{'quiet ms':>10}{'loaded ms':>11}{'loaded/quiet':>14}")
    for name in variants:
        print(f"{name:<10}{ms[(name, 'quiet')]:>10.1f}{ms[(name, 'loaded')]:>11.1f}"
              f"{ms[(name, 'loaded')] / ms[(name, 'quiet')]:>13.2f}x")
    best_quiet = min(ms[(name, "quiet")] for name in variants if name != "chosen")
    print(f"chosen threads: quiet {chosen_threads['quiet']}, loaded {chosen_threads['loaded']}")
    print(f"quiet cost of choosing: {ms[('chosen', 'quiet')] / best_quiet:.2f}x the best fixed count "
          "(target <= 1.10)")
    print(f"loaded slowdown, chosen: {ms[('chosen', 'loaded')] / ms[('chosen', 'quiet')]:.2f}x "
          "(target <= 2.5); "
          f"fixed {cores}: {ms[(f'fixed {cores}', 'loaded')] / ms[(f'fixed {cores}', 'quiet')]:.2f}x")


if __name__ == "__main__":
    main()
