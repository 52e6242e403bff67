"""The fused kernels against the definitions of resflow.training.block: same losses, same gradients.

The engine never builds an autograd graph: its gradients are derived by hand (resflow.training.kernels).
Here they are checked against autograd through the block's own definition (student_forward,
mse_loss, kl_loss) for several RK schemes and every loss, and against finite differences with
torch.autograd.gradcheck.  Also: batched teacher targets equal Teacher(x); checkpoints are safe.
"""

import math
from pathlib import Path

import pytest
import torch

from resflow import ConfigError, Teacher, get_tableau
from resflow.training import StudentSpec, kl_loss, mse_loss, student_forward, student_logits
from resflow.training.bank import StudentBank
from resflow.training.kernels import bank_backward, bank_forward, kl_head, mse_head, rms_forward
from resflow.training.state import CHECKPOINT_FORMAT
from resflow.training.targets import Targets

WIDTH, HIDDEN, VOCAB, BATCH = 5, 7, 6, 9
GRAD_RTOL = 1e-9  # float64, the same arithmetic in another order: agreement ~1e-13 expected


def random_bank(scheme, depths=(3, 2, 1, 3), seed=0):
    bank = StudentBank([StudentSpec("t", scheme, d, k) for k, d in enumerate(depths)], WIDTH, HIDDEN, VOCAB)
    gen = torch.Generator().manual_seed(seed)
    flat = torch.randn(bank.size, generator=gen, dtype=torch.float64) * 0.5  # W2 non-zero: a trained student
    return bank, flat


def fused(bank, flat, x, loss, target, temps=None, shared_head=None):
    grads = torch.zeros_like(flat)
    layers, glayers = bank.layers(flat), bank.layers(grads)
    final, saved = bank_forward(torch.nn.functional.rms_norm(x, (WIDTH,)), layers, bank.a, bank.b, save=True)
    if loss == "mse":
        value, g = mse_head(final, target, True)
    else:
        head = bank.head(flat) if shared_head is None else shared_head
        g_head = bank.head(grads) if shared_head is None else None
        value, g = kl_head(final, head, target, temps, g_head, True)
    bank_backward(g, layers, glayers, bank.a, bank.b, saved)
    return value, grads


def by_autograd(bank, flat, x, loss, target, temps=None, shared_head=None):
    """Loss and gradient of each student alone, by autograd through resflow.training.block."""
    tableau = get_tableau(bank.specs[0].scheme)
    grads = torch.zeros_like(flat)
    values = []
    for i, spec in enumerate(bank.specs):
        params = {k: v.clone().requires_grad_(True) for k, v in bank.student_parameters(flat, i).items()}
        h = student_forward(params, x, tableau)
        if loss == "mse":
            value = mse_loss(h, target[i])
        elif shared_head is None:
            value = kl_loss(student_logits(h, params["head"]), target[i])
        else:
            value = kl_loss(student_logits(h, shared_head[i], temps[i]), target[i])
        value.backward()
        values.append(value.detach())
        layers = bank.layers(grads)
        for layer in range(spec.depth):
            for name in ("W1", "b1", "W2"):
                getattr(layers[layer], name)[i] = params[name].grad[layer]
        if shared_head is None and loss == "kl":
            bank.head(grads)[i] = params["head"].grad
    return torch.stack(values), grads


def inputs(bank, loss, seed=1):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(BATCH, WIDTH, generator=gen, dtype=torch.float64)
    n = len(bank)
    if loss == "mse":
        return x, torch.nn.functional.rms_norm(torch.randn(n, BATCH, WIDTH, generator=gen, dtype=torch.float64),
                                               (WIDTH,)), None, None
    logp = torch.log_softmax(torch.randn(n, BATCH, VOCAB, generator=gen, dtype=torch.float64) * 2, -1)
    temps = torch.tensor([0.3, 1.0, 2.0, 0.7][:n], dtype=torch.float64)
    shared = torch.randn(n, VOCAB, WIDTH, generator=gen, dtype=torch.float64) if loss == "kl-shared" else None
    return x, logp, (temps if shared is not None else torch.ones(n, dtype=torch.float64)), shared


@pytest.mark.parametrize("scheme", ["euler", "midpoint", "heun", "rk3", "rk4"])
@pytest.mark.parametrize("loss", ["mse", "kl-learned", "kl-shared"])
def test_fused_gradients_equal_autograd_through_the_block_definition(scheme, loss):
    bank, flat = random_bank(scheme)
    x, target, temps, shared = inputs(bank, loss)
    kind = "mse" if loss == "mse" else "kl"
    v1, g1 = fused(bank, flat, x, kind, target, temps, shared)
    v2, g2 = by_autograd(bank, flat, x, kind, target, temps, shared)
    torch.testing.assert_close(v1, v2, rtol=GRAD_RTOL, atol=0)
    torch.testing.assert_close(g1, g2, rtol=GRAD_RTOL, atol=1e-14)
    assert g1.abs().max() > 0


