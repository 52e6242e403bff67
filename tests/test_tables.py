"""Tables fit the width they are given (issue 36): `fit`, `run` and `report` at COLUMNS=60 and 100 print no line
longer than that and every number they print at full width; a cell is wrapped between units, never cut."""

import re
from collections import Counter

import pytest
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from resflow.cli import app
from resflow.cli.tables import column_widths, print_table
from resflow.experiments import preset
from resflow.workflows import run_experiment
from resflow.workflows.report import fit_markdown

runner = CliRunner()
TINY = ["train.steps=40", "train.eval_every=20", "train.eval_batches=2", "train.eval_batch_size=64", "train.batch=16",
        "width=6", "teacher_depth=8", "vocab=8", "depths=2,4", "replicates=2", "train.device=cpu", "lengths=0.5,1"]
WIDE = "400"  # wide enough for every table whole: what the narrow output must keep, number for number
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]\d+)?%?")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    out = tmp_path_factory.mktemp("tables")
    run_experiment(preset("smooth-vs-rough", "cpu").with_overrides(TINY), out=out)
    return out


def numbers(text: str) -> Counter:
    return Counter(NUMBER.findall(text))


@pytest.mark.parametrize("command", ["fit", "report"])
@pytest.mark.parametrize("width", [60, 100])
def test_output_fits_the_width_and_keeps_every_number(command, width, store):
    wide = runner.invoke(app, [command, str(store)], env={"COLUMNS": WIDE})
    narrow = runner.invoke(app, [command, str(store)], env={"COLUMNS": str(width)})
    assert wide.exit_code == 0 and narrow.exit_code == 0, narrow.output
    too_long = [line for line in narrow.stdout.splitlines() if cell_len(line) > width]
    assert not too_long, too_long
    assert not numbers(wide.stdout) - numbers(narrow.stdout)  # every number, as often (a list repeats headers)
    assert not re.search(r"\w…", narrow.stdout)  # nothing cut to an ellipsis (as rich cuts: "uncertifi…")


def test_a_table_wraps_between_units_and_becomes_a_list_where_it_cannot():
    table = Table(title="exponents")
    for column in ("series", "α [95%]", "law α [95%]", "certified depths"):
        table.add_column(column)
    table.add_row("independent", "1.30 [-0.88, 4.03]", "0.72 [-1.47, 3.44]", "none")
    whole = column_widths(table, 200)
    assert whole == [11, 18, 18, 16]  # fits: as it is
    assert column_widths(table, 60) is not None and column_widths(table, 40) is None
    for width in (60, 40):
        console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
        print_table(table, console)
        text = console.export_text()
        assert all(cell_len(line) <= width for line in text.splitlines()), text
        assert "[-0.88, 4.03]" in text and "[-1.47, 3.44]" in text  # an interval is never split across lines
    assert "law α [95%]: 0.72 [-1.47, 3.44]" in text  # the list form at 40


def test_markdown_tables_too_wide_become_lists_and_fitting_ones_stay():
    text = "| a | b |\n|---|---|\n| 1 | 2 |\n\n| teacher | α [95%] |\n|---|---|\n| smooth (tied) | 1.43 [-0.04, 3.92] |"
    fitted = fit_markdown(text, 34)
    assert fitted.startswith("| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert "- teacher: smooth (tied)\n  - α [95%]: 1.43 [-0.04, 3.92]" in fitted
    assert fit_markdown(text, 200) == text
    assert fit_markdown(text, 20).endswith("  - α [95%]: 1.43\n    [-0.04, 3.92]")  # an interval stays whole
