"""`resflow bench` and benchmarks/gpu.sh, on tiny sizes: the JSON rows carry what the issue asks for."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from resflow.cli import app
from resflow.training import bench

ROOT = Path(__file__).resolve().parents[1]
FIELDS = {"case", "engine", "ms_per_step", "gflops", "fraction_of_sgemm", "speedup_vs_loop", "peak_mem_mb"}


@pytest.fixture
def tiny_cases(monkeypatch):
    tiny = bench.BenchCase(name="tiny", width=8, teacher_depth=8, depths=(2, 4), replicates=1, batch=64, steps=3)
    monkeypatch.setitem(bench.CASES, "tiny", tiny)
    return tiny


def test_bench_rows_json_and_record(tiny_cases, tmp_path):
    store = tmp_path / "store"
    result = CliRunner().invoke(app, ["bench", "--case", "tiny", "--rounds", "2", "--json", "--out", str(store)])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    rows = printed["rows"]
    from resflow.store import Store

    (record,) = Store.open(store).records(kind="bench")
    assert printed["record"] == record.id and printed["meta"]["torch"]
    ds = Store.open(store).load(record)
    assert list(ds["engine"].values) == ["batched", "loop"] and list(ds["ms_per_step"].values) == [
        r["ms_per_step"] for r in rows]
    assert [(r["case"], r["engine"]) for r in rows] == [("tiny", "batched"), ("tiny", "loop")]
    for r in rows:
        assert FIELDS <= set(r) and r["ms_per_step"] > 0 and 0 < r["fraction_of_sgemm"] < 1 and r["rounds"] == 2
    batched, loop = rows
    assert batched["speedup_vs_loop"] > 0 and loop["speedup_vs_loop"] is None
    # the same analytic FLOP count for both engines: forward 4Bdh per student-layer, x3 with the backward,
    # plus the teachers' forward
    students = 3 * 4 * 64 * 8 * 32 * (2 + 4) * 2
    teachers = 2 * 4 * 64 * 8 * 32 * 8
    assert batched["gflops"] == loop["gflops"] == pytest.approx((students + teachers) / 1e9)
    again = CliRunner().invoke(app, ["bench", "--case", "tiny", "--rounds", "1", "--out", str(store)])
    assert again.exit_code == 0 and len(Store.open(store).records(kind="bench")) == 2  # a new record, none replaced


def test_a_loaded_case_runs_beside_a_busy_process_and_reports_its_slowdown(tiny_cases, monkeypatch):
    """cpu-preset-loaded's machinery on a tiny case: a busy process is started for the loaded case only and killed
    after it, the loaded case has no loop row, and its slowdown is its time over its quiet twin's."""
    import dataclasses

    monkeypatch.setitem(bench.CASES, "tiny-loaded", dataclasses.replace(tiny_cases, name="tiny-loaded", loaded=True,
                                                                          quiet="tiny"))
    monkeypatch.setattr(bench, "WARM_UP_S", 0.0)
    started = []
    real = subprocess.Popen

    def popen(command, **kwargs):
        started.append(real(command, **kwargs))
        return started[-1]

    monkeypatch.setattr(bench.subprocess, "Popen", popen)
    rows = bench.run_bench("cpu", cases=("tiny", "tiny-loaded"), rounds=2)
    assert [(r.case, r.engine) for r in rows] == [("tiny", "batched"), ("tiny", "loop"), ("tiny-loaded", "batched")]
    assert len(started) == 2 and all("while True" in p.args[-1] for p in started)  # one per round of the loaded case
    assert all(p.poll() is not None for p in started)  # killed after each
    quiet, _, loaded = rows
    assert quiet.slowdown_vs_quiet is None and loaded.speedup_vs_loop is None
    assert loaded.slowdown_vs_quiet > 0 and loaded.threads >= 1


def test_bench_refuses_unknown_cases(tmp_path):
    result = CliRunner().invoke(app, ["bench", "--case", "huge", "--out", str(tmp_path / "s")])
    assert result.exit_code == 2 and "unknown bench case" in result.output and not (tmp_path / "s").exists()


@pytest.mark.slow  # about a minute on 2 cores: the script runs for real on the device (benchmarks/gpu.sh)
def test_gpu_script_runs_in_smoke_mode_on_the_cpu(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for k in range(8):  # the ladder's smoke corpus: eight small documents, no download
        (corpus / f"{k}.txt").write_text(" ".join(f"word{(k * 7 + i * i) % 23}" for i in range(600)))
    env = {**os.environ, "RESFLOW_GPU_SMOKE": "1", "OUT": str(tmp_path / "gpu"), "PYTHON": sys.executable,
           "LADDER_CORPUS": str(corpus), "LADDER_WORKERS": "2"}
    out = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu.sh")], capture_output=True, text=True, env=env,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    files = {p.name for p in (tmp_path / "gpu").iterdir()}
    assert {"bench.json", "bench.txt", "paper-fits.json", "paper.txt", "machine.txt"} <= files
    assert "paper preset wall time" in (tmp_path / "gpu" / "paper.txt").read_text()
    assert {"ladder.txt", "ladder-report.md", "ladder-figure.png"} <= files
    assert "lm-ladder wall time" in (tmp_path / "gpu" / "ladder.txt").read_text()
    checks = json.loads((tmp_path / "gpu" / "bench.json").read_text())["checks"]
    assert checks[0]["other"] == "tf32=True" and checks[0]["max_relative_difference"] == 0.0  # no TF32 on a CPU
