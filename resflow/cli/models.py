"""``resflow llm-fit``, ``resflow probe`` and ``resflow compare``: trained models beside the toys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from .app import (
    DEFAULT_STORE,
    Device,
    JsonFlag,
    app,
    console,
    err_console,
    interruptible,
    progress_bar,
    user_errors,
)

NOTHING_WRITTEN = "nothing was written to the store; run the command again"


@app.command("llm-fit")
def llm_fit(
    data: Annotated[Path | None, typer.Option(help="CSV with loss, num_tokens, d_model, n_layers (model_size "
                                                   "and FLOP optional; other headers: --columns); default: "
                                                   "$RESFLOW_DATA_DIR/chinchilla_depth_width.csv.")] = None,
    exclude_top: Annotated[int | None, typer.Option(help="Drop the points whose loss is at or above the "
                                                         "N-th largest (default: the study's 40 on the "
                                                         "Chinchilla table, which keeps 203 points; none on "
                                                         "any other table).",
                                                    min=0)] = None,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples for percentile intervals (0: none).",
                                           min=0)] = 0,
    depth_offset: Annotated[float, typer.Option(help="Fit (ell - K) instead of ell.", min=0)] = 0.0,
    loss: Annotated[str, typer.Option(help="huber | squared (on log-loss residuals).")] = "huber",
    starts: Annotated[int, typer.Option(help="Random starting points of the optimiser.", min=1)] = 64,
    holdout: Annotated[int, typer.Option(help="Held-out validation splits (0: none).", min=0)] = 0,
    sweep_exclusions: Annotated[bool, typer.Option("--sweep-exclusions",
                                                   help="Also fit with 0, 5, 10, 20, 30, 40, 60 points "
                                                        "excluded.")
                                ] = False,
    columns: Annotated[str | None, typer.Option(help="Map expected=actual column names, comma separated, "
                                                     "e.g. n_layers=depth,d_model=width,"
                                                     "num_tokens=tokens.")] = None,
    download: Annotated[bool, typer.Option("--download",
                                           help="Fetch the Chinchilla table (pinned sha256) if "
                                                "no --data is given.")] = False,
    out: Annotated[Path, typer.Option(help="Store to write the data and the fit into.")] = DEFAULT_STORE,
    keep_failed: Annotated[bool, typer.Option("--keep-failed",
                                              help="Store a fit that failed its checks, marked as failed "
                                                   "(never shown by compare).")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Fit L = c_m m^-a_m + c_l (l-k)^-a_l + c_D D^-a_D + L0 to trained-LLM data; write it to a store.

    A fit whose starts disagree, whose standard errors are not finite or one of whose terms vanished is
    reported as failed: nothing is written and the exit status is 2, unless --keep-failed."""
    from resflow.llm import PARAMS, ScalingFitSettings, parse_column_map
    from resflow.workflows import fit_llm_table

    with user_errors(), interruptible(NOTHING_WRITTEN):
        settings = ScalingFitSettings(loss=loss, n_starts=starts, depth_offset=depth_offset,
                                      exclude_top=exclude_top)
        with progress_bar("fitting", 1) as update:
            result = fit_llm_table(data, columns=parse_column_map(columns), download=download,
                                   settings=settings, bootstrap=bootstrap, holdout=holdout,
                                   sweep_exclusions=sweep_exclusions, out=out, keep_failed=keep_failed,
                                   progress=lambda stage, done, total: update(done, total, description=stage))
        if as_json:
            typer.echo(json.dumps(result.to_json(), indent=2))
            return
        fit = result.fit
        table = Table(title=f"L(m, l, D) fit: {fit.n_points} points, {fit.excluded} highest-loss excluded, "
                            f"{fit.starts_agree}/{fit.n_starts} starts agree")
        for column in ("parameter", "value", "std. error", "95% bootstrap interval"):
            table.add_column(column)
        for name in PARAMS:
            ci = fit.ci.get(name)
            table.add_row(name, f"{fit.params[name]:.4g}", f"{fit.se[name]:.3g}",
                          "-" if ci is None else f"[{ci[0]:.4g}, {ci[1]:.4g}]")
        console.print(table)
        if fit.failure:
            err_console.print(f"[bold red]failed fit (kept as asked, marked failed):[/] {fit.failure}",
                              highlight=False)
        if fit.holdout:
            h = fit.holdout
            console.print(f"held-out ({h['splits']} splits of {h['test_fraction']:.0%}): RMS log-loss "
                          f"residual {h['test_rms_log']:.4f} ± {h['test_rms_log_sd']:.4f} "
                          f"(train {h['train_rms_log']:.4f}); "
                          f"alpha_l {h['alpha_l_mean']:.2f} ± {h['alpha_l_sd']:.2f}", highlight=False)
        if result.sweep:
            sweep = Table(title="Exclusion sweep")
            for column in ("excluded", "points", "alpha_l", "std. error", "starts agree", "checks"):
                sweep.add_column(column)
            for f in result.sweep:
                sweep.add_row(str(f.excluded), str(f.n_points), f"{f.params['alpha_l']:.3f}",
                              f"{f.se['alpha_l']:.3f}", f"{f.starts_agree}/{f.n_starts}",
                              "passed" if f.failure is None else f"[red]failed[/]: {f.failure}")
            console.print(sweep)
        console.print(f"wrote records {result.data_record} and {result.fit_record} to store {out}",
                      highlight=False)


