"""The command line: help, version, listings, the demo, and clean errors."""

import json
import shutil
import subprocess
import sys

import pytest
import xarray as xr
from typer.testing import CliRunner

import resflow
from resflow.cli import app

runner = CliRunner()


def test_help_and_version():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "demo" in result.output and "tableaux" in result.output
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and resflow.__version__ in result.output


def test_console_script_is_installed():
    exe = shutil.which("resflow") or str(__import__("pathlib").Path(sys.executable).parent / "resflow")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and resflow.__version__ in out.stdout


def test_tableaux_json_lists_the_registry():
    result = runner.invoke(app, ["tableaux", "--json"])
    rows = json.loads(result.output)
    assert [r["name"] for r in rows] == list(resflow.TABLEAUX)
    assert all(r["order"] == resflow.TABLEAUX[r["name"]].order for r in rows)


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    first = runner.invoke(app, ["demo", "overview", "--out", str(out), "--seed", "1"])
    second = runner.invoke(app, ["demo", "overview", "--out", str(out), "--seed", "1"])
    return out, first, second


def test_demo_writes_dataset_figure_and_provenance(demo_runs):
    out, first, _ = demo_runs
    assert first.exit_code == 0, first.output
    run_dir = sorted((out / "work").iterdir())[0]
    assert run_dir.name.startswith("demo-overview-")
    assert {p.name for p in run_dir.iterdir()} == {"demo.nc", "demo.png", "provenance.json"}
    ds = xr.open_dataset(run_dir / "demo.nc", engine="scipy")
    for key in ("config", "seed", "resflow_version", "torch_version", "git_commit", "created"):
        assert key in ds.attrs
    assert ds.attrs["seed"] == "1"
    for name, var in ds.data_vars.items():
        assert "long_name" in var.attrs and "units" in var.attrs, name
    # the printed table reports an empirical order for every scheme
    assert all(scheme in first.output for scheme in resflow.TABLEAUX)
    assert (run_dir / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_never_overwrites_an_earlier_run(demo_runs):
    out, _, second = demo_runs
    assert second.exit_code == 0
    assert len(list((out / "work").iterdir())) == 2


def test_bad_input_exits_nonzero_without_traceback(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = runner.invoke(app, ["demo", "overview", "--out", str(blocker)])
    assert result.exit_code == 2
    assert str(blocker) in " ".join(result.output.split()).replace(" ", "") or "store" in result.output
    assert "Traceback" not in result.output and blocker.read_text() == "x"
    unnamed = runner.invoke(app, ["demo"])
    assert unnamed.exit_code == 2 and "no demo named" in unnamed.output and "overview" in unnamed.output
    assert runner.invoke(app, ["nonsense"]).exit_code != 0


def test_progress_in_a_log_is_plain_lines_every_five_percent_or_minute(capsys):
    """Where stderr is not a terminal the progress is a plain line per 5% of the work (or per minute), each with
    the share, elapsed time, ETA and the note, none for updates in between; markup is dropped."""
    from resflow.cli.app import plain_progress

    now = [0.0]
    with plain_progress("training", 1000, clock=lambda: now[0]) as update:
        for step in range(0, 1001, 10):  # 101 updates, one second each
            now[0] = float(step // 10)
            update(step, note="[red]loss[/] 1e-3")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 21  # 0%, 5%, ..., 100%
    assert lines[10] == "training: 500/1000 (50%), 0m50s elapsed, ETA 0m50s, loss 1e-3"
    assert lines[-1].startswith("training: 1000/1000 (100%), 1m40s elapsed, loss")
    now[0] = 0.0
    with plain_progress("fitting", None, clock=lambda: now[0]) as update:  # no total: a line per minute
        for second in range(0, 181, 1):
            now[0] = float(second)
            update(second)
    lines = capsys.readouterr().err.splitlines()
    assert [ln.split(",")[0] for ln in lines] == ["fitting: 0", "fitting: 60", "fitting: 120", "fitting: 180"]


def test_the_eta_of_a_resumed_run_counts_only_the_work_done_since_it_resumed(capsys):
    """A run resumed at half its work: the ETA follows the rate since the resume (found when a run resumed at 8%
    printed an ETA of 7 min for 2 h of work)."""
    from resflow.cli.app import plain_progress

    now = [100.0]
    with plain_progress("training", 1000, clock=lambda: now[0]) as update:
        for step in range(500, 1001, 10):  # resumed at 500; one second per 10 steps from there
            now[0] = 100.0 + (step - 500) // 10
            update(step)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "training: 500/1000 (50%), 0m00s elapsed"  # no rate yet, no ETA
    assert lines[1] == "training: 550/1000 (55%), 0m05s elapsed, ETA 0m45s"


def test_a_run_logged_to_a_file_shows_its_progress(tmp_path):
    """The main command with stderr to a file (a log, no terminal) writes progress lines while it trains."""
    log = tmp_path / "log"
    args = ["run", "smooth-vs-rough", "--out", str(tmp_path / "s"), "--device", "cpu"]
    for setting in ("train.steps=40", "train.eval_every=20", "train.eval_batches=1", "train.eval_batch_size=32",
                    "train.batch=16", "width=4", "teacher_depth=8", "depths=2,4", "replicates=1", "routes=scratch",
                    "inits=1", "lengths=0.5,1"):
        args += ["--set", setting]
    with log.open("w") as err:
        done = subprocess.run([sys.executable, "-m", "resflow.cli", *args], stdout=subprocess.DEVNULL, stderr=err,
                              env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    text = log.read_text()
    assert done.returncode == 0, text
    progress = [ln for ln in text.splitlines() if ln.startswith("training: ")]
    assert len(progress) >= 3 and "(100%)" in progress[-1] and "ETA" in " ".join(progress), text


HEAVY = ("torch", "scipy", "xarray")  # seconds to import: a command loads them when it runs, never for help


def test_help_loads_no_heavy_library():
    """`import resflow.cli` and the help of every command load none of torch, scipy, xarray (help answers at once:
    `resflow --help` took 2.3 s when the command modules imported them)."""
    script = f"""
import sys
import resflow.cli
loaded = [m for m in {HEAVY!r} if m in sys.modules]
from typer.testing import CliRunner
for args in ([], ["run"], ["fit"], ["report"], ["demo"], ["bench"], ["sweep"], ["llm-fit"], ["compare"], ["probe"],
             ["intervene"], ["tableaux"], ["theory"], ["store"], ["store", "check"], ["store", "gc"]):
    assert CliRunner().invoke(resflow.cli.app, [*args, "--help"]).exit_code == 0, args
print(loaded, [m for m in {HEAVY!r} if m in sys.modules])
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "[]"], out.stdout
    exe = shutil.which("resflow") or str(__import__("pathlib").Path(sys.executable).parent / "resflow")
    shown = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "Commands" in shown.stdout


def test_the_names_in_help_are_the_registry():
    """Help names experiments and presets without importing them (names.py); they are the registry's."""
    from resflow.cli.names import PRESETS, experiment_names
    from resflow.experiments import registered

    assert experiment_names() == list(registered())
    assert PRESETS == tuple(sorted({p for e in registered().values() for p in e.presets}))


def test_demo_list_shows_whole_descriptions():
    """Each demo's description is its docstring's whole first paragraph, wrapped to the terminal, never cut
    mid-sentence (it showed the first line of the docstring: "... teacher, each with the")."""
    from resflow.demos import DEMOS

    result = runner.invoke(app, ["demo", "--list"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    shown = " ".join(result.output.split())
    assert all(len(line) <= 80 for line in result.output.splitlines())
    for name, function in DEMOS.items():
        first_paragraph = " ".join(function.__doc__.strip().split("\n\n")[0].split())
        assert f"{name} {first_paragraph}" in shown, name
    assert "(branch scale 1/depth)." in shown and shown.startswith("overview ")


def test_every_preset_lists_its_keys_the_fields_of_other_optimisers_marked():
    """``--list-keys`` on an Adam preset listed SOAP's fields by reading them from Adam's settings, and failed."""
    from resflow.cli.names import keys_listing
    from resflow.experiments import registered

    for experiment in registered().values():
        for preset, config in experiment.presets.items():
            listing = keys_listing(config)
            if "train.optimizer.name" in listing and config.train.optimizer.name == "adam":
                assert "(not a field of this optimizer)" in listing, (experiment.name, preset)
