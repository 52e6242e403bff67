"""How ladder models use their depth: logit lens, block pruning with healing, maps across depth.

The references are constructions: a layer whose output projections are zero is the identity, so a model
with such a layer has a block that prunes at no cost, and a model with an identity layer after each of
another model's layers has that model's states at every other position.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from resflow.llm.ladder.depth_records import depth_use_tables  # noqa: E402
from resflow.llm.ladder.depth_use import (  # noqa: E402
    FOLDER,
    angular_distances,
    cross_depth_r2,
    logit_lens,
    measure_depth_use,
    prune_block,
    removable_share,
)
from resflow.llm.ladder.model import build_model  # noqa: E402
from resflow.llm.ladder.training import validation_losses  # noqa: E402

VOCAB = 300


def model(depth: int, seed: int = 0, width: int = 32):
    return build_model(vocab_size=VOCAB, width=width, depth=depth, context=32, seed=seed).eval()


def windows(n: int = 8, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, VOCAB, (n, 33), generator=torch.Generator().manual_seed(seed))


def make_identity(layer) -> None:
    """Zero the attention's and the MLP's output projections: both residual branches add nothing."""
    with torch.no_grad():
        layer.self_attn.o_proj.weight.zero_()
        layer.mlp.down_proj.weight.zero_()


def test_the_logit_lens_ends_at_the_models_loss_and_starts_at_the_embedding_read_out():
    m, w = model(3), windows()
    lens = logit_lens(m, w)
    assert len(lens) == 4
    assert lens[-1] == pytest.approx(float(validation_losses(m, w, 1)[0]), abs=1e-5)
    with torch.no_grad():
        logits = m.lm_head(m.model.norm(m.model.embed_tokens(w[:, :-1])))
        first = torch.nn.functional.cross_entropy(logits.flatten(0, 1), w[:, 1:].flatten())
    assert lens[0] == pytest.approx(float(first), abs=1e-5)


def test_pruning_cuts_the_block_closest_in_angle_and_an_identity_layer_costs_nothing():
    m, w = model(4), windows()
    make_identity(m.model.layers[2])
    d = angular_distances(m, w)
    assert d[0, :5] == pytest.approx(0.0, abs=1e-6) and d[1, 2] == pytest.approx(0.0, abs=1e-6)
    assert np.isnan(d[4, 1]) and d[1, 0] > 0.01
    measured = measure_depth_use(m, w)
    assert measured["prune_start"][1] == 2
    assert measured["prune_loss"][1] == pytest.approx(measured["prune_loss"][0], abs=1e-5)
    assert measured["healed_loss"] == [] and len(measured["prune_loss"]) == 4
    # every pruned loss is the model without that block, layer by layer
    for n, start in enumerate(measured["prune_start"]):
        kept = [layer for k, layer in enumerate(m.model.layers) if not start <= k < start + n]
        manual = copy.deepcopy(m)
        manual.model.layers = torch.nn.ModuleList(copy.deepcopy(kept))
        assert float(validation_losses(manual, w, 1)[0]) == pytest.approx(measured["prune_loss"][n], abs=1e-5)
    assert len(prune_block(m, 1, 2).model.layers) == 2 and len(m.model.layers) == 4  # the model untouched


def test_healing_fine_tunes_each_pruned_model_and_the_unpruned_control_alike():
    m, w = model(3), windows()
    stream = np.random.default_rng(0).integers(0, VOCAB, 4000)
    healed = measure_depth_use(m, w, train_stream=stream, heal_steps=3, lr=3e-3, batch=4, seed=0)
    again = measure_depth_use(m, w, train_stream=stream, heal_steps=3, lr=3e-3, batch=4, seed=0)
    assert healed["healed_loss"] == again["healed_loss"] and len(healed["healed_loss"]) == 3
    assert healed["healed_loss"][0] != pytest.approx(healed["prune_loss"][0], abs=1e-7)  # the control moved
    before = [p.clone() for p in m.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(before, m.parameters(), strict=True))  # healing copies


def test_maps_across_depth_find_the_states_a_stretched_model_repeats():
    """A deep model made of the shallow one's layers, each followed by an identity layer, holds the shallow
    state h_i at positions 2i - 1 and 2i: the map from h_i is exact there (R² = 1), so every deep state's
    best shallow state is found at relative depth j/2ℓ rounded up."""
    shallow, w = model(3, seed=0), windows(16)
    deep = model(6, seed=5)
    layers = []
    for k, layer in enumerate(shallow.model.layers):
        identity = copy.deepcopy(deep.model.layers[2 * k + 1])
        make_identity(identity)
        layers += [copy.deepcopy(layer), identity]
    deep.model.layers = torch.nn.ModuleList(layers)
    deep.model.embed_tokens = shallow.model.embed_tokens
    r2 = cross_depth_r2(shallow, deep, w)
    assert r2.shape == (4, 7)
    for j in range(7):
        i = (j + 1) // 2
        assert r2[i, j] == pytest.approx(1.0, abs=1e-6)
        assert int(np.argmax(r2[:, j])) == i or r2[int(np.argmax(r2[:, j])), j] == pytest.approx(1.0, abs=1e-6)
    assert r2[0, 6] < 0.999  # the embedding does not predict the last state
    with pytest.raises(ValueError, match="two windows"):
        cross_depth_r2(shallow, deep, w[:1])


def test_the_removable_share_stops_at_the_first_loss_past_the_tolerance():
    assert removable_share([2.0, 2.01, 2.04, 2.3, 2.02], 5, 0.05) == pytest.approx(2 / 5)
    assert removable_share([2.0, 2.3, 2.01], 3, 0.05) == 0.0
    assert removable_share([2.0], 1, 0.05) == 0.0
    assert removable_share([2.0, 2.01, float("nan")], 3, 0.05) == pytest.approx(1 / 3)


def test_a_ladder_is_measured_once_resumed_from_its_files_and_an_old_record_says_so(tmp_path):
    from test_lm_ladder import make_corpus

    from resflow.experiments import preset
    from resflow.store import Store
    from resflow.workflows import run_ladder

    corpus = make_corpus(tmp_path / "corpus")
    config = dataclasses.replace(preset("lm-ladder", "tiny"), corpus=str(corpus), device="cpu")
    result = run_ladder(config, out=tmp_path / "store")
    ds = Store.open(tmp_path / "store").load(result.record)
    assert ds["logit_lens"].dims == ("width", "depth", "seed", "layer")
    lens = ds["logit_lens"].sel(depth=2).values[0]
    assert np.isfinite(lens[:, :3]).all() and np.isnan(lens[:, 3:]).all()
    assert np.isfinite(ds["healed_loss"].sel(depth=4).values[..., :4]).all()
    # pairs (1, 2) and (2, 4) mapped; depth 4 has no partner of depth 8
    assert np.isfinite(ds["cross_depth_r2"].sel(depth=2).values[..., :3, :5]).all()
    assert np.isnan(ds["cross_depth_r2"].sel(depth=4).values).all()
    assert "Logit lens" in result.tables and "Block pruning" in result.tables and "2 → 4" in result.tables
    files = sorted(p.name for p in (result.work_dir / FOLDER).iterdir())
    assert "w32-l4-s1.json" in files and "w32-l2-s0-to-l4.json" in files and "w32-l1-s1-seen.json" in files
    assert len(files) == 6 + 6 + 4  # per model, its seen/unseen split, per pair
    # the training text's tokens apart by whether the model was trained to predict them
    assert np.isfinite(ds["seen_loss"].values).all() and np.isfinite(ds["unseen_loss"].values).all()
    assert ((ds["seen_share"] > 0) & (ds["seen_share"] < 1)).all()
    assert "Memorising or file shift" in result.tables
    # a resumed ladder reads what is there: a planted value comes back
    from resflow.llm.ladder.depth_use import ladder_depth_use

    path = result.work_dir / FOLDER / "w32-l1-s0.json"
    planted = {**json.loads(path.read_text()), "logit_lens": [9.0, 8.0]}
    path.write_text(json.dumps(planted))
    again = ladder_depth_use(result.work_dir, [("w32-l1-s0", 32, 1, 0)], torch.zeros(2, 33, dtype=torch.long),
                             np.zeros(100, np.int64), heal_steps=0, lr=1e-3, batch=2, device="cpu")
    assert again["models"]["w32-l1-s0"]["logit_lens"] == [9.0, 8.0]
    # a finished ladder measured again from its work directory: a missing file is measured anew, the same
    from resflow.workflows import ladder_depth_use_of

    seen_file = result.work_dir / FOLDER / "w32-l2-s1-seen.json"
    first = json.loads(seen_file.read_text())
    seen_file.unlink()
    again = ladder_depth_use_of(result.work_dir)
    assert again["models"]["w32-l2-s1"]["seen_loss"] == pytest.approx(first["seen_loss"], abs=1e-9)
    assert again["models"]["w32-l1-s0"]["logit_lens"] == [9.0, 8.0]  # what is there is read, not redone
    from resflow import ConfigError

    with pytest.raises(ConfigError, match="work_dir .* is not a ladder's work directory"):
        ladder_depth_use_of(tmp_path / "corpus")
    # a record written before the measures existed: the tables say so
    old = ds.drop_vars(["logit_lens", "prune_loss", "healed_loss", "prune_start", "cross_depth_r2"])
    assert "not measured for depth use" in "\n".join(depth_use_tables(old))


def test_a_ladder_started_before_a_key_existed_resumes_with_its_default(tmp_path):
    from test_lm_ladder import make_corpus

    from resflow.experiments import preset
    from resflow.workflows import run_ladder

    corpus = make_corpus(tmp_path / "corpus")
    config = dataclasses.replace(preset("lm-ladder", "tiny"), corpus=str(corpus), device="cpu", heal_steps=50)

    def stop(done, total, name):  # once a model's files are written: work to resume (rundir.resumable)
        if name and any(p.is_file() for p in (tmp_path / "store" / "work").glob("*/models/*/*")):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_ladder(config, out=tmp_path / "store", progress=stop)
    (run_dir,) = (tmp_path / "store" / "work").iterdir()
    info = json.loads((run_dir / "run.json").read_text())
    del info["config"]["heal_steps"]  # as a run.json written before heal_steps existed
    (run_dir / "run.json").write_text(json.dumps(info))
    from resflow import ConfigError

    with pytest.raises(ConfigError, match="different configuration"):
        run_ladder(dataclasses.replace(config, heal_steps=0), out=tmp_path / "store", resume=True)
    result = run_ladder(config, out=tmp_path / "store", resume=True)
    assert result.work_dir == run_dir


def test_the_law_of_width_depth_and_data_on_the_ladders_grid_recovers_planted_exponents():
    """Planted c_m m^-a_m + c_l l^-a_l + c_D D^-a_D + L0 with 0.2% noise on a grid like the gpu preset's (three
    widths, depths 2-8, three lengths, two seeds): every exponent within 3 Jacobian standard errors.  With two
    widths (the cpu preset's) the width term's exponent, coefficient and L0 trade off: the fit says it cannot
    be trusted; a grid with one length is refused with the reason."""
    import xarray as xr

    from resflow.llm.ladder.fit import ladder_law_fit, ladder_law_table

    widths, depths, lengths, seeds = np.array([32, 64, 128]), np.array([2, 3, 4, 6, 8]), np.array([0.25, 0.5, 1]), 2
    tokens = 3_686_400
    m, ell, frac = np.meshgrid(widths, depths, lengths, indexing="ij")
    law = 40.0 * m ** -0.6 + 2.0 * ell ** -0.8 + 300.0 * (frac * tokens) ** -0.3 + 1.2
    rng = np.random.default_rng(3)
    noisy = law[:, :, None, :, None] * (1 + 0.002 * rng.standard_normal((3, 5, seeds, 3, 2)))
    ds = xr.Dataset({"val_loss": (("width", "depth", "seed", "length", "batch"), noisy)},
                    coords={"width": widths, "depth": depths, "seed": range(seeds), "length": lengths},
                    attrs={"tokens_per_model": str(tokens)})
    table = ladder_law_table(ds)
    assert len(table) == 3 * 5 * 2 * 3 and set(table["num_tokens"]) == {0.25 * tokens, 0.5 * tokens, tokens}
    fit, why = ladder_law_fit(ds)
    assert why is None and fit.n_points == 90 and fit.failure is None, fit.failure
    for name, planted in (("alpha_m", 0.6), ("alpha_l", 0.8), ("alpha_D", 0.3)):
        assert abs(fit.params[name] - planted) < 3 * fit.se[name] + 0.02, (name, fit.params[name], fit.se[name])
    two, why = ladder_law_fit(ds.sel(width=[32, 64]))
    assert why is None and two.failure is not None and "standard errors" in two.failure
    fit, why = ladder_law_fit(ds.sel(length=[1.0]))
    assert fit is None and "1 lengths" in why


def test_the_coverage_replays_the_windows_training_drew_and_the_losses_split_by_it(monkeypatch):
    from resflow.llm.ladder import training
    from resflow.llm.ladder.depth_use import seen_and_unseen_losses, training_coverage
    from resflow.llm.ladder.training import LMRecipe, train_model

    drawn = []
    original = training.window_starts

    def record(gen, n_tokens, context, batch):
        starts = original(gen, n_tokens, context, batch)
        drawn.append(starts.clone())
        return starts

    monkeypatch.setattr(training, "window_starts", record)
    stream = np.random.default_rng(0).integers(0, VOCAB, 5000)
    recipe = LMRecipe(steps=30, batch=4, context=32, lr=3e-3, warmup=2, decay_fraction=0.2, weight_decay=0.1,
                      lengths=(0.5, 1.0), eval_every=10, eval_batches=2, checkpoint_every=10)
    m = model(2, seed=3)
    train_model(m, stream, windows(4), recipe, seed=3)
    # the half-length fork leaves at step 12 (its decay: the last 20% of 15 steps) and draws 3 steps with a copy
    # of the generator before the main run goes on: the same windows as the main run's steps 12-14
    assert len(drawn) == 33
    for k in range(3):
        torch.testing.assert_close(drawn[12 + k], drawn[15 + k])
    main = torch.cat(drawn[:12] + drawn[15:])
    expected = np.zeros(len(stream), np.int64)
    for s in main.tolist():
        expected[s + 1: s + 33] += 1
    coverage = training_coverage(len(stream), steps=30, batch=4, context=32, seed=3)
    np.testing.assert_array_equal(coverage, expected)
    assert coverage.sum() == 30 * 4 * 32
    # the losses split by it: the seen tokens' mean and the unseen ones', token by token
    split = seen_and_unseen_losses(m, stream, coverage, context=32, max_tokens=32 * 20)
    ids = torch.from_numpy(stream[: 20 * 32 + 1].astype(np.int64))
    with torch.no_grad():
        logits = m(input_ids=ids[None, :-1].reshape(20, 32), use_cache=False).logits
        per_token = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[1:].reshape(20, 32),
                                                      reduction="none").double().numpy().ravel()
    seen = coverage[1: 20 * 32 + 1] > 0
    assert split["seen_share"] == pytest.approx(seen.mean())
    assert split["seen_loss"] == pytest.approx(per_token[seen].mean(), abs=1e-5)
    assert split["unseen_loss"] == pytest.approx(per_token[~seen].mean(), abs=1e-5)
