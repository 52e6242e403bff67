"""Routes to convergence: steps and CPU seconds for a deep tied student to reach a given loss.

One student of depth 16 against the tied teacher of the smooth-vs-rough cpu preset (width 16, teacher
depth 32, batch 512, replicate 0), the cpu preset's schedule compressed to each training length.  For each
route the student is trained at the lengths 1/8, 1/4, 1/2 and 1 of ``--steps`` in one run (shorter lengths
forked from the full one), so each route gives its final loss at four budgets; the steps needed to reach
``--target`` are read off by log-log interpolation between them, and the seconds are those steps times the
route's time per step, timed in this process (one route after the other; quote the ratios).

Routes: Adam as in the study (betas 0.9, 0.999); Adam with betas 0.95, 0.95; SOAP
(``resflow.training.optimizers.soap``) with betas 0.95, 0.95; SOAP with its learning rate doubled; Adam whose
batch is 4x larger in the second half of training (the per-student loop: the engine has one batch size); and
depth-doubling continuation (the depth-8 student trained by the same route, split into 16 half steps, then
trained; its seconds include the depth-8 training).

    python benchmarks/routes.py --steps 20000 --target 3e-5

Slow: at --steps 20000 the first route alone ran for more than 20 minutes on the 2-core machine (sharing
it with another run), so the six routes need about two hours.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np
import torch

from resflow import get_tableau
from resflow.experiments import preset
from resflow.training import StudentSpec, Trainer, lr_multiplier, split_layers, train
from resflow.training.block import init_student, mse_loss, student_forward
from resflow.training.config import student_lr
from resflow.training.data import ReplicateStreams
from resflow.training.targets import Targets

LENGTHS = (0.125, 0.25, 0.5, 1.0)


def base(steps: int):
    return preset("smooth-vs-rough", "cpu").with_overrides(
        ["targets=tied", "replicates=1", f"train.steps={steps}", f"train.eval_every={steps}",
         "train.device=cpu", "train.eval_batches=4", "train.eval_batch_size=4096"])


def ms_per_step(config, specs, teachers, steps: int = 300) -> float:
    trainer = Trainer(specs, teachers, config)
    state = trainer.init(0)
    for _ in range(20):
        trainer.step(state, *trainer.next_batch(state))
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.step(state, *trainer.next_batch(state))
    return (time.perf_counter() - t0) / steps * 1e3


def engine_route(name: str, steps: int, overrides: list[str], depth: int = 16, initial=None) -> dict:
    """Final losses at every length; ``initial``: length -> the student's starting parameters (no forks then:
    each length starts from its own)."""
    config = base(steps).with_overrides(overrides)
    teachers = config.teachers()
    specs = [StudentSpec("tied", "euler", depth, 0, length=lam) for lam in LENGTHS]
    result = train(specs, teachers, config.train, seed=config.seed, keep_parameters=True,
                   initial={s: initial[s.length] for s in specs} if initial is not None else None)
    losses = {s.length: float(result.final_batches[i].mean()) for i, s in enumerate(result.specs)}
    timing = ms_per_step(config.train, [StudentSpec("tied", "euler", depth, 0)], teachers)
    t = config.train
    return {"route": name, "optimizer": f"{t.optimizer.name} {t.optimizer.beta1}, {t.optimizer.beta2}",
            "losses": [losses[lam] for lam in LENGTHS], "ms_per_step": timing,
            "parameters": {s.length: p for s, p in result.parameters.items()}}


def late_batch_route(steps: int, factor: int = 4) -> dict:
    """Adam, the per-student loop (autograd, torch.optim.Adam), batch x factor from the middle of training
    on."""
    config = base(steps)
    teachers = config.teachers()
    spec = StudentSpec("tied", "euler", 16, 0)
    targets = Targets(teachers, [spec], [0], [], False, torch.float32, torch.device("cpu"))
    losses, times = [], []
    for lam in LENGTHS:
        total = round(lam * steps)
        params = {k: v.requires_grad_(True) for k, v in init_student(spec, 16, 64, 128).items()}
        opt = torch.optim.Adam([params[k] for k in ("W1", "b1", "W2")], lr=student_lr(16, config.train))
        stream = ReplicateStreams(config.seed, [0], 16, torch.float32, torch.device("cpu"))
        tableau = get_tableau("euler")
        t0 = time.perf_counter()
        for step in range(total):
            x = stream.train_batch(config.train.batch * (factor if step >= total // 2 else 1))
            for group in opt.param_groups:
                group["lr"] = student_lr(16, config.train) * lr_multiplier(step, config.train, total)
            opt.zero_grad()
            mse_loss(student_forward(params, x[0], tableau), targets(x)["final"][0]).backward()
            opt.step()
        times.append((time.perf_counter() - t0) / total * 1e3)
        with torch.no_grad():
            evals = [stream.eval_batch(4096) for _ in range(4)]
            eval_losses = [float(mse_loss(student_forward(params, x[0], tableau), targets(x)["final"][0]))
                           for x in evals]
            losses.append(float(np.mean(eval_losses)))
    return {"route": f"Adam, batch x{factor} in the second half (per-student loop)", "losses": losses,
            "ms_per_step": float(np.mean(times))}


def steps_to(target: float, budgets, losses) -> float:
    """Steps at which the final loss reaches ``target`` (log-log interpolation between budgets; inf if
    never)."""
    b, y = np.log(np.asarray(budgets, float)), np.log(np.asarray(losses, float))
    if y[-1] > math.log(target):
        return math.inf
    if y[0] <= math.log(target):
        return float(budgets[0])
    i = int(np.argmax(y <= math.log(target)))
    frac = (math.log(target) - y[i - 1]) / (y[i] - y[i - 1])
    return float(math.exp(b[i - 1] + frac * (b[i] - b[i - 1])))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40_000)
    parser.add_argument("--target", type=float, default=3e-5, help="the depth-16 loss to reach")
    parser.add_argument("--json", default=None, help="also write the rows here")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (2: the whole 2-core machine)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    # every route names its optimizer and betas: the cpu preset it starts from is itself SOAP (0.95, 0.95)
    soap = ["train.optimizer.name=soap", "train.optimizer.beta1=0.95", "train.optimizer.beta2=0.95"]
    budgets = [lam * args.steps for lam in LENGTHS]
    rows = []
    for name, overrides in (("Adam (study: betas 0.9, 0.999)", ["train.optimizer.name=adam",
                                                                "train.optimizer.beta1=0.9",
                                                                "train.optimizer.beta2=0.999"]),
                            ("Adam, betas 0.95, 0.95", ["train.optimizer.name=adam",
                                                        "train.optimizer.beta1=0.95",
                                                        "train.optimizer.beta2=0.95"]),
                            ("SOAP, betas 0.95, 0.95", soap),
                            ("SOAP, betas 0.95, 0.95, lr x2", soap + ["train.lr_scale=16"])):
        row = engine_route(name, args.steps, overrides)
        row.pop("parameters")
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    # continuation at each budget: the depth-8 student trained for that budget, split, then trained for it
    # again
    shallow = engine_route("SOAP depth 8", args.steps, soap, depth=8)
    continued = engine_route("SOAP, depth-doubling continuation from depth 8", args.steps, soap,
                             initial={lam: split_layers(p) for lam, p in shallow.pop("parameters").items()})
    continued.pop("parameters")
    continued["extra_seconds"] = [lam * args.steps * shallow["ms_per_step"] / 1e3 for lam in LENGTHS]
    rows.append(continued)
    rows.append(late_batch_route(args.steps))
    print(f"depth-16 tied student, final test loss at {', '.join(f'{b:.0f}' for b in budgets)} steps; "
          f"steps and seconds to reach {args.target:g}")
    header = " | ".join(f"{b / 1000:g}k" for b in budgets)
    print("| route | " + header + " | ms/step | steps to reach | seconds |")
    print("|---|" + "---|" * (len(budgets) + 3))
    for row in rows:
        reach = steps_to(args.target, budgets, row["losses"])
        seconds = reach * row["ms_per_step"] / 1e3
        # the depth-8 student trained first, at that budget
        if "extra_seconds" in row and math.isfinite(reach):
            seconds += float(np.interp(reach, budgets, row["extra_seconds"]))
        print(f"| {row['route']} | " + " | ".join(f"{v:.2e}" for v in row["losses"])
              + f" | {row['ms_per_step']:.1f} | {reach:.0f} | {seconds:.0f} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
