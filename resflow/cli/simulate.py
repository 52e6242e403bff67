"""``resflow run``, ``resflow fit`` and ``resflow demo``: the toy experiments."""

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
from .fit_tables import print_fits
from .names import OVERVIEW, PRESETS, demo_listing, experiment_names, keys_listing, list_experiments
from .tables import print_table

PRESET_HELP = (f"A preset of EXPERIMENT: {', '.join(PRESETS)} "
               "(which experiment has which, and what each costs: resflow run --list).")
StoreOption = Annotated[Path, typer.Option(help="Store directory (created if missing).")]


def device_overrides(device: str, sets: list[str] | None, key: str = "train.device") -> list[str]:
    """The ``--set`` overrides with ``--device`` folded in as ``key`` (one device, given once)."""
    from resflow import IncompatibleOptionsError

    set_devices = {str(item).partition("=")[2].strip() for item in sets or []
                   if str(item).partition("=")[0].strip() == key}
    if set_devices and device != "auto" and set_devices != {device}:
        raise IncompatibleOptionsError(f"--device {device} and --set {key}={', '.join(sorted(set_devices))} "
                                       "disagree; give the device once.")
    return list(sets or []) + ([] if set_devices else [f"{key}={device}"])


def expected_time(experiment: str, preset: str, *, changed: bool) -> str:
    """What a run of ``preset`` is expected to take, from its measured wall time on 2 idle CPU cores."""
    from resflow.experiments import get_experiment

    seconds = get_experiment(experiment).seconds.get(preset)
    if seconds is None:
        return f"expected time: not measured for --preset {preset} (resflow run --list says what was)"
    if changed:
        return (f"expected time: not measured with these --set/--replicates changes (--preset {preset} "
                f"unchanged took {_duration(seconds)} on 2 idle CPU cores)")
    return (f"expected time: about {_duration(seconds)} (measured on 2 idle CPU cores; a busy or slower "
            "machine takes longer)")


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


