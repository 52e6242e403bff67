"""Group-structured students: weights shared within K contiguous groups of layers (issue 17, part 4)."""

import math

import numpy as np
import pytest
import torch

from resflow import ConfigError, Teacher
from resflow.records import merge_runs
from resflow.training import train, train_reference
from resflow.training.block import StudentSpec, init_student, layer_groups
from resflow.training.config import TrainConfig
from resflow.training.engine import Trainer

EQUIVALENCE_RTOL = 1e-9  # as tests/test_engine.py: float64, batched vs per-student arithmetic


def teachers(*specs, width=8, depth=16, vocab=16):
    return {s: Teacher(s, width=width, depth=depth, vocab=vocab, seed=0) for s in specs}


def small_config(**kw):
    settings = dict(steps=120, batch=32, eval_every=40, eval_batches=2, eval_batch_size=128, dtype="float64",
                    lr_scale=4.0, constant_fraction=0.5)
    return TrainConfig(**{**settings, **kw})


def key(spec):
    return (spec.target, spec.scheme, spec.depth, spec.replicate, spec.weight_groups,
            None if math.isnan(spec.temperature) else spec.temperature)


def test_layer_groups_are_contiguous_and_cover_every_layer():
    assert layer_groups(StudentSpec("tied", "euler", 8, 0)) is None
    assert layer_groups(StudentSpec("tied", "euler", 8, 0, weight_groups=4)).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert layer_groups(StudentSpec("tied", "euler", 2, 0, weight_groups=4)).tolist() == [0, 1]  # min(K, depth) groups
    assert layer_groups(StudentSpec("tied", "euler", 5, 0, weight_groups=1)).tolist() == [0] * 5


def test_a_shared_weight_starts_as_its_groups_first_layer_of_the_plain_draw():
    plain = init_student(StudentSpec("tied", "midpoint", 6, 1), 8, 32, 16)
    shared = init_student(StudentSpec("tied", "midpoint", 6, 1, weight_groups=2), 8, 32, 16)
    for name in ("W1", "b1"):
        assert torch.equal(shared[name][:3], plain[name][0].expand_as(shared[name][:3]))
        assert torch.equal(shared[name][3:], plain[name][3].expand_as(shared[name][3:]))
    assert not torch.equal(shared["W1"][0], shared["W1"][3])


@pytest.mark.parametrize(("loss", "head", "temps"), [("mse", "learned", ()), ("kl", "learned", (0.3,))])
def test_engine_trains_the_shared_model_the_reference_loop_defines(loss, head, temps):
    """The engine keeps a copy per layer and sums their gradients; the reference loop holds one leaf per group
    and indexes it (autograd sums): the same training, to float64 round-off."""
    tt = teachers("independent", "grouped:2")
    temperatures = temps or (math.nan,)
    specs = [StudentSpec(t, sch, d, 0, T, weight_groups=k) for t in tt for sch in ("euler", "midpoint") for d in (2, 4, 6)
             for k in (0, 2, 3) for T in temperatures]
    cfg = small_config(loss=loss, head=head, temperatures=temps)
    a, b = train(specs, tt, cfg, seed=3), train_reference(specs, tt, cfg, seed=3)
    ia, ib = ({key(s): i for i, s in enumerate(r.specs)} for r in (a, b))
    assert ia.keys() == ib.keys() and len(ia) == len(specs)
    for k in ia:
        np.testing.assert_allclose(a.test_loss[ia[k]], b.test_loss[ib[k]], rtol=EQUIVALENCE_RTOL)
    assert (a.test_loss[:, -1] < a.test_loss[:, 0]).all()


def test_copies_of_a_shared_weight_stay_bit_equal_and_groups_differ():
    tt = teachers("grouped:4")
    specs = [StudentSpec("grouped:4", "euler", d, 0, weight_groups=4) for d in (4, 8)]
    trainer = Trainer(specs, tt, small_config(dtype="float32"))
    state = trainer.init(0)
    for _ in range(30):
        state = trainer.step(state, *trainer.next_batch(state))
    (bank,) = trainer.banks
    for i, spec in enumerate(bank.specs):
        params, groups = bank.student_parameters(state.params[0], i), layer_groups(spec)
        for name in ("W1", "b1", "W2"):
            for g in range(4):
                copies = params[name][groups == g]
                assert torch.equal(copies, copies[:1].expand_as(copies)), (spec.depth, name, g)
        assert params["W2"].abs().sum() > 0 and not torch.equal(params["W2"][0], params["W2"][-1])


