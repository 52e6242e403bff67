#!/usr/bin/env bash
# Wall time of one fixed small sweep (4 cells: 2 targets x 2 replicates, 8 students each, 500 steps)
# with 2 local workers of 1 thread (A) against 1 worker of 2 threads (B), paired runs, on this machine.
# Usage: bash benchmarks/sweep_scaling.sh [RUNS]   (needs farm-bench; docs/benchmarks.md quotes it)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
SWEEP=".venv/bin/resflow sweep smooth-vs-rough --preset cpu --grid targets=independent,tied --replicates 2 \
  --set train.steps=500 --set train.device=cpu"
farm-bench -n "$RUNS" --warmup 0 --timeout 1800 \
  --vs "sh -c 'rm -rf /tmp/resflow-sweep-b && $SWEEP --workers 1 --threads 2 --out /tmp/resflow-sweep-b'" \
  -- sh -c "rm -rf /tmp/resflow-sweep-a && $SWEEP --workers 2 --threads 1 --out /tmp/resflow-sweep-a"
