"""The run spine's plan and stages (issue 50, point 2): a configuration resolved once into a typed plan, the
run as five typed stages, specs that carry their tableaux, and a TrainingResult with typed fields."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import resflow
from resflow.errors import ConfigError, UnknownNameError
from resflow.training import StudentSpec, train_routes
from resflow.workflows import STAGES, RunContext, RunPlan, run_stages
from resflow.workflows.run import train_dataset
from resflow.workflows.stages import Drawn, Fitted, Measured, Recorded, Trained

TINY = ["train.steps=30", "train.eval_every=15", "train.eval_batches=1", "train.eval_batch_size=32",
        "train.batch=16", "width=6", "teacher_depth=8", "depths=2,4", "replicates=1", "train.device=cpu"]


def tiny(*more: str):
    return resflow.preset("smooth-vs-rough", "cpu").with_overrides([*TINY, *more])


# ---------------------------------------------------------------- the plan
def test_the_plan_resolves_every_name_once_and_before_any_directory(tmp_path):
    config = tiny()
    plan = RunPlan.resolve(config)
    assert plan.specs == tuple(config.student_specs())
    assert set(plan.teachers) and plan.device == "cpu" and plan.described == config.to_dict()
    assert plan.measure_names[-1] == "group-angles" and "teacher-tracking" in plan.measure_names
    assert plan.experiment.name == "smooth-vs-rough"
    with pytest.raises(UnknownNameError, match="measure"):
        resflow.run_experiment(dataclasses.replace(config, measures=("no-such-measure",)), out=tmp_path / "s")
    assert not (tmp_path / "s").exists()
    with pytest.raises(TypeError, match="ExperimentConfig"):
        RunPlan.resolve({"experiment": "smooth-vs-rough"})


def test_a_spec_carries_its_tableau_without_it_being_part_of_its_identity():
    spec = StudentSpec("tied", "midpoint", 4, 0)
    assert spec.tableau is resflow.get_tableau("midpoint") and spec.tableau.stages == 2
    assert repr(spec) == ("StudentSpec(target='tied', scheme='midpoint', depth=4, replicate=0, "
                          "temperature=nan, length=1.0)")
    twin = dataclasses.replace(spec)
    assert twin == spec and hash(twin) == hash(spec) and twin.tableau is spec.tableau
    assert dataclasses.replace(spec, scheme="euler").tableau.stages == 1
    with pytest.raises(UnknownNameError, match="rk9"):
        StudentSpec("tied", "rk9", 4, 0)


# ---------------------------------------------------------------- the stages
@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    out = tmp_path_factory.mktemp("staged")
    store = resflow.Store.open(out, create=True)
    work = store.work_dir("smooth-vs-rough")
    return work, run_stages(RunPlan.resolve(tiny()), RunContext(run_dir=work, store=store))


def test_each_stage_takes_the_previous_ones_typed_output(staged):
    work, drawn = staged
    assert [s.name for s in STAGES] == ["train", "measure", "record", "fit", "draw"]
    assert isinstance(drawn, Drawn) and isinstance(drawn.fitted, Fitted)
    recorded = drawn.fitted.recorded
    assert isinstance(recorded, Recorded) and recorded.record and drawn.fitted.fit_record
    assert recorded.dataset.attrs["store_record"] == recorded.record
    assert (work / "record.txt").read_text().strip() == recorded.record
    assert drawn.figure.exists() and (work / "fits.json").exists()
    assert {f.target for f in drawn.fitted.fits} == {"tied", "independent"}


def test_the_stages_without_a_store_build_the_record_a_sweep_cell_writes(staged):
    _, drawn = staged
    steps, ds, prov = train_dataset(tiny(), run_dir=None)
    written = drawn.fitted.recorded.dataset
    assert steps == 30 and prov["experiment"] == "smooth-vs-rough"
    assert set(ds.data_vars) == set(written.data_vars)
    np.testing.assert_array_equal(ds["test_loss"].values, written["test_loss"].values)


def test_a_run_stopped_early_ends_after_training(tmp_path):
    plan = RunPlan.resolve(tiny())
    out = run_stages(plan, RunContext(run_dir=tmp_path, stop_after=15))
    assert isinstance(out, Trained) and not out.finished and out.result.steps_done == 15
    assert train_dataset(tiny(), run_dir=None, stop_after=15)[1] is None
    with pytest.raises(ConfigError, match="doubling"):
        train_dataset(tiny("init=doubling"), run_dir=None, stop_after=15)


def test_the_measure_stage_returns_what_it_found_without_writing_into_the_result():
    plan = RunPlan.resolve(tiny())
    trained = STAGES[0].run(plan, RunContext(), None)
    probes = set(trained.result.hidden)
    measured = STAGES[1].run(plan, RunContext(), trained)
    assert isinstance(measured, Measured) and set(trained.result.hidden) == probes  # the result is as trained
    assert "trajectory_error" in measured.measurements.outputs
    assert set(measured.measurements.outputs) <= set(measured.measurements.labels)


# ---------------------------------------------------------------- group angles are a measure
def test_group_angles_are_a_measure_of_students_of_grouped_teachers():
    grouped = ["depths=4,8", "teacher_depth=8", "targets=tied,grouped:4"]
    ds = train_dataset(tiny(*grouped), run_dir=None)[1].sel(length=1.0, depth=8)
    assert np.isfinite(ds["angle_within"].sel(target="grouped:4")).all()
    assert np.isnan(ds["angle_within"].sel(target="tied")).all()
    named = train_dataset(tiny(*grouped, "measures=teacher-tracking"), run_dir=None)[1]
    assert "angle_within" not in named and "trajectory_error" in named  # a run that names its measures


# ---------------------------------------------------------------- the typed result
def test_a_result_keeps_its_parameters_and_stage_times_in_typed_fields():
    config = tiny("routes=scratch,continuation")
    result = train_routes(config.student_specs(), config.teachers(), config.train)
    assert set(result.parameters) == set(result.specs)
    assert set(result.stage_wall_times) == {"first", "continuation"}
    assert all(t > 0 for t in result.stage_wall_times.values())
    reversed_ = result.for_specs(result.specs[::-1])
    for spec in result.specs:
        np.testing.assert_array_equal(reversed_.parameters[spec]["W1"], result.parameters[spec]["W1"])
    assert not hasattr(result, "extra")
    plain = resflow.train(config.student_specs()[:1], config.teachers(), config.train)
    assert plain.parameters is None and plain.stage_wall_times == {}
