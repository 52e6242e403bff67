"""Interventions across depth: each checked on a hand-computed case, and the laws of theory/interventions.py
checked against the ensemble and flow models they describe (Monte Carlo tolerances from the sample size)."""

import math

import numpy as np
import pytest
import torch

from resflow import ConfigError, laws
from resflow.analysis import lesion, run_steps, swap, trace
from resflow.dynamics import MLPField, ResidualStack, get_tableau, rmsnorm
from resflow.noise import Equicorrelated
from resflow.training import StudentSpec, init_student, student_forward, student_steps

Z = 4.0  # tolerance in standard errors: a two-sided miss probability of 6e-5 per check


def student(depth=6, width=8, dtype=torch.float64):
    params = init_student(StudentSpec("tied", "midpoint", depth, 0), width, 4 * width, 4, dtype=dtype)
    params["W2"] = 0.3 * torch.randn(params["W2"].shape, generator=torch.Generator().manual_seed(1), dtype=dtype)
    return params, get_tableau("midpoint")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_lesioned_student_is_the_student_built_without_that_layer_bit_for_bit(dtype):
    params, tableau = student(dtype=dtype)
    x = torch.randn(64, 8, generator=torch.Generator().manual_seed(2), dtype=dtype)
    profile = lesion(student_steps(params, tableau), rmsnorm(x), readout=rmsnorm, keep_outputs=True)
    for layer in range(6):
        without = {k: torch.cat([v[:layer], v[layer + 1:]]) if k != "head" else v for k, v in params.items()}
        assert torch.equal(profile.outputs[layer], student_forward(without, x, tableau))
    assert profile.position.tolist() == [k / 6 for k in range(6)]