class FusedStep(torch.autograd.Function):
    """The fused loss of a bank as a function of its flat parameters, with the hand-derived gradient."""

    @staticmethod
    def forward(ctx, flat, bank, x, target):
        value, grads = fused(bank, flat.detach(), x, "mse", target)
        ctx.save_for_backward(grads)
        return value.sum()

    @staticmethod
    def backward(ctx, g):
        (grads,) = ctx.saved_tensors
        return g * grads, None, None, None


@pytest.mark.parametrize("scheme", ["euler", "midpoint"])
def test_gradcheck_of_the_fused_step(scheme):
    bank, flat = random_bank(scheme, depths=(2, 1))
    x, target, _, _ = inputs(bank, "mse")
    flat.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda p: FusedStep.apply(p, bank, x, target), (flat,), eps=1e-6, atol=1e-6)


def test_rmsnorm_kernel_matches_torch():
    y = torch.randn(4, 9, 5, dtype=torch.float64)
    xn, r = rms_forward(y)
    torch.testing.assert_close(xn, torch.nn.functional.rms_norm(y, (5,)), rtol=1e-14, atol=0)


def test_batched_teacher_targets_equal_each_teacher_on_its_replicates_batch():
    targets_ = ("independent", "tied", "correlated:0.5")
    teachers = {(t, r): Teacher(t, width=8, depth=12, seed=r) for t in targets_ for r in (0, 1)}
    specs = [StudentSpec(t, "euler", 2, r, 0.5) for t in targets_ for r in (0, 1)]
    targets = Targets(teachers, specs, [0, 1], [0.5], True, torch.float64, torch.device("cpu"))
    assert targets.stacked is not None and len(targets.slots) == 6  # the batched path is the one tested
    x = torch.randn(2, 33, 8, dtype=torch.float64)  # one batch per replicate
    out = targets(x)
    for k, (key, replicate) in enumerate(targets.slots):
        teacher = teachers[key].double()
        torch.testing.assert_close(out["final"][k], teacher(x[replicate]), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(out["logp"][k, 0], torch.log_softmax(teacher.logits(x[replicate], 0.5), -1),
                                   rtol=1e-12, atol=1e-12)


def test_checkpoints_are_loaded_safely_and_checked(tmp_path):
    from resflow.training import TrainConfig, train
    from resflow.training.state import CHECKPOINT_NAME

    teachers = {"tied": Teacher("tied", width=4, depth=4, seed=0)}
    specs = [StudentSpec("tied", "euler", d, 0) for d in (1, 2)]
    config = TrainConfig(steps=20, batch=8, eval_every=10, eval_batches=1, eval_batch_size=16, checkpoint_every=5)
    train(specs, teachers, config, run_dir=tmp_path, stop_after=10)
    path = tmp_path / CHECKPOINT_NAME
    checkpoint = torch.load(path, weights_only=True)  # tensors and plain data only
    assert checkpoint["format"] == CHECKPOINT_FORMAT and checkpoint["step"] == 10
    good = path.read_bytes()
    for damage, message in ((good[: len(good) // 2], "cannot be read"), (b"not a checkpoint", "cannot be read")):
        path.write_bytes(damage)
        with pytest.raises(ConfigError, match=message):
            train(specs, teachers, config, run_dir=tmp_path, resume=True)
    torch.save({**checkpoint, "format": 1}, path)
    with pytest.raises(ConfigError, match="format 1"):
        train(specs, teachers, config, run_dir=tmp_path, resume=True)


def test_no_unsafe_torch_load_anywhere():
    root = Path(__file__).resolve().parents[1]
    offenders = [p for p in (root / "resflow").rglob("*.py") if "weights_only=False" in p.read_text()]
    assert not offenders


def test_flops_count_is_three_forwards():
    bank, _ = random_bank("midpoint", depths=(3, 1))
    forward = 4 * BATCH * WIDTH * HIDDEN * (3 + 1) * 2  # layer-students x stages
    assert bank.flops_per_step(BATCH) == 3 * forward and bank.flops_per_step(BATCH, training=False) == forward
    assert math.isclose(bank.flops_per_step(BATCH) / bank.flops_per_step(BATCH, training=False), 3.0)
