"""Training routes as properties of what the engine does: each route's start, continuation from the run's own
students, initialisations that differ, the record's route and init dims, configs that cannot work refused."""

import dataclasses
import math

import numpy as np
import pytest
import torch

import resflow
from resflow import ConfigError, Teacher
from resflow.experiments import preset
from resflow.records import best_start, build_dataset, trained_cells
from resflow.training import (
    ROUTES,
    StudentSpec,
    TrainConfig,
    continuation_parent,
    init_student,
    split_layers,
    train_routes,
)
from resflow.training import routes as routes_module
from resflow.training.block import student_seed

TINY = ["train.steps=40", "train.eval_every=20", "train.eval_batches=2", "train.eval_batch_size=64", "train.batch=16",
        "width=6", "teacher_depth=8", "vocab=8", "depths=2,4", "replicates=2", "train.device=cpu",
        "lengths=0.125,0.25,0.5,1"]


def teachers():
    return {t: Teacher(t, width=8, depth=16, vocab=16, seed=0) for t in ("tied", "independent")}


def config(**kw):
    return TrainConfig(**{**dict(steps=60, batch=32, eval_every=20, eval_batches=2, eval_batch_size=128,
                                 dtype="float64", lr_scale=4.0, constant_fraction=0.5), **kw})


def test_init_0_of_the_scratch_route_is_the_draw_of_every_earlier_version():
    spec = StudentSpec("tied", "euler", 4, 3)
    assert repr(spec) == "StudentSpec(target='tied', scheme='euler', depth=4, replicate=3, temperature=nan, length=1.0)"
    assert student_seed(3, "euler", 4) == student_seed(3, "euler", 4, 0, "scratch")
    other = [student_seed(3, "euler", 4, 1, "scratch"), student_seed(3, "euler", 4, 0, "smooth")]
    assert len({student_seed(3, "euler", 4), *other}) == 3


def test_inits_are_independent_draws_and_every_start_is_the_identity():
    a, b = (init_student(StudentSpec("tied", "euler", 4, 0, init=i), 8, 32, 16, torch.float64) for i in (0, 1))
    assert not torch.equal(a["W1"], b["W1"]) and not torch.equal(a["b1"], b["b1"])
    for route in ("scratch", "smooth"):
        for i in (0, 1):
            p = init_student(StudentSpec("tied", "euler", 4, 0, route=route, init=i), 8, 32, 16, torch.float64)
            assert not p["W2"].any() and not p["head"].any()


def test_the_smooth_start_is_constant_along_depth_and_scratch_is_not():
    smooth = init_student(StudentSpec("tied", "midpoint", 5, 0, route="smooth"), 8, 32, 16)
    scratch = init_student(StudentSpec("tied", "midpoint", 5, 0), 8, 32, 16)
    for name in ("W1", "b1"):
        assert all(torch.equal(smooth[name][layer], smooth[name][0]) for layer in range(5))
        assert not torch.equal(scratch[name][1], scratch[name][0])


def test_a_continuation_student_has_no_draw_of_its_own_and_unknown_routes_are_refused():
    with pytest.raises(ConfigError, match="train_routes"):
        init_student(StudentSpec("tied", "euler", 4, 0, route="continuation"), 8, 32, 16)
    with pytest.raises(ConfigError, match="route must be one of"):
        StudentSpec("tied", "euler", 4, 0, route="doubling")
    with pytest.raises(ConfigError, match="init must be"):
        StudentSpec("tied", "euler", 4, 0, init=-1)
    assert set(ROUTES) == {"scratch", "continuation", "smooth"}


def test_the_parent_of_a_continuation_student_is_the_scratch_student_of_half_its_depth_with_the_same_init():
    specs = [StudentSpec("tied", "euler", d, r, length=length, budget=b, init=i) for d, b in ((2, 1.0), (4, 0.5))
             for r in (0, 1) for length in (0.5, 1.0) for i in (0, 1)]
    child = StudentSpec("tied", "euler", 4, 1, length=0.5, budget=0.5, route="continuation", init=1)
    parent = continuation_parent(child, specs)
    assert (parent.depth, parent.replicate, parent.init, parent.length, parent.route) == (2, 1, 1, 1.0, "scratch")
    with pytest.raises(ConfigError, match="depth 8"):
        continuation_parent(dataclasses.replace(child, depth=16), specs)


