"""The study's recipe, stated as properties of what the engine actually does.

Each test pins one line of the recipe directly (not by comparing two implementations that could
share a mistake): a student is the identity at initialisation; the learning rate scales as
1/sqrt(depth); every step sees a fresh batch and evaluation never sees a training input; the MSE
target is the teacher's normalised final state.  (That a series whose exponent still moves with
training length is not called converged is tested in tests/test_fitting.py.)
"""

import math

import numpy as np
import pytest
import torch

from resflow import Teacher, get_tableau
from resflow.sim import StudentSpec, TrainConfig, Trainer, init_student, student_forward
from resflow.sim.engine import PREFETCH

DEPTHS = (1, 2, 4, 16)


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
    from resflow.sim import lr_multiplier

    config = TrainConfig(steps=1000, constant_fraction=0.5, decay="geometric", final_lr_fraction=0.01)
    half = 500
    for step in range(half):
        assert lr_multiplier(step, config, half) == pytest.approx(lr_multiplier(2 * step, config), rel=0.02, abs=1e-12)
    assert lr_multiplier(half - 1, config, half) == pytest.approx(0.01)
    assert lr_multiplier(249, config, half) == 1.0 and lr_multiplier(251, config, half) < 1.0
