"""Teachers by the names a reader knows (smooth, rough), the run figure a reader can read, and the figures of
docs/results.md: each drawn from a record its section cites.

A tiny smooth-vs-rough run (seconds) serves the figure, report and redraw tests.
"""

import json
import re
from pathlib import Path

import pytest

from resflow import ConfigError
from resflow.analysis import Mentions, headline, plot_experiment, separations, series_label, teacher_label
from resflow.presenting.run_figure import standing_text

ROOT = Path(__file__).resolve().parents[1]
TINY = ["train.steps=60", "train.eval_every=20", "train.eval_batches=2", "train.eval_batch_size=128",
        "train.batch=32", "width=8", "teacher_depth=16", "depths=2,4,8", "train.device=cpu", "replicates=2"]
DOCS_WIDTH = 1600  # pixels: the widest figure the docs show at its own size
DOCS_BYTES = 300_000  # the largest figure file kept in the docs


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    import resflow

    out = tmp_path_factory.mktemp("store")
    result = resflow.run_experiment(resflow.preset("smooth-vs-rough", "cpu").with_overrides(TINY), out=out)
    return out, result


@pytest.mark.parametrize(("spec", "first", "after"), [
    ("tied", "smooth (tied)", "smooth"),
    ("independent", "rough (independent)", "rough"),
    ("correlated:0.9", "correlated ρ = 0.9 (correlated:0.9)", "correlated ρ = 0.9"),
    ("fractional:0.75", "fBm H = 0.75 (fractional:0.75)", "fBm H = 0.75"),
    ("grouped:4", "4 groups (grouped:4)", "4 groups"),
    ("grouped:4:0.5", "4 groups, ρ = 0.5 (grouped:4:0.5)", "4 groups, ρ = 0.5"),
    ("rhm:3", "rhm:3", "rhm:3"),
])
def test_a_teacher_is_spelled_out_on_first_mention_and_named_after(spec, first, after):
    assert teacher_label(spec) == first and teacher_label(spec, first=False) == after
    mentions = Mentions()
    assert [mentions(spec), mentions(spec)] == [first, after]


def test_a_series_names_its_teacher_then_what_else_sets_it_apart():
    class Fit:
        target, scheme, student_groups, temperature = "tied", "midpoint", 4, 0.1

    assert series_label(Fit()) == "smooth (tied), midpoint, students of 4 weight groups, T = 0.1"
    mentions = Mentions()
    assert mentions("tied") == "smooth (tied)" and mentions.series(Fit()).startswith("smooth, midpoint")


def _texts(fig) -> list[str]:
    """Every text of a figure: titles, labels, legends, free text."""
    out = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text") and callable(a.get_text))]
    return [t for t in out if isinstance(t, str) and t]


def _legends(ax) -> list[str]:
    from matplotlib.legend import Legend

    return [t.get_text() for legend in ax.findobj(Legend) for t in legend.get_texts()]


def test_the_run_figure_states_the_separation_from_the_fits(tiny_run):
    _, result = tiny_run
    (sep,) = separations(list(result.fits))
    fig = plot_experiment(result.dataset, result.fits)
    texts = _texts(fig)
    verdict = "Smooth vs rough teacher: " + ("smooth is steeper" if sep.steeper else "undecided")
    assert verdict in texts  # the headline's title
    numbers = f"{sep.separation:.2f} [{sep.separation_ci_low:.2f}, {sep.separation_ci_high:.2f}]"
    assert any(t.startswith("α(smooth) − α(rough) = ") and numbers in t for t in texts)
    assert any(f"{sep.separation_law:.2f} [{sep.separation_law_ci_low:.2f}" in t for t in texts)
    for fit in result.fits:  # both exponents, each labelled a bound or an estimate
        assert any(f"α = {fit.exponent:.2f} [{fit.ci_low:.2f}, {fit.ci_high:.2f}]" in t for t in texts)
    standing = [t.strip() for t in texts if t.strip().startswith(("a bound (routes", "certified (routes"))]
    assert len(standing) == len(result.fits)
    assert not any("$" in t for t in texts)  # no raw LaTeX


def test_the_run_figure_has_legends_not_coded_titles(tiny_run):
    _, result = tiny_run
    fig = plot_experiment(result.dataset, result.fits)
    headline_text, chart, loss, curves, angles, lesion = fig.axes
    legend = " | ".join(_legends(loss))
    for what in ("rough (independent): α =", "smooth (tied): α =", "not certified: the loss is a bound",
                 "same student at 0.5× the training", "extrapolated limit (an estimate)", "ensemble law α = 1",
                 "procedural law, coherent α = 2", "procedural law, incoherent α = 3"):
        assert what in legend, what
    assert "hollow" not in loss.get_title() and "stars" not in loss.get_title()
    assert {"rough (independent)", "smooth (tied)"} <= set(_legends(curves)) and "ℓ = 2" in _legends(curves)
    assert {"rough (independent)", "smooth (tied)"} <= set(_legends(angles))
    assert any("ensemble law" in t for t in _legends(chart))
    # the lesion panel is a summary: one line per teacher (the mean over replicates) and a band over them
    teachers = [line for line in lesion.get_lines() if line.get_marker() not in ("None", None, "")]
    assert len(teachers) == result.dataset.sizes["target"]
    assert lesion.collections and "range over 2 replicates (line: their mean)" in _legends(lesion)
    width, height = fig.get_size_inches() * 130  # save_figure's dpi
    assert width <= DOCS_WIDTH and height < 1.25 * DOCS_WIDTH  # a two-teacher run: a grid, not a strip