def test_as_many_groups_as_layers_is_the_plain_student_bit_for_bit():
    tt = teachers("independent")
    specs = [StudentSpec("independent", "euler", 4, 0, weight_groups=g) for g in (0, 4, 9)]
    result = train(specs, tt, small_config(), seed=1)
    losses = {s.weight_groups: result.test_loss[i] for i, s in enumerate(result.specs)}
    assert np.array_equal(losses[0], losses[4]) and np.array_equal(losses[0], losses[9])
    fewer = train([StudentSpec("independent", "euler", 4, 0, weight_groups=2)], tt, small_config(), seed=1)
    assert not np.array_equal(fewer.test_loss[0], losses[0])


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True])
def test_bad_weight_groups_are_named(bad):
    with pytest.raises(ConfigError, match="weight_groups"):
        StudentSpec("tied", "euler", 4, 0, weight_groups=bad)


# ------------------------------------------------------------------ configuration, results, fits


def test_experiment_config_trains_each_structure_and_keeps_the_plain_dict():
    from resflow.experiments import ExperimentConfig

    plain = ExperimentConfig("smooth-vs-rough", depths=(2, 4), replicates=1, lengths=(1.0,))
    assert "student_groups" not in plain.to_dict()  # the run ids and sweep ids of plain runs are unchanged
    both = plain.with_overrides(["student_groups=4,0"])
    assert both.student_groups == (0, 4) and both.to_dict()["student_groups"] == (0, 4)
    assert sorted({s.weight_groups for s in both.student_specs()}) == [0, 4]
    assert len(both.student_specs()) == 2 * len(plain.student_specs())
    for bad, match in (("student_groups=-1", "student_groups"), ("student_groups=2,2", "distinct"),
                       ("student_groups=x", "student_groups")):
        with pytest.raises(ConfigError, match=match):
            plain.with_overrides([bad])


def test_runs_with_group_structured_students_have_a_student_groups_dimension_and_fits_per_structure():
    from resflow.analysis import fit_dataset, fits_from_dataset, fits_to_dataset
    from resflow.fitting.fits import FitSettings
    from resflow.probing.probes import SIGNATURE_LABELS, state_signature
    from resflow.records import build_dataset

    tt = teachers("grouped:2")
    specs = [StudentSpec("grouped:2", "euler", d, r, weight_groups=g, length=length) for d in (2, 4) for r in (0, 1)
             for g in (0, 2) for length in (0.5, 1.0)]
    result = train(specs, tt, small_config(steps=40, dtype="float32"), state_metrics=state_signature)
    ds = build_dataset(result, loss="mse", targets=["grouped:2"], attrs={}, metric_labels=SIGNATURE_LABELS)
    assert ds["final_loss"].dims == ("target", "scheme", "student_groups", "temperature", "depth", "replicate", "route",
                                     "init", "length")
    assert ds["student_groups"].values.tolist() == [0, 2]
    assert ds["early_stop_fraction"].dims == ds["final_loss"].dims  # one number per student
    assert ds["update_angle"].dims[-1] == "layer"
    fits = fit_dataset(ds)
    assert sorted(f.student_groups for f in fits) == [0, 2]
    back = fits_from_dataset(fits_to_dataset(fits, source_record="x", settings=FitSettings()))
    assert [f.student_groups for f in back] == [f.student_groups for f in fits]
    plain = build_dataset(train(specs[:2], tt, small_config(steps=40, dtype="float32")), loss="mse",
                          targets=["grouped:2"], attrs={})
    assert plain["student_groups"].values.tolist() == [0]  # every record has the dim: size 1, plain students


# ------------------------------------------------------------------ signatures