@app.command()
def run(
    ctx: typer.Context,
    experiment: Annotated[str | None, typer.Argument(help=" | ".join(experiment_names())
                                                          + " (with --resume: also a run id, or nothing "
                                                          "for the latest run)")] = None,
    preset: Annotated[str, typer.Option(help=PRESET_HELP)] = "cpu",
    device: Device = "auto",
    replicates: Annotated[int | None, typer.Option(help="Replicates: each its own teachers, data and "
                                                        "student initialisations (overrides the preset).",
                                                   min=1)] = None,
    out: StoreOption = DEFAULT_STORE,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a config key: key=value "
                                                                 "(repeatable).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue an interrupted run in --out (the run id "
                                                          "given as EXPERIMENT, else the latest of "
                                                          "EXPERIMENT, else the latest) with its saved "
                                                          "configuration; options given again must agree "
                                                          "with it.")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List the experiments, their presets and what each "
                                                       "costs on 2 CPU cores, and exit.")] = False,
    list_keys: Annotated[bool, typer.Option("--list-keys",
                                            help="List every key --set takes for EXPERIMENT, with its type "
                                                 "and its value in --preset, and exit.")] = False,
) -> None:
    """Train students against teachers (or the language-model ladder), fit depth exponents, write the run,
    its fits and a figure."""
    from resflow import ConfigError
    from resflow.experiments import ExperimentConfig, get_experiment
    from resflow.experiments import preset as load_preset
    from resflow.workflows import run_experiment, run_ladder

    with user_errors():
        if list_:
            typer.echo(list_experiments())
            return
        if resume and not list_keys:  # the run's saved configuration; options given again must agree with it
            from resflow.workflows import resume_config

            given = {name: value for name, value in (("preset", preset), ("device", device))
                     if ctx.get_parameter_source(name).name != "DEFAULT"}
            unfinished = resume_config(out, experiment, sets=set_ or (), replicates=replicates, **given)
            config, experiment, resume = unfinished.config, unfinished.run_id, unfinished.run_id
            preset = unfinished.preset or preset
            toy = isinstance(config, ExperimentConfig)
        else:
            if experiment is None:
                raise ConfigError(f"name an EXPERIMENT ({', '.join(experiment_names())}); resflow run --list "
                                  "shows them with their presets.")
            config = load_preset(experiment, preset)
            toy = isinstance(config, ExperimentConfig)
            overrides = (device_overrides(device, set_, "train.device" if toy else "device")
                         + ([f"{'replicates' if toy else 'seeds'}={replicates}"] if replicates else []))
            if list_keys:
                typer.echo(keys_listing(config))
                return
            if axis := get_experiment(experiment).grid(preset):
                raise ConfigError(
                    f"preset {preset!r} of {experiment} is an axis ({'; '.join(axis)}): it runs one cell per "
                    f"value, `resflow sweep {experiment} --preset {preset} --out STORE`, read by "
                    f"`resflow report STORE --axis {axis[0].partition('=')[0]}`.")
            config = config.with_overrides(overrides)
        header = [f"{experiment} ({preset}): {config.describe()}"
                  + (f", targets {', '.join(config.targets)}" if toy else "")]
        if not resume:
            header.append(expected_time(experiment, preset, changed=bool(set_) or replicates is not None))

        def started() -> None:  # the header, once: at once, or (resuming) once the interrupted run goes on
            while header:
                err_console.print(header.pop(0), highlight=False)

        if not resume:  # resuming: no header above "no interrupted run to resume" or another refusal
            started()
        resume_hint = ("the last checkpoint is kept; continue with "
                       f"`resflow run {experiment} --out {out} --resume`")
        if not toy:  # the language-model ladder
            with interruptible(resume_hint), progress_bar("training", config.progress_total) as update:
                def ladder_progress(done: int, total: int, name: str) -> None:
                    started()
                    update(done, note=name)

                ladder = run_ladder(config, out=out, resume=resume, progress=ladder_progress)
            typer.echo(ladder.tables)
            console.print(f"wrote record {ladder.record} to store {out}; models in "
                          f"{ladder.work_dir / 'models'}; figure {ladder.figure}", highlight=False)
            return
        with interruptible(resume_hint), progress_bar("training", config.progress_total) as update:
            def toy_progress(step: int, total: int, losses: dict) -> None:
                started()
                update(step, note="train loss " + "  ".join(f"{k}: {v:.2e}" for k, v in losses.items()))

            result = run_experiment(config, out=out, resume=resume, preset=preset, progress=toy_progress)
        if config.classifies:  # students of RHM data: read by the drop depth, not by a power law (its report)
            from resflow.workflows import report_run

            from .tables import markdown_width

            typer.echo(report_run(out, result.record, width=markdown_width(console)))
        else:
            print_fits(result.fits, result.separations,
                       f"Depth exponents: loss ∝ depth^-α ({result.record})")
            from resflow.analysis import plan_next_run

            ran = result.config  # the saved configuration, when resumed
            plan = plan_next_run(ran.depths, ran.train.steps, ran.budgets, result.fits)
            if plan.longer or plan.other:
                console.print(f"[bold]Next run[/]: {plan.text}", highlight=False)
        console.print(f"wrote records {result.record} (run) and {result.fit_record} (fits) to store {out}; "
                      f"figure {result.figure}", highlight=False)


@app.command()
def fit(
    store: Annotated[Path, typer.Argument(help="A store directory (the --out of `resflow run`).")],
    as_json: Annotated[bool, typer.Option("--json",
                                          help="Machine-readable output (a list of fitted series).")] = False,
    run: Annotated[str | None, typer.Option("--run", help="Only this toy-run record (its id).")] = None,
) -> None:
    """Fit the depth exponents of every toy run in a store (writes fit records; reuses existing ones)."""
    from resflow.workflows import fit_store

    with user_errors(), interruptible("fit records already written are kept; run the command again to go on"):
        runs = fit_store(store, run=run)
        for r in runs:
            if r.skipped:
                err_console.print(f"[yellow]skipped[/] {r.run}: {r.skipped}", highlight=False)
        runs = [r for r in runs if not r.skipped]
        if as_json:
            typer.echo(json.dumps([{"run": r.run, "fit_record": r.fit_record, **row.to_json()}
                                   for r in runs for row in (*r.fits, *r.separations)], indent=2))
            return
        for r in runs:
            print_fits(r.fits, r.separations,
                       f"{r.run} ({'read from' if r.reused else 'written to'} {r.fit_record})")


