"""The command line's first hour: one error format for every failure, the closest names first, Ctrl-C at any
moment without a traceback, nothing printed before the input is checked (issue 36)."""

import io
import subprocess
import sys
import types

import pytest
from rich.console import Console
from typer.testing import CliRunner

from resflow import UnknownNameError
from resflow.cli import app
from resflow.errors import FEW_NAMES, did_you_mean

runner = CliRunner()


def one_error_line(result) -> str:
    """The output of a refused command: exactly one line, ``error: ...``, exit 2, no usage block or traceback."""
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Usage:" not in result.output and "Try '" not in result.output and "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize(("args", "says"), [
    (["run", "smooth-vs-rough", "--replicates", "abc"], ["--replicates:", "'abc'", "resflow run --help"]),
    (["run", "smooth-vs-rough", "--replicates", "0"], ["--replicates:", "'0'"]),
    (["demo", "overview", "--seed", "x"], ["--seed:", "'x'", "resflow demo --help"]),
    (["bench", "--rounds", "1.5"], ["--rounds:", "'1.5'"]),
    (["run", "smooth-vs-rough", "--device", "tpu"], ["--device:", "choose auto, cpu or cuda"]),
    (["run", "smooth-vs-rough", "--replicate", "3"], ["--replicate", "did you mean --replicates?"]),
    (["tableaux", "--jsn"], ["did you mean --json?", "resflow tableaux --help"]),
    (["rn"], ["no such command 'rn'", "did you mean 'run'?", "resflow --help"]),
    (["store", "chek", "x"], ["did you mean 'check'?", "resflow store --help"]),
    (["fit"], ["missing argument", "resflow fit --help"]),
    (["store", "check"], ["missing argument", "resflow store check --help"]),
    (["probe", "teacher:tied", "--texts", "/nonexistent/texts.txt"], ["--texts:", "/nonexistent/texts.txt"]),
])
def test_a_typed_option_fails_like_every_other_error(args, says):
    """Click's own refusals (a bad type, a range, an unknown option or command, a missing argument) are one line
    in resflow's format naming the argument, exit 2 -- not click's usage block of three lines."""
    line = one_error_line(runner.invoke(app, args))
    for part in says:
        assert part in line, line


def test_a_resflow_error_and_a_click_error_look_alike():
    ours = one_error_line(runner.invoke(app, ["run", "nope"]))
    clicks = one_error_line(runner.invoke(app, ["run", "smooth-vs-rough", "--replicates", "x"]))
    assert ours.split(" ")[0] == clicks.split(" ")[0] == "error:"


def test_no_arguments_still_print_the_help():
    for args in ([], ["store"]):
        result = runner.invoke(app, args)
        assert "Usage:" in result.output and "Commands" in result.output and "error:" not in result.output


@pytest.mark.parametrize(("args", "suggestion", "whole_list"), [
    (["run", "smooth-vs-rough", "--set", "replicate=3"], "did you mean 'replicates'", "--list-keys"),
    (["run", "smooth-vs-rough", "--set", "train.step=3"], "did you mean 'train.steps'", "--list-keys"),
    (["sweep", "smooth-vs-rough", "--grid", "widht=2,4"], "did you mean 'width'", "--list-keys"),
    (["run", "smooth-vs-ruff"], "did you mean 'smooth-vs-rough'", "compositional"),
    (["run", "smooth-vs-rough", "--preset", "cpu-certifed"], "did you mean 'cpu-certified'", "paper"),
    (["run", "smooth-vs-rough", "--set", "targets=tide"], "did you mean 'tied'", "'correlated:RHO'"),
    (["run", "smooth-vs-rough", "--set", "schemes=rk5"], "did you mean 'rk3' or 'rk4'?", "midpoint"),
    (["theory", "local-eror"], "did you mean 'local-error'", "resflow theory"),
    (["demo", "stack-to-ode"], "did you mean 'stack_to_ode'", "overview"),
])
def test_an_unknown_name_gets_the_closest_names_first(args, suggestion, whole_list):
    line = one_error_line(runner.invoke(app, args))
    assert suggestion in line and whole_list in line, line
    assert line.index(suggestion) < line.index(whole_list)  # the closest first, then the rest or where it is


