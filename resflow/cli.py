"""The ``resflow`` command line.  Bad input exits with status 2 and a one-line message, no traceback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from .errors import ResflowError

app = typer.Typer(
    name="resflow",
    help="How residual networks use depth: discretised flows, noisy ensembles, error-vs-depth laws.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn resflow's input errors into a clean message and exit status 2."""
    try:
        yield
    except ResflowError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(code=2) from None


def _version(value: bool) -> None:
    if value:
        from . import __version__

        console.print(f"resflow {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """resflow command line."""


@app.command()
def tableaux(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List the registered Runge-Kutta schemes (Butcher tableaux)."""
    from .tableau import TABLEAUX

    rows = [
        {"name": t.name, "stages": t.stages, "order": t.order, "reference": t.reference}
        for t in TABLEAUX.values()
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="Registered explicit Runge-Kutta schemes")
    for column in ("name", "stages", "order", "reference"):
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(row[c]) for c in ("name", "stages", "order", "reference")))
    console.print(table)


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Root directory; the run goes into a new subdirectory.")] = Path("results"),
    seed: Annotated[int, typer.Option(help="Seed of every random draw.", min=0)] = 0,
) -> None:
    """Demo of the dynamics core: stack-vs-ODE convergence per scheme, ensembles, teacher angles."""
    with user_errors():
        from .sims.flow_demo import FlowDemoConfig, main

        with console.status("running the flow demo ..."):
            run_dir = main(out, FlowDemoConfig(seed=seed))
        import xarray as xr

        ds = xr.open_dataset(run_dir / "demo.nc", engine="scipy")
        table = Table(title="Tied residual stack vs its ODE: empirical order (slope of error vs depth)")
        for column in ("scheme", "declared order", "relu² block (study)", "softplus² block (smooth)"):
            table.add_column(column)
        for scheme in ds["scheme"].values:
            fits = ds["empirical_order"].sel(scheme=scheme)
            table.add_row(
                str(scheme),
                str(int(ds["declared_order"].sel(scheme=scheme))),
                f"{float(fits.sel(field='relu2')):.2f}",
                f"{float(fits.sel(field='softplus2')):.2f}",
            )
        console.print(table)
        ds.close()
        console.print(f"wrote {run_dir / 'demo.nc'}, {run_dir / 'demo.png'}, {run_dir / 'provenance.json'}")


@app.command()
def theory(
    name: Annotated[str | None, typer.Argument(help="A law name; omit to list them all.")] = None,
    latex: Annotated[bool, typer.Option("--latex", help="Print LaTeX instead of pretty text.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output (a list of objects).")] = False,
) -> None:
    """List the derived error-vs-depth laws, or print one (pretty, --latex or --json)."""
    with user_errors():
        import sympy as sp

        from . import laws

        selected = laws.names() if name is None else [laws.derivation(name).name]
        if as_json:
            typer.echo(json.dumps([laws.as_record(n) for n in selected], indent=2))
            return
        if name is None and not latex:
            table = Table(title="Derived laws (resflow theory NAME for one; --latex, --json)")
            for column in ("name", "law", "loss-vs-depth exponent"):
                table.add_column(column)
            for n in selected:
                d = laws.derivation(n)
                text = "-" if d.exponent is None else sp.sstr(d.exponent)
                table.add_row(n, d.title, text if len(text) <= 40 else f"local, depends on the depth (theory {n})")
            console.print(table)
            return
        for n in selected:
            d = laws.derivation(n)
            if latex:
                typer.echo(f"% {n}: {d.title}\n{sp.latex(d.expression)}")
                continue
            console.rule(f"[bold]{n}")
            console.print(d.title, highlight=False)
            typer.echo(sp.pretty(d.expression, use_unicode=True))
            for label, step in d.steps:
                console.print(f"[dim]{label}:[/]", highlight=False)
                typer.echo(sp.pretty(step, use_unicode=True))
            if d.exponent is not None:
                typer.echo(f"loss-vs-depth exponent: {sp.sstr(d.exponent)}")
            console.print(f"[dim]assumptions:[/] {d.assumptions}", highlight=False)


def _fits_table(fits, title: str) -> Table:
    table = Table(title=title)
    for column in ("target", "loss", "scheme", "T", "α", "95% CI", "offset fit α", "converged", "regime", "note"):
        table.add_column(column)
    for f in fits:
        table.add_row(
            f.target, f.loss, f.scheme, "-" if f.temperature is None else f"{f.temperature:g}",
            f"{f.exponent:.2f}", f"[{f.ci_low:.2f}, {f.ci_high:.2f}]",
            "-" if f.offset_exponent is None else f"{f.offset_exponent:.2f}",
            "yes" if f.converged else "[red]no[/]", f.regime, f.note,
        )
    return table


