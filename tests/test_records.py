"""The toy-run record has one shape: every dimension in every record, old records upgraded when read, bit for
bit the values of before; merging lives with the record (resflow.records)."""

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import resflow
from resflow.analysis import PROFILE_LABELS
from resflow.errors import ConfigError, IncompatibleOptionsError
from resflow.presenting.signatures import GROUP_LABELS
from resflow.probing.constructions import CONSTRUCTION_LABELS
from resflow.probing.early_exit import EXIT_LABELS
from resflow.probing.smoothness import SMOOTHNESS_LABELS
from resflow.records import DIMS, checked_run, load_run, merge_runs, run_problems, upgrade_run
from resflow.store import Store

OLD = Path(__file__).parent / "data" / "records-0.3.0"
TINY = ["train.steps=40", "train.eval_every=20", "train.eval_batches=2", "train.eval_batch_size=64", "train.batch=16",
        "width=6", "teacher_depth=8", "vocab=8", "depths=2,4", "replicates=2", "train.device=cpu"]
V2 = ["routes=scratch", "inits=1", "lengths=0.25,0.5,1", "train.checkpoint_every=1000"]  # the cpu preset before v3
RUNS = {  # the fixture's runs (tests/data/records-0.3.0/README.md): experiment -> extra overrides
    "smooth-vs-rough": V2, "group-students": ["student_groups=0,2"], "temperature": ["train.temperatures=0.3,1.0", *V2]}
ADDED = {"smooth-vs-rough": ("student_groups", "temperature", "route", "init"),
         "group-students": ("temperature", "route", "init"), "temperature": ("student_groups", "route", "init")}


def old(name):
    with xr.open_dataset(OLD / f"{name}.nc") as ds:
        return ds.load()


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """Each fixture run again by this resflow, into one store: experiment -> its toy-run record."""
    out = tmp_path_factory.mktemp("fresh")
    records = {}
    for name, extra in RUNS.items():
        config = resflow.preset(name, "cpu").with_overrides(TINY + extra)
        assert json.loads(config.to_json()) == json.loads(old(name).attrs["config"])  # the fixture's run
        records[name] = resflow.run_experiment(config, out=out).record
    return Store.open(out), records


@pytest.mark.parametrize("name", list(RUNS))
def test_every_per_student_variable_has_every_dim_in_order(fresh, name):
    store, records = fresh
    ds = store.load(records[name])
    assert tuple(d for d in ds["final_loss"].dims) == DIMS
    for var in ds.data_vars.values():
        assert var.dims[:len(DIMS)] == DIMS, var.name
    kl = name == "temperature"
    assert ds["temperature"].values.tolist() == [0.3, 1.0] if kl else np.isnan(ds["temperature"].values).tolist() == [
        True]
    assert ds["student_groups"].values.tolist() == ([0, 2] if name == "group-students" else [0])
    assert upgrade_run(ds) is ds  # a current record needs nothing


@pytest.mark.parametrize("name", list(RUNS))
def test_a_record_of_0_3_reads_bit_for_bit_as_it_was_written_in_the_current_shape(name):
    """Every variable and coordinate of the old record, unchanged, the added dims of size 1 (student_groups 0,
    temperature NaN, route scratch, init 0), in the current order; its provenance untouched."""
    before = old(name)
    assert all(d not in before.dims for d in ADDED[name])
    up = upgrade_run(before)
    assert up["final_loss"].dims == DIMS
    for dim in ADDED[name]:
        assert up.sizes[dim] == 1
    assert set(up.data_vars) == set(before.data_vars)
    for var in before.data_vars:
        a = up[var].isel({d: 0 for d in ADDED[name] if d in up[var].dims}).transpose(*before[var].dims).values
        b = before[var].values
        assert np.array_equal(a, b, equal_nan=b.dtype.kind == "f"), var
    assert up.attrs == before.attrs


@pytest.mark.parametrize("name", list(RUNS))
def test_a_record_of_0_3_has_the_shape_of_a_fresh_run_of_its_config(fresh, name):
    """The same variables (but those new since 0.3), dims, coordinates and NaN layout as a fresh run of the same
    configuration.  Not the same trained values: the fixtures were written on another machine, and 40 SOAP
    steps amplify its floating-point differences (final losses 0.0151 there, 0.0149 on an AVX-512 Xeon, for one
    student), so only a run on that machine reproduces them bit for bit (as it did when they were written)."""
    store, records = fresh
    new, up = store.load(records[name]), upgrade_run(old(name))
    # new in 0.4: the interventions, early exit and the angles by teacher group; in 0.5: the constructions
    assert set(new.data_vars) - set(up.data_vars) == (set(PROFILE_LABELS) | set(EXIT_LABELS) - {"test_accuracy",
                                                      "exit_accuracy"} | set(GROUP_LABELS)
                                                      | (set() if name == "temperature" else set(CONSTRUCTION_LABELS))
                                                      | set(SMOOTHNESS_LABELS))
    for var in up.data_vars:
        assert up[var].dims == new[var].dims, var
        a, b = up[var].values, new[var].values
        if a.dtype.kind == "f":
            assert np.array_equal(np.isnan(a), np.isnan(b)), var
    for coord in new.coords:
        a, b = up[coord].values, new[coord].values
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), coord