def test_a_long_list_is_not_printed_in_an_error():
    """42 --set keys or 31 laws: the error names the closest and where the list is, not all of them."""
    keys = one_error_line(runner.invoke(app, ["run", "smooth-vs-rough", "--set", "replicate=3"]))
    assert "train.cuda_graphs" not in keys and "resflow run EXPERIMENT --list-keys" in keys and len(keys) < 200
    law = one_error_line(runner.invoke(app, ["theory", "local-eror"]))
    assert "trace-flow" not in law and len(law) < 200
    nothing_close = one_error_line(runner.invoke(app, ["run", "smooth-vs-rough", "--set", "zzz=1"]))
    assert "did you mean" not in nothing_close and "--list-keys" in nothing_close


def test_did_you_mean_shows_a_short_list_whole_and_a_long_one_by_where_it_is():
    few = [chr(ord("a") + i) * 5 for i in range(FEW_NAMES)]  # aaaaa, bbbbb, ...
    assert did_you_mean("aaaab", few) == f"; did you mean 'aaaaa'? (choose one of {', '.join(few)})"
    many = few + ["other"]
    assert did_you_mean("aaaab", many, listing="`x --list`") == f"; did you mean 'aaaaa'? (all {len(many)} are " \
                                                               "listed by `x --list`)"
    assert did_you_mean("zzz", many, listing="`x --list`") == f"; all {len(many)} are listed by `x --list`"
    assert did_you_mean(3, ["a"]) == "; choose one of a"  # not a string: nothing to compare
    assert did_you_mean("steps", ["train.steps", "train.dtype"]).startswith("; did you mean 'train.steps'?")
    assert did_you_mean("train.stepz", ["train.steps", "train.dtype", "train.tf32"]).startswith(
        "; did you mean 'train.steps'? (")  # only the clearly closest, not every name within the cutoff
    error = UnknownNameError.of("widget", "gizmo", ["gadget", "gizmos"])
    assert isinstance(error, UnknownNameError) and str(error).startswith("unknown widget 'gizmo'; did you mean 'gizmos'")


def test_the_library_suggests_names_too():
    """The same suggestions for a Python user: a choice of a config, a correlation spec, a law."""
    from resflow import TrainConfig, laws, parse_correlation

    with pytest.raises(UnknownNameError, match=r"loss must be one of .*; got 'mes' \(str\); did you mean 'mse'\?"):
        TrainConfig(loss="mes")
    with pytest.raises(UnknownNameError, match=r"unknown correlation 'tide' \(did you mean 'tied'\?\); use"):
        parse_correlation("tide")
    with pytest.raises(UnknownNameError, match="unknown law name 'local-eror'; did you mean 'local-error'"):
        laws.derivation("local-eror")


def test_list_keys_lists_every_key_set_takes_with_the_preset_value():
    from resflow.experiments import config_keys, preset

    result = runner.invoke(app, ["run", "smooth-vs-rough", "--list-keys"])
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split()[-1] for line in result.output.splitlines()}
    assert set(rows) == set(config_keys())
    config = preset("smooth-vs-rough", "cpu")
    assert rows["replicates"] == str(config.replicates) and rows["train.steps"] == str(config.train.steps)
    assert rows["depths"] == ",".join(map(str, config.depths))
    assert config.with_overrides([f"depths={rows['depths']}"]).depths == config.depths  # as --set takes it


def test_resume_without_an_interrupted_run_says_so_before_any_header(tmp_path):
    """The refusal comes first and alone: no "smooth-vs-rough (cpu): ..." header above it."""
    result = runner.invoke(app, ["run", "smooth-vs-rough", "--resume", "--out", str(tmp_path / "none")])
    line = one_error_line(result)
    assert "no interrupted" in line and "smooth-vs-rough (cpu)" not in result.output


