"""Constructions (students built from the teacher, not trained): what they are, and the laws they follow."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import resflow
from resflow import StudentSpec, Teacher, TrainConfig, train
from resflow.dynamics.fields import MLPField
from resflow.dynamics.stepper import solve_fixed
from resflow.probing.constructions import construction_fields, construction_loss, construction_output


def _teacher(spec, seed=0, depth=32):
    return Teacher(spec, width=16, depth=depth, hidden=64, seed=seed).double()


def _inputs(teacher, n=4096, seed=7):
    return teacher.sample_inputs(n, seed=seed).double()


@pytest.mark.parametrize("spec", ["independent", "tied", "correlated:0.5", "fractional:0.75", "grouped:4"])
def test_the_euler_construction_as_deep_as_its_teacher_is_the_teacher(spec):
    teacher = _teacher(spec, depth=16)
    assert construction_loss(teacher, 16, "euler", _inputs(teacher)) < 1e-28


def test_a_depth_that_does_not_divide_the_teachers_has_no_construction():
    teacher = _teacher("independent", depth=12)
    assert construction_fields(teacher, 5) is None
    assert construction_loss(teacher, 5, "euler", _inputs(teacher)) is None
    assert construction_loss(teacher, 0, "euler", _inputs(teacher)) is None


def test_the_block_sum_student_is_one_mlp_of_k_times_the_width():
    """For a rough teacher each Euler construction layer is the sum of its k teacher layers: one MLP whose
    hidden units are the k layers' units side by side, stepped with the teacher's own branch scale."""
    teacher, depth = _teacher("independent", depth=16), 4
    k = 16 // depth
    fields = teacher.stack.layer_fields
    x = _inputs(teacher, 512)
    h = resflow.dynamics.fields.rmsnorm(x)
    for i in range(depth):
        group = fields[i * k:(i + 1) * k]
        wide = MLPField.from_parameters(torch.cat([f.W1 for f in group]), torch.cat([f.b1 for f in group]),
                                        torch.cat([f.W2 for f in group], dim=1)).double()
        h = h + teacher.stack.step_size * wide(0.0, h)
    built = construction_output(teacher, depth, "euler", x)
    torch.testing.assert_close(built, resflow.dynamics.fields.rmsnorm(h), rtol=1e-12, atol=1e-12)


def test_the_tied_construction_is_the_teachers_field_integrated_in_fewer_steps():
    teacher, depth = _teacher("tied", depth=16), 4
    x = _inputs(teacher, 512)
    field = teacher.stack.layer_fields[0]
    for scheme in ("euler", "midpoint"):
        h = solve_fixed(field, resflow.dynamics.fields.rmsnorm(x), horizon=teacher.stack.horizon, n_steps=depth,
                        scheme=scheme)
        torch.testing.assert_close(construction_output(teacher, depth, scheme, x),
                                   resflow.dynamics.fields.rmsnorm(h), rtol=1e-12, atol=1e-12)


def _plain_alpha(spec, seed):
    teacher = _teacher(spec, seed=seed)
    depths = np.array([2, 4, 8, 16])
    losses = np.array([construction_loss(teacher, int(d), "euler", _inputs(teacher)) for d in depths])
    return -np.polyfit(np.log(depths), np.log(losses), 1)[0]


def test_the_block_sum_student_follows_the_finite_teacher_ensemble_law():
    """Law α of the rough teacher's construction over ℓ = 2–16 (L_T = 32): 1, within a 99% Student-t
    interval of the teacher seeds' spread (a law α of 1.3, the plain slope, must not pass)."""
    from resflow.testing.checks import construction_exponent, mean_tolerance

    alphas = np.array([construction_exponent(_teacher("independent", seed=s), "finite-teacher-ensemble",
                                             n_inputs=4096, seed=7)[0] for s in range(4)])
    half = mean_tolerance(alphas, confidence=0.99)
    assert abs(alphas.mean() - 1.0) <= half, (alphas, half)
    assert abs(alphas.mean() - 1.3) > half


def test_the_smooth_construction_falls_faster_with_depth_than_the_rough_one():
    rough = [_plain_alpha("independent", s) for s in range(2)]
    smooth = [_plain_alpha("tied", s) for s in range(2)]
    assert min(smooth) > max(rough) + 1.0, (smooth, rough)


def test_every_student_of_a_run_gets_its_constructions_loss():
    from resflow.workflows import TrainedStudents
    from resflow.workflows.constructions import CONSTRUCTIONS

    specs = [StudentSpec(t, "euler", d, 0) for t in ("tied", "independent") for d in (2, 3, 4)]
    specs += [StudentSpec("tied", "midpoint", 2, 0), StudentSpec("tied", "euler", 2, 0, length=0.5)]
    teachers = {t: Teacher(t, width=8, depth=8, seed=0) for t in ("tied", "independent")}
    result = train(specs, teachers, TrainConfig(steps=4, batch=8, eval_every=4, eval_batch_size=16, device="cpu"),
                   keep_parameters=True)
    out = CONSTRUCTIONS.measure(TrainedStudents.of_result(result, teachers))["construction_loss"]
    assert out.shape == (len(specs),)
    assert np.isnan(out[[1, 4]]).all()  # depth 3 does not divide 8
    assert np.isfinite(np.delete(out, [1, 4])).all()
    assert out[-1] == out[0] and out[-2] != out[0]  # shared over lengths, not over schemes