@app.command()
def run(
    experiment: Annotated[str, typer.Argument(help="smooth-vs-rough | temperature | rk2 | roughness")],
    preset: Annotated[str, typer.Option(help="cpu (minutes on a laptop) or paper (the study's scale, GPU).")] = "cpu",
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    seeds: Annotated[int | None, typer.Option(help="Number of student seeds (overrides the preset).",
                                              min=1)] = None,
    out: Annotated[Path, typer.Option(help="Store directory; each run goes into a new subdirectory.")] = Path(
        "results"),
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a config key: key=value (repeatable).")
                    ] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the latest interrupted run of EXPERIMENT "
                                                          "in --out.")] = False,
) -> None:
    """Train students against teachers, fit depth exponents, write a Dataset, fits and a figure."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    with user_errors():
        from .experiments import preset as load_preset
        from .experiments import run_experiment

        config = load_preset(experiment, preset)
        overrides = list(set_ or []) + [f"train.device={device}"] + ([f"seeds={seeds}"] if seeds else [])
        config = config.with_overrides(overrides)
        n_students = len(config.student_specs())
        console.print(f"{experiment} ({preset}): {n_students} students, {config.train.steps} steps, "
                      f"targets {', '.join(config.targets)}", highlight=False)
        columns = [TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                   TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[losses]}")]
        with Progress(*columns, console=console, transient=False) as bar:
            task = bar.add_task("training", total=config.train.steps, losses="")

            def report(step, total, losses):
                text = "  ".join(f"{k}: {v:.2e}" for k, v in losses.items())
                bar.update(task, completed=step, losses=f"train loss {text}")

            try:
                run_dir, ds, fits = run_experiment(config, out=out, resume=resume, progress=report)
            except KeyboardInterrupt:
                err_console.print(f"[yellow]interrupted[/]: checkpoint saved; continue with "
                                  f"`resflow run {experiment} --preset {preset} --out {out} --resume`")
                raise typer.Exit(code=130) from None
        console.print(_fits_table(fits, f"Depth exponents: loss ∝ depth^-α ({ds.attrs['store_record']})"))
        console.print(f"wrote record {ds.attrs['store_record']} to store {out}; fits and figure in {run_dir}")


@app.command()
def fit(
    store: Annotated[Path, typer.Argument(help="A store directory (the --out of `resflow run`).")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output (a list of fitted series).")] = False,
) -> None:
    """Refit the depth exponents of every toy run in a store."""
    with user_errors():
        from .errors import ConfigError
        from .fitting import fit_dataset
        from .store import Store

        opened = Store.open(store)
        infos = opened.records(kind="toy-run")
        if not infos:
            raise ConfigError(f"no toy runs in store {str(store)!r}; `resflow run` writes them.")
        rows = []
        for info in infos:
            fits = fit_dataset(opened.load(info))
            if as_json:
                rows += [{"run": info.id, **f.to_json()} for f in fits]
            else:
                console.print(_fits_table(fits, info.id))
        if as_json:
            typer.echo(json.dumps(rows, indent=2))


@app.command("llm-fit")
def llm_fit(
    data: Annotated[Path | None, typer.Option(help="CSV with model_size, FLOP, loss, num_tokens, d_model, n_layers "
                                                   "(default: $RESFLOW_DATA_DIR/chinchilla_depth_width.csv).")] = None,
    exclude_top: Annotated[int, typer.Option(help="Drop this many highest-loss points before fitting.", min=0)] = 0,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples for percentile intervals (0: none).",
                                           min=0)] = 0,
    depth_offset: Annotated[float, typer.Option(help="Fit (ell - K) instead of ell.", min=0)] = 0.0,
    loss: Annotated[str, typer.Option(help="huber | squared (on log-loss residuals).")] = "huber",
    starts: Annotated[int, typer.Option(help="Random starting points of the optimiser.", min=1)] = 64,
    holdout: Annotated[int, typer.Option(help="Held-out validation splits (0: none).", min=0)] = 0,
    sweep_exclusions: Annotated[bool, typer.Option("--sweep-exclusions",
                                                   help="Also fit with 0, 5, 10, 20, 30, 40, 60 points excluded.")
                                ] = False,
    columns: Annotated[str | None, typer.Option(help="Map expected=actual column names, comma separated.")] = None,
    download: Annotated[bool, typer.Option("--download", help="Fetch the Chinchilla table (pinned sha256) if "
                                                              "no --data is given.")] = False,
    out: Annotated[Path, typer.Option(help="Store to write the data and the fit into.")] = Path("results"),
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Fit L = c_m m^-a_m + c_l (l-k)^-a_l + c_D D^-a_D + L0 to trained-LLM data; write it to a store."""
    with user_errors():
        from .llm_data import CHINCHILLA, load_scaling_table, parse_column_map, table_dataset
        from .llm_fit import (
            PARAMS,
            FitSettings,
            bootstrap_fit,
            exclusion_sweep,
            fit_dataset_record,
            fit_scaling_law,
            holdout_validation,
        )
        from .provenance import provenance
        from .store import Store

        table = load_scaling_table(data, columns=parse_column_map(columns), download=download)
        settings = FitSettings(loss=loss, n_starts=starts, depth_offset=depth_offset, exclude_top=exclude_top)
        fit = fit_scaling_law(table, settings)
        if bootstrap:
            bootstrap_fit(table, fit, bootstrap)
        if holdout:
            fit.holdout = holdout_validation(table, settings, splits=holdout)
        sweep = exclusion_sweep(table, settings) if sweep_exclusions else []
        store = Store.open(out, create=True)
        prov = provenance({"settings": settings.__dict__, "data": table.attrs.get("path"), "bootstrap": bootstrap},
                          seed=settings.seed)
        is_chinchilla = str(table.attrs.get("path", "")).endswith(CHINCHILLA["file"])
        data_ds = table_dataset(table, source=CHINCHILLA["source"] if is_chinchilla else str(table.attrs["path"]),
                                license=CHINCHILLA["license"] if is_chinchilla else "as given by the user")
        data_ds.attrs.update(prov)
        data_record = store.write(data_ds, kind="llm-data", name="chinchilla" if is_chinchilla else "user-table")
        fit_ds = fit_dataset_record(fit, data_record)
        fit_ds.attrs.update(prov)
        fit_record = store.write(fit_ds, kind="llm-fit", name="depth-scaling")
        record = {**fit.to_json(), "record": fit_record, "data_record": data_record}
        if sweep:
            record["sweep"] = [{"excluded": f.excluded, "n_points": f.n_points, "alpha_l": f.params["alpha_l"],
                                "alpha_l_se": f.se["alpha_l"], "starts_agree": f.starts_agree} for f in sweep]
        if as_json:
            typer.echo(json.dumps(record, indent=2))
            return
        table_out = Table(title=f"L(m, l, D) fit: {fit.n_points} points, {fit.excluded} highest-loss excluded, "
                                f"{fit.starts_agree}/{fit.n_starts} starts agree")
        for column in ("parameter", "value", "std. error", "95% bootstrap interval"):
            table_out.add_column(column)
        for name in PARAMS:
            ci = fit.ci.get(name)
            table_out.add_row(name, f"{fit.params[name]:.4g}", f"{fit.se[name]:.3g}",
                              "-" if ci is None else f"[{ci[0]:.4g}, {ci[1]:.4g}]")
        console.print(table_out)
        if fit.holdout:
            h = fit.holdout
            console.print(f"held-out ({h['splits']} splits of {h['test_fraction']:.0%}): RMS log-loss residual "
                          f"{h['test_rms_log']:.4f} ± {h['test_rms_log_sd']:.4f} (train {h['train_rms_log']:.4f}); "
                          f"alpha_l {h['alpha_l_mean']:.2f} ± {h['alpha_l_sd']:.2f}", highlight=False)
        if sweep:
            sweep_table = Table(title="Exclusion sweep")
            for column in ("excluded", "points", "alpha_l", "std. error", "starts agree"):
                sweep_table.add_column(column)
            for row in record["sweep"]:
                sweep_table.add_row(str(row["excluded"]), str(row["n_points"]), f"{row['alpha_l']:.3f}",
                                    f"{row['alpha_l_se']:.3f}", str(row["starts_agree"]))
            console.print(sweep_table)
        console.print(f"wrote records {data_record} and {fit_record} to store {out}", highlight=False)


