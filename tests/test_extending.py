"""Extending resflow from one file, without touching the package (issue 37): a new optimiser rule.

Plain momentum SGD (``torch.optim.SGD``'s rule: ``v <- mu v + g``, ``p <- p - lr v``) is declared here, trained
through the public API, checked against the reference loop, and run as an experiment whose record is read
back from a store.  ``docs/design/extending.md`` says how to add each kind of thing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
import torch

import resflow
from resflow.training import StudentSpec, Teacher, TrainConfig, train, train_reference
from resflow.training.optimizers import OPTIMIZERS, OptimizerSettings, register_optimizer


class _MomentumRule:
    """Momentum SGD on a bank's flat buffers: one buffer, ``velocity``."""

    capturable = True

    def __init__(self, momentum: float, size: int) -> None:
        self.momentum = momentum
        self.buffers = {"velocity": size}

    def scalars(self, step: int, multiplier: float) -> tuple[float]:
        return (multiplier,)

    def apply(self, param: torch.Tensor, grad: torch.Tensor, state: Mapping[str, torch.Tensor], lr: torch.Tensor,
              work: torch.Tensor, scalars: tuple, step: int) -> None:
        velocity = state["velocity"]
        velocity.mul_(self.momentum).add_(grad)
        torch.mul(velocity, lr, out=work)
        param.addcmul_(work, torch.as_tensor(scalars[0], dtype=param.dtype, device=param.device), value=-1.0)


@dataclass(frozen=True)
class Momentum(OptimizerSettings):
    name: ClassVar[str] = "momentum-test"
    momentum: float = 0.9

    def bind(self, bank, *, heads: bool) -> _MomentumRule:
        return _MomentumRule(self.momentum, bank.size)

    def reference(self, groups: list[dict]) -> torch.optim.Optimizer:
        return torch.optim.SGD(groups, momentum=self.momentum, foreach=False)


@pytest.fixture
def momentum():
    """The rule registered for one test (the registry is the package's: leave it as found)."""
    register_optimizer(Momentum)
    try:
        yield Momentum
    finally:
        del OPTIMIZERS[Momentum.name]


def test_a_new_optimiser_rule_trains_like_its_reference(momentum):
    teachers = {k: Teacher(k, width=8, depth=8, seed=0) for k in ("independent", "tied")}
    specs = [StudentSpec(t, "euler", d, 0, math.nan, length) for t in teachers for d in (2, 4) for length in (0.5, 1)]
    config = TrainConfig(steps=40, batch=32, eval_every=10, eval_batches=2, eval_batch_size=64, dtype="float64",
                         optimizer=momentum(momentum=0.8), lr_scale=20.0, device="cpu")
    ours, reference = train(specs, teachers, config, seed=3), train_reference(specs, teachers, config, seed=3)
    np.testing.assert_allclose(ours.test_loss, reference.test_loss, rtol=1e-9)
    assert (ours.test_loss[:, -1] < ours.test_loss[:, 0]).all()  # it learns
    adam = train(specs, teachers, TrainConfig(**{**config.__dict__, "optimizer": "adam"}), seed=3)
    assert not np.allclose(adam.test_loss, ours.test_loss, rtol=1e-3)  # the check can tell rules apart


def test_a_new_optimiser_rule_runs_an_experiment_by_name_and_is_read_back_from_the_store(momentum, tmp_path):
    config = resflow.preset("smooth-vs-rough", "quick").with_overrides(
        ["train.optimizer.name=momentum-test", "train.optimizer.momentum=0.5", "train.steps=40",
         "train.eval_every=20", "depths=1,2", "replicates=2", "routes=scratch", "lengths=1", "train.device=cpu"])
    assert config.train.optimizer == momentum(momentum=0.5)
    result = resflow.run_experiment(config, out=tmp_path / "store")
    saved = json.loads(resflow.Store.open(tmp_path / "store").attrs(result.record)["config"])
    assert saved["train"]["optimizer"] == {"name": "momentum-test", "momentum": 0.5}
    assert np.isfinite(result.dataset["test_loss"].values).any()


