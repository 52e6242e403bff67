"""The cost of a training route per depth: milliseconds per step of one route's students of one depth.

For a preset of smooth-vs-rough (default ``cpu``: width 16, teachers of depth 32, batch 512), this times the
training step of the students one route trains at one depth -- both teachers, every replicate and init of the
preset (``--replicates``, ``--inits``), full length -- built as the engine builds them (one batched bank, the
teachers run ahead), interleaved over ``--rounds`` so the machine's drift hits every depth alike; then the
step of the teachers alone (every slot).  Every route has the same shapes, so one route's students of a depth
cost the same per step whatever the route; a route differs in how many steps it needs, and continuation also
needs its parent (the scratch students of half the depth, already trained for the scratch route).

The students' shorter lengths (``lengths``) are forked from the full-length ones where their schedules part
(``docs/design/convergence.md``): with a schedule constant for half of the run, lengths 1/16 .. 1 cost
``1 + (1/2)(1/16 + 1/8 + 1/4 + 1/2)`` = 1.47 full-length runs.  The printed seconds per 1k steps include
that factor.

    python benchmarks/route_cost.py --replicates 1 --inits 2 --threads 1
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from resflow.experiments import preset
from resflow.training import StudentSpec

sys.path.insert(0, str(Path(__file__).parent))
from routes import ms_per_step  # noqa: E402  (the same timing as the routes benchmark)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--replicates", type=int, default=None, help="default: the preset's")
    parser.add_argument("--inits", type=int, default=2)
    parser.add_argument("--steps", type=int, default=100, help="timed steps per depth and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    config = preset("smooth-vs-rough", args.preset).with_overrides(["train.device=cpu"])
    replicates = args.replicates or config.replicates
    config = config.with_overrides([f"replicates={replicates}"])
    teachers = config.teachers()
    lengths = config.lengths if len(config.lengths) >= 4 else (0.0625, 0.125, 0.25, 0.5, 1.0)
    fork = 1 + config.train.constant_fraction * sum(v for v in lengths if v < 1)
    timings: dict[str, list[float]] = {str(d): [] for d in config.depths}
    timings["teachers"] = []
    for _ in range(args.rounds):
        for depth in config.depths:
            specs = [StudentSpec(t, "euler", depth, r, init=i) for t in config.targets
                     for r in config.replicate_ids for i in range(args.inits)]
            timings[str(depth)].append(ms_per_step(config.train, specs, teachers, args.steps))
        alone = [StudentSpec(t, "euler", 1, r) for t in config.targets for r in config.replicate_ids]
        timings["teachers"].append(ms_per_step(config.train, alone, teachers, args.steps))
    median = {k: float(np.median(v)) for k, v in timings.items()}
    teacher = median.pop("teachers")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, preset {args.preset}: "
          f"{len(config.targets)} teachers x {replicates} replicates x {args.inits} inits per depth, "
          f"batch {config.train.batch}, {args.rounds} rounds; ms per step (median; "
          f"a depth-1 student's step with the teachers: {teacher:.2f})")
    print("| depth | students | ms/step (with teachers) | ms/step (students) "
          "| s per 1k steps, lengths forked |")
    print("|---|---|---|---|---|")
    rows = []
    for depth, ms in median.items():
        n = len(config.targets) * replicates * args.inits
        own = max(ms - teacher, 0.0)
        rows.append({"depth": int(depth), "students": n, "ms_per_step": ms, "student_ms_per_step": own,
                     "seconds_per_1k_steps": own * fork})
        print(f"| {depth} | {n} | {ms:.2f} | {own:.2f} | {own * fork:.2f} |")
    print(f"teachers (every slot, run ahead): about {teacher:.2f} ms per step and training run; "
          f"forks x{fork:.3f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"rows": rows, "teachers_ms_per_step": teacher, "fork_factor": fork,
                       "threads": torch.get_num_threads(), "torch": torch.__version__}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
