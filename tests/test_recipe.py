"""The study's recipe, stated as properties of what the engine actually does.

Each test pins one line of the recipe directly (not by comparing two implementations that could
share a mistake): a student is the identity at initialisation; the learning rate scales as
1/sqrt(depth); every step sees a fresh batch and evaluation never sees a training input; the MSE
target is the teacher's normalised final state.  (That a series whose exponent still moves with
training length is not called converged is tested in tests/test_fitting.py.)
"""

import json
import math

import numpy as np
import pytest
import torch

from resflow import ConfigError, Teacher, get_tableau
from resflow.training import StudentSpec, TrainConfig, Trainer, init_student, student_forward, train
from resflow.training.engine import PREFETCH

DEPTHS = (1, 2, 4, 16)
# the cpu preset trains two routes and two inits at five lengths (verdict v3); the recipe tests here need one route
ONE_ROUTE = ["routes=scratch", "inits=1", "lengths=0.25,0.5,1"]


def trainer(loss="mse", dtype="float64", **kw):
    teachers = {k: Teacher(k, width=8, depth=16, vocab=16, seed=0) for k in ("independent", "tied")}
    specs = [StudentSpec(t, s, d, 0, 1.0 if loss == "kl" else math.nan) for t in teachers
             for s in ("euler", "midpoint") for d in DEPTHS]
    temps = (1.0,) if loss == "kl" else ()
    config = TrainConfig(steps=100, batch=64, dtype=dtype, loss=loss, temperatures=temps, **kw)
    return Trainer(specs, teachers, config), teachers


def rms(h):
    return h / torch.sqrt(h.square().mean(-1, keepdim=True) + torch.finfo(h.dtype).eps)


@pytest.mark.parametrize("scheme", ["euler", "midpoint", "rk4"])
def test_a_student_is_the_identity_at_initialisation(scheme):
    params = init_student(StudentSpec("tied", scheme, 5, 3), 8, 32, 16, torch.float64)
    assert not params["W2"].any() and not params["head"].any() and params["W1"].any() and params["b1"].any()
    x = torch.randn(10, 8, dtype=torch.float64)
    torch.testing.assert_close(student_forward(params, x, get_tableau(scheme)), rms(x), rtol=1e-14, atol=0)


def test_the_engine_starts_every_student_at_the_identity():
    tr, teachers = trainer()
    state = tr.init(0)
    x = torch.randn(256, 8, dtype=torch.float64)
    expected = {k: float((rms(x) - rms(t.hidden_states(x.float()).double()[-1])).square().mean())
                for k, t in teachers.items()}  # identity student vs the normalised teacher state
    losses = tr.evaluate(state, x[None])  # one batch per replicate (one replicate here)
    for spec, value in zip(tr.order, losses.tolist(), strict=True):
        assert value == pytest.approx(expected[spec.target], rel=1e-5), spec