def test_a_field_of_another_rule_is_refused_with_the_rule_named(momentum):
    config = resflow.preset("smooth-vs-rough", "quick")
    with pytest.raises(resflow.ConfigError, match="'adam' has no field momentum"):
        config.with_overrides(["train.optimizer.momentum=0.5"])
    with pytest.raises(resflow.ConfigError, match="did you mean 'momentum-test'"):
        config.with_overrides(["train.optimizer.name=momentum-tset"])


def test_a_taken_name_is_refused():
    @dataclass(frozen=True)
    class Impostor(OptimizerSettings):
        name: ClassVar[str] = "adam"

    with pytest.raises(resflow.ConfigError, match="taken"):
        register_optimizer(Impostor)
    assert OPTIMIZERS["adam"].__name__ == "Adam"


# ------------------------------------------------------------------------------------------- a new measure

class LayerWeightNorm:
    """Per layer, the Frobenius norm of the student's first weight matrix (summed over stages)."""

    name = "layer-weight-norm-test"
    labels = {"layer_weight_norm": ("Frobenius norm of W1 of layer l", "1")}

    def applies(self, students) -> bool:
        return True

    def measure(self, students) -> dict[str, np.ndarray]:
        out = students.per_layer("layer_weight_norm")
        for student in students:
            w1 = student.parameters["W1"]  # (layers, stages, hidden, width)
            out["layer_weight_norm"][student.index, :student.spec.depth] = (
                w1.flatten(1).norm(dim=1).double().numpy())
        return out


@pytest.fixture
def weight_norm():
    from resflow.workflows import MEASURES, register_measure

    measure = register_measure(LayerWeightNorm())
    try:
        yield measure
    finally:
        del MEASURES[measure.name]


def test_a_new_measure_runs_on_every_trained_student_and_is_read_back_from_the_store(weight_norm, tmp_path):
    config = resflow.preset("smooth-vs-rough", "quick").with_overrides(
        ["train.steps=40", "train.eval_every=20", "depths=1,2,4", "replicates=1", "routes=scratch", "lengths=1",
         "train.device=cpu"])
    result = resflow.run_experiment(config, out=tmp_path / "store")
    ds = resflow.Store.open(tmp_path / "store").load(result.record)
    norms = ds["layer_weight_norm"]
    assert norms.attrs["long_name"].startswith("Frobenius norm of W1 of layer l")
    assert "layer" in norms.dims
    for depth in (1, 2, 4):
        row = norms.sel(depth=depth).values.reshape(-1, norms.sizes["layer"])
        assert np.isfinite(row[:, :depth]).all() and (row[:, :depth] > 0).all()
        assert np.isnan(row[:, depth:]).all()  # padded beyond the student's depth
    assert "lesion" in ds  # the built-in measures still ran


def test_an_experiment_takes_only_the_measures_it_names(weight_norm, tmp_path):
    base = ["train.steps=20", "train.eval_every=20", "depths=1,2", "replicates=1", "routes=scratch", "lengths=1",
            "train.device=cpu"]
    config = resflow.preset("smooth-vs-rough", "quick").with_overrides([*base, "measures=layer-weight-norm-test"])
    result = resflow.run_experiment(config, out=tmp_path / "one")
    ds = resflow.Store.open(tmp_path / "one").load(result.record)
    assert np.isfinite(ds["layer_weight_norm"].sel(depth=2).isel(layer=[0, 1])).all()
    assert "lesion" not in ds and "exit_depth" not in ds  # interventions and early exit were not asked for

    config = resflow.preset("smooth-vs-rough", "quick").with_overrides([*base, "measures="])
    result = resflow.run_experiment(config, out=tmp_path / "none")
    ds = resflow.Store.open(tmp_path / "none").load(result.record)
    assert "layer_weight_norm" not in ds and "lesion" not in ds
    assert np.isfinite(ds["final_loss"]).any()  # training itself is not a measure