@app.command()
def compare(
    stores: Annotated[list[Path], typer.Argument(help="One or more store directories.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output (a list of rows).")] = False,
    figure: Annotated[Path | None, typer.Option(help="Where to write the figure (default: a new work "
                                                     "directory of the first store).")] = None,
) -> None:
    """Depth exponents of theory, toy runs and LLM fits side by side, with the regime of each."""
    with user_errors():
        from .compare import comparison_figure, comparison_rows
        from .errors import ConfigError
        from .plotting import save_figure
        from .provenance import provenance
        from .store import Store

        rows, llm = comparison_rows(stores)
        if figure is None:
            figure = Store.open(stores[0]).work_dir("compare") / "compare.png"
        elif figure.exists():
            raise ConfigError(f"{str(figure)!r} exists; choose a new file (nothing is overwritten).")
        save_figure(comparison_figure(rows, llm), figure,
                    provenance({"stores": [str(s) for s in stores]}, records=[r.record for r in rows]))
        if as_json:
            typer.echo(json.dumps([r.to_json() for r in rows], indent=2))
            return
        table = Table(title="Depth exponents: theory, toy models, trained LLMs")
        for column in ("source", "series", "loss", "scheme", "α", "95% interval", "converged", "regime"):
            table.add_column(column)
        for r in rows:
            interval = "-" if r.source == "theory" else f"[{r.ci_low:.2f}, {r.ci_high:.2f}]"
            converged = "-" if r.converged is None else ("yes" if r.converged else "[red]no[/]")
            table.add_row(r.source, r.name, r.loss, r.scheme, f"{r.exponent:.2f}", interval, converged, r.regime)
        console.print(table)
        console.print(f"figure: {figure}")


