"""Students of Random Hierarchy Model data in the engine (resflow.training.classes), early exit
(resflow.probing.early_exit) and the aliasing of structured students with as many groups as layers.

The engine's cross-entropy gradients (head, layers, token embedding) are derived by hand; they are
checked against autograd through the block's own definitions and with torch.autograd.gradcheck.
"""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

import resflow
from resflow import ConfigError, get_tableau
from resflow.experiments.config import ExperimentConfig
from resflow.probing.early_exit import exit_layers, exit_summary
from resflow.training import StudentSpec, student_forward, student_logits
from resflow.training.classes import HierarchyTarget, HierarchyTargetConfig, one_hot_inputs
from resflow.training.config import TrainConfig
from resflow.training.driver import train
from resflow.training.engine import Trainer
from resflow.training.hierarchy import HierarchyConfig, RandomHierarchyModel

WIDTH = 6


def grammars(levels=(2, 3), replicates=(0, 1), **kw):
    return {(f"rhm:{L}", r): HierarchyTarget(HierarchyTargetConfig.from_spec(f"rhm:{L}", width=WIDTH, seed=r, **kw))
            for L in levels for r in replicates}


def specs(levels=(2, 3), depths=(1, 3), replicates=(0, 1), scheme="euler"):
    return [StudentSpec(f"rhm:{L}", scheme, d, r, math.nan, 1.0) for L in levels for d in depths for r in replicates]


def trainer_and_batch(scheme="euler", dtype="float64"):
    config = TrainConfig(steps=10, batch=7, loss="ce", dtype=dtype, device="cpu")
    trainer = Trainer(specs(scheme=scheme), grammars(), config)
    state = trainer.init(0)
    gen = torch.Generator().manual_seed(3)
    for p in state.params:  # a trained-looking student: W2 and head non-zero
        p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.3)
    x, labels = trainer.next_batch(state)
    return trainer, state, x, labels


def autograd_losses(trainer, params, x, labels):
    """Each student's loss and gradient alone, by autograd through resflow.training.block and F.cross_entropy."""
    codes = trainer.targets.inputs(x, trainer.dtype)
    values, grads = [], [torch.zeros_like(p) for p in params]
    for k, bank in enumerate(trainer.banks):
        tableau = get_tableau(bank.specs[0].scheme)
        for i, spec in enumerate(bank.specs):
            p = {n: v.clone().requires_grad_(True) for n, v in bank.student_parameters(params[k], i).items()}
            slot = trainer.targets.slot_of(spec, trainer.targets.teachers)
            h = student_forward(p, codes[slot] @ p["embed"].T, tableau)
            value = torch.nn.functional.cross_entropy(student_logits(h, p["head"]), labels[slot])
            value.backward()
            values.append(value.detach())
            layers = bank.layers(grads[k])
            for layer in range(spec.depth):
                for name in ("W1", "b1", "W2"):
                    getattr(layers[layer], name)[i] = p[name].grad[layer]
            bank.head(grads[k])[i] = p["head"].grad
            bank.embed(grads[k])[i] = p["embed"].grad
    return torch.stack(values), grads


@pytest.mark.parametrize("scheme", ["euler", "midpoint", "rk4"])
def test_engine_cross_entropy_gradients_equal_autograd_embedding_and_head_included(scheme):
    trainer, state, x, labels = trainer_and_batch(scheme)
    banks = list(range(len(trainer.banks)))
    losses = torch.cat(trainer.gradients(state.params, x, labels, banks))
    expected, grads = autograd_losses(trainer, state.params, x, labels)
    torch.testing.assert_close(losses, expected, rtol=1e-10, atol=0)
    for k, bank in enumerate(trainer.banks):
        torch.testing.assert_close(trainer.grads[k], grads[k], rtol=1e-9, atol=1e-13)
        assert bank.embed(trainer.grads[k]).abs().max() > 0 and bank.head(trainer.grads[k]).abs().max() > 0


class EngineLoss(torch.autograd.Function):
    """The summed engine loss of bank 0 as a function of some of its flat parameters (``at``, the rest held
    at ``params``), with the engine's gradient."""

    @staticmethod
    def forward(ctx, chosen, at, trainer, params, x, labels):
        flat = params[0].clone()
        flat[at] = chosen.detach()
        value = trainer.gradients([flat] + params[1:], x, labels, [0])[0].sum()
        ctx.save_for_backward(trainer.grads[0][at].clone())
        return value

    @staticmethod
    def backward(ctx, g):
        (grads,) = ctx.saved_tensors
        return g * grads, None, None, None, None, None


