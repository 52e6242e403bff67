"""Hand-made mutations of the engine, the recipe and the convergence verdict, each run against the suite.

    python tests/mutate.py [NAME ...]

Each mutation changes one line (an init, a factor, a sign, a check), runs the tests that should
notice, and restores the file.  A mutation that no test kills is a "survivor"; the survivors and why
each is harmless are listed in docs/design/engine.md.  (Not collected by pytest.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ["tests/test_recipe.py", "tests/test_kernels.py", "tests/test_engine.py", "tests/test_fitting.py",
         "tests/test_soap.py", "tests/properties/test_fit_coverage.py"]
CLASSES = ["tests/test_classes.py"]
COVERAGE = ["tests/test_coverage.py"]  # issue 53: every interval at its rate
V4 = ["tests/test_certification.py", "tests/test_drift.py", "tests/test_routes.py", "tests/test_fitting.py"]  # routes, v4

# name: (file, old text, new text, what it breaks)
MUTATIONS = {
    "w2-init": ("resflow/training/block.py", '"W2": torch.zeros((spec.depth, stages, *shapes["W2"]), dtype=dtype)',
                '"W2": 0.01 * torch.ones((spec.depth, stages, *shapes["W2"]), dtype=dtype)',
                "student W2 not zero-initialised"),
    "head-init": ("resflow/training/block.py", '"head": torch.zeros((vocab, width), dtype=dtype)',
                  '"head": 0.01 * torch.ones((vocab, width), dtype=dtype)', "learned head not zero-initialised"),
    "lr-1/l": ("resflow/training/config.py", "scale = 1.0 / math.sqrt(depth) if", "scale = 1.0 / depth if",
               "learning rate 1/l instead of 1/sqrt(l)"),
    "head-lr-scaled": ("resflow/training/config.py", "scaled = config.head_lr_depth_scaling if head else",
                       "scaled = True if head else", "the head's learning rate scaled with depth"),
    "same-batch": ("resflow/training/engine.py",
                   "xs = [state.data.train_batch(self.config.batch) for _ in range(PREFETCH)]",
                   "xs = [state.data.train_batch(self.config.batch)] * PREFETCH", "the same batch reused"),
    "eval-is-train": ("resflow/training/data.py", "self.eval_gen = torch.Generator().manual_seed(seed + EVAL_SEED_OFFSET)",
                      "self.eval_gen = torch.Generator().manual_seed(seed)", "evaluation inputs = training inputs"),
    "target-unnormalised": ("resflow/training/targets.py", "            h, _ = block_forward(h, layer, ((0.0,),), (1.0,), "
                            "save=False)\n        return rmsnorm(h)",
                            "            h, _ = block_forward(h, layer, ((0.0,),), (1.0,), save=False)\n        return h",
                            "the MSE target without the final normalisation"),
    "relu2-factor": ("resflow/training/kernels.py", "torch.bmm(gp.transpose(1, 2), stage.xn, out=gW1).mul_(2.0)",
                     "torch.bmm(gp.transpose(1, 2), stage.xn, out=gW1)", "gradient of relu^2 missing its 2 (W1)"),
    "rms-sign": ("resflow/training/kernels.py", "return r * (g - xn * (g * xn).mean(-1, keepdim=True))",
                 "return r * (g + xn * (g * xn).mean(-1, keepdim=True))", "rmsnorm backward sign"),
    "rk-chain": ("resflow/training/kernels.py", "gk = gk + a[j][i] * gy_stage[j]", "gk = gk",
                 "RK stages' chain rule dropped"),
    "adam-bias": ("resflow/training/optimizers/adam.py", "return -multiplier / (1.0 - settings.beta1**t), math.sqrt",
                  "return -multiplier, math.sqrt", "Adam's first-moment bias correction dropped"),
    "no-freeze": ("resflow/training/engine.py", "state.frozen_lr[k] = torch.where(mask, self.lr[k], torch.zeros(",
                  "state.frozen_lr[k] = torch.where(mask, self.lr[k], self.lr[k] + 0 * torch.zeros(",
                  "a failed student is not frozen"),
    "schedule": ("resflow/training/config.py", "    start = config.constant_fraction * total",
                 "    start = config.constant_fraction * config.steps", "half-length schedule not compressed"),
    "verdict-drift": ("resflow/fitting/verdict.py",
                      "if not (drift.low > -drift_tolerance and drift.high < drift_tolerance):", "if False:",
                      "the exponent-drift check removed"),
    "verdict-gain": ("resflow/fitting/verdict.py", "if not highs[worst] < gain_tolerance:", "if False:",
                     "the remaining-gain check removed"),
    "verdict-paired": ("resflow/fitting/verdict.py", "one[:, -2].mean(axis=-1)))\n\n    drift",
                       "one[:, -1].mean(axis=-1)))\n\n    drift", "the drift compares the longest length with itself"),
    "aitken-tail": ("resflow/fitting/extrapolation.py", "tail = d2 * ratio / (1.0 - ratio)", "tail = d2",
                    "the geometric tail cut to one more fall"),
    "no-limit": ("resflow/fitting/extrapolation.py", "    if d1 > d2:\n", "    if True:\n",
                 "a loss that does not decelerate given a limit"),
    "flat-no-gain": ("resflow/fitting/extrapolation.py",
                     "    ceiling = max(d2, 0.0) + ceiling_noise  # the largest last fall the noise allows",
                     "    ceiling = 0.0", "a fall within the noise read as nothing left to gain"),
    "fork-eval": ("resflow/training/engine.py", "if parent is not None and state.step <= self.bank_start[k]]",
                  "if parent is not None and state.step < self.bank_start[k]]",
                  "a copy evaluated at its fork step before it is forked"),
    "fork-step": ("resflow/training/config.py", "return min(math.ceil(config.constant_fraction * short), short)",
                  "return min(math.ceil(config.constant_fraction * long), short)",
                  "copies forked after their own decay has begun"),
    "fork-moments": ("resflow/training/engine.py", "zip(state.bank_buffers(k), state.bank_buffers(parent), strict=True)",
                     "zip(state.bank_buffers(k)[:1], state.bank_buffers(parent)[:1], strict=True)",
                     "a fork copies parameters only"),
    "budget": ("resflow/training/block.py", "return round(self.length * self.budget * run_steps)",
               "return round(self.length * run_steps)", "a student's budget ignored"),
    "same-teacher": ("resflow/experiments/config.py", "vocab=self.vocab,\n                                       "
                     "seed=self.teacher_seed + replicate)", "vocab=self.vocab,\n                                       "
                     "seed=self.teacher_seed)", "every replicate the same teacher"),
    "soap-rotation": ("resflow/training/optimizers/soap.py", "second.lerp_((left.mT @ g @ right).square_(), 1.0 - b2)",
                      "second.lerp_(g.square(), 1.0 - b2)", "SOAP's second moment not rotated"),
    "soap-refresh": ("resflow/training/optimizers/soap.py", "if n > 0 and n % settings.precondition_frequency == 0:", "if False:",
                     "SOAP's eigenbases never refreshed"),
    "law-factor": ("resflow/fitting/fits.py", "confidence=conf, samples=samples, transform=factor)",
                   "confidence=conf, samples=samples)", "the law-aware fit without the finite-teacher factor"),
    "t-quantile": ("resflow/fitting/intervals.py", "quantile = stats.t.ppf(1 - (1 - confidence) / 2, values.size - 1)",
                   "quantile = stats.norm.ppf(1 - (1 - confidence) / 2)", "normal instead of Student-t quantile"),
    "resume-pending": ("resflow/training/state.py", "        self.pending = [(x.to(device), f.to(device))",
                       "        self.pending = [] if True else [(x.to(device), f.to(device))", "batches drawn ahead lost on resume"),
    # students of RHM data, early exit, aliasing (issue 27): run against their own tests
    "ce-onehot-sign": ("resflow/training/kernels.py", "torch.full_like(g_logits[..., :1], -1.0)",
                       "torch.full_like(g_logits[..., :1], 1.0)", "cross-entropy gradient adds the label", CLASSES),
    "embed-no-norm": ("resflow/training/kernels.py", "torch.bmm(rms_backward(g_h0, h0, r).transpose(1, 2), inputs",
                      "torch.bmm(g_h0.transpose(1, 2), inputs", "embedding gradient skips the norm's backward",
                      CLASSES),
    "label-ignores-rules": ("resflow/training/classes.py", "labels, _ = target.rhm.parse(tokens[s, :, : target.n_tokens].cpu())",
                            "labels, _ = tokens[s, :, 0].cpu() % target.config.hierarchy.classes, 0",
                            "a label read from one token, not parsed by the rules", CLASSES),
    "rhm-eval-is-train": ("resflow/training/classes.py", "manual_seed(seed + r + EVAL_SEED_OFFSET)",
                          "manual_seed(seed + r)", "RHM evaluation sentences = training sentences", CLASSES),
    "exit-inverted": ("resflow/probing/early_exit.py", "reached = readouts.max(dim=-1).values >= tau",
                      "reached = readouts.max(dim=-1).values <= tau", "the confidence rule inverted", CLASSES),
    "settled-inverted": ("resflow/probing/early_exit.py", "moving = moves > tau * scale",
                         "moving = moves < tau * scale", "the settled rule inverted", CLASSES),
    "early-half": ("resflow/probing/early_exit.py", "(2 * exits <= depth)", "(2 * exits < depth)",
                   "an exit at half the depth not counted early", CLASSES),
    "alias-off": ("resflow/training/block.py", "if 0 < self.depth <= self.weight_groups else self",
                  "if 0 < self.depth < self.weight_groups else self", "K = depth trained twice", CLASSES),
    "drop-threshold": ("resflow/fitting/hierarchy.py", "if y < DROP_FRACTION * math.log(classes)]",
                       "if y < math.log(classes)]", "the drop depth against the uniform guess itself", CLASSES),
    # training routes (issue 35) and verdict v4 (issue 49): run against their own tests
    "tail-point-ratio": ("resflow/fitting/extrapolation.py", "ratio = min(max(upper, last / float(falls[-2])), slowest)",
                         "ratio = min(fitted, slowest)", "the tail's ratio without its upper bound and the last ratio",
                         V4),
    "tail-flat-free": ("resflow/fitting/extrapolation.py", "        ratio = slowest\n",
                       "        ratio = 0.0\n", "falls within the noise read as nothing left to lose", V4),
    "agreement-off": ("resflow/fitting/certification.py", "elif not high <= route_tolerance:",
                      "elif False:", "routes that disagree certified", V4),
    "agreement-worst-init": ("resflow/fitting/certification.py", "pick = sub.argmin(axis=1)",
                             "pick = np.where(np.isfinite(sub), sub, -np.inf).argmax(axis=1)",
                             "a route's worst init taken as its witness", V4),
    "drift-ignored": ("resflow/fitting/certification.py", "elif not drift.certifies(tolerance):", "elif False:",
                      "an exponent certified while it still moves", V4),
    "drift-no-cap": ("resflow/fitting/drift.py", "cap = q ** -slowest_gamma", "cap = 1.0 - 1e-9",
                     "a drift that does not shrink allowed to decay as slowly as it likes", V4),
    "drift-noise-free": ("resflow/fitting/drift.py",
                         "low, high = min(0.0, d_low) * tail, max(0.0, d_high) * tail",
                         "low, high = min(0.0, dbar) * tail, max(0.0, dbar) * tail",
                         "the remaining drift's interval without the drift's noise", V4),
    "drift-ratio-point": ("resflow/fitting/drift.py",
                          "_, high_r = fieller_interval(sign * abar, sign * dbar, cov, t_two)",
                          "high_r = dbar / abar", "the decay's upper end replaced by its point estimate", V4),
    "drift-not-in-ci": ("resflow/fitting/fits.py",
                        "drift_down, drift_up = max(0.0, -drift.low), max(0.0, drift.high)",
                        "drift_down, drift_up = 0.0, 0.0", "the exponent's interval without the remaining drift",
                        V4),
    "route-error-sides": ("resflow/fitting/certification.py",
                          "return float(np.sum(-w[w < 0] * s[w < 0])), float(np.sum(w[w > 0] * s[w > 0]))",
                          "return float(np.sum(w[w > 0] * s[w > 0])), float(np.sum(-w[w < 0] * s[w < 0]))",
                          "a deep depth's spread lowering the exponent", V4),
    "best-is-worst": ("resflow/fitting/fits.py", "pick = score.argmin(axis=-1)",
                      "pick = np.where(np.isfinite(score), score, -np.inf).argmax(axis=-1)",
                      "each depth's worst student read as its best", V4),
    "separation-unpaired": ("resflow/fitting/separation.py", "diffs = np.array([a[r] - b[r] for r in common], float)",
                            "diffs = np.array([a[r] - b[common[-1 - i]] for i, r in enumerate(common)], float)",
                            "replicates paired with other replicates' teachers", V4),
    "parent-init-0": ("resflow/training/routes.py",
                      'want = dataclasses.replace(spec, route="scratch", depth=spec.depth // 2, length=1.0, budget=1.0)',
                      'want = dataclasses.replace(spec, route="scratch", depth=spec.depth // 2, length=1.0, budget=1.0, '
                      'init=0)', "every continuation student from init 0's parent", V4),
    "smooth-not-smooth": ("resflow/training/block.py", "        W1, b1 = W1[:1].repeat(spec.depth, 1, 1, 1), b1[:1]"
                          ".repeat(spec.depth, 1, 1)", "        pass", "the smooth start drawn as scratch", V4),
    "init-ignored": ("resflow/training/block.py", "student_seed(spec.replicate, spec.scheme, spec.depth, spec.init, "
                     "spec.route)", "student_seed(spec.replicate, spec.scheme, spec.depth)",
                     "every init and route the same draw", V4),
    "t-as-normal": ("resflow/fitting/intervals.py", "quantile = stats.t.ppf(1 - (1 - confidence) / 2, values.size - 1)",
                    "quantile = stats.norm.ppf(1 - (1 - confidence) / 2)",
                    "a normal quantile in place of t over replicates", COVERAGE),
    "paired-t-as-normal": ("resflow/fitting/separation.py", "half = float(stats.t.ppf(0.975, diffs.size - 1) *",
                           "half = float(stats.norm.ppf(0.975) *", "the separation's t as a normal quantile",
                           COVERAGE),
    "jackknife-unscaled": ("resflow/fitting/intervals.py", "se = math.sqrt((n - 1) / n * float(",
                           "se = math.sqrt(1 / n * float(", "the jackknife's (n - 1)/n factor dropped", COVERAGE),
    "boot-plain-percentile": ("resflow/fitting/intervals.py", "_expanded_levels(n_rep, confidence)))",
                              "(0.025, 0.975)))", "the plain percentiles beside the t interval", COVERAGE),
    "huber-as-squared": ("resflow/llm/table/scaling_fit.py", 'if settings.loss != "huber":', "if True:",
                         "the Huber fit's errors by the least-squares formula", COVERAGE),
    "route-high-two-sided": ("resflow/fitting/certification.py",
                             "half = stats.t.ppf(AGREEMENT_CONFIDENCE, values.size - 1)",
                             "half = stats.t.ppf(1 - (1 - AGREEMENT_CONFIDENCE) / 2, values.size - 1)",
                             "the route spread's one-sided end at 97.5%", COVERAGE),
}


def run(name: str) -> tuple[bool, float]:
    path, old, new, _, *tests = MUTATIONS[name]
    file = ROOT / path
    text = file.read_text()
    if text.count(old) != 1:
        raise SystemExit(f"{name}: the text to mutate is not found exactly once in {path}")
    t0 = time.time()
    file.write_text(text.replace(old, new))
    try:
        result = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-n", os.environ.get("MUTATE_WORKERS", "2"), "-p", "no:cacheprovider",
                                 *(tests[0] if tests else TESTS)], cwd=ROOT, capture_output=True, text=True)
    finally:
        file.write_text(text)
    return result.returncode != 0, time.time() - t0


if __name__ == "__main__":
    names = sys.argv[1:] or list(MUTATIONS)
    survivors = []
    for name in names:
        killed, seconds = run(name)
        print(f"{name:22s} {'killed' if killed else 'SURVIVED'} ({seconds:.0f} s)  {MUTATIONS[name][3]}", flush=True)
        if not killed:
            survivors.append(name)
    print(f"{len(names) - len(survivors)} of {len(names)} killed; survivors: {', '.join(survivors) or 'none'}")