@app.command()
def probe(
    models: Annotated[list[str], typer.Argument(help="Model directories or hub-cache names, or resflow teachers: "
                                                      "teacher:tied, teacher:independent, teacher:correlated:0.9, "
                                                      "teacher:fractional:0.75.")],
    texts: Annotated[Path | None, typer.Option(help="UTF-8 text file, one text per line (transformer models).")
                     ] = None,
    max_tokens: Annotated[int, typer.Option(help="Tokens (or Gaussian inputs for teachers) to probe.", min=1)] = 4096,
    batch_size: Annotated[int, typer.Option(help="Texts per forward pass.", min=1)] = 8,
    device: Annotated[str, typer.Option(help="cpu | cuda")] = "cpu",
    half: Annotated[bool, typer.Option("--half", help="bf16 weights (GPU).")] = False,
    normalise: Annotated[bool, typer.Option("--normalise", help="Plot against l / L.")] = False,
    out: Annotated[Path, typer.Option(help="Store for the probe record and figure.")] = Path("results"),
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Hidden-state metrics per layer (rotation, update angles, norms, progress, per-layer loss)."""
    with user_errors():
        import torch

        from .errors import ConfigError
        from .plotting import save_figure
        from .probes import plot_probes, probe_dataset, probe_teacher, step_size_slope
        from .provenance import provenance
        from .store import Store

        results = []
        for name in models:
            if name.startswith("teacher:"):
                results.append(probe_teacher(name[len("teacher:"):], n_inputs=max_tokens))
                continue
            from .hf_probe import probe_hf, read_texts

            if texts is None:
                raise ConfigError(f"probing {name!r} needs --texts FILE (one text per line).")
            results.append(probe_hf(name, read_texts(texts), max_tokens=max_tokens, batch_size=batch_size,
                                    device=device, dtype=torch.bfloat16 if half else torch.float32))
        store = Store.open(out, create=True)
        prov = provenance({"models": models, "texts": str(texts), "max_tokens": max_tokens}, seed=0)
        ds = probe_dataset(results)
        ds.attrs.update(prov)
        record = store.write(ds, kind="probe", name="probe")
        figure = store.work_dir("probe") / "probe.png"
        save_figure(plot_probes(results, normalise=normalise), figure, prov)
        payload = [r.to_json() for r in results]
        if as_json:
            typer.echo(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2))
            return
        table = Table(title="Hidden-state probes (means over tokens; angles in degrees)")
        for column in ("model", "layers", "tokens", "median update angle, middle", "relative step, middle",
                       "early-stop fraction", "last state after final norm"):
            table.add_column(column)
        for r in results:
            s = r.summary()
            table.add_row(r.model, str(r.n_layers), str(r.n_tokens),
                          f"{np.degrees(s['median_update_angle_middle']):.1f}",
                          f"{s['relative_step_middle']:.4f}", f"{r.early_stop_fraction:.3f}",
                          {None: "-", True: "yes", False: "no"}[r.last_state_after_final_norm])
        console.print(table)
        if len({r.n_layers for r in results}) >= 2:
            console.print(f"slope of the middle-layer step size against depth: {step_size_slope(results):.2f}")
        console.print(f"wrote record {record} to {out}; figure {figure}", highlight=False)


def main() -> None:  # console-script entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
