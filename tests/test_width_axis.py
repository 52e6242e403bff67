"""The student's hidden width as an axis: the spec and config key, the engine, axis presets and their report,
and the approximation view's law (theory/width.py)."""

import dataclasses
import math

import numpy as np
import pytest
import sympy as sp
from test_sweep import TINY
from typer.testing import CliRunner

from resflow import ConfigError, Teacher, laws
from resflow.cli import app
from resflow.experiments import get_experiment
from resflow.experiments import preset as load_preset
from resflow.theory import width
from resflow.training import train, train_reference
from resflow.training.block import StudentSpec
from resflow.training.config import TrainConfig
from resflow.workflows import SweepPlan, axis_report, run_sweep

EQUIVALENCE_RTOL = 1e-9  # as tests/test_engine.py: float64 batched against the per-student loop


def test_a_students_hidden_width_is_its_own_and_zero_means_its_teachers():
    assert StudentSpec("tied", "euler", 2, 0, hidden=32).hidden == 32
    assert "hidden" not in repr(StudentSpec("tied", "euler", 2, 0))  # checkpoint fingerprints as before
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match="hidden"):
            StudentSpec("tied", "euler", 2, 0, hidden=bad)
    with pytest.raises(ConfigError, match="student_hidden"):
        dataclasses.replace(load_preset("smooth-vs-rough", "quick"), student_hidden=-2)


def test_the_default_width_leaves_every_run_id_as_it_was():
    config = load_preset("smooth-vs-rough", "cpu")
    assert "student_hidden" not in config.to_dict()
    wide = config.with_overrides(["student_hidden=128"])
    assert wide.to_dict()["student_hidden"] == 128 and {s.hidden for s in wide.student_specs()} == {128}


def test_students_of_three_widths_train_in_one_run_and_match_the_per_student_loop():
    teachers = {t: Teacher(t, width=8, depth=8, vocab=16, seed=0) for t in ("independent", "tied")}
    specs = [StudentSpec(t, "euler", d, 0, hidden=h) for t in teachers for d in (2, 4) for h in (0, 8, 48)]
    cfg = TrainConfig(steps=120, batch=32, eval_every=40, eval_batches=2, eval_batch_size=128, dtype="float64",
                      lr_scale=4.0, constant_fraction=0.5)
    a = train(specs, teachers, cfg, seed=1, keep_parameters=True)
    b = train_reference(specs, teachers, cfg, seed=1)
    ia, ib = {s: i for i, s in enumerate(a.specs)}, {s: i for i, s in enumerate(b.specs)}
    for spec in specs:
        np.testing.assert_allclose(a.test_loss[ia[spec]], b.test_loss[ib[spec]], rtol=EQUIVALENCE_RTOL)
        w1 = a.parameters[spec]["W1"]
        assert w1.shape[-2] == (spec.hidden or teachers[spec.target].config.hidden)
    # widths differ in what they learn: the students of one target and depth are not copies
    loss = {s: a.test_loss[ia[s], -1] for s in specs}
    assert len({loss[StudentSpec("tied", "euler", 4, 0, hidden=h)] for h in (0, 8, 48)}) == 3


def test_an_axis_preset_declares_its_grid_and_run_refuses_it_naming_the_sweep():
    experiment = get_experiment("student-width")
    assert experiment.grid("cpu") == ("student_hidden=32,64,128",)
    assert SweepPlan("student-width", "cpu").grid == (("student_hidden", ("32", "64", "128")),)
    assert SweepPlan("student-width", "cpu", grid=(("student_hidden", ("16",)),)).grid[0][1] == ("16",)
    assert get_experiment("smooth-vs-rough").grid("cpu") == ()
    result = CliRunner().invoke(app, ["run", "student-width", "--preset", "cpu"])
    assert result.exit_code != 0 and "resflow sweep student-width --preset cpu" in result.output
    assert "Traceback" not in result.output
    listed = CliRunner().invoke(app, ["run", "student-width", "--preset", "cpu", "--list-keys"])
    assert listed.exit_code == 0 and "student_hidden" in listed.output  # its keys are still listed