def test_gradcheck_of_the_cross_entropy_step():
    """Numerical against the engine's gradient at 24 coordinates of every part of bank 0 (each layer's W1, b1
    and W2, the head, the embedding): a finite difference per coordinate, so a sample, not all of them."""
    trainer, state, x, labels = trainer_and_batch("midpoint")
    bank, flat = trainer.banks[0], state.params[0]
    index = torch.arange(flat.numel(), dtype=flat.dtype).view_as(flat)  # each buffer entry's own position
    parts = [getattr(layer, name) for layer in bank.layers(index) for name in ("W1", "b1", "W2")]
    parts += [bank.head(index), bank.embed(index)]
    gen = torch.Generator().manual_seed(11)
    at = torch.cat([p.flatten()[torch.randperm(p.numel(), generator=gen)[:24]] for p in parts]).long()
    chosen = flat[at].clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda c: EngineLoss.apply(c, at, trainer, state.params, x, labels), (chosen,),
                                    eps=1e-6, atol=1e-6)


def test_labels_the_engine_trains_on_are_what_the_rules_say():
    trainer, state, x, labels = trainer_and_batch()
    for s, (key, _) in enumerate(trainer.targets.slots):
        rhm = trainer.targets.teachers[key].rhm
        n = rhm.config.n_tokens
        assert (x[s, :, n:] == -1).all()  # padding past the input's end
        root, levels = rhm.parse(x[s, :, :n])
        assert levels == rhm.depth and torch.equal(labels[s], root)


def test_a_label_follows_the_rules_synonyms_keep_it_and_a_tuple_no_rule_makes_is_refused():
    rhm = RandomHierarchyModel(HierarchyConfig(vocab=8, classes=8, synonyms=4, branching=2, depth=2, seed=5))
    tokens, labels = rhm.sample(200, seed=1)
    # replace the first pair of tokens by another rule of the same level-1 symbol: same sentence, same label
    low = rhm.rules[-1]  # (symbols, m, s)
    pairs = tokens[:, :2]
    symbol = torch.tensor([int(torch.nonzero((low == pair).all(-1))[0, 0]) for pair in pairs])
    swapped = tokens.clone()
    swapped[:, :2] = low[symbol, (torch.arange(len(symbol)) % rhm.config.synonyms)]
    assert torch.equal(rhm.parse(swapped)[0], labels)
    # a pair that no rule produces: not a sentence of the grammar
    used = {tuple(t) for t in low.reshape(-1, 2).tolist()}
    unused = next(p for p in ((a, b) for a in range(8) for b in range(8)) if p not in used)
    broken = tokens.clone()
    broken[:, :2] = torch.tensor(unused)
    assert (rhm.parse(broken)[0] == -1).all()
    # the engine refuses such inputs rather than inventing a label
    targets = {("rhm:2", 0): HierarchyTarget(HierarchyTargetConfig(rhm.config, WIDTH, 4 * WIDTH))}
    trainer = Trainer(specs(levels=(2,), replicates=(0,)), targets, TrainConfig(steps=2, loss="ce", device="cpu"))
    with pytest.raises(ConfigError, match="does not parse"):
        trainer.targets.final_states(broken[None])


def test_the_evaluation_stream_is_not_the_training_stream():
    config = TrainConfig(steps=2, batch=64, loss="ce", device="cpu")
    trainer = Trainer(specs(levels=(4,), replicates=(0,)), grammars(levels=(4,), replicates=(0,)), config)
    train_x = trainer.init(0).data.train_batch(64)
    eval_x = trainer.init(0).data.eval_batch(64)
    assert not torch.equal(train_x, eval_x)
    assert torch.equal(trainer.init(0).data.train_batch(64), train_x)  # each stream seeded, reproducible


