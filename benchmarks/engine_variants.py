"""What was tried to speed up the training step, measured in one process (docs/benchmarks.md).

    python benchmarks/engine_variants.py [--rounds 7] [--compile]

Students of the cpu preset (24 Euler students of depths 2-16, width 16, hidden 64, batch 512, MSE),
forward + backward only, against fixed random targets; and the teachers' forward.  Variants run
in interleaved rounds and each round's times are divided by the fused kernels' time of the same
round (the median of those ratios is printed), so machine drift cancels.

  autograd          the block's definition batched over students, gradients by autograd (engine v1's way)
  fused             resflow.training.kernels: hand-derived gradients, no autograd graph (engine v2)
  fused+bias-in-mm  the bias as an extra input column, so the first matmul adds it (no broadcast copy)
  fused+recompute   activations recomputed in the backward pass instead of stored (less memory traffic)
  fused, 1 thread   torch.set_num_threads(1)
  matmuls only      the step's batched matmuls alone, in its order, into preallocated buffers: the ceiling
                    of this formulation (its GFLOP/s is printed beside the machine's sgemm rate)
  teachers/step     both teachers (depth 32) on one batch, every step
  teachers/8 steps  the same on 8 batches at once, per step (engine v2 draws ahead: PREFETCH)
  --compile         torch.compile (inductor, default mode) of the autograd variant and of the fused
                    one; compile time printed (tens of seconds each)
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from resflow.dynamics.fields import rmsnorm
from resflow.training import StudentSpec, Teacher, TrainConfig, Trainer, mse_loss, student_block
from resflow.training.kernels import bank_backward, bank_forward, mse_head, rms_backward, rms_forward


def setup():
    teachers = {k: Teacher(k, width=16, depth=32, seed=0) for k in ("independent", "tied")}
    specs = [StudentSpec(t, "euler", d, s) for t in teachers for d in (2, 4, 8, 16) for s in range(3)]
    trainer = Trainer(specs, teachers, TrainConfig(batch=512, device="cpu"))
    state = trainer.init(0)
    bank = trainer.banks[0]
    flat = state.params[0]
    # a trained-like student
    flat.add_(torch.randn(flat.shape, generator=torch.Generator().manual_seed(0)) * 0.02)
    x = torch.randn(512, 16, generator=torch.Generator().manual_seed(1))
    target = rmsnorm(torch.randn(len(bank), 512, 16, generator=torch.Generator().manual_seed(2)))
    return trainer, bank, flat, x, target


def fused(bank, flat, grads, x, target):
    layers = bank.layers(flat)
    final, saved = bank_forward(rmsnorm(x), layers, bank.a, bank.b, save=True)
    _, g = mse_head(final, target, True)
    bank_backward(g, layers, bank.layers(grads), bank.a, bank.b, saved)


def autograd(bank, leaves, x, target):
    """The block of resflow.training.block batched over students (stacked per layer), autograd backward."""
    h = rmsnorm(x).expand(len(bank), *x.shape)
    finished = []
    for (W1, b1, W2), count in zip(leaves, bank.counts, strict=True):
        if count < h.shape[0]:
            finished.append(h[count:])
            h = h[:count]
        h = student_block(h, W1, b1, W2, bank.tableau)
    finished.append(h)
    for p in leaves:
        for t in p:
            t.grad = None
    mse_loss(torch.cat(finished[::-1]), target).sum().backward()


def fused_variant(bank, flat, grads, x, target, *, bias_in_mm=False, recompute=False):
    """Euler only: the fused kernels with one change each (see the module docstring)."""
    d = bank.width
    layers, glayers = bank.layers(flat), bank.layers(grads)
    w1b = [torch.cat([p.W1[:, 0], p.b1[:, 0].unsqueeze(-1)], -1) for p in layers] if bias_in_mm else None
    h = rmsnorm(x).expand(len(bank), *x.shape)
    finished, saved = [], []
    for k, p in enumerate(layers):
        if p.W1.shape[0] < h.shape[0]:
            finished.append(h[p.W1.shape[0]:])
            h = h[:p.W1.shape[0]]
        if bias_in_mm:
            r = torch.rsqrt(h.square().mean(-1, keepdim=True) + torch.finfo(h.dtype).eps)
            xa = torch.empty(*h.shape[:-1], d + 1)
            xa[..., d] = 1.0
            torch.mul(h, r, out=xa[..., :d])
            act = torch.bmm(xa, w1b[k].transpose(1, 2)).clamp_min_(0.0)
            xn = xa[..., :d]
        else:
            xn, r = rms_forward(h)
            act = torch.baddbmm(p.b1[:, 0].unsqueeze(1), xn, p.W1[:, 0].transpose(1, 2)).clamp_min_(0.0)
        sq = act * act
        h = torch.baddbmm(h, sq, p.W2[:, 0].transpose(1, 2))
        saved.append((xn, r) if recompute else (xn, r, act, sq))
    finished.append(h)
    _, g_final = mse_head(torch.cat(finished[::-1]), target, True)
    g = g_final[: layers[-1].W1.shape[0]]
    for k in reversed(range(len(layers))):
        p, gp_ = layers[k], glayers[k]
        if p.W1.shape[0] > g.shape[0]:
            g = torch.cat([g, g_final[g.shape[0]:p.W1.shape[0]]])
        xn, r = saved[k][:2]
        if recompute:
            act = torch.baddbmm(p.b1[:, 0].unsqueeze(1), xn, p.W1[:, 0].transpose(1, 2)).clamp_min_(0.0)
            sq = act * act
        else:
            act, sq = saved[k][2:]
        torch.bmm(g.transpose(1, 2), sq, out=gp_.W2[:, 0])
        gp = torch.bmm(g, p.W2[:, 0]).mul_(act)
        torch.bmm(gp.transpose(1, 2), xn, out=gp_.W1[:, 0]).mul_(2.0)
        torch.sum(gp, 1, out=gp_.b1[:, 0]).mul_(2.0)
        if k > 0:
            g = g + rms_backward(torch.bmm(gp, p.W1[:, 0]).mul_(2.0), xn, r)


def matmuls_only(bank, flat, batch: int):
    """The step's six batched matmuls per layer (forward two, backward four) on random operands."""
    gen = torch.Generator().manual_seed(4)
    d, h = bank.width, bank.hidden
    layers = bank.layers(flat)
    ops = []
    for p in layers:
        n = p.W1.shape[0]
        x, a, g = (torch.randn(n, batch, k, generator=gen) for k in (d, h, d))
        out_h, out_d = torch.empty(n, batch, h), torch.empty(n, batch, d)
        gw1, gw2 = torch.empty(n, h, d), torch.empty(n, d, h)
        W1, W2 = p.W1[:, 0], p.W2[:, 0]
        ops.append((x, a, g, out_h, out_d, gw1, gw2, W1, W2))

    def run():
        for x, a, _g, out_h, out_d, _, _, W1, W2 in ops:
            torch.bmm(x, W1.transpose(1, 2), out=out_h)
            torch.bmm(a, W2.transpose(1, 2), out=out_d)
        for x, a, g, out_h, out_d, gw1, gw2, W1, W2 in reversed(ops):
            torch.bmm(g.transpose(1, 2), a, out=gw2)
            torch.bmm(g, W2, out=out_h)
            torch.bmm(out_h.transpose(1, 2), x, out=gw1)
            torch.bmm(out_h, W1, out=out_d)

    return run, 12.0 * batch * d * h * sum(bank.counts)