def test_grids_of_an_experiment_name_its_presets():
    from resflow.experiments import Experiment

    base = load_preset("smooth-vs-rough", "quick")
    with pytest.raises(ConfigError, match="grids"):
        Experiment(name="smooth-vs-rough", summary="", presets={"quick": base}, figure=print,
                   grids={"nope": {"student_hidden": (8,)}})


@pytest.fixture(scope="module")
def width_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("width") / "store"
    plan = SweepPlan("smooth-vs-rough", "cpu", (*TINY, "train.steps=60"), (("student_hidden", ("8", "32")),), 2)
    result = run_sweep(plan, out=out, workers=0, threads=1)
    assert result.complete
    return out, result.sweep_id


def test_the_axis_report_fits_each_width_and_gives_the_slope_along_it(width_sweep):
    out, sweep_id = width_sweep
    text = axis_report(out, "student_hidden")
    assert f"sweep {sweep_id}" in text and "2 values of student_hidden, 4 cells" in text
    rows = [line for line in text.splitlines() if line.startswith(("| 8 |", "| 32 |"))]
    assert len(rows) == 4  # two widths x two teachers
    assert "slope 8→32" in text and "Readings." in text
    slopes = [line.split("|")[-2].strip() for line in text.splitlines() if line.startswith("| tied |")]
    assert len(slopes) == 2 and all(s.startswith(("+", "-")) for s in slopes)  # depths 2, 4: a number each
    # the slope is what the losses say: recomputed from the table's own columns
    row = next(line for line in text.splitlines() if line.startswith("| tied | 2 |")).split("|")
    a, b, slope = float(row[3]), float(row[4]), float(row[5])
    assert slope == pytest.approx(-math.log(b / a) / math.log(4), abs=0.006)


def test_the_axis_figure_carries_the_sweeps_provenance_and_never_overwrites(width_sweep, tmp_path):
    from PIL import Image

    from resflow.workflows import axis_figure

    out, sweep_id = width_sweep
    path = axis_figure(out, "student_hidden", tmp_path / "axis.png")
    description = Image.open(path).text["Description"]
    assert sweep_id in description and '"axis": "student_hidden"' in description
    with pytest.raises(ConfigError, match="exists"):
        axis_figure(out, "student_hidden", path)


def test_the_axis_report_refuses_a_key_no_sweep_varies(width_sweep):
    out, _ = width_sweep
    with pytest.raises(ConfigError, match="teacher_depth"):
        axis_report(out, "teacher_depth")
    result = CliRunner().invoke(app, ["report", str(out), "--axis", "student_hidden", "--replicate", "0"])
    assert result.exit_code != 0 and "--axis" in result.output and "Traceback" not in result.output


def test_the_blocks_third_order_sums_are_those_of_k_composed_euler_steps():
    """k Euler steps of y' = y^2 expanded in s: the s^3 coefficient is C(k,3) f'f'f + (1/2) sum j^2 f''(f,f)."""
    y, s = sp.symbols("y s")

    def f(z):  # f' = 2y, f'' = 2: f'f'f = 4y^4, f''(f,f) = 2y^4
        return z**2

    first, second = width.block_third_order_sums()
    for k in (2, 3, 5):
        z = y
        for _ in range(k):
            z = sp.expand(z + s * f(z))
        got = sp.Poly(z, s).coeff_monomial(s**3)
        assert sp.expand(got - (first.subs(width.k, k) * 4 * y**4 + second.subs(width.k, k) * 2 * y**4)) == 0


def test_the_width_limited_law_runs_from_5_minus_c_to_3_minus_c_and_rises_as_epsilon_falls():
    alpha = laws.evaluator("width-limited-block", what="exponent")
    for c in (0.0, 1.0):
        shallow, deep = (alpha(ell=e, L_T=np.inf, A=1.0, B=1.0, c=c, epsilon=0.5) for e in (1e-3, 1e3))
        assert shallow == pytest.approx(5 - c, abs=1e-4) and deep == pytest.approx(3 - c, abs=1e-4)
    wide, narrow = (alpha(ell=4.0, L_T=np.inf, A=1.0, B=1.0, c=0.0, epsilon=e) for e in (0.01, 0.5))
    assert wide > narrow
    # a finite teacher bends it down: the loss vanishes at l = L_T
    assert laws.evaluate("width-limited-block", ell=32.0, L_T=32.0, A=1.0, B=1.0, c=0.0, epsilon=0.5) == 0
