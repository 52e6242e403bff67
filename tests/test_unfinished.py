"""Runs without a record yet (issue 36): listed by `store check` and `report` with their state, progress and the
command that resumes them; a run that fails before any work leaves no directory, and one that did no work is a
leftover `store gc` removes; `--resume` reads the saved configuration and refuses a flag that conflicts with it."""

import json
import shutil

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from resflow.cli import app
from resflow.experiments import ExperimentConfig, preset, registered
from resflow.store import RunBusyError, Store, run_lock
from resflow.workflows import check_store, gc_store, resume_config, run_experiment, unfinished_runs
from resflow.workflows.unfinished import IN_PROGRESS, INTERRUPTED, NO_WORK, UNKNOWN, config_from_dict

runner = CliRunner()
# two routes (the run trains twice: first, then continuation), one replicate: a few seconds on one core
TINY = ["train.steps=40", "train.eval_every=20", "train.eval_batches=2", "train.eval_batch_size=64", "train.batch=16",
        "width=6", "teacher_depth=8", "vocab=8", "depths=2,4", "replicates=1", "train.device=cpu",
        "lengths=0.5,1"]
STOP_AT = 20  # where the interrupted run stops (of 40 steps of its first run)


def one_line(output: str) -> str:
    return " ".join(output.split())


@pytest.fixture(scope="module")
def tiny():
    return preset("smooth-vs-rough", "cpu").with_overrides(TINY)


@pytest.fixture(scope="module")
def whole(tiny, tmp_path_factory):
    """The run trained straight through: what a resumed run must equal."""
    return run_experiment(tiny, out=tmp_path_factory.mktemp("whole"), preset="cpu")


def interrupted(tiny, store) -> str:
    """A run of ``tiny`` in ``store`` stopped (checkpointed) at STOP_AT; its run id."""
    stopped = run_experiment(tiny, out=store, stop_after=STOP_AT, preset="cpu")
    assert not stopped.finished
    return stopped.work_dir.name


# ---------------------------------------------------------------- runs in progress are visible
def test_store_check_and_report_name_an_interrupted_run_and_how_to_resume_it(tiny, tmp_path):
    run_id = interrupted(tiny, tmp_path)
    checked = runner.invoke(app, ["store", "check", str(tmp_path)], env={"COLUMNS": "200"})
    assert checked.exit_code == 0, checked.output
    text = one_line(checked.output)
    assert "0 records" in text and "1 unfinished runs" in text and "0 leftovers" in text
    assert f"{run_id}: {INTERRUPTED}" in text and "smooth-vs-rough, preset cpu with" in text and "started 20" in text
    assert f"checkpoint at step {STOP_AT} of 80 (first {STOP_AT}, 1 more not started)" in text
    assert f"resume: resflow run {run_id} --out {tmp_path} --resume" in text
    report = runner.invoke(app, ["report", str(tmp_path)])
    assert report.exit_code == 2 and "Traceback" not in report.output
    assert f"{run_id} ({INTERRUPTED}, checkpoint at step {STOP_AT} of 80)" in one_line(report.output)
    assert "no toy run" in report.output and f"resflow store check {tmp_path}" in one_line(report.output)


def test_a_run_whose_lock_is_held_is_in_progress_and_is_not_resumed(tiny, tmp_path):
    """The lock, not a PID, says a process still works on the run: held here (as the run's own process holds it),
    the run is in progress; `--resume` refuses it (two processes would write one checkpoint)."""
    run_id = interrupted(tiny, tmp_path)
    with run_lock(tmp_path / "work" / run_id):
        [run] = check_store(tmp_path).unfinished
        assert run.state == IN_PROGRESS and run.work_done and run.done == STOP_AT
        assert "resume:" not in "\n".join(run.lines())  # it is running: nothing to resume
        with pytest.raises(RunBusyError, match="in progress"):
            resume_config(tmp_path, run_id)
        refused = runner.invoke(app, ["run", "--out", str(tmp_path), "--resume"])
        assert refused.exit_code == 2 and f"({run_id} in progress)" in one_line(refused.output)
    assert check_store(tmp_path).unfinished[0].state == INTERRUPTED  # released with its holder