def test_an_old_record_in_a_store_is_upgraded_when_read_and_merges_with_a_new_one(tmp_path, fresh):
    store_new, records = fresh
    store = Store.open(tmp_path / "s", create=True)
    plain = old("smooth-vs-rough").sel(target=["independent"])
    for key in [k for k in plain.attrs if k.startswith("store_")]:
        del plain.attrs[key]
    a = store.write(plain, kind="toy-run", name="smooth-vs-rough")
    tied = store_new.load(records["smooth-vs-rough"]).sel(target=["tied"])
    tied.attrs = {k: v for k, v in tied.attrs.items() if not k.startswith("store_")}
    b = store.write(tied, kind="toy-run", name="smooth-vs-rough")
    assert "student_groups" not in store.load(a).dims  # the store returns what was written
    assert load_run(store, a)["final_loss"].dims == DIMS
    merged = merge_runs(store, [a, b])
    assert merged["target"].values.tolist() == ["independent", "tied"]
    for target, source in (("independent", upgrade_run(plain)), ("tied", tied)):  # each run's values, kept
        np.testing.assert_array_equal(merged["final_loss_batch"].sel(target=target).values,
                                      source["final_loss_batch"].sel(target=target).values)
    fits = resflow.analysis.fit_dataset(merged)
    assert [f.target for f in fits] == ["independent", "tied"] and all(f.temperature is None for f in fits)


def test_merging_refuses_other_experiments_and_the_same_cells(fresh, tmp_path):
    store, records = fresh
    with pytest.raises(IncompatibleOptionsError, match="one experiment"):
        merge_runs(store, [records["smooth-vs-rough"], records["group-students"]])
    with pytest.raises(IncompatibleOptionsError, match="same cells"):
        merge_runs(store, [records["smooth-vs-rough"], records["smooth-vs-rough"]])
    with pytest.raises(ConfigError, match="nothing to merge"):
        merge_runs(store, [])


def test_a_dataset_that_is_not_a_toy_run_gets_one_line_naming_what_it_lacks():
    foreign = xr.Dataset({"x": ("depth", [1.0, 2.0])}, attrs={"store_record": "rec-1"})
    assert "final_loss_batch" in run_problems(foreign)
    with pytest.raises(ConfigError, match="rec-1 is not a toy run.*lacks final_loss_batch"):
        checked_run(foreign)


def test_store_check_applies_each_kinds_validator_and_knows_no_variable_itself(tmp_path):
    store = Store.open(tmp_path / "s", create=True)
    store.write(xr.Dataset({"x": ("depth", [1.0])}), kind="toy-run", name="broken")
    assert store.check().ok  # the store alone only loads records
    report = store.check({"toy-run": run_problems})
    assert not report.ok and "lacks final_loss_batch" in next(iter(report.unreadable.values()))


def test_merging_replicates_keeps_the_configuration_that_the_law_fit_reads(fresh, tmp_path):
    """A sweep's cells of one grid point differ only in their replicates: the merged run keeps their
    configuration (the teacher's depth, for the finite-teacher factor) with the merged replicates; runs that
    differ in more have none (before 0.5 every merge dropped it, and the law α silently equalled the plain α)."""
    store, records = fresh
    ds = store.load(records["smooth-vs-rough"])
    config = json.loads(ds.attrs["config"])
    cells = Store.open(tmp_path / "cells", create=True)
    ids = []
    for r in (0, 1):
        cell = ds.sel(replicate=[r])
        cell.attrs = dict(ds.attrs) | {"config": json.dumps(config | {"first_replicate": r, "replicates": 1})}
        ids.append(cells.write(cell, kind="toy-run", name="smooth-vs-rough"))
    merged = merge_runs(cells, ids)
    assert json.loads(merged.attrs["config"]) == config | {"first_replicate": 0, "replicates": 2}
    fits = resflow.analysis.fit_dataset(merged)
    assert all(f.law_exponent != f.exponent for f in fits)  # the factor of a teacher of depth 8 is divided out
    other = ds.sel(replicate=[1])
    other.attrs = dict(ds.attrs) | {"config": json.dumps(config | {"first_replicate": 1, "teacher_depth": 16})}
    assert "config" not in merge_runs(cells, [ids[0], cells.write(other, kind="toy-run", name="smooth-vs-rough")]).attrs