def test_state_signature_is_the_probe_numbers_of_the_same_states():
    from resflow.analysis import probe_states, state_signature

    gen = torch.Generator().manual_seed(0)
    early = torch.cumsum(torch.cat([torch.randn(3, 300, 8, generator=gen, dtype=torch.float64),
                                    1e-3 * torch.randn(6, 300, 8, generator=gen, dtype=torch.float64)]), 0)
    even = torch.cumsum(torch.randn(9, 500, 8, generator=gen, dtype=torch.float64), 0)
    states = torch.cat([early, even], dim=1)  # 300 inputs that stop after 3 of 8 layers, 500 that do not
    signature = state_signature(states)
    probe = probe_states([states], "synthetic")
    assert signature["early_stop_fraction"].ndim == 0
    assert float(signature["early_stop_fraction"]) == pytest.approx(probe.early_stop_fraction)
    assert float(signature["early_stop_fraction"]) == pytest.approx(300 / 800, abs=0.02)
    np.testing.assert_allclose(signature["update_angle"].mean(-1).numpy(), probe.mean["update_angle"][:7])


def test_boundary_pairs_place_student_layers_on_the_teachers_time():
    from resflow.analysis import boundary_pairs

    assert boundary_pairs(8, 4).tolist() == [False, True, False, True, False, True, False]
    assert boundary_pairs(4, 4).all() and boundary_pairs(2, 4).all()  # a group per layer or finer
    assert not boundary_pairs(6, 1).any()
    with pytest.raises(ConfigError, match="groups"):
        boundary_pairs(8, 0)


def test_split_update_angles_averages_the_right_pairs():
    from resflow.analysis import split_update_angles

    angles = np.array([0.1, 1.0, 0.3, 2.0, 0.5, 3.0, 0.7, np.nan])  # depth 8 has 7 pairs; padding ignored
    within, boundary = split_update_angles(angles, 8, 4)
    assert within == pytest.approx((0.1 + 0.3 + 0.5 + 0.7) / 4) and boundary == pytest.approx(2.0)
    within, boundary = split_update_angles(angles, 8, 1)
    assert np.isnan(boundary) and within == pytest.approx(np.mean(angles[:7]))


def test_group_signature_of_a_trained_group_structured_student_turns_only_at_boundaries():
    """Shared weights within a group push successive layers the same way on every input: the angle
    within a group is near 0 (each copy sees a slightly different state), at a boundary it is not."""
    from resflow.analysis import group_signature
    from resflow.probing.probes import SIGNATURE_LABELS, state_signature
    from resflow.records import build_dataset

    tt = teachers("grouped:4")
    specs = [StudentSpec("grouped:4", "euler", 16, 0, weight_groups=g) for g in (0, 4)]
    result = train(specs, tt, small_config(steps=60, dtype="float32"), state_metrics=state_signature)
    ds = build_dataset(result, loss="mse", targets=["grouped:4"], attrs={}, metric_labels=SIGNATURE_LABELS)
    sig = group_signature(ds, 4).isel(target=0, scheme=0, temperature=0, depth=0, replicate=0, length=0, route=0,
                                      init=0)
    assert float(sig["angle_within"].sel(student_groups=4)) < 0.25 < float(sig["angle_boundary"].sel(student_groups=4))
    assert float(sig["angle_within"].sel(student_groups=0)) > 0.5  # plain layers start unrelated


def test_exponent_difference_recovers_a_known_change_of_exponent():
    import xarray as xr

    from resflow.analysis import exponent_difference

    depths, rng = np.array([2, 4, 8, 16]), np.random.default_rng(0)
    plain = 0.1 * depths[:, None, None] ** -1.0 * np.exp(0.05 * rng.standard_normal((4, 5, 3)))
    grouped = plain * depths[:, None, None] ** -0.5  # exactly 0.5 steeper, batch by batch
    dims = ("target", "scheme", "student_groups", "depth", "replicate", "length", "eval_batch")
    values = np.stack([plain, grouped])[None, None, :, :, :, None, :]
    ds = xr.Dataset({"final_loss_batch": (dims, values)},
                    coords={"target": ["t"], "scheme": ["euler"], "student_groups": [0, 4], "depth": depths,
                            "replicate": range(5), "length": [1.0], "eval_batch": range(3)})
    diff = exponent_difference(ds, "t", 4)
    assert diff.value == pytest.approx(0.5) and diff.low == pytest.approx(0.5) and diff.high == pytest.approx(0.5)
    assert "5 replicates" in diff.method
    assert exponent_difference(ds, "t", 4, depths=(4, 8, 16)).value == pytest.approx(0.5)
    noisy = ds.copy()
    noisy["final_loss_batch"] = ds["final_loss_batch"] * xr.DataArray(
        np.exp(0.2 * rng.standard_normal((2, 4, 5))), dims=("student_groups", "depth", "replicate"))
    wide = exponent_difference(noisy, "t", 4)
    assert wide.low < wide.value < wide.high and wide.high - wide.low > 0.05
    one = exponent_difference(noisy.isel(replicate=[0]), "t", 4)
    assert "evaluation batches" in one.method  # one replicate: says what its interval measures
    with pytest.raises(ConfigError, match="temperature"):
        exponent_difference(ds.expand_dims(temperature=[0.1, 1.0]), "t", 4)