def test_an_unknown_measure_is_refused_before_training(tmp_path):
    config = resflow.preset("smooth-vs-rough", "quick").with_overrides(["measures=early-exits", "train.device=cpu"])
    with pytest.raises(resflow.UnknownNameError, match="did you mean 'early-exit'"):
        resflow.run_experiment(config, out=tmp_path / "store")
    assert not (tmp_path / "store").exists() or not list((tmp_path / "store").rglob("*.zarr"))


def test_all_is_alone_among_the_measures():
    with pytest.raises(resflow.ConfigError, match="measures"):
        resflow.preset("smooth-vs-rough", "quick").with_overrides(["measures=all,early-exit"])


def test_taking_every_measure_leaves_run_ids_as_before_the_field():
    """A config that takes every measure has the dict (and so the run id and sweep id) of resflow 0.4; one that
    names its measures says so."""
    config = resflow.preset("smooth-vs-rough", "quick")
    assert "measures" not in config.to_dict()
    assert config.with_overrides(["measures=early-exit"]).to_dict()["measures"] == ("early-exit",)


def test_a_measure_that_returns_what_it_does_not_label_is_refused(weight_norm):
    from resflow.workflows import TrainedStudents
    from resflow.workflows.measures import run_measures

    specs = [StudentSpec("tied", "euler", 2, 0)]
    teachers = {"tied": Teacher("tied", width=8, depth=8, seed=0)}
    result = train(specs, teachers, TrainConfig(steps=4, batch=8, eval_every=4, eval_batch_size=16, device="cpu"),
                   keep_parameters=True)
    students = TrainedStudents.of_result(result, teachers)
    outputs, labels = run_measures(students)
    assert outputs["layer_weight_norm"].shape == (1, 3) and "layer_weight_norm" in labels
    weight_norm.labels = {}  # now it returns an output it does not name
    with pytest.raises(resflow.ConfigError, match="layer-weight-norm-test"):
        run_measures(students)


# ------------------------------------------------------------------------------------------- a new intervention

def _duplicate_profile(steps, h0, corrupt, readout):
    """Damage of running layer l twice (h_{l+1} = f_l(f_l(h_l))), layer by layer."""
    from resflow.probing.interventions import run_steps

    readout = readout or (lambda h: h)
    clean = readout(run_steps(steps, h0))
    damage = []
    for layer in range(len(steps)):
        doubled = list(steps[:layer + 1]) + list(steps[layer:])
        damage.append(float((readout(run_steps(doubled, h0)) - clean).square().mean()))
    return np.array(damage)


@pytest.fixture
def duplicate():
    from resflow.probing.interventions import STACK_INTERVENTIONS, StackIntervention, register_intervention

    intervention = register_intervention(StackIntervention(
        "duplicate_test", "damage of running layer l twice (mean square change of the normalised output)",
        "layer l run twice", _duplicate_profile))
    try:
        yield intervention
    finally:
        del STACK_INTERVENTIONS[intervention.name]  # its label goes with it (PROFILE_LABELS is a view)


def test_a_new_intervention_profiles_every_trained_student_and_every_teacher(duplicate, tmp_path):
    config = resflow.preset("smooth-vs-rough", "quick").with_overrides(
        ["train.steps=40", "train.eval_every=20", "depths=1,2,4", "replicates=1", "routes=scratch", "lengths=1",
         "train.device=cpu"])
    result = resflow.run_experiment(config, out=tmp_path / "store")
    store = resflow.Store.open(tmp_path / "store")
    ds = store.load(result.record)
    doubled = ds["duplicate_test"]
    assert doubled.attrs["long_name"].startswith("damage of running layer l twice")
    for depth in (1, 2, 4):
        row = doubled.sel(depth=depth).values.reshape(-1, doubled.sizes["layer"])
        assert (row[:, :depth] > 0).all() and np.isnan(row[:, depth:]).all()
    # the same intervention on a teacher, through `resflow intervene`'s function, read back from its record
    run = resflow.workflows.intervene_models(["teacher:tied"], out=tmp_path / "store", n_inputs=64)
    profile = store.load(run.records[0])["duplicate_test"]
    assert profile.attrs["long_name"].endswith("layer l run twice") and np.isfinite(profile.values).all()