def test_the_mse_target_is_the_teachers_normalised_final_state():
    tr, teachers = trainer()
    x = torch.randn(128, 8, dtype=torch.float64)
    finals = tr.targets.final_states(x[None])
    for k, label in enumerate(tr.targets.labels):
        h_last = teachers[label].double().stack(rms(x), return_states=True)[-1]
        np.testing.assert_allclose(finals[k].numpy(), rms(h_last).numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(finals.square().mean(-1).numpy(), 1.0, rtol=1e-6)  # unit RMS per input


def first_update(tr, state, name):
    """Largest |change| of one parameter kind per student after the first step (W2 starts at zero)."""
    before = [p.clone() for p in state.params]
    tr.step(state, *tr.next_batch(state))
    out, offset = {}, 0
    for k, bank in enumerate(tr.banks):
        for layer_before, layer_after in zip(bank.layers(before[k]), bank.layers(state.params[k]), strict=True):
            delta = (getattr(layer_after, name) - getattr(layer_before, name)).abs().flatten(1).amax(1)
            for i, value in enumerate(delta.tolist()):
                out[offset + i] = max(out.get(offset + i, 0.0), value)
        offset += len(bank)
    return out


def test_the_learning_rate_scales_as_one_over_root_depth():
    """Adam's first step moves every parameter by lr * g / (|g| + eps): the largest change of a
    student's W2 is its learning rate to ~1e-6, so the ratio between depths 4 and 16 must be 2."""
    tr, _ = trainer(lr_scale=1.0, lr_base=1e-3)
    state = tr.init(0)
    moved = first_update(tr, state, "W2")
    lr = {(s.target, s.scheme, s.depth): moved[i] for i, s in enumerate(tr.order)}
    for target in ("independent", "tied"):
        for scheme in ("euler", "midpoint"):
            assert lr[(target, scheme, 4)] / lr[(target, scheme, 16)] == pytest.approx(2.0, rel=1e-4)
            assert lr[(target, scheme, 1)] == pytest.approx(1e-3, rel=1e-4)


def test_a_learned_heads_learning_rate_is_not_scaled_with_depth():
    """The study's recipe: the blocks' lr is c base / sqrt(depth), the head's c base at every depth."""
    tr, _ = trainer(loss="kl", lr_scale=1.0, lr_base=1e-3)
    state = tr.init(0)
    before = [tr.banks[k].head(p).clone() for k, p in enumerate(state.params)]
    tr.step(state, *tr.next_batch(state))
    for k, bank in enumerate(tr.banks):
        moved = (bank.head(state.params[k]) - before[k]).abs().flatten(1).amax(1)
        np.testing.assert_allclose(moved.numpy(), 1e-3, rtol=1e-4)


def test_every_training_step_sees_a_fresh_batch_and_evaluation_never_a_training_input():
    tr, _ = trainer()
    state = tr.init(0)
    seen = set()
    for _ in range(2 * PREFETCH + 3):  # across prefetch blocks
        x, _finals = tr.next_batch(state)
        rows = {tuple(r) for r in x[0].tolist()}
        assert len(rows) == x.shape[1] and not rows & seen
        seen |= rows
    for _ in range(3):
        rows = {tuple(r) for r in state.data.eval_batch(64)[0].tolist()}
        assert not rows & seen
        seen |= rows


def test_prefetched_targets_are_the_targets_of_their_batch():
    tr, _ = trainer()
    state = tr.init(0)
    for _ in range(PREFETCH + 2):
        x, finals = tr.next_batch(state)
        np.testing.assert_allclose(finals.numpy(), tr.targets.final_states(x).numpy(), rtol=1e-10, atol=1e-12)


def test_a_failed_student_is_frozen():
    """Once marked failed, a student's parameters never change again (its learning rate is zero), even
    though Adam's moments from earlier steps would still move them; the others keep training."""
    tr, _ = trainer()
    state = tr.init(0)
    for _ in range(3):  # non-zero Adam moments for everyone
        tr.step(state, *tr.next_batch(state))
    victim = 5
    state.failed[victim] = True
    bank_index = next(k for k in range(len(tr.banks)) if tr.offsets[k] <= victim < tr.offsets[k + 1])
    bank, local = tr.banks[bank_index], victim - tr.offsets[bank_index]
    before = {name: p.clone() for name, p in bank.student_parameters(state.params[bank_index], local).items()}
    others = state.params[bank_index].clone()
    for _ in range(3):
        tr.step(state, *tr.next_batch(state))
    after = bank.student_parameters(state.params[bank_index], local)
    assert all(torch.equal(before[name], after[name]) for name in before)
    assert not torch.equal(others, state.params[bank_index])


def test_a_half_length_student_runs_the_whole_schedule_compressed():
    """The half-length students' schedule is the full one at half speed: constant for the same
    fraction of *their* steps, ending at the same final fraction at their own last step."""
    from resflow.training import lr_multiplier

    config = TrainConfig(steps=1000, constant_fraction=0.5, decay="geometric", final_lr_fraction=0.01)
    half = 500
    for step in range(half):
        assert lr_multiplier(step, config, half) == pytest.approx(lr_multiplier(2 * step, config), rel=0.02, abs=1e-12)
    assert lr_multiplier(half - 1, config, half) == pytest.approx(0.01)
    assert lr_multiplier(249, config, half) == 1.0 and lr_multiplier(251, config, half) < 1.0


def _trained(specs, config, teachers):
    """Final loss and the whole evaluation curve of each student, by its repr."""
    from resflow.training import train

    result = train(specs, teachers, config, seed=3)
    finals = {repr(s): float(v) for s, v in zip(result.specs, result.final_batches.mean(axis=1), strict=True)}
    curves = {f"{s!r} curve": row for s, row in zip(result.specs, result.test_loss, strict=True)}
    return {**finals, **curves}


def test_shorter_copies_are_forked_where_their_schedule_is_the_full_ones():
    """A student of length 1/4 or 1/2 is forked from the full-length one at the end of its own constant
    phase, and ends exactly where a copy trained alone from the start ends (float64), its evaluation curve
    the same at every point (the fork step included): the fork saves work, never changes a student."""
    teachers = {k: Teacher(k, width=8, depth=8, vocab=16, seed=0) for k in ("independent", "tied")}
    config = TrainConfig(steps=80, batch=32, dtype="float64", eval_every=20, eval_batches=2, eval_batch_size=64,
                         constant_fraction=0.5, decay="geometric", final_lr_fraction=0.01, lr_scale=8.0)
    specs = [StudentSpec(t, "euler", d, 0, length=lam) for t in teachers for d in (2, 4) for lam in (0.25, 0.5, 1.0)]
    tr = Trainer(specs, teachers, config)
    lengths = [bank.specs[0].length for bank in tr.banks]
    assert lengths == [1.0, 0.5, 0.25] and tr.bank_parent == [None, 0, 0]
    assert tr.bank_start == [0, 20, 10] and tr.bank_steps == [80, 40, 20]  # half of each one's steps: constant
    together = _trained(specs, config, teachers)
    for lam in (0.25, 0.5):
        alone = _trained([s for s in specs if s.length == lam], config, teachers)
        for name, value in alone.items():
            assert np.allclose(together[name], value, rtol=1e-10, equal_nan=True), name


def test_a_students_budget_sets_its_steps_and_compresses_its_schedule():
    """budgets = (0.25, 1): a depth-2 student of a run to depth 8 trains a quarter of the steps, on the
    schedule compressed to them (its last step at the final learning rate); forked copies keep it."""
    from resflow.experiments import preset
    from resflow.training import lr_multiplier

    config = preset("smooth-vs-rough", "cpu").with_overrides(
        ["depths=8,2", "budgets=1,0.25", "replicates=1", "train.steps=400", *ONE_ROUTE])  # budgets follow depths
    specs = config.student_specs()
    steps = {(s.depth, s.length): s.steps(400) for s in specs}
    assert steps == {(2, 0.25): 25, (2, 0.5): 50, (2, 1.0): 100, (8, 0.25): 100, (8, 0.5): 200, (8, 1.0): 400}
    assert lr_multiplier(99, config.train, 100) == pytest.approx(config.train.final_lr_fraction)
    tr = Trainer(specs, config.teachers(), config.train)
    for k, bank in enumerate(tr.banks):
        assert tr.bank_steps[k] == bank.specs[0].steps(400)
        assert tr.bank_start[k] == (0 if bank.specs[0].length == 1.0 else math.ceil(tr.bank_steps[k] / 2))
    with pytest.raises(ConfigError, match="one share of the run's steps per depth"):
        config.with_overrides(["depths=2,4,8"])
    assert config.with_overrides(["budgets="]).to_dict() == preset("smooth-vs-rough", "cpu").with_overrides(
        ["depths=2,8", "replicates=1", "train.steps=400", *ONE_ROUTE]).to_dict()  # the default leaves run ids as they were


def test_each_replicate_has_its_own_teachers_and_the_targets_of_a_replicate_share_a_seed():
    """Replicate r's teachers have seed teacher_seed + r: different weights from replicate to replicate,
    the same seed for every target of one replicate (paired comparisons)."""
    from resflow.experiments import preset

    config = preset("smooth-vs-rough", "cpu").with_overrides(["replicates=3"])
    teachers = config.teachers()
    for target in config.targets:
        weights = [teachers[(target, r)].stack.layers[0].W1 for r in range(3)]
        assert not any(torch.equal(weights[i], weights[j]) for i in range(3) for j in range(i + 1, 3))
    for r in range(3):
        assert len({teachers[(t, r)].config.seed for t in config.targets}) == 1
        assert teachers[("tied", r)].config.seed == config.teacher_seed + r


@pytest.mark.parametrize("scheme", ["euler", "midpoint"])
def test_a_split_layer_is_two_half_steps_of_the_same_field(scheme):
    """split_layers: layer l of the depth-2l student pair is layer l at half step, twice (any tableau)."""
    from resflow.training import split_layers
    from resflow.training.block import student_block

    torch.manual_seed(0)
    params = init_student(StudentSpec("tied", scheme, 3, 0), 8, 32, 16, torch.float64)
    params["W2"] = 0.1 * torch.randn_like(params["W2"])
    split = split_layers(params)
    assert split["W1"].shape[0] == 6 and torch.equal(split["W1"][4], params["W1"][2])
    x = torch.randn(5, 8, dtype=torch.float64)
    half = {**params, "W2": params["W2"] / 2}
    tableau = get_tableau(scheme)
    h = rms(x)
    for layer in range(3):
        for _ in range(2):
            h = student_block(h, half["W1"][layer], half["b1"][layer], half["W2"][layer], tableau)
    torch.testing.assert_close(student_forward(split, x, tableau), h)


def test_doubling_continuation_starts_each_depth_from_the_split_of_the_one_before():
    from resflow.training import train_by_doubling

    teachers = {"tied": Teacher("tied", width=8, depth=8, vocab=16, seed=0)}
    specs = [StudentSpec("tied", "euler", d, 0) for d in (1, 2, 4)]
    config = TrainConfig(steps=40, batch=32, eval_every=20, eval_batches=1, eval_batch_size=64, dtype="float64")
    chained = train_by_doubling(specs, teachers, config, seed=0)
    alone = train(specs, teachers, config, seed=0)
    order = {s.depth: i for i, s in enumerate(chained.specs)}
    same = {s.depth: i for i, s in enumerate(alone.specs)}
    # the shallowest is trained from scratch in both; the deeper ones start where the shallower ended
    assert chained.test_loss[order[1], -1] == pytest.approx(alone.test_loss[same[1], -1], rel=1e-12)
    for d in (2, 4):
        assert chained.test_loss[order[d], 0] == pytest.approx(chained.test_loss[order[d // 2], -1], rel=0.5)
        assert chained.test_loss[order[d], 0] < alone.test_loss[same[d], 0]  # not the identity
    with pytest.raises(ConfigError, match="double"):
        train_by_doubling([StudentSpec("tied", "euler", d, 0) for d in (2, 3)], teachers, config)


def test_doubling_continuation_with_budgets_resumes_stage_by_stage(tmp_path):
    """A deeper student with its own budget still starts from its shallower counterpart (whatever that one's
    budget); an interrupted chain is found by --resume, and stop_after is refused with a reason."""
    from resflow.experiments import preset
    from resflow.workflows import find_resumable, run_experiment

    config = preset("smooth-vs-rough", "cpu").with_overrides(
        ["depths=2,4", "budgets=1,0.5", "replicates=1", "train.steps=8", "train.eval_every=4",
         "train.eval_batches=1", "train.eval_batch_size=16", "train.batch=8", "init=doubling", "targets=tied",
         *ONE_ROUTE])
    run_dir = tmp_path / "work" / "smooth-vs-rough-20260101T000000Z"
    (run_dir / "depth-2").mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"config": json.loads(config.to_json()), "preset": "cpu",
                                                  "started": "2026-01-01T00:00:00+00:00"}))
    from resflow.workflows.run import train_dataset

    steps, ds, _ = train_dataset(config, run_dir=run_dir)
    assert steps == 8 and ds is not None
    assert find_resumable(tmp_path, "smooth-vs-rough") == run_dir  # stage checkpoints, no record yet
    with pytest.raises(ConfigError, match="stop_after"):
        run_experiment(config, out=tmp_path / "other", stop_after=4)


def test_a_copy_that_starts_elsewhere_is_not_forked():
    """Forks assume the copies start where the full-length student starts; given other initial parameters
    (depth-doubling continuation at every length), each copy trains from its own start."""
    teachers = {"tied": Teacher("tied", width=8, depth=8, vocab=16, seed=0)}
    specs = [StudentSpec("tied", "euler", 2, 0, length=lam) for lam in (0.5, 1.0)]
    config = TrainConfig(steps=40, batch=16, dtype="float64")
    same = init_student(specs[0], 8, 32, 16, torch.float64)
    assert Trainer(specs, teachers, config, {s: same for s in specs}).bank_parent == [None, 0]
    other = {**same, "W2": torch.full_like(same["W2"], 0.01)}
    assert Trainer(specs, teachers, config, {specs[0]: other, specs[1]: same}).bank_parent == [None, None]
