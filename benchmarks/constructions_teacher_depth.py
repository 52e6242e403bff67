"""The finite-teacher factor tested on constructions: plain α of block-sum and teacher-field Euler students
against teachers of depth 32, 64, 128, predicted from the law and measured.

The finite-teacher laws say loss ∝ ℓ^-α F(ℓ, L_T), F = 1 − ℓ/L_T (ensemble, α = 1) or (1 − ℓ/L_T)²
(procedural, coherent error, α = 2), so over ℓ = 2–16 the *plain* slope depends on the teacher's depth.
Constructions (``resflow.analysis.construction_loss``) are exact: no training, so what they show is the law,
not a convergence question.  Teachers of the cpu preset's shape (width 16, hidden 64), seeds 0..2, Euler
constructions on 8192 inputs, float64; mean ± sd over the seeds.  About a minute on one core.

    python benchmarks/constructions_teacher_depth.py
"""

from __future__ import annotations

import argparse

import numpy as np

import resflow
from resflow.analysis import construction_loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher-depths", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--inputs", type=int, default=8192)
    args = parser.parse_args()
    depths = np.array([2.0, 4.0, 8.0, 16.0])
    print("| teacher | L_T | plain α predicted by the law | measured (mean ± sd over seeds) |")
    print("|---|---|---|---|")
    readings = (("independent", "rough (block-sum)", 1), ("tied", "smooth (teacher-field Euler)", 2))
    for family, name, alpha in readings:
        for teacher_depth in args.teacher_depths:
            measured = []
            for seed in range(args.seeds):
                teacher = resflow.Teacher(family, width=16, depth=teacher_depth, seed=seed).double()
                x = teacher.sample_inputs(args.inputs, seed=1).double()
                loss = [construction_loss(teacher, int(d), "euler", x) for d in depths]
                measured.append(-np.polyfit(np.log(depths), np.log(loss), 1)[0])
            law = depths**-alpha * (1 - depths / teacher_depth) ** alpha
            predicted = -np.polyfit(np.log(depths), np.log(law), 1)[0]
            print(f"| {name} | {teacher_depth} | {predicted:.2f} | {np.mean(measured):.2f} ± "
                  f"{np.std(measured, ddof=1):.2f} |")


if __name__ == "__main__":
    main()
