"""The batched engine: equivalence with the per-student loop, determinism, resume after a kill, NaN handling."""

import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from resflow import ConfigError, Teacher
from resflow.analysis import token_metrics
from resflow.training import engine as engine_module
from resflow.training import train, train_reference
from resflow.training.block import StudentSpec
from resflow.training.config import TrainConfig, lr_multiplier
from resflow.training.engine import CHECKPOINT_NAME

# Same arithmetic in float64, batched (bmm) vs per-student (matmul): agreement to ~1e-12 over a few
# hundred Adam steps (measured 4e-16); 1e-9 leaves room for BLAS differences between machines.
EQUIVALENCE_RTOL = 1e-9


def small_teachers(*specs, width=8, depth=16, vocab=16):
    return {s: Teacher(s, width=width, depth=depth, vocab=vocab, seed=0) for s in specs}


def by_spec(result):
    return {(s.target, s.scheme, s.depth, s.replicate, None if math.isnan(s.temperature) else s.temperature): i
            for i, s in enumerate(result.specs)}


@pytest.mark.parametrize(("loss", "head", "temps"), [("mse", "learned", ()), ("kl", "learned", (0.1, 1.0)),
                                                     ("kl", "shared", (0.3,))])
def test_batched_engine_equals_per_student_loop(loss, head, temps):
    teachers = small_teachers("independent", "tied")
    temperatures = temps or (math.nan,)
    specs = [StudentSpec(t, sch, d, s, T) for t in teachers for sch in ("euler", "midpoint") for d in (2, 3)
             for s in (0, 1) for T in temperatures]
    cfg = TrainConfig(steps=150, batch=32, loss=loss, head=head, temperatures=temps, eval_every=50,
                      eval_batches=2, eval_batch_size=128, dtype="float64", lr_scale=4.0, constant_fraction=0.5)
    a, b = train(specs, teachers, cfg, seed=3), train_reference(specs, teachers, cfg, seed=3)
    ia, ib = by_spec(a), by_spec(b)
    assert ia.keys() == ib.keys() and a.eval_steps == b.eval_steps
    for key in ia:
        np.testing.assert_allclose(a.test_loss[ia[key]], b.test_loss[ib[key]], rtol=EQUIVALENCE_RTOL)
    assert (a.test_loss[:, -1] < a.test_loss[:, 0]).all()  # every student learned something


def tiny_run(tmp_path=None, steps=120, **kw):
    teachers = small_teachers("independent", "tied")
    specs = [StudentSpec(t, "euler", d, s) for t in teachers for d in (2, 4) for s in (0, 1)]
    cfg = TrainConfig(steps=steps, batch=32, eval_every=40, eval_batches=2, eval_batch_size=128, checkpoint_every=40,
                      **kw)
    return specs, teachers, cfg


def test_same_seed_same_result_bit_for_bit():
    specs, teachers, cfg = tiny_run()
    a, b = train(specs, teachers, cfg, seed=1), train(specs, teachers, cfg, seed=1)
    assert np.array_equal(a.test_loss, b.test_loss) and np.array_equal(a.final_batches, b.final_batches)
    c = train(specs, teachers, cfg, seed=2)
    assert not np.array_equal(a.test_loss[:, -1], c.test_loss[:, -1])


def test_resume_continues_exactly(tmp_path):
    specs, teachers, cfg = tiny_run()
    straight = train(specs, teachers, cfg, seed=1)
    first = train(specs, teachers, cfg, seed=1, run_dir=tmp_path, stop_after=80)
    assert first.steps_done == 80 and (tmp_path / CHECKPOINT_NAME).exists()
    resumed = train(specs, teachers, cfg, seed=1, run_dir=tmp_path, resume=True)
    assert np.array_equal(straight.test_loss, resumed.test_loss)
    assert np.array_equal(straight.final_batches, resumed.final_batches)


def test_resuming_a_finished_run_reproduces_its_final_evaluation(tmp_path):
    """A run killed after training but before its record was written resumes to the same numbers
    (the last checkpoint precedes the final evaluation; found by the sweep's killed-client test)."""
    specs, teachers, cfg = tiny_run(steps=100)  # not a multiple of checkpoint_every
    straight = train(specs, teachers, cfg, seed=1, run_dir=tmp_path)
    again = train(specs, teachers, cfg, seed=1, run_dir=tmp_path, resume=True)
    assert again.steps_done == straight.steps_done == 100
    assert np.array_equal(straight.test_loss, again.test_loss)
    assert np.array_equal(straight.final_batches, again.final_batches)


