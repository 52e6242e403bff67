"""``resflow optimum RUN_DIR``: every depth's optimum of a finished toy run by L-BFGS, beside the run's
exponents (:func:`resflow.workflows.reach_optima`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer

from .app import JsonFlag, app, console, interruptible, progress_bar, user_errors

__all__ = ["optimum"]


@app.command()
def optimum(
    run_dir: Annotated[Path, typer.Argument(help="The work directory of a finished toy run (`resflow run` "
                                                 "prints it), e.g. of --preset ground-truth.")],
    samples: Annotated[int, typer.Option(help="The fixed sample's size (Gaussian inputs).", min=16)] = 2**14,
    evaluations: Annotated[int, typer.Option(help="L-BFGS loss evaluations allowed per start.",
                                             min=1)] = 2000,
    target: Annotated[list[str] | None, typer.Option(help="Only this teacher (repeatable; default: every "
                                                          "teacher of the run).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Reach every depth's optimum of a finished run by full-batch L-BFGS in float64 from its trained starts
    (resumable: each start's result is kept in RUN_DIR/optimum/SETTINGS/), write an `optimum` record, and
    print the exponent of the optima beside the run's own interval (verdict v4)."""
    from resflow.analysis import fit_dataset
    from resflow.records import load_run
    from resflow.store import Store
    from resflow.training import OptimumSettings
    from resflow.workflows import reach_optima

    kept = "the starts already reached are kept in RUN_DIR/optimum/; the same command goes on from them"
    with user_errors(), interruptible(kept):
        settings = OptimumSettings(samples=samples, evaluations=evaluations)
        with progress_bar("optima") as update:
            found = reach_optima(run_dir, settings=settings, targets=target or None,
                                 progress=lambda done, total, what: update(done, total=total, note=what))
        store = Store.open(Path(run_dir).parent.parent)
        fits = {f.target: f for f in fit_dataset(load_run(store, found.source_record))}
        rows = []
        for e in found.exponents:
            f = fits.get(e.target)
            inside = f is not None and f.ci_low <= e.exponent <= f.ci_high
            rows.append({"target": e.target, "optimum_exponent": e.exponent, "optimum_ci_low": e.ci_low,
                         "optimum_ci_high": e.ci_high, "optima": e.optima, "start_spread": e.start_spread,
                         "settled": e.settled, "starts": e.starts, "improved": e.improved,
                         "run_exponent": None if f is None else f.exponent,
                         "run_ci_low": None if f is None else f.ci_low,
                         "run_ci_high": None if f is None else f.ci_high,
                         "run_certified": None if f is None else f.exponent_certified, "inside": inside})
        if as_json:
            clean = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
                     for r in rows]
            out = {"record": found.record, "source_record": found.source_record, "rows": clean}
            typer.echo(json.dumps(out, indent=2))
            return
        console.print(f"optima of {found.source_record} (record {found.record}):", highlight=False)
        for r in rows:
            run = ("–" if r["run_exponent"] is None else
                   f"{r['run_exponent']:.2f} [{r['run_ci_low']:.2f}, {r['run_ci_high']:.2f}] "
                   f"({'certified' if r['run_certified'] else 'a bound'})")
            optima = (f"{r['optimum_exponent']:.3f} [{r['optimum_ci_low']:.3f}, {r['optimum_ci_high']:.3f}]"
                      f" ({r['improved']} of {r['starts']} starts lowered by L-BFGS, {r['settled']} settled; "
                      f"largest start spread "
                      f"{max(r['start_spread']):.1%})")
            verdict = "contains it" if r["inside"] else "does NOT contain it"
            console.print(f"  {r['target']}: optima α = {optima}; the run's α {run}: {verdict}",
                          highlight=False)
