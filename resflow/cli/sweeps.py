"""``resflow sweep``: a grid of toy-experiment configurations, one cell per grid point and replicate."""

from __future__ import annotations

import shlex
from typing import Annotated

import typer
from rich.table import Table

from .app import DEFAULT_STORE, Device, app, console, err_console, interruptible, progress_bar, user_errors
from .names import experiment_names
from .simulate import PRESET_HELP, StoreOption, device_overrides


@app.command()
def sweep(
    experiment: Annotated[str, typer.Argument(help=" | ".join(experiment_names()))],
    preset: Annotated[str, typer.Option(help=f"The preset every cell starts from. {PRESET_HELP}")] = "cpu",
    device: Device = "auto",
    grid: Annotated[list[str] | None, typer.Option("--grid", help="A swept key: KEY=V1,V2,... (repeatable; "
                                                                  "any --set key).")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a config key for every cell: "
                                                                 "key=value (repeatable).")] = None,
    replicates: Annotated[int | None, typer.Option(help="Replicates per grid point, one cell each (overrides "
                                                        "the preset).", min=1)] = None,
    out: StoreOption = DEFAULT_STORE,
    workers: Annotated[int, typer.Option(help="Worker processes of a local dask cluster (0: serially in this "
                                              "process).", min=0)] = 1,
    scheduler: Annotated[str | None, typer.Option(help="Address of a running dask scheduler, tcp://HOST:PORT "
                                                       "(instead of --workers).")] = None,
    threads: Annotated[int | None, typer.Option(help="Torch threads per cell (default: cores / workers).",
                                                min=1)] = None,
    resources: Annotated[list[str] | None, typer.Option("--resources",
                                                        help="A dask worker resource each cell needs: "
                                                             "NAME=N, e.g. GPU=1 (repeatable).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Finish this sweep in --out: run only the cells "
                                                          "without a record.")] = False,
) -> None:
    """Run a grid of configurations as independent cells on dask.distributed, each written to the store."""
    from resflow import ConfigError, IncompatibleOptionsError, ResflowError
    from resflow.workflows import SweepPlan, parse_grid, run_sweep

    with user_errors():
        if scheduler is not None and workers != 1:
            raise IncompatibleOptionsError("--workers and --scheduler exclude each other: the scheduler's "
                                           "workers run the cells.")
        # a default device adds nothing, so a sweep's id (a hash of its overrides) is what it was before
        # --device
        sets = device_overrides(device, set_) if device != "auto" else list(set_ or [])
        plan = SweepPlan(experiment, preset, tuple(sets), parse_grid(grid or []), replicates)
        needs = {}
        for item in resources or []:
            name, _, amount = item.partition("=")
            try:
                needs[name.strip()] = float(amount)
            except ValueError:
                raise ConfigError(f"--resources expects NAME=N such as GPU=1; got {item!r}.") from None
        n_cells = len(plan.cells())
        where = scheduler or (f"{workers} local worker process(es)" if workers else "this process")
        err_console.print(f"sweep {plan.sweep_id}: {n_cells} cells on {where}", highlight=False)
        rerun = shlex.join(
            ["resflow", "sweep", experiment, "--preset", preset,
             *[a for g in grid or [] for a in ("--grid", g)],
             *[a for item in set_ or [] for a in ("--set", item)],
             *(["--device", device] if device != "auto" else []),
             *(["--replicates", str(replicates)] if replicates else []),
             *[a for r in resources or [] for a in ("--resources", r)],
             *(["--scheduler", scheduler] if scheduler else ["--workers", str(workers)]),
             *(["--threads", str(threads)] if threads else []), "--out", str(out), "--resume"])
        with interruptible(f"finished cells are in the store; continue with `{rerun}`"), \
                progress_bar("cells", n_cells) as update:
            result = run_sweep(plan, out=out, workers=workers, scheduler=scheduler, threads=threads,
                               resources=needs or None, resume=resume,
                               progress=lambda done, total, cell, ok: update(
                                   done, note=("done " if ok else "[red]FAILED[/] ") + cell))
        table = Table(title=f"Sweep {result.sweep_id} ({len(result.records)} of {len(result.cells)} "
                            f"cells done; {result.ran} run now)")
        for column in ("cell", "record or error"):
            table.add_column(column)
        for cell in result.cells:
            table.add_row(cell, result.records.get(cell) or f"[red]{result.failed.get(cell, 'not run')}[/]")
        console.print(table)
        console.print(f"manifest {result.manifest}", highlight=False)
        if result.failed:
            raise ResflowError(f"{len(result.failed)} cell(s) failed: {'; '.join(result.failed)}. The other "
                               f"cells are in the store; `{rerun}` retries only failed and missing cells.")
