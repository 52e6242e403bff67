"""Smoothness of trained weights along depth (resflow.probing.smoothness)."""

from __future__ import annotations

import math

import numpy as np
import torch

from resflow import StudentSpec, Teacher, TrainConfig, train
from resflow.probing.smoothness import layer_vectors, weight_smoothness


def _params(theta: torch.Tensor, width=4, hidden=8) -> dict[str, torch.Tensor]:
    """Student-shaped parameters (depth, 1 stage, ...) whose layer vectors are the rows of ``theta``."""
    depth = theta.shape[0]
    n1, nb = hidden * width, hidden
    return {"W1": theta[:, :n1].reshape(depth, 1, hidden, width), "b1": theta[:, n1:n1 + nb].reshape(depth, 1, hidden),
            "W2": theta[:, n1 + nb:].reshape(depth, 1, width, hidden), "head": torch.zeros(3, width)}


N = 2 * 4 * 8 + 8  # weights per layer of _params


def test_layer_vectors_are_every_weight_of_a_layer_once():
    theta = torch.randn(5, N, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(layer_vectors(_params(theta)), theta)


def test_equal_layers_do_not_vary():
    theta = torch.randn(1, N).expand(6, N).clone()
    change, variation = weight_smoothness(_params(theta))
    assert change.shape == (5,) and torch.all(change == 0) and variation == 0


def test_independent_layers_change_by_root_two():
    """Independent Gaussian layers: |θ_{l+1} − θ_l| / |θ_l| → √2; the tolerance is five standard errors of
    a norm ratio over n weights (about 1/√n each)."""
    n = 20_000
    theta = torch.randn(8, n, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    change, variation = weight_smoothness({"W1": theta.reshape(8, 1, n, 1), "b1": torch.zeros(8, 1, 0),
                                           "W2": torch.zeros(8, 1, 1, 0)})
    assert torch.all((change - math.sqrt(2)).abs() < 5 / math.sqrt(n))
    assert abs(variation - 7 * math.sqrt(2)) < 7 * 5 / math.sqrt(n)


def test_a_smooth_field_keeps_its_variation_as_depth_grows_and_independent_layers_do_not():
    gen = torch.Generator().manual_seed(2)
    a, b = torch.randn(N, generator=gen, dtype=torch.float64), torch.randn(N, generator=gen, dtype=torch.float64)
    smooth, rough = [], []
    for depth in (4, 16, 64):
        t = torch.linspace(0, 1, depth, dtype=torch.float64)[:, None]
        smooth.append(weight_smoothness(_params(a + torch.sin(3 * t) * b))[1])
        rough.append(weight_smoothness(_params(torch.randn(depth, N, generator=gen, dtype=torch.float64)))[1])
    assert max(smooth) / min(smooth) < 1.5  # the path length of the curve, whatever the sampling
    assert rough[2] / rough[0] > 0.8 * 63 / 3  # grows as the number of changes


def test_every_trained_student_gets_its_smoothness_and_a_one_layer_student_none():
    from resflow.workflows import TrainedStudents
    from resflow.workflows.smoothness import SMOOTHNESS

    specs = [StudentSpec("tied", "euler", d, 0) for d in (1, 2, 4)] + [StudentSpec("tied", "midpoint", 3, 0)]
    teachers = {"tied": Teacher("tied", width=8, depth=8, seed=0)}
    result = train(specs, teachers, TrainConfig(steps=2, batch=8, eval_every=2, eval_batch_size=16, device="cpu"),
                   keep_parameters=True)
    out = SMOOTHNESS.measure(TrainedStudents.of_result(result, teachers))
    assert out["layer_change"].shape == (4, 5) and out["weight_variation"].shape == (4,)
    assert np.isnan(out["weight_variation"][0]) and np.isnan(out["layer_change"][0]).all()
    for i, depth in enumerate((1, 2, 4, 3)):
        assert np.isfinite(out["layer_change"][i, :depth - 1]).all() and np.isnan(out["layer_change"][i, depth - 1:]).all()
    assert np.all(out["weight_variation"][1:] > 0)  # a scratch student's layers start independent


def test_a_change_is_measured_against_the_layer_it_starts_from():
    """θ_1 = 2 θ_0: the change is |θ_0| / |θ_0| = 1 (against the next layer's norm it would read 1/2); the
    variation is |θ_0| over the mean norm 1.5 |θ_0|."""
    a = torch.randn(1, N, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    change, variation = weight_smoothness(_params(torch.cat([a, 2 * a])))
    torch.testing.assert_close(change, torch.ones(1, dtype=torch.float64))
    assert math.isclose(variation, 1 / 1.5, rel_tol=1e-12)
