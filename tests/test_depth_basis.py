"""Layers whose weights are smooth functions of depth: the knob, its cost, and the model it leaves behind."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from resflow.llm.ladder.depth_basis import DepthBasisModel, legendre_basis, unwrap  # noqa: E402
from resflow.llm.ladder.model import build_model, parameter_count  # noqa: E402
from resflow.llm.ladder.training import _optimizer, validation_losses  # noqa: E402

VOCAB = 300


def hf(depth: int, seed: int = 0):
    return build_model(vocab_size=VOCAB, width=32, depth=depth, context=32, seed=seed)


def windows(n: int = 4) -> torch.Tensor:
    return torch.randint(0, VOCAB, (n, 33), generator=torch.Generator().manual_seed(2))


def test_the_basis_is_legendre_at_layer_centres_and_spans_every_depth_profile_at_full_order():
    b = legendre_basis(4, 3)
    x = np.array([-0.75, -0.25, 0.25, 0.75])
    np.testing.assert_allclose(b, np.stack([np.ones(4), x, 1.5 * x**2 - 0.5], 1))
    assert np.linalg.matrix_rank(legendre_basis(6, 6)) == 6 and legendre_basis(6, 2).shape == (6, 2)


def test_the_layers_start_tied_and_the_wrapped_model_runs_with_the_computed_weights():
    model = DepthBasisModel(hf(4), 2)
    weights = model.layer_weights()
    first = dict(hf(4).model.layers[0].named_parameters())
    for layer in range(4):  # C_1 starts at zero: every layer is layer 0's initialisation
        torch.testing.assert_close(weights[f"model.layers.{layer}.mlp.up_proj.weight"], first["mlp.up_proj.weight"])
    with torch.no_grad():
        model.coefficients[model.names.index("mlp.up_proj.weight")][1].normal_(0, 0.05)
    w = windows()
    loss = float(validation_losses(model, w, 1)[0])
    plain = unwrap(model)  # an ordinary HF model with the computed weights written in
    assert type(plain).__name__ == "LlamaForCausalLM"
    assert float(validation_losses(plain, w, 1)[0]) == pytest.approx(loss, abs=1e-6)
    up = [plain.model.layers[k].mlp.up_proj.weight for k in range(4)]
    assert not torch.allclose(up[0], up[3])  # the order-1 term varies the weights linearly along depth
    torch.testing.assert_close(up[1] - up[0], up[2] - up[1])


def test_only_the_coefficients_train_and_the_count_is_order_times_one_layer_whatever_the_depth():
    from resflow.llm.ladder.training import LMRecipe

    recipe = LMRecipe(steps=10, batch=2, context=32, lr=1e-2, warmup=1, decay_fraction=0.2, weight_decay=0.1,
                      lengths=(1.0,), eval_every=5, eval_batches=1, checkpoint_every=5)
    one_layer = sum(p.numel() for p in hf(1).model.layers[0].parameters())
    norm = hf(1).model.norm.weight.numel()
    for depth in (2, 4, 8):
        model = DepthBasisModel(hf(depth), 2)
        assert model.parameter_count() == 2 * one_layer + norm
    assert parameter_count(hf(8)) == 8 * one_layer + norm  # independent layers grow with depth
    model = DepthBasisModel(hf(3), 2)
    opt = _optimizer(model, recipe)
    decayed, plain = (set(map(id, g["params"])) for g in opt.param_groups)
    layer_params = {id(p) for p in model.inner.model.layers.parameters()}
    assert not layer_params & (decayed | plain)  # the layers' own weights are not trained
    norm_coefficient = model.coefficients[model.names.index("input_layernorm.weight")]
    assert id(norm_coefficient) in plain and opt.param_groups[1]["weight_decay"] == 0.0
    assert id(model.coefficients[model.names.index("mlp.up_proj.weight")]) in decayed
    w = windows()
    loss = torch.nn.functional.cross_entropy(model(input_ids=w[:, :-1], use_cache=False).logits.transpose(1, 2),
                                             w[:, 1:])
    loss.backward()
    assert all(c.grad is not None and c.grad[1].abs().sum() > 0 for c in model.coefficients)
    with pytest.raises(ValueError, match="order"):
        DepthBasisModel(hf(2), 0)


def test_a_ladder_with_the_knob_has_one_size_at_every_depth_and_saves_plain_models(tmp_path):
    from test_lm_ladder import make_corpus

    from resflow.experiments import preset
    from resflow.llm.ladder.depth_use import _load
    from resflow.store import Store
    from resflow.workflows import run_ladder

    corpus = make_corpus(tmp_path / "corpus")
    config = dataclasses.replace(preset("lm-ladder", "tiny"), corpus=str(corpus), device="cpu", depth_basis=1,
                                 heal_steps=0, seeds=1)
    result = run_ladder(config, out=tmp_path / "store")
    ds = Store.open(tmp_path / "store").load(result.record)
    assert len(set(ds["parameters"].values.ravel().tolist())) == 1  # one block repeated: one size
    saved = _load(result.work_dir / "models" / "w32-l4-s0" / "model", "cpu")
    layers = saved.model.layers
    assert all(torch.equal(layers[0].mlp.down_proj.weight, layer.mlp.down_proj.weight) for layer in layers)
    assert "layers smooth in depth" in result.tables