@pytest.mark.parametrize("optimizer", ["adam", "soap"])
def test_a_checkpoint_of_format_3_resumes_exactly(tmp_path, optimizer):
    """Runs checkpointed before the optimiser rules (format 3: buffers ``adam_m``, ``adam_v``, ``precond``,
    ``bases``) resume to the same numbers: the format-3 file is written from a format-4 one by hand."""
    specs, teachers, cfg = tiny_run(optimizer=optimizer)
    straight = train(specs, teachers, cfg, seed=1)
    train(specs, teachers, cfg, seed=1, run_dir=tmp_path, stop_after=80)
    checkpoint = torch.load(tmp_path / CHECKPOINT_NAME, weights_only=True)
    assert checkpoint["format"] == 4
    banks = checkpoint.pop("optimiser")
    old = {"adam_m": "m", "adam_v": "v", "precond": "factors", "bases": "bases"}
    checkpoint.update({key: [bank[name] for bank in banks if name in bank] for key, name in old.items()},
                      format=3)
    torch.save(checkpoint, tmp_path / CHECKPOINT_NAME)
    resumed = train(specs, teachers, cfg, seed=1, run_dir=tmp_path, resume=True)
    assert np.array_equal(straight.test_loss, resumed.test_loss)


def test_resume_refuses_a_different_configuration(tmp_path):
    specs, teachers, cfg = tiny_run()
    train(specs, teachers, cfg, seed=1, run_dir=tmp_path, stop_after=40)
    with pytest.raises(ConfigError, match="different configuration"):
        train(specs, teachers, cfg, seed=2, run_dir=tmp_path, resume=True)
    with pytest.raises(ConfigError, match="nothing to resume"):
        train(specs, teachers, cfg, seed=1, run_dir=tmp_path / "elsewhere", resume=True)


KILL_SCRIPT = """
import sys
from resflow.experiments import preset
from resflow.workflows import run_experiment
cfg = preset("smooth-vs-rough", "cpu").with_overrides(sys.argv[2:])
run_experiment(cfg, out=sys.argv[1])
"""
KILL_SETTINGS = ["train.steps=1500", "train.checkpoint_every=100", "train.eval_every=500", "depths=2,4",
                 "replicates=1", "width=8", "teacher_depth=8", "train.batch=16", "train.eval_batch_size=64",
                 "train.eval_batches=2", "train.device=cpu"]


@pytest.mark.slow  # about 50 s: a run SIGKILLed mid-training (test_resume_continues_exactly resumes in-process)
def test_resume_after_a_kill(tmp_path):
    from resflow.experiments import preset
    from resflow.workflows import run_experiment

    store = tmp_path / "store"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(store), *KILL_SETTINGS], env=env)
    deadline = time.time() + 120
    try:
        while time.time() < deadline:
            ckpts = list(store.glob(f"work/*/first/{CHECKPOINT_NAME}"))  # the first of the two routes' runs
            if ckpts and torch.load(ckpts[0], weights_only=True)["step"] >= 300:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be killed; make it longer"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    run_dir = next((store / "work").iterdir())
    killed_at = torch.load(run_dir / "first" / CHECKPOINT_NAME, weights_only=True)["step"]
    assert 300 <= killed_at < 1500 and not (run_dir / "record.txt").exists()
    assert not list((store / "runs").glob("*.zarr"))  # no half-written record
    cfg = preset("smooth-vs-rough", "cpu").with_overrides(KILL_SETTINGS)
    resumed = run_experiment(cfg, out=store, resume=True).dataset
    straight = run_experiment(cfg, out=tmp_path / "straight").dataset
    np.testing.assert_array_equal(resumed["test_loss"].values, straight["test_loss"].values)


def test_nan_student_is_marked_failed_and_the_others_continue(monkeypatch):
    teachers = small_teachers("independent")
    specs = [StudentSpec("independent", "euler", d, 0) for d in (2, 3, 4)]
    cfg = TrainConfig(steps=60, batch=32, eval_every=20, eval_batches=2, eval_batch_size=128)
    real = engine_module.student_lr
    monkeypatch.setattr(engine_module, "student_lr", lambda depth, c, **kw: math.inf if depth == 3 else real(depth, c, **kw))
    result = train(specs, teachers, cfg, seed=0)
    monkeypatch.setattr(engine_module, "student_lr", real)
    clean = train([s for s in specs if s.depth != 3], teachers, cfg, seed=0)
    i = {s.depth: k for k, s in enumerate(result.specs)}
    j = {s.depth: k for k, s in enumerate(clean.specs)}
    assert result.failed[i[3]] and not result.failed[i[2]] and not result.failed[i[4]]
    assert "became" in result.fail_reason[i[3]] and "at step" in result.fail_reason[i[3]]
    assert np.isnan(result.final_batches[i[3]]).all()
    for depth in (2, 4):
        np.testing.assert_allclose(result.test_loss[i[depth]], clean.test_loss[j[depth]], rtol=1e-5)