def test_a_killed_process_leaves_its_run_interrupted(tmp_path):
    """Across processes: the lock of a live process reads as held, and a kill (no cleanup runs) frees it."""
    import signal
    import subprocess
    import sys
    import time

    from resflow.store import lock_holder

    hold = "import sys, time; from resflow.store import run_lock\nwith run_lock(sys.argv[1]):\n print('held', flush=True); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", hold, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        writer, held = lock_holder(tmp_path)
        assert held is True and writer.startswith(f"{child.pid}@")
        with pytest.raises(RunBusyError, match="in progress"), run_lock(tmp_path):
            pass
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    deadline = time.time() + 10
    while lock_holder(tmp_path)[1] and time.time() < deadline:
        time.sleep(0.05)
    assert lock_holder(tmp_path) == (writer, False)


def test_report_of_a_store_with_records_names_its_unfinished_runs_on_stderr(tiny, whole, tmp_path):
    store = whole.work_dir.parents[1]
    shutil.copytree(store, tmp_path / "s")
    run_id = interrupted(tiny, tmp_path / "s")
    result = runner.invoke(app, ["report", str(tmp_path / "s")])
    assert result.exit_code == 0, result.output
    assert run_id not in result.stdout and f"1 run without a record yet: {run_id}" in one_line(result.stderr)


def test_an_unfinished_ladder_says_how_many_models_it_trained(tmp_path):
    """A language-model ladder is listed too: its progress is its models with a result."""
    from resflow.llm.ladder.train import model_name

    config = preset("lm-ladder", "tiny")
    run_dir = Store.open(tmp_path, create=True).work_dir("lm-ladder")
    (run_dir / "run.json").write_text(json.dumps({"config": json.loads(config.to_json())}))
    for model in config.models()[:2]:
        (run_dir / "models" / model_name(*model)).mkdir(parents=True)
        (run_dir / "models" / model_name(*model) / "result.json").write_text("{}")
    [run] = check_store(tmp_path).unfinished
    assert run.state == UNKNOWN and run.preset == "tiny" and not run.changes  # a run without a lock: cannot tell
    text = "\n".join(run.lines())
    assert f"2 of {len(config.models())} models trained" in text and run.resume_command in text


# ---------------------------------------------------------------- a failed start leaves nothing; idle runs are leftovers
@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: cuda is a valid device")
def test_a_run_refused_for_its_device_leaves_no_run_directory(tiny, tmp_path):
    store = Store.open(tmp_path / "s", create=True)
    result = runner.invoke(app, ["run", "smooth-vs-rough", "--device", "cuda", "--out", str(tmp_path / "s")])
    assert result.exit_code == 2 and "no CUDA device" in result.output
    assert not list((store.path / "work").iterdir())
    fresh = runner.invoke(app, ["run", "smooth-vs-rough", "--device", "cuda", "--out", str(tmp_path / "fresh")])
    assert fresh.exit_code == 2 and not (tmp_path / "fresh").exists()  # the device is checked before anything


def test_a_run_that_fails_before_its_first_checkpoint_leaves_no_run_directory(tiny, tmp_path, monkeypatch):
    import resflow.workflows.stages as stages

    def broken(*args, **kwargs):
        raise RuntimeError("training failed at its first step")

    monkeypatch.setattr(stages, "train_routes", broken)
    with pytest.raises(RuntimeError, match="first step"):
        run_experiment(tiny, out=tmp_path)
    assert not list((tmp_path / "work").iterdir())