def test_a_swap_is_the_student_with_two_layers_exchanged_and_a_full_restore_recovers_exactly():
    params, tableau = student()
    x = torch.randn(32, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    steps = student_steps(params, tableau)
    profile = swap(steps, rmsnorm(x), keep_outputs=True)
    for layer in range(5):
        order = list(range(6))
        order[layer], order[layer + 1] = order[layer + 1], order[layer]
        assert torch.equal(profile.outputs[layer], run_steps([steps[k] for k in order], rmsnorm(x)))
    corrupt = rmsnorm(x + torch.randn(x.shape, generator=torch.Generator().manual_seed(4), dtype=x.dtype))
    restored = trace(steps, rmsnorm(x), corrupt)
    assert restored.value.tolist() == [1.0] * 7  # every state restored: the clean output, exactly
    by_update = trace(steps, rmsnorm(x), corrupt, restore="update")
    assert by_update.layer.tolist() == list(range(6)) and np.all(by_update.value < 1)


def test_bad_input_is_refused_with_the_argument_named():
    params, tableau = student()
    h = torch.zeros(3, 8, dtype=torch.float64)
    with pytest.raises(ConfigError, match="steps"):
        swap(student_steps(params, tableau)[:1], h)
    with pytest.raises(ConfigError, match="restore"):
        trace(student_steps(params, tableau), h, h, restore="everything")
    with pytest.raises(ConfigError, match="corrupt"):
        trace(student_steps(params, tableau), h, h[:2])


# ------------------------------------------------------------------------------------------- the ensemble


def ensemble(depth, rho, m, sigma, n=400, width=16, seed=0):
    """Updates u_k / depth, u_k = mean + sigma z_k, z equicorrelated along depth; n independent ensembles."""
    z = Equicorrelated(rho).sample(depth, (n, width), seed=seed, base="gaussian", dtype=torch.float64)
    mean = m * torch.ones(width, dtype=torch.float64)
    updates = (mean + sigma * z) / depth
    return [lambda h, u=u: h + u for u in updates], torch.zeros(n, width, dtype=torch.float64)


@pytest.mark.parametrize(("depth", "rho"), [(8, 0.0), (16, 0.5), (32, 0.9)])
def test_lesion_laws_of_the_noisy_ensemble(depth, rho):
    m, sigma, n, width = 0.7, 1.3, 400, 16
    steps, h0 = ensemble(depth, rho, m, sigma, n, width)
    samples = n * width  # independent (row, coordinate) draws behind every layer's mean
    plain = lesion(steps, h0)
    expected = laws.evaluate("lesion-ensemble", ell=depth, m=m, sigma=sigma)
    se = math.sqrt((2 * sigma**4 + 4 * m**2 * sigma**2) / samples) / depth**2  # SE of the mean of (m + sigma z)^2
    assert np.all(np.abs(plain.value - expected) < Z * se), (plain.value, expected)
    rescaled = lesion(steps, h0, rescale=True)
    expected = laws.evaluate("lesion-rescaled-ensemble", ell=depth, sigma=sigma, rho=rho)
    se = math.sqrt(2 / samples) * expected  # the mean of the square of a N(0, expected) variable
    assert np.all(np.abs(rescaled.value - expected) < Z * se), (rescaled.value, expected)
    assert np.max(swap(steps, h0).value) < 1e-28  # a sum in another order: round-off only
    assert laws.evaluate("swap-ensemble", ell=depth) == 0


# ------------------------------------------------------------------------------------------- the flow


def scalar_flow(depth, rate, width=4):
    rates = [rate(k / depth) for k in range(depth)]
    return [lambda h, a=a: h * (1 + a / depth) for a in rates], np.array(rates)


def test_lesion_law_of_a_discretised_flow_is_exact_for_the_scalar_linear_field():
    depth = 24
    steps, rates = scalar_flow(depth, lambda t: 1 + 2 * t)
    h0 = torch.randn(8, 4, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    out = float(run_steps(steps, h0).square().mean().sqrt())
    expected = [laws.evaluate("lesion-flow", ell=depth, a=a, h=out) for a in rates]
    np.testing.assert_allclose(lesion(steps, h0).value, expected, rtol=1e-10)


def test_rescaled_lesion_of_a_flow_follows_the_rate_minus_its_mean_to_first_order():
    errors = []
    for depth in (64, 256):
        steps, rates = scalar_flow(depth, lambda t: 1 + 2 * t)
        h0 = torch.ones(1, 4, dtype=torch.float64)
        out = float(run_steps(steps, h0).square().mean().sqrt())
        law = np.array([laws.evaluate("lesion-rescaled-flow", ell=depth, a=a, abar=rates.mean(), h=out)
                        for a in rates])
        far = np.abs(rates - rates.mean()) > 0.5  # away from the layers that do what the average one does
        errors.append(np.max(np.abs(lesion(steps, h0, rescale=True).value[far] / law[far] - 1)))
    assert errors[1] < 0.05 and errors[1] < errors[0] / 2  # the leading order, and its O(1/ell) correction


def slope(depths, values):
    return -np.polyfit(np.log(depths), np.log(values), 1)[0]


def test_an_autonomous_flow_is_repaired_by_rescaling_and_its_lesion_profile_is_flat():
    field = MLPField(8, seed=0)
    h0 = rmsnorm(torch.randn(64, 8, generator=torch.Generator().manual_seed(6)).double())
    field = field.double()
    depths, plain, rescaled = [8, 16, 32, 64], [], []
    for depth in depths:
        steps = ResidualStack(field, depth=depth).layer_steps()
        one = lesion(steps, h0)
        assert np.ptp(one.value) / one.value.mean() < 4.0 / depth  # flat to O(1/ell)
        plain.append(one.value.mean())
        rescaled.append(lesion(steps, h0, rescale=True).value.mean())
    assert slope(depths, plain) == pytest.approx(2.0, abs=0.1)
    assert slope(depths, rescaled) == pytest.approx(4.0, abs=0.3)  # the leading ell^-2 term cancels


@pytest.mark.parametrize(("gamma", "smooth"), [(1, True), (0, False)])
def test_swap_damage_of_a_flow_falls_as_ell_to_minus_4_minus_2_gamma(gamma, smooth):
    gen = torch.Generator().manual_seed(7)
    a0, a1 = (torch.randn(6, 6, generator=gen, dtype=torch.float64) / 2 for _ in range(2))
    h0 = torch.randn(32, 6, generator=gen, dtype=torch.float64)
    depths, damage = [8, 16, 32, 64], []
    for depth in depths:
        if smooth:
            mats = [a0 + (k / depth) * a1 for k in range(depth)]
        else:
            mats = [torch.randn(6, 6, generator=torch.Generator().manual_seed(100 + k), dtype=torch.float64) / 2
                    for k in range(depth)]
        steps = [lambda h, a=a, n=depth: h + h @ a.T / n for a in mats]
        damage.append(swap(steps, h0).value.mean())
    expected = laws.exponent("swap-flow", ell=32, c=1.0, gamma=gamma)
    assert slope(depths, damage) == pytest.approx(float(expected), abs=0.35)


# ------------------------------------------------------------------------------------------- transformers

PROMPT, TARGET, SUBJECT = "The space needle is in downtown", " seattle", "needle"


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    pytest.importorskip("transformers", reason="the llm extra (transformers) is not installed")
    from test_probes import tiny_model_dir

    root = tmp_path_factory.mktemp("models")
    return {family: tiny_model_dir(root, family) for family in ("gpt_neox", "llama", "bert")}


def probability(model, tokenizer):
    enc = tokenizer(PROMPT, return_tensors="pt")
    target = tokenizer(TARGET, add_special_tokens=False)["input_ids"][0]
    with torch.no_grad():
        return float(torch.softmax(model(**enc, use_cache=False).logits[0, -1].float(), -1)[target])


@pytest.mark.parametrize("family", ["gpt_neox", "llama"])
def test_transformer_lesion_and_swap_are_the_model_without_or_with_reordered_layers(tiny_models, family):
    from resflow.llm.probes.hf_probe import load_hf
    from resflow.llm.probes.interventions import _layers, intervene_model

    result = intervene_model(tiny_models[family], PROMPT, target=TARGET, subject=SUBJECT)
    model, tokenizer, _ = load_hf(tiny_models[family])
    layers = _layers(model, True)
    assert result.clean == pytest.approx(probability(model, tokenizer), rel=1e-6)
    original = list(layers)
    for k in range(len(original)):
        assert result.lesion[k] == pytest.approx(_skip_output(model, tokenizer, layers, k, original), rel=1e-5)
    for k in range(len(original) - 1):
        layers[k], layers[k + 1] = original[k + 1], original[k]
        try:
            assert result.swap[k] == pytest.approx(probability(model, tokenizer), rel=1e-6)
        finally:
            layers[k], layers[k + 1] = original[k], original[k + 1]


def _skip_output(model, tokenizer, layers, k, original):
    """The model with layer k removed from its layer list (the others keep their order)."""
    kept = [layer for i, layer in enumerate(original) if i != k]
    for i in range(len(layers)):
        layers[i] = kept[i] if i < len(kept) else None
    del layers[len(kept):]
    try:
        return probability(model, tokenizer)
    finally:
        for i, layer in enumerate(original):
            if i < len(layers):
                layers[i] = layer
            else:
                layers.append(layer)


@pytest.mark.parametrize("family", ["gpt_neox", "llama", "bert"])
def test_a_trace_restoring_the_corrupted_token_at_the_first_layer_recovers_the_clean_output(tiny_models, family):
    from resflow.llm.probes.interventions import intervene_model

    result = intervene_model(tiny_models[family], PROMPT, target=TARGET, subject=SUBJECT, seed=3)
    (position,) = result.subject
    assert result.trace.shape == (result.depth, len(result.tokens))
    restored = result.trace[0, position]
    assert restored == pytest.approx(result.clean, rel=1e-5, abs=1e-12)  # the only corrupted token, put back
    assert result.corrupt != pytest.approx(result.clean, rel=1e-9, abs=1e-15)  # the noise did something
    again = intervene_model(tiny_models[family], PROMPT, target=TARGET, subject=SUBJECT, seed=3)
    np.testing.assert_array_equal(again.trace, result.trace)  # deterministic under a seed


def test_bad_transformer_specs_get_one_clear_line(tiny_models):
    from resflow.llm.probes.interventions import intervene_model

    with pytest.raises(ConfigError, match="subject 'Paris'"):
        intervene_model(tiny_models["gpt_neox"], PROMPT, target=TARGET, subject="Paris")
    with pytest.raises(ConfigError, match="--target"):
        intervene_model(tiny_models["gpt_neox"], PROMPT, interventions=("lesion",))
    with pytest.raises(ConfigError, match="unknown interventions"):
        intervene_model(tiny_models["gpt_neox"], PROMPT, target=TARGET, interventions=("ablate",))
    with pytest.raises(ConfigError, match="prompt"):
        intervene_model(tiny_models["gpt_neox"], "  ", target=TARGET)


# ------------------------------------------------------------------------------------------- command line


def test_intervene_command_writes_one_record_per_model_with_one_schema(tmp_path, tiny_models):
    import json

    from typer.testing import CliRunner

    from resflow.cli import app
    from resflow.store import Store

    out = tmp_path / "s"
    result = CliRunner().invoke(app, ["intervene", "teacher:tied", "teacher:independent", str(tiny_models["llama"]),
                                      "--inputs", "64", "--seed", "1", "--prompt", PROMPT,
                                      "--target", TARGET, "--subject", SUBJECT, "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert [p["model"] for p in payload] == ["teacher:tied", "teacher:independent", "tiny-llama"]
    tied, independent, llama = payload
    assert max(tied["swap"][:-1]) == 0.0  # identical layers commute: a tied teacher is blind to a swap
    rescaled = np.mean(tied["lesion_rescaled"]) / np.mean(tied["lesion"])
    assert rescaled < 1e-2 < np.mean(independent["lesion_rescaled"]) / np.mean(independent["lesion"])
    records = Store.open(out).records(kind="intervention")
    assert len(records) == 3
    shapes = {tuple(sorted(Store.open(out).load(r).dims)) for r in records}
    assert shapes == {("layer", "token")}  # toy and transformer records: one schema
    assert llama["measure"] == "probability" and len(llama["trace"]) == 4


@pytest.mark.parametrize(("args", "message"), [
    (["teacher:wobbly"], "unknown teacher spec"),
    (["{llama}", "--subject", "Paris"], "subject 'Paris'"),
    (["{llama}", "--only", "ablate"], "unknown interventions"),
])
def test_intervene_refuses_bad_specs_in_one_line_and_writes_nothing(tmp_path, tiny_models, args, message):
    from typer.testing import CliRunner

    from resflow.cli import app

    out = tmp_path / "s"
    args = [str(tiny_models["llama"]) if a == "{llama}" else a for a in args]
    result = CliRunner().invoke(app, ["intervene", *args, "--inputs", "16", "--out", str(out)])
    assert result.exit_code == 2 and message in " ".join(result.output.split()) and "Traceback" not in result.output
    assert not out.exists()


# ------------------------------------------------------------------------------------------- trained students


def test_every_trained_student_of_a_run_gets_its_own_profiles(tmp_path):
    from resflow.training import Teacher, TrainConfig, train
    from resflow.training.hidden import METRIC_BATCH, METRIC_SEED
    from resflow.workflows.intervene import STUDENT_INTERVENTIONS, TOY_NOISE
    from resflow.workflows.measures import TrainedStudents

    teachers = {t: Teacher(t, width=8, depth=8, vocab=8, seed=0) for t in ("tied", "independent")}
    specs = [StudentSpec(t, "euler", d, 0) for t in teachers for d in (1, 2, 4)]
    config = TrainConfig(steps=30, batch=16, eval_every=15, eval_batches=1, eval_batch_size=32, dtype="float64")
    result = train(specs, teachers, config, seed=0, keep_parameters=True)
    profiles = STUDENT_INTERVENTIONS.measure(TrainedStudents.of_result(result, teachers, "float64"))
    assert set(profiles) == {"lesion", "lesion_rescaled", "swap", "trace"}
    gen = torch.Generator().manual_seed(METRIC_SEED)
    x = torch.randn((METRIC_BATCH, 8), generator=gen, dtype=torch.float64)
    noisy = x + TOY_NOISE * torch.randn(x.shape, generator=gen, dtype=x.dtype)
    for i, spec in enumerate(result.specs):
        steps = student_steps(result.parameters[spec], get_tableau("euler"))
        np.testing.assert_array_equal(profiles["lesion"][i, :spec.depth], lesion(steps, rmsnorm(x), readout=rmsnorm).value)
        by_update = trace(steps, rmsnorm(x), rmsnorm(noisy), restore="update", readout=rmsnorm).value
        np.testing.assert_array_equal(profiles["trace"][i, :spec.depth], by_update)
        assert np.all(np.isnan(profiles["lesion"][i, spec.depth:]))  # padded beyond the student's depth
        assert np.isnan(profiles["swap"][i, spec.depth - 1])  # the last layer has no successor
    assert not np.array_equal(profiles["lesion"][0, :1], profiles["lesion"][3, :1])  # its own weights


def test_intervention_exponents_recover_known_depth_laws_with_replicate_intervals():
    import xarray as xr

    from resflow.analysis import intervention_exponents

    depths, reps, layers = np.array([2, 4, 8, 16]), 4, 16
    rng = np.random.default_rng(0)
    noise = np.exp(0.05 * rng.standard_normal((len(depths), reps, 3)))
    values = np.full((1, 1, len(depths), reps, 1, layers), np.nan)
    data = {}
    for k, (name, alpha) in enumerate((("lesion", 2.0), ("lesion_rescaled", 4.0), ("swap", 6.0))):
        one = values.copy()
        for i, d in enumerate(depths):
            one[0, 0, i, :, 0, :d] = (d ** -alpha * noise[i, :, k])[:, None]
        data[name] = (("target", "scheme", "depth", "replicate", "length", "layer"), one)
    ds = xr.Dataset(data, coords={"target": ["t"], "scheme": ["euler"], "depth": depths, "replicate": range(reps),
                                  "length": [1.0], "layer": range(layers)})
    e = intervention_exponents(ds, "t", confidence=0.999)  # three intervals: each may miss 1 in 1000
    for name, alpha in (("lesion", 2.0), ("lesion_rescaled", 4.0), ("swap", 6.0)):
        assert e[name].low < alpha < e[name].high and e[name].high - e[name].low < 0.5, name
    assert e["repair"].value == pytest.approx(16.0**-2, rel=0.2)


def test_compare_puts_toy_students_and_models_side_by_side(tmp_path):
    import resflow
    from resflow.workflows import compare_stores, intervene_models, report_run

    tiny = ["train.steps=30", "train.eval_every=15", "train.eval_batches=1", "train.eval_batch_size=32",
            "train.batch=16", "width=6", "teacher_depth=8", "vocab=8", "depths=2,4,8", "replicates=2",
            "train.device=cpu"]
    out = tmp_path / "s"
    resflow.run_experiment(resflow.preset("smooth-vs-rough", "cpu").with_overrides(tiny), out=out)
    intervene_models(["teacher:tied"], n_inputs=64, out=out)
    rows = compare_stores([out]).interventions
    assert [(r.source, r.name) for r in rows] == [("toy run", "rough (independent) student"),
                                                  ("toy run", "smooth (tied) student"), ("model", "teacher:tied")]
    toy = {r.name: r for r in rows}
    assert toy["rough (independent) student"].depth == 8 and toy["teacher:tied"].depth == 128
    assert toy["teacher:tied"].swap_share == 0.0 and toy["teacher:tied"].repair < 1e-2
    assert all(r.flatness >= 1.0 for r in rows)
    text = report_run(out)  # the students' exponents beside the laws' (evaluated from the derivations)
    assert "| law: noisy ensemble | 2.00 (lesion-ensemble) | 2.14 at ℓ = 8" in text
    assert "6.00 smooth, 4.00 independent layers (swap-flow)" in text and "| smooth (tied) | " in text


@pytest.mark.parametrize("rho", [0.0, 0.5, 1.0])
def test_trace_law_of_the_noisy_ensemble(rho):
    """The state is (x, y): layer k adds Z_k x / depth to y and leaves x; Z_k equicorrelated rho along depth.
    Corrupting x changes every update; restoring layer l's clean update recovers the law's share."""
    depth, n, width = 8, 20000, 4
    z = Equicorrelated(rho).sample(depth, (n, width, width), seed=1, base="gaussian", dtype=torch.float64)

    def layer(k):
        return lambda h: torch.cat([h[..., :width], h[..., width:] + (z[k] @ h[..., :width, None])[..., 0] / depth],
                                   dim=-1)

    gen = torch.Generator().manual_seed(2)
    x = torch.randn(n, width, generator=gen, dtype=torch.float64)
    h0 = torch.cat([x, torch.zeros_like(x)], dim=-1)
    corrupt = torch.cat([x + torch.randn(x.shape, generator=gen, dtype=x.dtype), torch.zeros_like(x)], dim=-1)
    shares = trace([layer(k) for k in range(depth)], h0, corrupt, restore="update",
                   readout=lambda h: h[..., width:]).value
    expected = laws.evaluate("trace-ensemble", ell=depth, rho=rho)
    # each mean square averages n * width Gaussian squares (relative SE sqrt(2/N)); the ratio's error is at
    # most the sum of the two relative errors, times the unrecovered share
    tolerance = Z * (1 - expected) * 2 * math.sqrt(2 / (n * width))
    assert np.all(np.abs(shares - expected) < tolerance), (shares, expected, tolerance)


def test_trace_law_of_a_discretised_flow_is_exact_for_the_scalar_linear_field():
    depth = 16
    steps, rates = scalar_flow(depth, lambda t: 1 + 2 * t)
    gen = torch.Generator().manual_seed(3)
    h0 = torch.randn(8, 4, generator=gen, dtype=torch.float64)
    shares = trace(steps, h0, h0 + torch.randn(h0.shape, generator=gen, dtype=h0.dtype), restore="update").value
    np.testing.assert_allclose(shares, [laws.evaluate("trace-flow", ell=depth, a=a) for a in rates], rtol=1e-10)


def test_a_model_without_residual_layers_resflow_knows_is_refused_by_name(tiny_models, monkeypatch):
    import resflow.llm.probes.interventions as hf
    from resflow.llm.probes.interventions import intervene_model

    monkeypatch.setattr(hf, "LAYERS", {})
    with pytest.raises(ConfigError, match="model type 'llama' has no residual layers"):
        intervene_model(tiny_models["llama"], PROMPT, target=TARGET, subject=SUBJECT)