def test_a_plain_run_and_a_group_structured_run_merge_into_one_store_dataset(tmp_path):
    from resflow.records import build_dataset
    from resflow.store import Store

    tt = teachers("independent")
    store = Store.open(tmp_path / "s", create=True)
    records = []
    for groups in (0, 2):
        specs = [StudentSpec("independent", "euler", d, 0, weight_groups=groups) for d in (2, 4)]
        ds = build_dataset(train(specs, tt, small_config(steps=20, dtype="float32")), loss="mse",
                           targets=["independent"], attrs={"experiment": "x"})
        records.append(store.write(ds, kind="toy-run", name="x"))
    merged = merge_runs(store, records)
    assert merged["student_groups"].values.tolist() == [0, 2]
    assert merged["final_loss"].dims == store.load(records[1])["final_loss"].dims
    np.testing.assert_array_equal(merged["final_loss"].sel(student_groups=[0]).values,
                                  store.load(records[0])["final_loss"].values)


def test_a_student_built_from_the_teachers_group_fields_is_the_teacher_at_full_depth_and_coarser_below():
    from resflow.sims.group_students import teacher_built_losses

    losses = teacher_built_losses("grouped:4", [4, 8, 16, 32], replicates=1, inputs=2048)
    assert losses[32] < 1e-10  # the teacher itself
    assert losses[4] > losses[8] > losses[16] > losses[32]  # a finer Euler discretisation of the same flow


def test_merging_two_records_of_the_same_cells_is_refused(tmp_path):
    from resflow.errors import IncompatibleOptionsError
    from resflow.records import build_dataset
    from resflow.store import Store

    tt = teachers("independent")
    store = Store.open(tmp_path / "s", create=True)
    records = []
    for groups in ((0,), (0, 2)):
        specs = [StudentSpec("independent", "euler", d, 0, weight_groups=g) for d in (2, 4) for g in groups]
        ds = build_dataset(train(specs, tt, small_config(steps=10, dtype="float32")), loss="mse",
                           targets=["independent"], attrs={"experiment": "x"})
        records.append(store.write(ds, kind="toy-run", name="x"))
    for order in (records, records[::-1]):  # either way the plain students of the first would be lost
        with pytest.raises(IncompatibleOptionsError, match="same cells"):
            merge_runs(store, order)


def test_split_update_angles_reads_the_last_axis_and_one_structure_selects_students():
    import xarray as xr

    from resflow.analysis import one_structure, split_update_angles

    angles = np.array([[0.1, 1.0, 0.3], [0.2, 2.0, 0.4]])  # two rows of depth-4 pairs, K = 2: boundary at pair 1
    within, boundary = split_update_angles(angles, 4, 2)
    assert within == pytest.approx(0.25) and boundary == pytest.approx(1.5)
    ds = xr.Dataset({"final_loss": (("student_groups", "depth"), [[1.0, 2.0], [3.0, 4.0]])},
                    coords={"student_groups": [0, 4], "depth": [2, 4]})
    assert one_structure(ds)["final_loss"].squeeze().values.tolist() == [1.0, 2.0]  # route, init: size 1
    assert one_structure(ds, 4)["final_loss"].squeeze().values.tolist() == [3.0, 4.0]
    with pytest.raises(ConfigError, match="student_groups=2"):
        one_structure(ds, 2)
    assert one_structure(ds.sel(student_groups=0)) is not None


def test_a_diverged_students_early_stop_fraction_is_nan_not_zero():
    from resflow.analysis import state_signature

    states = torch.randn(6, 50, 4, dtype=torch.float64).cumsum(0)
    states[3:, 7] = float("nan")
    assert np.isnan(float(state_signature(states)["early_stop_fraction"]))