def test_store_check_lists_a_run_directory_without_work_and_gc_removes_it(tiny, tmp_path):
    """What a failed start used to leave (run.json only) is a leftover: removable once its lock is free; one of a
    resflow before run locks is kept while it may still be starting; a run at work is never touched."""
    store = Store.open(tmp_path, create=True)
    config = {"config": json.loads(tiny.to_json())}
    idle, old, busy = (store.work_dir("smooth-vs-rough") for _ in range(3))
    for run_dir in (idle, old, busy):
        (run_dir / "run.json").write_text(json.dumps(config))
    with run_lock(idle):  # taken and released: its process is gone
        pass
    with run_lock(busy):
        report = check_store(tmp_path)
        leftovers = {left.path: left for left in report.leftovers}
        assert set(leftovers) == {idle, old} and all(left.what == NO_WORK for left in leftovers.values())
        assert leftovers[idle].removable and not leftovers[old].removable
        assert "without run locks" in leftovers[old].kept_because
        assert [(r.path, r.state) for r in report.unfinished] == [(busy, IN_PROGRESS)]
        checked = runner.invoke(app, ["store", "check", str(tmp_path)], env={"COLUMNS": "200"})
        text = one_line(checked.output)
        assert f"{NO_WORK} {idle.name}" in text and f"removable by `resflow store gc {tmp_path}`" in text
        assert f"{busy.name}: {IN_PROGRESS}" in text and "no checkpoint yet" in text
        assert gc_store(tmp_path, dry_run=True).removed == [idle] and idle.exists()
        gone = runner.invoke(app, ["store", "gc", str(tmp_path)])
        assert gone.exit_code == 0 and "1 leftovers removed" in one_line(gone.output)
        assert not idle.exists() and old.exists() and busy.exists()
    assert [r.state for r in unfinished_runs(tmp_path) if r.path == old] == [UNKNOWN]


# ---------------------------------------------------------------- --resume reads the saved configuration
def test_resume_with_no_flag_finishes_the_run_as_if_never_interrupted(tiny, whole, tmp_path):
    run_id = interrupted(tiny, tmp_path)
    result = runner.invoke(app, ["run", "--out", str(tmp_path), "--resume"])  # the latest run of the store
    assert result.exit_code == 0, result.output
    assert f"{run_id} (cpu)" in result.output  # the run's own preset and configuration, no flag given
    [record] = Store.open(tmp_path).records(kind="toy-run")
    resumed = Store.open(tmp_path).load(record)
    np.testing.assert_array_equal(resumed["final_loss_batch"].values, whole.dataset["final_loss_batch"].values)
    assert json.loads(resumed.attrs["config"]) == json.loads(whole.dataset.attrs["config"])
    assert not check_store(tmp_path).unfinished


@pytest.mark.parametrize(("flags", "message"), [
    (["--set", "train.steps=500"], "--set train.steps=500 conflicts with the interrupted run's train.steps=40; drop "
                                   "--set train.steps=500 to resume it, or start a new run without --resume"),
    (["--replicates", "3"], "--replicates 3 conflicts with the interrupted run's replicates=1; drop --replicates"),
    (["--preset", "study"], "--preset study conflicts with the interrupted run's preset cpu; drop --preset"),
    (["--device", "auto"], "--device auto conflicts with the interrupted run's train.device=cpu; drop --device"),
])
def test_resume_refuses_a_flag_that_conflicts_with_the_saved_run_in_one_line(flags, message, tiny, tmp_path):
    run_id = interrupted(tiny, tmp_path)
    result = runner.invoke(app, ["run", run_id, "--out", str(tmp_path), "--resume", *flags])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert message in one_line(result.output) and len(result.output.strip().splitlines()) <= 3  # one line, wrapped
    agreeing = resume_config(tmp_path, "smooth-vs-rough", preset="cpu", sets=["train.steps=40", "depths=4,2"],
                             device="cpu", replicates=1)
    assert agreeing.run_id == run_id and agreeing.config == tiny


def test_resume_names_what_cannot_be_resumed(tiny, tmp_path):
    interrupted(tiny, tmp_path)
    for run, message in (("nope", "is neither an experiment"), ("rk2", "no interrupted 'rk2' run to resume")):
        result = runner.invoke(app, ["run", run, "--out", str(tmp_path), "--resume"])
        assert result.exit_code == 2 and message in one_line(result.output), result.output


@pytest.mark.parametrize("experiment", sorted(registered()))
def test_every_preset_is_rebuilt_from_what_a_run_saves(experiment):
    for config in registered()[experiment].presets.values():
        rebuilt = config_from_dict(type(config), json.loads(config.to_json()))
        assert rebuilt == config and rebuilt.to_json() == config.to_json()
    with pytest.raises(Exception, match="does not know: nope"):
        config_from_dict(ExperimentConfig, {"experiment": experiment, "nope": 1})