@app.command()
def compare(
    stores: Annotated[list[Path], typer.Argument(help="One or more store directories.")],
    as_json: JsonFlag = False,
    figure: Annotated[Path | None, typer.Option(help="Where to write the figure (default: a new work "
                                                     "directory of the first store).")] = None,
) -> None:
    """Depth exponents of theory, toy runs and LLM fits side by side, with the regime of each."""
    from resflow.workflows import compare_stores

    with user_errors(), interruptible(NOTHING_WRITTEN):
        with progress_bar("reading stores", len(stores)) as update:
            result = compare_stores(stores, figure=figure,
                                    progress=lambda store, done, total: update(done, total))
        if as_json:
            typer.echo(json.dumps([r.to_json() for r in result.rows], indent=2))
            return
        table = Table(title="Depth exponents: theory, toy models, trained LLMs")
        for column in ("source", "series", "loss", "scheme", "α", "95% interval", "converged", "regime"):
            table.add_column(column)
        for r in result.rows:
            interval = "-" if r.source == "theory" else f"[{r.ci_low:.2f}, {r.ci_high:.2f}]"
            converged = "-" if r.converged is None else ("yes" if r.converged else "[red]no[/]")
            table.add_row(r.source, r.name, r.loss, r.scheme, f"{r.exponent:.2f}", interval, converged,
                          r.regime)
        console.print(table)
        if result.interventions:
            inter = Table(title="Interventions across depth (docs/interventions.md): damage of skipping a "
                                "layer, its profile's max over mean, swap and rescaled lesion over it")
            for column in ("source", "stack", "layers", "measure", "lesion", "max/mean", "swap/lesion",
                           "rescaled/lesion"):
                inter.add_column(column)
            for r in result.interventions:
                inter.add_row(r.source, r.name, str(r.depth), r.measure, f"{r.lesion_mean:.3g}",
                              f"{r.flatness:.2f}", f"{r.swap_share:.3g}",
                              "-" if r.repair != r.repair else f"{r.repair:.3g}")
            console.print(inter)
        if result.signatures:
            sig = Table(title="Signatures of the three readings (docs/results.md): middle-layer update "
                              "angle (rad), early-stop fraction, inputs exiting in the first half and mean "
                              "exit e/ℓ, angles within/across a teacher's groups (rad), RHM drop depth")
            sig.add_column("stack", min_width=24, overflow="fold")
            for column in ("ℓ", "angle", "stop", "exit", "e/ℓ", "within", "across", "drop"):
                sig.add_column(column, no_wrap=True)

            def cell(value: float) -> str:
                return "-" if value != value else ("> run" if value == float("inf") else f"{value:.2g}")

            for r in result.signatures:
                sig.add_row(f"{r.source}: {r.name}", str(r.depth), cell(r.update_angle), cell(r.early_stop),
                            cell(r.exit_early), cell(r.exit_depth), cell(r.angle_within),
                            cell(r.angle_boundary), cell(r.drop_depth))
            console.print(sig)
        if result.unfitted:
            console.print(f"[yellow]not shown[/] (no fit record; `resflow fit STORE` fits them): "
                          f"{', '.join(result.unfitted)}", highlight=False)
        for record, why in result.failed:
            console.print(f"[yellow]not shown[/] (failed fit) {record}: {why}", highlight=False)
        console.print(f"figure: {result.figure}")