def test_a_failed_students_frozen_learning_rate_lives_in_the_state_and_survives_a_new_trainer(monkeypatch):
    """The trainer never changes (its learning rates stay as built); the state carries the frozen rates, and a
    trainer built afresh for the same state (a resume) keeps the failed student frozen from its first step."""
    teachers = small_teachers("independent")
    specs = [StudentSpec("independent", "euler", d, 0) for d in (2, 3)]
    cfg = TrainConfig(steps=20, batch=32, eval_every=20, eval_batches=1, eval_batch_size=64)
    real = engine_module.student_lr
    monkeypatch.setattr(engine_module, "student_lr", lambda depth, c, **kw: math.inf if depth == 3 else real(depth, c, **kw))
    trainer = engine_module.Trainer(specs, teachers, cfg)
    built = [lr.clone() for lr in trainer.lr]
    state = trainer.init(0)
    for _ in range(3):
        trainer.step(state, *trainer.next_batch(state))
    failed = [k for k, s in enumerate(trainer.order) if s.depth == 3]
    assert state.failed[failed].all() and state.frozen_lr  # frozen in the state ...
    assert all(torch.equal(a, b) for a, b in zip(trainer.lr, built, strict=True))  # ... not in the trainer
    again = engine_module.Trainer(specs, teachers, cfg)  # the same state in a new trainer, as after a resume
    state.frozen_lr = {}  # not checkpointed: rebuilt from `failed`
    before = [p.clone() for p in state.params]
    again.step(state, *again.next_batch(state))
    bank = next(k for k, b in enumerate(again.banks) if any(s.depth == 3 for s in b.specs))
    assert bank in state.frozen_lr  # rebuilt by the first step's finite check, before the update
    moved = [not torch.equal(a, b) for a, b in zip(before, state.params, strict=True)]
    assert any(moved)  # the healthy student trains on
    frozen_part = again.lr_of(state, bank) == 0
    assert frozen_part.any() and torch.allclose(before[bank][frozen_part], state.params[bank][frozen_part], rtol=0,
                                                atol=0, equal_nan=True)


def test_learning_rate_schedule():
    cfg = TrainConfig(steps=101, constant_fraction=0.5, decay="linear", final_lr_fraction=0.1)
    assert lr_multiplier(0, cfg) == 1.0 and lr_multiplier(50, cfg) == 1.0
    assert math.isclose(lr_multiplier(100, cfg), 0.1) and 0.1 < lr_multiplier(75, cfg) < 1.0
    geo = TrainConfig(steps=101, constant_fraction=0.5, decay="geometric", final_lr_fraction=0.01)
    assert math.isclose(lr_multiplier(100, geo), 0.01) and math.isclose(lr_multiplier(75, geo), 0.1, rel_tol=0.05)


def test_hidden_state_metrics_are_stored_per_layer():
    specs, teachers, cfg = tiny_run(steps=40)
    result = train(specs, teachers, cfg, seed=0, state_metrics=token_metrics)
    for k, spec in enumerate(result.specs):
        assert np.isfinite(result.hidden["step_angle"][k, : spec.depth]).all()
        assert np.isnan(result.hidden["step_angle"][k, spec.depth:]).all()
        assert np.isfinite(result.hidden["update_angle"][k, : spec.depth - 1]).all()
        assert np.isfinite(result.hidden["norm"][k, : spec.depth + 1]).all()
        assert result.hidden["progress"][k, spec.depth] == pytest.approx(1.0)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"loss": "kl"}, "needs at least one teacher temperature"),
    ({"loss": "hinge"}, "loss must be one of"),
    ({"steps": 0}, "steps must be a positive integer"),
    ({"constant_fraction": 1.5}, "constant_fraction must be"),
    ({"device": "tpu"}, "device must be one of"),
])
def test_train_config_validation(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**kwargs)


def test_cuda_request_without_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    specs, teachers, cfg = tiny_run(steps=2, device="cuda")
    with pytest.raises(ConfigError, match="no CUDA device"):
        train(specs, teachers, cfg)