def test_llm_fit_refuses_a_bad_table_before_any_progress_bar(tmp_path, monkeypatch):
    """On a terminal, a table missing its columns is one error line; no 'fitting 0%' bar is drawn above it."""
    cli_app = sys.modules["resflow.cli.app"]  # the module (resflow.cli.app the attribute is the Typer app)

    screen = io.StringIO()
    monkeypatch.setattr(cli_app, "err_console", Console(file=screen, force_terminal=True, width=120))
    table = tmp_path / "table.csv"
    table.write_text("a,b\n1,2\n")
    result = runner.invoke(app, ["llm-fit", "--data", str(table), "--out", str(tmp_path / "s")])
    assert result.exit_code == 2, result.output
    assert "error:" in screen.getvalue() and "has no column" in screen.getvalue()
    assert "fitting" not in screen.getvalue() and "%" not in screen.getvalue(), screen.getvalue()


def test_a_progress_bar_appears_at_the_first_update(monkeypatch):
    cli_app = sys.modules["resflow.cli.app"]  # the module (resflow.cli.app the attribute is the Typer app)

    screen = io.StringIO()
    monkeypatch.setattr(cli_app, "err_console", Console(file=screen, force_terminal=True, width=120))
    with cli_app.progress_bar("fitting", 2) as update:
        assert "fitting" not in screen.getvalue()
        update(1)
    assert "fitting" in screen.getvalue()


class Interrupting(types.ModuleType):
    """A module whose every name raises KeyboardInterrupt: Ctrl-C while a command imports its libraries."""

    def __getattr__(self, name):
        raise KeyboardInterrupt


@pytest.mark.parametrize("args", [["report", "STORE"], ["fit", "STORE"], ["store", "check", "STORE"]],
                         ids=" ".join)
def test_ctrl_c_while_a_command_imports_exits_130_with_one_line(args, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "resflow.workflows", Interrupting("resflow.workflows"))
    try:
        result = runner.invoke(app, [str(tmp_path) if a == "STORE" else a for a in args])
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped the command line (a traceback for the user)")
    assert result.exit_code == 130, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interrupted") and "Traceback" not in result.output


def test_ctrl_c_while_the_arguments_are_read_exits_130_with_one_line(monkeypatch):
    """Between building the commands and running one (click reads the arguments): one line too, not silence."""
    from typer.core import TyperGroup

    def interrupted(self, ctx, args):
        raise KeyboardInterrupt

    monkeypatch.setattr(TyperGroup, "parse_args", interrupted)
    try:
        result = runner.invoke(app, ["tableaux"])
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped the command line (a traceback for the user)")
    assert result.exit_code == 130
    assert result.output.strip().splitlines() == ["interrupted while the command line loaded; nothing was done"]


def test_ctrl_c_while_the_commands_are_built_exits_130_with_one_line(monkeypatch, capsys):
    """typer reads the commands' annotations (help text, experiment names) when `resflow` starts, before any
    command runs: Ctrl-C there is one line and exit 130 too (it was a traceback, found by sending SIGINT)."""
    from resflow.cli import main

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(sys.modules["resflow.cli.simulate"], "experiment_names", interrupted)
    monkeypatch.setattr(sys, "argv", ["resflow", "--help"])
    with pytest.raises(SystemExit) as exited:
        try:
            main()
        except KeyboardInterrupt:
            pytest.fail("Ctrl-C escaped the command line (a traceback for the user)")
    assert exited.value.code == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["interrupted while the command line loaded; nothing was done"]


def test_ctrl_c_while_the_command_line_loads_exits_130_with_one_line():
    """Ctrl-C while `resflow` imports its command modules (as the console script does: `from resflow.cli import
    main`) prints one line and exits 130, not a KeyboardInterrupt traceback."""
    script = """
import sys

class Interrupt:  # Ctrl-C just as resflow.cli.listing is imported
    def find_spec(self, name, path=None, target=None):
        if name == "resflow.cli.listing":
            raise KeyboardInterrupt

sys.meta_path.insert(0, Interrupt())
from resflow.cli import main
sys.exit(main())
"""
    done = subprocess.run([sys.executable, "-c", script, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines() == ["interrupted while the command line loaded; nothing was done"]
    assert done.stdout == ""