def test_each_replicate_has_its_own_grammar_and_each_student_its_own_embedding():
    config = resflow.preset("hierarchy", "cpu").with_overrides(["targets=rhm:3", "replicates=2", "depths=1,2"])
    grammars_ = config.teachers()
    rules = [grammars_[("rhm:3", r)].rhm.rules for r in (0, 1)]
    assert not all(torch.equal(a, b) for a, b in zip(*rules, strict=True))
    trainer = Trainer(config.student_specs(), grammars_, config.train)
    state = trainer.init(0)
    embeds = [trainer.student_parameters(state, i)["embed"] for i in range(len(trainer.order))]
    distinct = {(s.depth, s.replicate) for s in trainer.order}
    assert len({e.sum().item() for e in embeds}) >= len(distinct)  # forks share their parent's start


def test_a_targets_data_do_not_depend_on_the_other_targets_of_the_run():
    config = TrainConfig(steps=2, batch=32, loss="ce", device="cpu")
    alone = Trainer(specs(levels=(3,)), grammars(levels=(3,)), config).init(0).data
    beside = Trainer(specs(levels=(2, 3)), grammars(levels=(2, 3)), config).init(0).data
    for draw in ("train_batch", "eval_batch"):
        a, b = getattr(alone, draw)(32), getattr(beside, draw)(32)
        assert torch.equal(a[:, :, :8], b[2:, :, :8])  # slots (rhm:3, 0), (rhm:3, 1) after rhm:2's


def test_grammars_train_with_cross_entropy_only():
    with pytest.raises(ConfigError, match="loss 'ce'"):
        train(specs(), grammars(), TrainConfig(steps=2, loss="mse", device="cpu"))


def test_one_hot_codes_put_each_position_in_its_own_block():
    tokens = torch.tensor([[[2, 0, -1, -1]]])
    codes = one_hot_inputs(tokens, vocab=3, positions=4, dtype=torch.float64)
    assert codes.shape == (1, 1, 12)
    assert torch.nonzero(codes[0, 0]).flatten().tolist() == [2, 3]


def binomial_floor(p0: float, n: int, sigmas: float = 5.0) -> float:
    return p0 + sigmas * math.sqrt(p0 * (1 - p0) / n)


@pytest.fixture(scope="module")
def rhm_run(tmp_path_factory):
    config = ExperimentConfig("hierarchy", targets=("rhm:2",), width=16, depths=(1, 2), replicates=2,
                              lengths=(0.5, 1.0), train=TrainConfig(steps=200, batch=64, loss="ce", eval_every=50,
                                                                     eval_batches=2, eval_batch_size=256,
                                                                     device="cpu"))
    return resflow.run_experiment(config, out=tmp_path_factory.mktemp("rhm"))


def test_students_learn_the_grammar_far_above_chance_on_fresh_sentences(rhm_run):
    ds = rhm_run.dataset
    accuracy = ds["test_accuracy"].sel(length=1.0)
    chance = 1 / 8
    assert float(accuracy.min()) > binomial_floor(chance, 1024)  # 1024 fresh sentences per student
    loss = ds["final_loss"].sel(length=1.0)
    assert float(loss.max()) < math.log(8)  # below the loss of a uniform guess
    assert ds.attrs["loss"] == "ce" and "confidence" in ds.attrs["exit_rule"]
    np.testing.assert_allclose(ds["exit_share"].sel(length=1.0).sum("layer").values, 1.0)


def test_the_hierarchy_report_and_figure_read_the_run(rhm_run):
    from resflow.fitting.hierarchy import drop_depth
    from resflow.workflows import report_run

    text = report_run(rhm_run.work_dir.parents[1], experiment="hierarchy")
    assert "| rhm:2 | 2 |" in text and "Drop depth per replicate at each training length" in text
    assert rhm_run.figure.exists()
    # the drop depth: the first depth below half the uniform-guess loss; censored when none is
    assert drop_depth([1, 2, 4], [2.0, 1.2, 0.1], classes=8) == 4  # 0.5 ln 8 = 1.04
    assert drop_depth([1, 2, 4], [2.0, 1.0, 0.1], classes=8) == 2
    assert drop_depth([1, 2, 4], [2.0, 1.9, 1.5], classes=8) == math.inf
    assert math.isnan(drop_depth([1, 2], [math.nan, 0.1], classes=8))