@app.command()
def report(
    store: Annotated[Path, typer.Argument(help="A store directory (the --out of `resflow run`).")],
    record: Annotated[str | None, typer.Argument(help="A toy-run record id (default: the latest run).")
                      ] = None,
    experiment: Annotated[str | None, typer.Option(help="The latest run of this experiment: "
                                                        f"{' | '.join(experiment_names())}.")] = None,
    replicate: Annotated[int | None, typer.Option(help="Keep only this replicate (its teacher seed).",
                                                  min=0)] = None,
    figure: Annotated[Path | None, typer.Option(help="Also redraw the run's figure into this PNG (never over "
                                                     "an existing file).")] = None,
    axis: Annotated[str | None, typer.Option(help="Tables along a swept key instead of one run: the cells of "
                                                  "the latest sweep in STORE that varies it (e.g. "
                                                  "student_hidden, teacher_depth).")] = None,
    sweep: Annotated[str | None, typer.Option(help="With --axis: this sweep's cells (its id, as `resflow "
                                                   "sweep` prints it).")] = None,
) -> None:
    """Markdown tables of a run: the separation, exponents certified or bound, best losses and route spreads,
    losses by training length, verdict v2, estimates, accumulation; and the runs without a record yet (on
    stderr).  With --axis KEY: the exponents and losses of a sweep along KEY."""
    from resflow import IncompatibleOptionsError
    from resflow.workflows import axis_figure, axis_report, draw_run_figure, report_run, unfinished_note

    from .tables import markdown_width

    with user_errors():
        if axis is not None:
            if record is not None or replicate is not None:
                raise IncompatibleOptionsError("--axis reports a sweep's cells along a key; "
                                               "it takes no RECORD or --replicate.")
            typer.echo(axis_report(store, axis, sweep=sweep, width=markdown_width(console)))
            if figure is not None:
                drawn = axis_figure(store, axis, figure, sweep=sweep)
                err_console.print(f"figure: {drawn}", highlight=False, markup=False)
            return
        if sweep is not None:
            raise IncompatibleOptionsError("--sweep picks the sweep of --axis; give --axis KEY with it.")
        typer.echo(report_run(store, record, experiment=experiment, replicate=replicate,
                              width=markdown_width(console)))
        if figure is not None:
            drawn = draw_run_figure(store, record, path=figure, experiment=experiment)
            err_console.print(f"figure: {drawn.path}", highlight=False, markup=False)
        if note := unfinished_note(store):
            err_console.print(note, highlight=False, markup=False)


@app.command()
def demo(
    name: Annotated[str | None, typer.Argument(help=f"{OVERVIEW} (stacks -> ODE, ensembles, teachers) or a "
                                                    "classroom demo; resflow demo --list shows them.")
                    ] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the demos and exit.")] = False,
    out: Annotated[Path, typer.Option(help="Store directory (created if missing); the figure, its data (.nc) "
                                           "and provenance go into a new directory "
                                           "STORE/work/demo-NAME-<time>.")] = DEFAULT_STORE,
    seed: Annotated[int, typer.Option(help="Seed of every random draw.", min=0)] = 0,
) -> None:
    """Run a demo: the dynamics-core overview or a classroom demo (resflow.demos); figure and data in the
    store."""
    from resflow import UnknownNameError
    from resflow.demos import DEMOS, run_demo
    from resflow.store import Store
    from resflow.workflows import FlowDemoConfig, run_flow_demo

    if list_:
        typer.echo(demo_listing(console.width))
        return
    with user_errors(), interruptible("nothing was kept; run the command again"):
        if name is None:
            raise UnknownNameError(f"no demo named; choose {OVERVIEW} or one of {', '.join(DEMOS)} "
                                   "(demo --list).")
        if name != OVERVIEW and name not in DEMOS:
            raise UnknownNameError.of("demo", name, [OVERVIEW, *DEMOS], listing="`resflow demo --list`")
        if name != OVERVIEW:
            store = Store.open(out, create=True)  # a bad --out fails before the work
            with err_console.status(f"running {name} ..."):
                result = run_demo(name, seed=seed)
            path = result.save(store.work_dir(f"demo-{name}") / f"{name}.png")  # after success
            console.print(f"{result.title} ({result.seconds:.1f} s): wrote {path} and "
                          f"{path.with_suffix('.nc')}", highlight=False)
            return
        with err_console.status("running the flow demo ..."):
            result = run_flow_demo(out, FlowDemoConfig(seed=seed))
        ds = result.dataset
        table = Table(title="Tied residual stack vs its ODE: empirical order (slope of error vs depth)")
        for column in ("scheme", "declared order", "relu² block (study)", "softplus² block (smooth)"):
            table.add_column(column)
        for scheme in ds["scheme"].values:
            orders = ds["empirical_order"].sel(scheme=scheme)
            table.add_row(str(scheme), str(int(ds["declared_order"].sel(scheme=scheme))),
                          f"{float(orders.sel(field='relu2')):.2f}",
                          f"{float(orders.sel(field='softplus2')):.2f}")
        console.print(table)
        console.print(f"wrote {result.work_dir / 'demo.nc'}, {result.figure}, "
                      f"{result.work_dir / 'provenance.json'}")


