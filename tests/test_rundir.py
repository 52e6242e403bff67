"""The one scanner of a store's runs (resflow.workflows.rundir), on the cases each of the three scanners it
replaced handled: ``find_resumable`` (a checkpoint needed, a locked run skipped, the latest by start),
``unfinished_runs`` (run.json needed, finished runs left out, oldest first) and the ladder's own (models count
as work, a run started with other settings refused)."""

import json
import os

import pytest

from resflow.errors import ConfigError
from resflow.store import RunBusyError, run_lock
from resflow.training.engine import CHECKPOINT_NAME
from resflow.workflows import RunDir, find_resumable, resumable, run_dirs, unfinished_runs
from resflow.workflows.resume import find_unfinished


def make_run(store, run_id, *, experiment="smooth-vs-rough", started=None, work=None, record=None,
             info=True):
    path = store / "work" / run_id
    path.mkdir(parents=True)
    if info:
        found = RunDir(path)
        found.write_info({"experiment": experiment}, preset="quick", started=started)
    if work == "checkpoint":
        (path / CHECKPOINT_NAME).write_bytes(b"x")
    elif work == "stage":
        (path / "continuation").mkdir()
        (path / "continuation" / CHECKPOINT_NAME).write_bytes(b"x")
    elif work == "model":
        (path / "models" / "d2-w8-s0").mkdir(parents=True)
        (path / "models" / "d2-w8-s0" / "config.json").write_text("{}")
    if record:
        RunDir(path).write_record(record)
    return path


def test_a_run_dir_reads_what_a_run_writes(tmp_path):
    path = make_run(tmp_path, "smooth-vs-rough-20261207T100000Z", started="2026-12-07T10:00:00+00:00",
                    work="checkpoint")
    found = RunDir(path)
    assert found.is_run and found.run_id == path.name and found.store == tmp_path
    assert found.experiment == "smooth-vs-rough" and found.info()["preset"] == "quick"
    assert found.started.isoformat() == "2026-12-07T10:00:00+00:00"
    assert not found.finished and found.record is None and found.work_done and found.has_checkpoint
    found.write_record("toy-run--x")
    assert found.finished and found.record == "toy-run--x"
    assert not RunDir(tmp_path / "work" / "nothing").is_run
    (path / "run.json").write_text("{not json")
    assert RunDir(path).info() == {} and RunDir(path).experiment is None


def test_the_start_comes_from_the_id_when_run_json_has_none(tmp_path):
    path = make_run(tmp_path, "lm-ladder-20261201T080000Z", experiment="lm-ladder")
    assert RunDir(path).started.isoformat() == "2026-12-01T08:00:00+00:00"


def test_the_scanner_lists_runs_oldest_first_and_leaves_out_what_is_not_a_run(tmp_path):
    late = make_run(tmp_path, "smooth-vs-rough-20261207T120000Z", started="2026-12-07T12:00:00+00:00")
    early = make_run(tmp_path, "zz-smooth-vs-rough-20261207T090000Z", started="2026-12-07T09:00:00+00:00")
    done = make_run(tmp_path, "smooth-vs-rough-20261207T100000Z", started="2026-12-07T10:00:00+00:00",
                    record="toy-run--done")
    make_run(tmp_path, "demo-overview-20261207T110000Z", info=False)  # a demo's directory: not a run
    assert [r.path for r in run_dirs(tmp_path)] == [early, done, late]  # by start, not by name
    assert [r.path for r in run_dirs(tmp_path, unfinished=True)] == [early, late]
    assert [r.path for r in unfinished_runs(tmp_path)] == [early, late]
    assert run_dirs(tmp_path / "no-store") == []


def test_resume_takes_the_latest_run_that_did_work_and_is_not_locked(tmp_path):
    first = make_run(tmp_path, "smooth-vs-rough-20261207T090000Z", started="2026-12-07T09:00:00+00:00",
                     work="checkpoint")
    second = make_run(tmp_path, "smooth-vs-rough-20261207T100000Z", started="2026-12-07T10:00:00+00:00",
                      work="stage")
    make_run(tmp_path, "smooth-vs-rough-20261207T110000Z", started="2026-12-07T11:00:00+00:00")  # no work
    make_run(tmp_path, "smooth-vs-rough-20261207T120000Z", started="2026-12-07T12:00:00+00:00",
             work="checkpoint", record="toy-run--finished")
    make_run(tmp_path, "rk2-20261207T130000Z", experiment="rk2", started="2026-12-07T13:00:00+00:00",
             work="checkpoint")
    assert resumable(tmp_path, experiment="smooth-vs-rough").path == second  # a stage's checkpoint is work
    assert find_resumable(tmp_path, "smooth-vs-rough") == second
    assert resumable(tmp_path).run_id.startswith("rk2-")  # of any experiment: the latest
    with run_lock(second):  # in progress: skipped, and named when nothing else is left
        assert resumable(tmp_path, experiment="smooth-vs-rough").path == first
        assert find_unfinished(tmp_path, "smooth-vs-rough").path == first
        with run_lock(first), pytest.raises(ConfigError, match="in progress"):
            resumable(tmp_path, experiment="smooth-vs-rough")
        with pytest.raises(RunBusyError, match="in progress"):
            resumable(tmp_path, run=second.name)


@pytest.mark.parametrize(("case", "message"), [
    ("missing", "no run 'smooth-vs-rough-20261207T100000Z'"),
    ("finished", "is finished"),
    ("idle", "did no work"),
    ("unreadable", "unreadable"),
])
def test_resuming_a_run_by_id_names_why_it_cannot(case, message, tmp_path):
    run_id = "smooth-vs-rough-20261207T100000Z"
    if case != "missing":
        path = make_run(tmp_path, run_id, work=None if case == "idle" else "checkpoint",
                        record="toy-run--x" if case == "finished" else None)
        if case == "unreadable":
            (path / "run.json").write_text("[]")
    with pytest.raises(ConfigError, match=message):
        resumable(tmp_path, run=run_id)


def test_a_run_of_an_experiment_not_registered_here_is_not_resumed(tmp_path):
    make_run(tmp_path, "gone-20261207T100000Z", experiment="gone", work="checkpoint")
    with pytest.raises(ConfigError, match="no interrupted run"):
        resumable(tmp_path)


def test_a_ladder_resumes_from_its_models_and_not_before_any(tmp_path):
    ladder = make_run(tmp_path, "lm-ladder-20261207T100000Z", experiment="lm-ladder")
    with pytest.raises(ConfigError, match="no interrupted 'lm-ladder' run"):
        resumable(tmp_path, experiment="lm-ladder")
    (ladder / "models" / "d1").mkdir(parents=True)
    (ladder / "models" / "d1" / "weights").write_bytes(b"x")
    os.utime(ladder / "models" / "d1" / "weights")
    found = resumable(tmp_path, experiment="lm-ladder")
    assert found.path == ladder and found.work_done and not found.has_checkpoint


def test_the_ladder_refuses_a_run_started_with_other_settings(tmp_path):
    pytest.importorskip("transformers")
    from resflow.llm.ladder.train import LadderConfig
    from resflow.workflows.ladder import _resumable

    ladder = make_run(tmp_path, "lm-ladder-20261207T100000Z", experiment="lm-ladder", work="model")
    config = LadderConfig()
    RunDir(ladder).write_info(json.loads(config.to_json()))
    assert _resumable(tmp_path, config) == ladder
    other = json.loads(config.to_json())
    other["steps"] = config.steps + 1
    RunDir(ladder).write_info(other)
    with pytest.raises(ConfigError, match="different configuration"):
        _resumable(tmp_path, config)