def test_a_resumed_cross_entropy_run_matches_an_uninterrupted_one(tmp_path):
    config = TrainConfig(steps=24, batch=16, loss="ce", eval_every=8, eval_batches=2, eval_batch_size=32,
                         checkpoint_every=5, device="cpu")
    args = ([StudentSpec(f"rhm:{L}", "euler", d, r, math.nan, length) for L in (2, 3) for d in (1, 2)
             for r in (0, 1) for length in (0.5, 1.0)], grammars(), config)  # forks resume too
    whole = train(*args, seed=0)
    train(*args, seed=0, run_dir=tmp_path, stop_after=11)
    resumed = train(*args, seed=0, run_dir=tmp_path, resume=True)
    np.testing.assert_array_equal(resumed.final_batches, whole.final_batches)


@pytest.mark.parametrize("overrides, match", [
    (["targets=rhm:2", "train.loss=mse"], "train.loss=ce"),
    (["targets=rhm:2,tied"], "mixes"),
    (["targets=tied"], "rhm:L targets"),
    (["targets=rhm:x"], "cannot read"),
    (["targets=rhm:2:q3"], "cannot read"),
    (["targets=rhm:2:m40"], "synonyms"),
    (["targets=rhm: 2"], "cannot read"),
    (["targets=rhm:2:v8:v8"], "each key once"),
    (["targets=rhm:12"], "one-hot inputs"),
    (["init=doubling", "depths=1,2"], "scratch"),
    (["targets=rhm:2,rhm:3:c4"], "one vocabulary"),
])
def test_bad_classification_settings_are_refused_by_name(overrides, match):
    base = resflow.preset("hierarchy", "cpu")
    with pytest.raises(ConfigError, match=match):
        base.with_overrides(overrides)


def test_cross_entropy_refuses_soap_and_a_shared_head():
    for bad in ({"optimizer": "soap"}, {"head": "shared"}):
        with pytest.raises(ConfigError, match="head='learned'"):
            TrainConfig(loss="ce", **bad)


# ---------------------------------------------------------------- early exit
def planted_probabilities(depth, exit_at, classes=4, batch=5, tau=0.9):
    """Readouts whose top probability is below tau before layer exit_at[b] and above from it."""
    probs = torch.full((depth + 1, batch, classes), 1 / classes, dtype=torch.float64)
    for b, k in enumerate(exit_at):
        probs[k:, b] = torch.tensor([0.95] + [0.05 / (classes - 1)] * (classes - 1), dtype=torch.float64)
    return probs


def test_confidence_rule_exits_where_the_readout_becomes_confident():
    exit_at = [0, 1, 3, 4, 2]
    exits = exit_layers(planted_probabilities(4, exit_at), "confidence")
    assert exits.tolist() == exit_at
    never = torch.full((5, 3, 4), 0.25, dtype=torch.float64)
    assert exit_layers(never, "confidence").tolist() == [4, 4, 4]  # never confident: the last layer


def test_settled_rule_exits_where_the_readout_stops_moving():
    depth, exit_at = 6, [1, 3, 6, 0]
    gen = torch.Generator().manual_seed(0)
    readouts = torch.zeros((depth + 1, len(exit_at), 5), dtype=torch.float64)
    for b, k in enumerate(exit_at):
        for layer in range(1, depth + 1):  # moves at layers 1..k, then fixed
            step = torch.randn(5, generator=gen, dtype=torch.float64) if layer <= k else 0.0
            readouts[layer, b] = readouts[layer - 1, b] + step
    assert exit_layers(readouts, "settled").tolist() == exit_at


def test_exit_summary_counts_exits_and_early_ones():
    summary = exit_summary(torch.tensor([0, 1, 2, 4, 4, 4]), depth=4)
    np.testing.assert_allclose(summary["exit_share"], [1 / 6, 1 / 6, 1 / 6, 0, 3 / 6])
    assert summary["exit_early_fraction"] == pytest.approx(3 / 6)  # e <= 2
    assert summary["exit_depth"] == pytest.approx((0 + 1 + 2 + 12) / 6 / 4)


def test_bad_exit_arguments_are_refused_by_name():
    with pytest.raises(ConfigError, match="rule"):
        exit_layers(torch.zeros(3, 2, 2), "patience")
    with pytest.raises(ConfigError, match="readouts"):
        exit_layers(torch.zeros(2, 2), "settled")