@app.command()
def bench(
    device: Device = "auto",
    rounds: Annotated[int, typer.Option(help="Measurement rounds (medians are reported).", min=1)] = 3,
    case: Annotated[list[str] | None, typer.Option(help="cpu-preset | cpu-preset-loaded (the same beside a "
                                                        "busy process) | study (repeatable; default all "
                                                        "three).")] = None,
    check: Annotated[list[str] | None, typer.Option(help="Also compare a short run with tf32 or cuda-graphs "
                                                         "on against float32 eager (repeatable).")] = None,
    check_steps: Annotated[int, typer.Option(help="Steps of each --check run.", min=1)] = 300,
    out: StoreOption = DEFAULT_STORE,
    as_json: JsonFlag = False,
) -> None:
    """Time the batched engine and the per-student loop against this machine's sgemm rate, quiet and beside a
    busy process (a bench record)."""
    from resflow.workflows import bench_engine

    with user_errors(), interruptible("nothing was written; run the command again"):
        with progress_bar("bench", 1) as update:
            cases = tuple(case) if case else ("cpu-preset", "cpu-preset-loaded", "study")
            result = bench_engine(device, cases=cases, rounds=rounds,
                                  checks=tuple(check or ()), check_steps=check_steps, out=out,
                                  progress=lambda what, done, total: update(done, total, note=what))
        if as_json:
            typer.echo(json.dumps(result.to_json(), indent=1))
            return
        rows = result.rows
        table = Table(title=f"Engine speed ({rows[0].device}; sgemm {rows[0].sgemm_gflops_per_s:.0f} "
                            f"GFLOP/s; medians of {rounds} rounds)")
        for column in ("case", "engine", "students", "threads", "ms/step", "GFLOP/step", "GFLOP/s",
                       "of sgemm", "vs loop", "vs quiet", "peak MB"):
            table.add_column(column)
        for r in rows:
            table.add_row(r.case, r.engine, str(r.students), str(r.threads), f"{r.ms_per_step:.1f}",
                          f"{r.gflops:.3f}", f"{r.gflops_per_s:.1f}", f"{r.fraction_of_sgemm:.0%}",
                          "-" if r.speedup_vs_loop is None else f"{r.speedup_vs_loop:.2f}x",
                          "-" if r.slowdown_vs_quiet is None else f"{r.slowdown_vs_quiet:.2f}x slower",
                          "-" if r.peak_mem_mb is None else f"{r.peak_mem_mb:.0f}")
        print_table(table, console)
        for name, c in zip(check or (), result.checks, strict=True):
            console.print(f"{name}: final losses differ from float32 eager by "
                          f"{c.max_relative_difference:.2e} (max), {c.median_relative_difference:.2e} "
                          f"(median) after {c.steps} steps; {c.reference_ms_per_step:.1f} -> "
                          f"{c.other_ms_per_step:.1f} ms/step", highlight=False)
        console.print(f"wrote record {result.record} to store {out}", highlight=False)
