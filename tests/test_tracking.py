"""A student against its teacher along depth: the tracking metrics on hand-made cases, and in a run's record."""

import math

import numpy as np
import pytest
import torch
import xarray as xr

from resflow import Teacher
from resflow.errors import ShapeError
from resflow.probing.tracking import tracking_metrics


def _teacher_states(depth=8, width=6, n=200, seed=0, family="tied"):
    teacher = Teacher(family, width=width, depth=depth, vocab=8, seed=seed)
    x = torch.randn(n, width, generator=torch.Generator().manual_seed(1))
    return teacher, teacher.hidden_states(x)


def _propagated(teacher, local, k):
    return torch.stack([teacher.propagate(local[i], (i + 1) * k) for i in range(local.shape[0])])


def test_a_student_on_the_teachers_path_has_no_error():
    teacher, states = _teacher_states()
    k = 2
    student_states = states[::k]
    local = states[k::k]  # each student layer lands exactly where the teacher's k layers do
    out = tracking_metrics(student_states, states, local, _propagated(teacher, local, k))
    assert float(out["trajectory_error"].abs().max()) == 0.0 and float(out["local_error"].max()) == 0.0
    assert float(out["output_error"].max()) < 1e-10
    assert float(out["path_error"].max()) < 1e-12
    torch.testing.assert_close(out["path_time"][:, 0], torch.arange(5) / 4.0)


def test_a_student_on_the_teachers_path_at_another_pace_has_a_path_error_of_zero():
    """States taken at other points of the teacher's path: far from the teacher at matching times, on its path."""
    teacher, states = _teacher_states()
    student_states = states[[0, 1, 2, 4, 8]]  # a depth-4 student, on the path, front-loaded
    local = states[[2, 4, 6, 8]]
    out = tracking_metrics(student_states, states, local, _propagated(teacher, local, 2))
    assert float(out["trajectory_error"][1:4].mean()) > 100 * float(out["path_error"][1:4].max())
    torch.testing.assert_close(out["path_time"][:, 0], torch.tensor([0, 1, 2, 4, 8]) / 8.0)


def test_the_euler_student_of_a_tied_teachers_field_has_exactly_the_euler_local_error():
    teacher, states = _teacher_states()
    k = 4
    step = states[1:] - states[:-1]
    local = states[:-1:k] + k * step[::k]  # one Euler step k*s of the tied field from the teacher's states
    out = tracking_metrics(states[::k], states, local, _propagated(teacher, local, k))
    torch.testing.assert_close(out["local_error"], out["euler_local_error"])
    assert float(out["local_error"].mean()) > 0


@pytest.mark.parametrize("kind", ["coherent", "incoherent"])
def test_coherence_is_the_depth_for_equal_errors_and_one_for_orthogonal_ones(kind):
    """Layer errors that are equal add up ell-fold in the squared sum (C = ell); orthogonal ones do not (C = 1).
    Built with a teacher of unit branch scale so a local error of the last layers reaches the output as it is."""
    depth, n, width = 4, 500, 8
    states = torch.zeros(depth + 1, n, width)
    states[:, :, 0] = 10.0  # a constant path: the teacher's output rmsnorm(h) is e_0 * sqrt(width)
    bump = 1e-3
    if kind == "coherent":
        errors = torch.zeros(depth, n, width)
        errors[:, :, 1] = bump
    else:
        errors = torch.zeros(depth, n, width)
        for layer in range(depth):
            errors[layer, :, 1 + layer] = bump
    local = states[1:] + errors
    # propagation by an identity teacher: the output moves with the local error
    propagated = local.clone()
    student = states.clone()
    student[-1] = states[-1] + errors.sum(0)
    out = tracking_metrics(student, states, local, propagated)
    expected = depth if kind == "coherent" else 1.0
    assert float(out["error_coherence"]) == pytest.approx(expected, rel=1e-3)
    assert float(out["error_linearity"]) < 1e-3  # small errors: the output error is their sum
    assert float(out["local_error_angle"].mean()) == pytest.approx(0.0 if kind == "coherent" else math.pi / 2,
                                                                    abs=1e-3)


def test_a_depth_that_does_not_divide_the_teachers_is_refused():
    _, states = _teacher_states(depth=8)
    with pytest.raises(ShapeError, match="divide"):
        tracking_metrics(states[:4], states, states[:3], states[:3])


def test_every_run_record_holds_its_students_tracking(tmp_path):
    import resflow

    config = resflow.preset("smooth-vs-rough", "cpu").with_overrides(
        ["train.steps=60", "train.eval_every=30", "depths=2,4", "replicates=1", "train.device=cpu",
         "teacher_depth=8"])
    ds = resflow.run_experiment(config, out=tmp_path / "store").dataset
    for name in ("trajectory_error", "local_error", "euler_local_error", "output_error", "error_coherence",
                 "error_linearity"):
        assert name in ds and "long_name" in ds[name].attrs
    # every student the run trained has its tracking; the cells of a route that does not train a depth
    # (continuation at the shallowest depth) stay empty
    from resflow.records import trained_cells

    coherence, trained = xr.broadcast(ds["error_coherence"], trained_cells(ds))
    coherence, trained = coherence.values, trained.transpose(*coherence.dims).values
    assert trained.any() and not trained.all()
    assert np.all(np.isfinite(coherence[trained])) and np.all(coherence[trained] > 0)
    assert np.all(np.isnan(coherence[~trained]))
    # a student's trajectory error starts at 0 (same input state) and its layers beyond its depth are NaN
    tied = ds.sel(target="tied", depth=2, length=1.0).isel(scheme=0, replicate=0, student_groups=0, temperature=0,
                                                        route=0, init=0)
    assert float(tied["trajectory_error"].sel(layer=0)) == 0.0 and np.isnan(float(tied["trajectory_error"].sel(layer=3)))
    # the report prints the run's tables from its record: losses by length, the verdict, the estimate, tracking
    from typer.testing import CliRunner

    from resflow.cli import app
    from resflow.workflows import report_run as report

    text = report(str(tmp_path / "store"))
    cli = CliRunner().invoke(app, ["report", str(tmp_path / "store")], env={"COLUMNS": None})  # a log: as written
    assert cli.exit_code == 0 and cli.stdout.strip() == text.strip()
    for header in ("| teacher | α [95%] | law α [95%] | standing |", "| teacher | length | ℓ = 2 | ℓ = 4 |",
                   "| teacher | drift [90%] |", "asymptotic α [95%] (estimate)", "coherence exponent c",
                   "path time of h_1", "| teacher | ℓ | route spread [upper] |"):
        assert header in text, header
    assert report(str(tmp_path / "store"), replicate=0).splitlines()[0].endswith(
        "1 replicate, routes scratch + continuation, 2 inits each")
    from resflow.errors import ConfigError

    with pytest.raises(ConfigError, match="replicate must be one of"):
        report(str(tmp_path / "store"), replicate=5)
    with pytest.raises(ConfigError, match="no record 'nope'"):
        report(str(tmp_path / "store"), "nope")
    refused = CliRunner().invoke(app, ["report", str(tmp_path / "store"), "--experiment", "rk2"])
    assert refused.exit_code == 2 and "no run of 'rk2'" in refused.output