# ---------------------------------------------------------------- aliasing
def test_a_structured_student_with_as_many_groups_as_layers_is_trained_once_as_the_plain_one(tmp_path):
    config = resflow.preset("group-students", "cpu").with_overrides([
        "train.steps=20", "train.eval_every=10", "train.eval_batches=2", "train.eval_batch_size=32",
        "train.batch=8", "width=6", "teacher_depth=8", "vocab=8", "depths=2,4,8", "replicates=1",
        "student_groups=0,4", "targets=independent", "train.device=cpu", "lengths=1"])
    assert StudentSpec("t", "euler", 4, 0, weight_groups=4).canonical() == StudentSpec("t", "euler", 4, 0)
    assert StudentSpec("t", "euler", 8, 0, weight_groups=4).canonical().weight_groups == 4
    trained = []
    original = Trainer.__init__

    def spy(self, specs, *args, **kwargs):
        trained.extend(specs)
        original(self, specs, *args, **kwargs)

    Trainer.__init__ = spy
    try:
        ds = resflow.run_experiment(config, out=tmp_path).dataset
    finally:
        Trainer.__init__ = original
    assert len(trained) == 4 and len(set(trained)) == 4  # plain 2, 4, 8 and structured 8: not 6
    for depth in (2, 4):
        for var in ("final_loss_batch", "test_loss", "update_angle"):
            a = ds[var].sel(student_groups=0, depth=depth).values
            b = ds[var].sel(student_groups=4, depth=depth).values
            assert np.array_equal(a, b, equal_nan=True), var
    assert not np.array_equal(ds["final_loss"].sel(student_groups=0, depth=8).values,
                              ds["final_loss"].sel(student_groups=4, depth=8).values)


# ---------------------------------------------------------------- the three readings in one compare
def test_compare_shows_the_signatures_of_every_reading_side_by_side(rhm_run, tmp_path):
    from resflow.workflows import compare_stores, probe_models

    out = rhm_run.work_dir.parents[1]
    tiny = ["train.steps=30", "train.eval_every=15", "train.eval_batches=1", "train.eval_batch_size=32",
            "train.batch=16", "width=6", "teacher_depth=8", "vocab=8", "depths=2,4,8", "replicates=2",
            "train.device=cpu", "targets=tied,grouped:4"]
    grouped = resflow.run_experiment(resflow.preset("smooth-vs-rough", "cpu").with_overrides(tiny), out=out).dataset
    full = grouped.sel(length=1.0, depth=8)
    assert np.isfinite(full["angle_within"].sel(target="grouped:4")).all()  # stored beside the other probes
    assert np.isnan(full["angle_within"].sel(target="tied")).all()  # no groups: nothing to split
    assert np.isfinite(full["exit_depth"]).all() and "settled" in grouped.attrs["exit_rule"]
    probe_models(["teacher:grouped:4"], max_tokens=256, out=out)
    comparison = compare_stores([out], figure=tmp_path / "compare.png")
    rows = {r.name: r for r in comparison.signatures}
    assert set(rows) == {"hierarchy: rhm:2", "smooth-vs-rough: smooth (tied)", "smooth-vs-rough: 4 groups (grouped:4)",
                         "teacher:grouped:4"}  # toy teachers by their reader's names (resflow.labels)
    assert rows["hierarchy: rhm:2"].drop_depth >= 1 and np.isnan(rows["smooth-vs-rough: smooth (tied)"].drop_depth)
    assert np.isfinite(rows["smooth-vs-rough: 4 groups (grouped:4)"].angle_within)
    assert rows["teacher:grouped:4"].source == "probe" and np.isfinite(rows["teacher:grouped:4"].update_angle)
    assert not any("rhm" in r.name for r in comparison.rows)  # read by its drop depth, not by a power law


def test_signatures_and_reports_of_runs_without_plain_students_or_without_grammars():
    import xarray as xr

    from resflow.presenting.signatures import toy_signature_rows
    from resflow.sims.hierarchy import report

    with xr.open_dataset(Path(__file__).parent / "data" / "records-0.3.0" / "group-students.nc") as fixture:
        ds = fixture.load()
    rows = toy_signature_rows(ds.sel(student_groups=[2]), "rec", "group-students")
    assert [r.name for r in rows] == ["group-students: 4 groups (grouped:4), students of 2 weight groups",
                                      "group-students: rough (independent), students of 2 weight groups"]
    assert "| 4 groups (grouped:4) |" in report(ds, "rec")  # a hierarchy run given teachers: the usual tables
