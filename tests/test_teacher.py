"""Teachers: reproducibility, family relations, marginal statistics, outputs, errors."""

import math

import pytest
import torch

from resflow import (
    ConfigError,
    IncompatibleOptionsError,
    Teacher,
    TeacherConfig,
    UnknownNameError,
    fgn_autocovariance,
    rmsnorm,
)
from resflow.dynamics.fields import mlp_init_std
from resflow.probing.metrics import update_angles

Z = 5.0  # standard errors allowed in statistical checks (false alarm ~6e-7 per check)
SMALL = {"width": 16, "depth": 32}


def layer_weights(teacher: Teacher, name: str) -> torch.Tensor:
    """(depth, ...) stack of one parameter across layers."""
    return torch.stack([getattr(teacher.stack.layer_fields[i], name) for i in range(teacher.depth)])


def same_parameters(a: Teacher, b: Teacher) -> bool:
    return all(
        torch.equal(layer_weights(a, n), layer_weights(b, n)) for n in ("W1", "b1", "W2")
    ) and torch.equal(a.head, b.head)


@pytest.mark.parametrize("spec", ["independent", "tied", "correlated:0.7", "fractional:0.75"])
def test_same_seed_same_teacher_bit_for_bit(spec):
    a, b = Teacher(spec, seed=3, **SMALL), Teacher(spec, seed=3, **SMALL)
    x = a.sample_inputs(64, seed=0)
    assert same_parameters(a, b) and torch.equal(a(x), b(x))
    assert not same_parameters(a, Teacher(spec, seed=4, **SMALL))


def test_correlated_zero_is_independent_and_correlated_one_is_tied():
    assert same_parameters(Teacher("correlated:0", seed=1, **SMALL), Teacher("independent", seed=1, **SMALL))
    assert same_parameters(Teacher("correlated:1", seed=1, **SMALL), Teacher("tied", seed=1, **SMALL))


def test_tied_teacher_shares_one_field():
    teacher = Teacher("tied", seed=0, **SMALL)
    assert teacher.stack.tied and len(teacher.stack.layers) == 1
    assert not Teacher("independent", seed=0, **SMALL).stack.tied


def test_study_defaults():
    cfg = TeacherConfig()
    assert (cfg.width, cfg.depth, cfg.hidden, cfg.vocab, cfg.scheme) == (32, 128, 128, 128, "euler")
    assert cfg.branch_scale == pytest.approx(1 / math.sqrt(128))


@pytest.mark.parametrize("spec", ["independent", "correlated:0.5", "tied", "fractional:0.75"])
def test_every_family_keeps_the_default_init_variance(spec):
    # W1 entries within a layer are independent: n_eff = hidden * width draws at least.
    teacher = Teacher(spec, seed=2, **SMALL)
    w = layer_weights(teacher, "W1")
    var = float(w.square().mean())
    expected = mlp_init_std(16, 64)["W1"] ** 2
    n_eff = w[0].numel()
    assert abs(var / expected - 1) <= Z * math.sqrt(2 / n_eff), var / expected


@pytest.mark.parametrize(("spec", "lag1"), [
    ("independent", 0.0), ("correlated:0.3", 0.3), ("correlated:0.9", 0.9),
    ("fractional:0.75", float(fgn_autocovariance(0.75, 2)[1])),
    ("fractional:0.25", float(fgn_autocovariance(0.25, 2)[1])),
])
def test_weights_are_correlated_across_layers_as_the_family_says(spec, lag1):
    teacher = Teacher(spec, seed=5, **SMALL)
    w = layer_weights(teacher, "W1").reshape(teacher.depth, -1).double()
    a, b = w[:-1].reshape(-1), w[1:].reshape(-1)
    corr = float(torch.corrcoef(torch.stack([a, b]))[0, 1])
    n_eff = w.shape[1]  # entries are independent; layers within one entry are not
    assert abs(corr - lag1) <= Z * (1 - lag1**2 + 0.05) / math.sqrt(n_eff), corr


def test_outputs_and_hidden_states():
    teacher = Teacher("independent", seed=0, vocab=10, **SMALL)
    x = teacher.sample_inputs(8, seed=1)
    hs = teacher.hidden_states(x)
    assert hs.shape == (33, 8, 16)
    torch.testing.assert_close(hs[0], rmsnorm(x))
    torch.testing.assert_close(teacher(x), rmsnorm(hs[-1]))
    torch.testing.assert_close(teacher.logits(x, 0.1), teacher.logits(x, 1.0) / 0.1)
    assert teacher.logits(x).shape == (8, 10)
    assert not any(p.requires_grad for p in teacher.parameters())


def test_update_angles_separate_tied_from_independent():
    angles = {}
    for spec in ("tied", "independent"):
        teacher = Teacher(spec, seed=0)
        with torch.no_grad():
            states = teacher.hidden_states(teacher.sample_inputs(256, seed=1))
            angles[spec] = math.degrees(float(update_angles(states).mean()))
    assert angles["tied"] < 5.0 and abs(angles["independent"] - 90.0) < 5.0, angles


def test_from_spec_and_from_dict():
    cfg = TeacherConfig.from_spec("fractional:0.6", depth=16)
    assert (cfg.family, cfg.hurst, cfg.init, cfg.depth) == ("fractional", 0.6, "gaussian", 16)
    assert TeacherConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.label == "fractional:0.6"


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: TeacherConfig(family="smooth"), UnknownNameError, "family must be one of"),
        (lambda: TeacherConfig(family="correlated"), ConfigError, "needs rho"),
        (lambda: TeacherConfig(family="correlated", rho=1.2), ConfigError,
         r"rho must be a finite number in \[0.0, 1.0\]; got 1.2"),
        (lambda: TeacherConfig(family="independent", rho=0.5), IncompatibleOptionsError, "rho is only for"),
        (lambda: TeacherConfig(family="fractional", hurst=0.7), IncompatibleOptionsError, "init='gaussian'"),
        (lambda: TeacherConfig(family="fractional", hurst=1.0, init="gaussian"), ConfigError, "hurst must be"),
        (lambda: TeacherConfig(depth=0), ConfigError, "depth must be a positive integer; got 0"),
        (lambda: TeacherConfig(depth="8"), ConfigError, r"depth must be an integer; got '8' \(str\)"),
        (lambda: TeacherConfig(scheme="rk5"), UnknownNameError, "scheme must be one of"),
        (lambda: TeacherConfig.from_dict({"widht": 3}), ConfigError, r"unknown TeacherConfig keys \['widht'\]"),
        (lambda: TeacherConfig.from_spec("fractional"), UnknownNameError, "unknown teacher spec"),
        (lambda: Teacher("tied", **SMALL)(torch.zeros(2, 5)), ConfigError, "last dimension 16"),
        (lambda: Teacher("tied", **SMALL).logits(torch.zeros(2, 16), 0.0), ConfigError, "temperature must be"),
        (lambda: Teacher(3), ConfigError, "config must be"),
    ],
)
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("spec", ["independent", "tied", "correlated:0", "correlated:0.9", "fractional:0.75", "grouped:4",
                                  "grouped:4:0.5"])
def test_a_spec_parses_to_a_config_whose_label_and_k_give_it_back(spec):
    from resflow.training import TeacherConfig

    config = TeacherConfig.from_spec(spec)
    assert config.label == spec  # "correlated:0" is not "independent", though their correlations are equal
    assert TeacherConfig.from_spec(config.label) == config
    assert config.n_groups == (4 if spec.startswith("grouped") else 1)