def timed(fn, repeats: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t0) / repeats


def main(rounds: int, compile_: bool) -> None:
    trainer, bank, flat, x, target = setup()
    grads = torch.zeros_like(flat)
    leaves = [tuple(getattr(p, n).clone().requires_grad_(True) for n in ("W1", "b1", "W2"))
              for p in bank.layers(flat)]
    xs = torch.randn(8 * 512, 16, generator=torch.Generator().manual_seed(3))
    mm, mm_flops = matmuls_only(bank, flat, 512)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    replicates = int(max(trainer.targets.replicate_index)) + 1  # the teachers take one batch per replicate
    x_rep, xs_rep = x.expand(replicates, -1, -1), xs.expand(replicates, -1, -1)
    variants = {
        "fused": lambda: fused(bank, flat, grads, x, target),
        "matmuls only": mm,
        "autograd": lambda: autograd(bank, leaves, x, target),
        "fused+bias-in-mm": lambda: fused_variant(bank, flat, grads, x, target, bias_in_mm=True),
        "fused+recompute": lambda: fused_variant(bank, flat, grads, x, target, recompute=True),
        "teachers/step": lambda: trainer.targets.final_states(x_rep),
        "teachers/8 steps": lambda: trainer.targets.final_states(xs_rep),  # divided by 8 below
    }
    if compile_:
        for name, base in (("autograd, compiled", variants["autograd"]),
                           ("fused, compiled", variants["fused"])):
            compiled = torch.compile(base)
            t0 = time.perf_counter()
            compiled()
            print(f"{name}: compile {time.perf_counter() - t0:.0f} s")
            variants[name] = compiled
    threads = torch.get_num_threads()
    times: dict[str, list[float]] = {name: [] for name in [*variants, "fused, 1 thread"]}
    sgemm = []
    for _ in range(rounds):
        sgemm.append(2 * 1024**3 / timed(lambda: a @ b, 10) / 1e9)
        for name, fn in variants.items():
            times[name].append(timed(fn, 10) / (8 if name == "teachers/8 steps" else 1))
        torch.set_num_threads(1)
        times["fused, 1 thread"].append(timed(variants["fused"], 10))
        torch.set_num_threads(threads)
    ratios = {name: statistics.median(t / f for t, f in zip(values, times["fused"], strict=True))
              for name, values in times.items()}
    print(f"torch {torch.__version__}, {threads} threads, {rounds} rounds; "
          "ms per step (median) and time / fused")
    for name, values in times.items():
        print(f"{name:22s} {statistics.median(values) * 1e3:8.2f} ms   x{ratios[name]:.2f}")
    rate = mm_flops / statistics.median(times["matmuls only"]) / 1e9
    print(f"matmuls only: {rate:.1f} GFLOP/s = {rate / statistics.median(sgemm):.0%} of sgemm "
          f"({statistics.median(sgemm):.1f} GFLOP/s, 1024 x 1024, same rounds)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()
    main(args.rounds, args.compile)