@app.command()
def probe(
    models: Annotated[list[str], typer.Argument(help="Model directories or hub-cache names, or resflow "
                                                      "teachers: teacher:tied, teacher:independent, "
                                                      "teacher:correlated:0.9, teacher:fractional:0.75.")],
    texts: Annotated[Path | None, typer.Option(help="UTF-8 text file, one text per line "
                                                    "(transformer models).",
                                               exists=True, dir_okay=False, readable=True)] = None,
    max_tokens: Annotated[int, typer.Option(help="Tokens (or Gaussian inputs for teachers) to probe.",
                                            min=1)] = 4096,
    batch_size: Annotated[int, typer.Option(help="Texts per forward pass.", min=1)] = 8,
    device: Device = "auto",
    bf16: Annotated[bool, typer.Option("--bf16",
                                       help="Load the weights in bfloat16 (halves GPU memory).")] = False,
    normalise: Annotated[bool, typer.Option("--normalise", help="Plot against l / L.")] = False,
    out: Annotated[Path, typer.Option(help="Store for the probe record and figure.")] = DEFAULT_STORE,
    as_json: JsonFlag = False,
) -> None:
    """Hidden-state metrics per layer (rotation, update angles, norms, progress, per-layer loss)."""
    import numpy as np

    from resflow.workflows import probe_models

    with user_errors(), interruptible(NOTHING_WRITTEN):
        with progress_bar("probing", len(models)) as update:
            run = probe_models(models, texts=texts, max_tokens=max_tokens, batch_size=batch_size,
                               device=device, bf16=bf16, normalise=normalise, out=out,
                               progress=lambda model, done, total: update(done, total, note=model))
        payload = [r.to_json() for r in run.results]
        if as_json:
            typer.echo(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2))
            return
        table = Table(title="Hidden-state probes (means over tokens; angles in degrees)")
        for column in ("model", "layers", "tokens", "median update angle, middle", "relative step, middle",
                       "early-stop fraction (update sizes)", "early-stop fraction (study: PCA of angles)",
                       "last state after final norm"):
            table.add_column(column)
        for r in run.results:
            s = r.summary()
            table.add_row(r.model, str(r.n_layers), str(r.n_tokens),
                          f"{np.degrees(s['median_update_angle_middle']):.1f}",
                          f"{s['relative_step_middle']:.4f}", f"{r.early_stop_fraction:.3f}",
                          f"{r.angle_early_stop_fraction:.3f}",
                          {None: "-", True: "yes", False: "no"}[r.last_state_after_final_norm])
        console.print(table)
        if run.step_size_slope is not None:
            console.print(f"slope of the middle-layer step size against depth: {run.step_size_slope:.2f}")
        console.print(f"wrote record {run.record} to {out}; figure {run.figure}", highlight=False)


@app.command()
def intervene(
    models: Annotated[list[str], typer.Argument(help="Model directories or hub-cache names, or resflow "
                                                      "teachers: teacher:tied, teacher:independent, "
                                                      "teacher:grouped:4, ...")],
    prompt: Annotated[str, typer.Option(help="The prompt (transformer models).")
                      ] = "The Space Needle is in downtown",
    target: Annotated[str, typer.Option(help="The continuation whose probability is measured (causal LMs).")
                      ] = " Seattle",
    subject: Annotated[str, typer.Option(help="The words of the prompt a trace corrupts.")
                       ] = "The Space Needle",
    only: Annotated[str, typer.Option("--only", help="Comma-separated interventions for transformer models: "
                                                     "lesion, swap, trace.")] = "lesion,swap,trace",
    inputs: Annotated[int, typer.Option(help="Gaussian inputs for teachers.", min=1)] = 1024,
    seed: Annotated[int, typer.Option(help="Seed of the inputs and of the trace's noise.", min=0)] = 0,
    device: Device = "auto",
    out: Annotated[Path, typer.Option(help="Store for the intervention records.")] = DEFAULT_STORE,
    as_json: JsonFlag = False,
) -> None:
    """Lesion, swap and trace every layer (toy teachers and transformers; one intervention record each)."""
    import numpy as np

    from resflow.workflows import intervene_models

    with user_errors(), interruptible(NOTHING_WRITTEN):
        with progress_bar("intervening", len(models)) as update:
            run = intervene_models(models, prompt=prompt, target=target, subject=subject or None,
                                   interventions=tuple(p.strip() for p in only.split(",") if p.strip()),
                                   n_inputs=inputs, device=device, seed=seed, out=out,
                                   progress=lambda model, done, total: update(done, total, note=model))
        payload = [_intervention_json(ds, record)
                   for ds, record in zip(run.datasets, run.records, strict=True)]
        if as_json:
            typer.echo(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2))
            return
        table = Table(title="Interventions across depth (mean over layers; per layer in the records)")
        for column in ("model", "layers", "measure", "clean", "lesion", "rescaled lesion", "swap",
                       "trace, best"):
            table.add_column(column)
        for p in payload:
            def mean(name, p=p):
                values = [v for v in p.get(name) or [] if v is not None]
                return "-" if not values else f"{np.mean(values):.3g}"
            best = "-" if not p.get("trace") else f"{np.nanmax(np.array(p['trace'], float)):.3g}"
            table.add_row(p["model"], str(p["depth"]), p["measure"], p.get("clean") or "-", mean("lesion"),
                          mean("lesion_rescaled"), mean("swap"), best)
        console.print(table)
        console.print(f"wrote records {', '.join(run.records)} to {out}; figure {run.figure}",
                      highlight=False)


def _intervention_json(ds, record: str) -> dict:
    import numpy as np

    def listed(name):
        if name not in ds:
            return None
        return [None if not np.isfinite(v) else float(v) for v in np.asarray(ds[name].values, float).ravel()]

    return {"record": record, "model": ds.attrs["model"], "depth": int(ds.attrs["depth"]),
            "measure": ds.attrs["measure"], "clean": ds.attrs.get("clean"), "lesion": listed("lesion"),
            "lesion_rescaled": listed("lesion_rescaled"), "swap": listed("swap"),
            "trace": None if "trace" not in ds else np.asarray(ds["trace"].values, float).tolist(),
            "tokens": None if "token_text" not in ds.coords else [str(t) for t in ds["token_text"].values]}
