"""Trained students along the teacher's depth: does the finite-teacher factor account for the change of α?

Reads a sweep of ``--grid teacher_depth=...`` (one cell per teacher depth and replicate) from a store, merges
each teacher depth's replicates (``resflow.records.merge_runs``) and fits them as one run: plain α, law α
(the finite-teacher factor F divided out) and the law's own plain shift over the run's depths (the slope of
log F: what F alone moves plain α by).  If F is right, law α is the same at every teacher depth while plain α
moves by the shift.  Every exponent is as verdict v3 stands it (a bound unless its depths are certified).

    resflow sweep smooth-vs-rough --preset cpu --grid teacher_depth=32,64,128 --set depths=2,4,8 \\
        --set replicates=2 --out results-ltd --workers 0
    python benchmarks/teacher_depth_sweep.py results-ltd
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import numpy as np

from resflow.analysis import fit_dataset, separations
from resflow.fitting.law_fit import finite_teacher_factor
from resflow.records import merge_runs
from resflow.store import Store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store")
    args = parser.parse_args()
    store = Store.open(args.store)
    by_depth: dict[int, list[str]] = defaultdict(list)
    for info in store.records(kind="toy-run"):
        attrs = store.load(info).attrs
        if "sweep_cell" in attrs:
            by_depth[int(json.loads(attrs["config"])["teacher_depth"])].append(info.id)
    print("| L_T | teacher | α [95%] | law α [95%] | F's plain shift | standing | smooth − rough α [95%] |")
    print("|---|---|---|---|---|---|---|")
    for teacher_depth in sorted(by_depth):
        ds = merge_runs(store, by_depth[teacher_depth])
        fits = fit_dataset(ds)
        gap = {s.scheme: s for s in separations(fits)}
        for f in fits:
            depths = np.asarray(f.depths, float)
            factor = (finite_teacher_factor(f.law, depths, teacher_depth) if f.law not in (None, "none")
                      else np.full(depths.shape, np.nan))
            shift = -np.polyfit(np.log(depths), np.log(factor), 1)[0]
            s = gap.get(f.scheme)
            sep = (f"{s.separation:.2f} [{s.separation_ci_low:.2f}, {s.separation_ci_high:.2f}]"
                   if s is not None and f.target == "tied" else "")
            print(f"| {teacher_depth} | {f.target} | {f.exponent:.2f} [{f.ci_low:.2f}, {f.ci_high:.2f}] | "
                  f"{f.law_exponent:.2f} [{f.law_ci_low:.2f}, {f.law_ci_high:.2f}] | {shift:+.2f} | "
                  f"{'certified' if f.certified else 'bound'} | {sep} |")


if __name__ == "__main__":
    main()