def test_the_headline_answers_steeper_first_and_calls_certified_exponents_certified():
    from resflow.analysis import fit_dataset
    from test_fitting import certifiable, dataset, power

    fits = fit_dataset(dataset(certifiable({"independent": power(1.0), "tied": power(1.5)}), ["independent", "tied"]))
    title, lines, _ = headline(fits)
    (sep,) = separations(fits)
    assert title == "Smooth vs rough teacher: " + ("smooth is steeper" if sep.steeper else "undecided")
    assert any(line.startswith(sep.answer) for line in lines) and any(sep.gap_text in line for line in lines)
    standing = [line.strip() for line in lines if line.startswith(" ")]
    assert standing == [standing_text(f) for f in fits] and len(standing) == 2
    title, lines, _ = headline([f for f in fits if f.target == "tied"])
    assert title == "Depth exponents" and "no smooth–rough pair" in lines[0]


def test_reports_and_separations_name_smooth_and_rough(tiny_run):
    from resflow.workflows import compare_stores, report_run

    out, result = tiny_run
    text = report_run(out)
    assert "smooth (tied) − rough (independent) α = " in text
    assert "| rough (independent) | " in text and "| smooth (tied) | " in text
    assert "| smooth | continuation |" in text  # a teacher's second row in a table: the reader's word alone
    assert not re.search(r"^\| (tied|independent) \|", text, re.M)
    comparison = compare_stores([out], figure=out / "compare.png")
    assert {r.name for r in comparison.rows if r.source == "toy"} == {"smooth-vs-rough: rough (independent)",
                                                                      "smooth-vs-rough: smooth (tied)"}


def test_a_run_figure_is_redrawn_from_its_record(tiny_run, tmp_path):
    from PIL import Image

    from resflow.workflows import draw_run_figure

    out, result = tiny_run
    drawn = draw_run_figure(out, result.record, path=tmp_path / "figs" / "run.png")
    assert drawn.record == result.record and drawn.fit_record == result.fit_record
    with Image.open(drawn.path) as image:
        assert image.width <= DOCS_WIDTH and image.mode == "P"  # a palette PNG: docs-sized
        provenance = json.loads(image.text["Description"])
    assert provenance["store_record"] == result.record and provenance["fit_record"] == result.fit_record
    with pytest.raises(ConfigError, match="exists; choose a new file, or pass overwrite=True"):
        draw_run_figure(out, result.record, path=drawn.path)
    assert draw_run_figure(out, path=drawn.path, overwrite=True, colours=None).record == result.record
    with pytest.raises(ConfigError, match="no toy-run record 'toy-run--nope'"):
        draw_run_figure(out, "toy-run--nope", path=tmp_path / "x.png")
    with pytest.raises(ConfigError, match="colours must be at most 256"):
        draw_run_figure(out, path=tmp_path / "y.png", colours=1000)


def test_demo_legends_agree_with_their_titles():
    from resflow.demos import smooth_vs_rough, stack_to_ode

    result = smooth_vs_rough(steps=20)
    legend = " ".join(_legends(result.figure.axes[0]))
    assert "smooth" in result.title.lower() and "rough" in result.title.lower()
    assert "smooth (tied) teacher" in legend and "rough (independent) teacher" in legend
    assert "$" not in stack_to_ode(depths=(2, 4, 8)).title  # printed on the console as it is


FIGURE = re.compile(r"!\[([^\]]+)\]\(((?:\.\./)?figures/[^)]+\.png)\)")
CITED = re.compile(r"<!-- record: ([^ ]+)")
RESULTS = [ROOT / "docs" / "results.md", *sorted((ROOT / "docs" / "results").glob("*.md"))]


def _sections(text: str) -> list[str]:
    return re.split(r"^## ", text, flags=re.M)


def test_results_pages_show_figures_of_the_records_their_sections_cite():
    from PIL import Image

    shown = 0
    for page in RESULTS:
        for section in _sections(page.read_text()):
            cited = set(CITED.findall(section)) | set(re.findall(r"`(toy-run--[^`]+)`", section))
            for alt, link in FIGURE.findall(section):
                path = (page.parent / link).resolve()
                assert path.is_file(), (page.name, link)
                assert path.stat().st_size < DOCS_BYTES, (link, path.stat().st_size)
                with Image.open(path) as image:
                    assert image.width <= DOCS_WIDTH, (link, image.width)
                    record = json.loads(image.text["Description"])["store_record"]
                assert record in cited, f"{page.name}: {link} is drawn from {record}, which its section does not cite"
                assert len(alt) > 40, f"{link}: say what the figure shows in its alt text"
                shown += 1
    assert shown >= 4


def test_the_results_first_screen_holds_the_answer_the_figure_and_the_exponents():
    sections = _sections(RESULTS[0].read_text())
    assert sections[1].startswith("The depth exponents across training budgets"), "the first screen: exponents"
    first = sections[1]
    assert first.index("**Decided") < first.index("| run |") < first.index("What is not established")
    assert FIGURE.search(first), "the headline figure is on the first screen"
    pages = [p.relative_to(ROOT / "docs").as_posix() for p in RESULTS[1:]]
    for page in pages:  # every experiment's page is linked from the first page
        assert f"]({page})" in RESULTS[0].read_text(), page
