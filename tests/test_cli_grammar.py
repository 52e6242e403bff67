"""The command-line grammar of docs/cli.md, checked on every command (walked from the Typer app), and the
docs/cli.md's command block checked against the commands' own options."""

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from resflow.cli import app
from resflow.experiments import registered

ROOT = Path(__file__).resolve().parents[1]
WORK_COMMANDS = {"run", "sweep", "bench", "probe", "intervene"}  # the commands that train, time or run models


def commands(group=None, prefix: tuple[str, ...] = ()):
    """(path, command) for every leaf command of the app (Typer's own click objects: duck-typed)."""
    group = group or typer.main.get_command(app)
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from commands(command, prefix + (name,))
        else:
            yield prefix + (name,), command


ALL = dict(commands())


def options(command) -> dict:
    return {opt: p for p in command.params if p.param_type_name == "option" for opt in p.opts}


def test_the_walk_sees_every_command():
    assert {" ".join(p) for p in ALL} >= {"run", "fit", "demo", "bench", "sweep", "llm-fit", "compare", "probe",
                                          "tableaux", "theory", "store check", "store gc"}


@pytest.mark.parametrize("path", sorted(ALL), ids=" ".join)
def test_every_command_follows_the_grammar(path):
    command, opts = ALL[path], options(ALL[path])
    name = " ".join(path)
    if path[-1] in WORK_COMMANDS:  # one --device, the same everywhere work runs
        device = opts.get("--device")
        assert device is not None, f"{name} has no --device"
        assert device.metavar == "[auto|cpu|cuda]" and device.default == "auto", name
    else:
        assert "--device" not in opts, f"{name} takes --device but runs no work; add it to WORK_COMMANDS"
    if "--json" in opts:  # an on/off flag for machine output on stdout, never a path
        assert opts["--json"].is_flag, f"{name}: --json must be a flag"
    if "--out" in opts:  # always a store
        out = opts["--out"]
        assert str(out.default) == "results" and "store" in (out.help or "").lower(), name
    for param in command.params:  # on/off options are flags, shown without a value
        if param.param_type_name == "option" and param.bare_type() == "bool":
            assert param.is_flag and not param.metavar, (name, param.name)
    if "--preset" in opts:  # the choices come from the registry
        presets = {p for e in registered().values() for p in e.presets}
        assert all(p in opts["--preset"].help for p in presets), (name, opts["--preset"].help)


@pytest.mark.parametrize("args", [["run", "smooth-vs-rough"], ["sweep", "smooth-vs-rough"], ["bench"],
                                  ["probe", "teacher:tied"]], ids=lambda a: a[0])
def test_every_work_command_refuses_an_unknown_device_before_working(args, tmp_path):
    result = CliRunner().invoke(app, [*args, "--device", "tpu", "--out", str(tmp_path / "s")])
    assert result.exit_code == 2 and "choose auto, cpu or cuda" in result.output and not (tmp_path / "s").exists()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a GPU is here: cuda is a valid device")
@pytest.mark.parametrize("args", [["probe", "teacher:tied"], ["intervene", "teacher:tied"]], ids=lambda a: a[0])
def test_a_teacher_command_refuses_cuda_without_a_gpu_and_writes_nothing(args, tmp_path):
    """probe and intervene refuse --device cuda on a machine without a GPU, as run and bench do (they used to
    exit 0 having run on the CPU, the record saying nothing of the device)."""
    result = CliRunner().invoke(app, [*args, "--device", "cuda", "--out", str(tmp_path / "s")])
    assert result.exit_code == 2 and "no CUDA device" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "s").exists()


def test_a_probe_record_says_where_it_ran(tmp_path):
    import json

    from resflow.store import Store

    result = CliRunner().invoke(app, ["probe", "teacher:tied", "--device", "cpu", "--out", str(tmp_path / "s")])
    assert result.exit_code == 0, result.output
    store = Store.open(tmp_path / "s")
    [record] = store.records(kind="probe")
    assert json.loads(store.attrs(record)["config"])["device"] == {"teachers": "cpu", "models": "cpu"}


def test_help_shows_flags_as_flags():
    text = CliRunner().invoke(app, ["probe", "--help"], env={"COLUMNS": "120"}).output
    assert re.search(r"--json\s+Machine", text) and "<bool>" not in text and "--bf16" in text


def test_run_list_names_every_experiment_and_preset():
    result = CliRunner().invoke(app, ["run", "--list"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    for name, experiment in registered().items():
        assert name in result.output and all(p in result.output for p in experiment.presets), name
    cost = registered()["smooth-vs-rough"].costs["cpu"]  # what the main job cost here, as measured
    assert cost.split(" (")[0] in " ".join(result.output.split())
    missing = CliRunner().invoke(app, ["run"])
    assert missing.exit_code == 2 and "resflow run --list" in " ".join(missing.output.split())


def command_block() -> list[str]:
    """docs/cli.md's command block (the fenced block that starts with `resflow --help`), joined lines."""
    text = (ROOT / "docs" / "cli.md").read_text()
    block = re.search(r"```\n(resflow --help.*?)```", text, re.S).group(1)
    lines = []
    for line in block.splitlines():
        code = line.split("#", 1)[0].rstrip()
        if code.startswith("resflow "):
            lines.append(code)
        elif code.strip() and lines:  # a continuation line
            lines[-1] += " " + code.strip()
    return lines


def test_the_cli_page_command_block_matches_the_commands():
    lines = command_block()
    shown = set()
    for line in lines:
        words = line.split()[1:]
        path = next((p for p in sorted(ALL, key=len, reverse=True) if tuple(words[:len(p)]) == p), None)
        if path is None:
            assert words[0].startswith("--"), f"docs/cli.md names no command in {line!r}"
            continue
        shown.add(path)
        opts = options(ALL[path])
        for flag in re.findall(r"(--[a-z][a-z0-9-]*)", line):
            assert flag in opts or flag == "--help", f"docs/cli.md: {' '.join(path)} has no option {flag}"
    assert shown == set(ALL), f"docs/cli.md's block omits {sorted(' '.join(p) for p in set(ALL) - shown)}"