def test_continuation_students_start_from_the_split_of_their_trained_parents(monkeypatch):
    """The second run's initial parameters are split_layers of the first run's trained scratch students (recorded
    by wrapping the driver), and both runs draw one configuration: the same evaluation steps."""
    calls = []
    real = routes_module.train

    def spy(specs, teachers_, cfg, **kw):
        result = real(specs, teachers_, cfg, **kw)
        calls.append((specs, kw.get("initial"), result))
        return result

    monkeypatch.setattr(routes_module, "train", spy)
    specs = [StudentSpec(t, "euler", d, 0, route=route, init=i) for t in ("tied", "independent") for d in (2, 4)
             for route in ("scratch", "continuation") for i in (0, 1) if not (route == "continuation" and d == 2)]
    result = train_routes(specs, teachers(), config())
    (first, none, trained), (later, initial, _) = calls
    assert none is None and all(s.route == "scratch" for s in first) and all(s.route == "continuation" for s in later)
    for spec in later:
        parent = trained.parameters[continuation_parent(spec, first)]
        expected = split_layers(parent)
        for name in expected:
            torch.testing.assert_close(initial[spec][name], expected[name], rtol=0, atol=0)
    assert len(result.specs) == len(specs) and set(result.parameters) == set(specs)
    assert not np.any(result.failed)


def test_an_experiment_of_several_routes_records_them_and_reads_the_best_student(tmp_path):
    cfg = preset("smooth-vs-rough", "cpu").with_overrides(TINY + ["routes=scratch,continuation", "inits=2"])
    assert cfg.progress_total == 2 * cfg.train.steps
    result = resflow.run_experiment(cfg, out=tmp_path)
    ds = result.dataset
    assert ds["final_loss"].dims[6:8] == ("route", "init") and list(ds["route"].values) == ["scratch", "continuation"]
    present = trained_cells(ds)
    assert not bool(present.sel(route="continuation", depth=2).any())  # no parent: no continuation student
    assert bool(present.sel(route="continuation", depth=4).all()) and bool(present.sel(route="scratch").all())
    assert bool(ds["final_loss"].sel(route="continuation", depth=2).isnull().all())
    best = best_start(ds)
    full = ds["final_loss"].sel(length=1.0)
    expected = full.where(present.sel(length=1.0)).min(["route", "init"])
    np.testing.assert_allclose(best["final_loss"].sel(length=1.0).values, expected.values)
    assert "route" not in best.dims and best["route"].dims  # which start, per cell
    (sep,) = result.separations
    assert all(f.routes == ("scratch", "continuation") and f.inits == 2 for f in result.fits)
    assert all(len(f.route_spread) == 2 for f in result.fits) and math.isfinite(sep.separation)


def test_a_run_of_several_routes_resumes_to_the_same_result(tmp_path):
    cfg = preset("smooth-vs-rough", "cpu").with_overrides(TINY + ["routes=scratch,continuation", "replicates=1"])
    whole = resflow.run_experiment(cfg, out=tmp_path / "a").dataset
    stopped = resflow.run_experiment(cfg, out=tmp_path / "b", stop_after=20)
    assert not stopped.finished
    resumed = resflow.run_experiment(cfg, out=tmp_path / "b", resume=True).dataset
    np.testing.assert_array_equal(whole["final_loss_batch"].values, resumed["final_loss_batch"].values)


@pytest.mark.parametrize(("overrides", "message"), [
    (["routes=scratch,doubling"], "routes"),
    (["routes=continuation"], "add 'scratch'"),
    (["routes=scratch,continuation", "depths=3,5"], "half is also a depth"),
    (["routes=scratch,continuation", "init=doubling"], "init='doubling'"),
    (["routes=scratch,scratch"], "distinct"),
    (["inits=0"], "inits"),
])
def test_configs_that_cannot_train_their_routes_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        preset("smooth-vs-rough", "cpu").with_overrides(overrides)


def test_classification_targets_cannot_be_continued():
    with pytest.raises(ConfigError, match="continuation"):
        preset("hierarchy", "cpu").with_overrides(["routes=scratch,continuation"])


def test_a_config_of_one_start_keeps_the_dict_and_run_ids_of_before_the_routes():
    cfg = preset("smooth-vs-rough", "cpu-converged")  # one route, one init
    assert "routes" not in cfg.to_dict() and "inits" not in cfg.to_dict()
    many = cfg.with_overrides(["routes=continuation,scratch", "inits=2"])
    assert many.routes == ("scratch", "continuation") and many.to_dict()["inits"] == 2  # one order everywhere
    specs = many.student_specs()
    assert len(specs) == 2 * 1 * 3 * 2 * (4 + 3)  # targets x replicates x lengths x inits x (scratch + continuation)


def test_build_dataset_orders_the_routes_as_given():
    class Result:
        specs = [StudentSpec("tied", "euler", 2, 0, route="smooth"), StudentSpec("tied", "euler", 2, 0)]
        eval_steps = [0]
        test_loss = np.array([[1.0], [2.0]])
        final_batches = np.array([[1.0], [2.0]])
        failed = np.zeros(2, bool)
        fail_reason = ["", ""]
        hidden = {}
        wall_time = 0.0
        device = "cpu"
        steps_done = 1

    ds = build_dataset(Result(), loss="mse", targets=["tied"], attrs={}, routes=("scratch", "smooth"))
    assert list(ds["route"].values) == ["scratch", "smooth"]
    assert float(ds["final_loss"].sel(route="smooth").squeeze()) == 1.0
    assert str(best_start(ds)["route"].squeeze().item()) == "smooth"
