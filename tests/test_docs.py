"""Every Python example in the README and the docs runs, and prints what the text says it prints.

The ```python blocks of one page run in order in one namespace (a page's examples may build on
each other), in a fresh working directory.  A block followed by a line containing "prints" and
then a plain ``` block must print exactly that block.  Generated pages are checked to be fresh.
"""

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)


def examples(page: Path) -> list[tuple[str, str | None]]:
    """(code, expected output or None) for every python block of a page."""
    text = page.read_text()
    found = []
    matches = list(FENCE.finditer(text))
    for k, match in enumerate(matches):
        if match.group(1) != "python":
            continue
        expected = None
        if k + 1 < len(matches) and matches[k + 1].group(1) == "":
            between = text[match.end():matches[k + 1].start()]
            if "prints" in between:
                expected = matches[k + 1].group(2)
        found.append((match.group(2), expected))
    return found


PAGES_WITH_EXAMPLES = [p for p in PAGES if examples(p)]


def test_the_readme_has_examples():
    assert ROOT / "README.md" in PAGES_WITH_EXAMPLES


@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_run_and_print_what_the_page_says(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for code, expected in examples(page):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"{page.name} example", "exec"), namespace)  # noqa: S102 - our own docs
        if expected is not None:
            assert out.getvalue() == expected


@pytest.mark.parametrize(("page", "module"), [("docs/theory.md", "resflow.theory.render"),
                                              ("docs/experiments.md", "resflow.experiments.render")])
def test_generated_pages_are_up_to_date(page, module):
    import importlib

    render = importlib.import_module(module).render_markdown
    assert (ROOT / page).read_text() == render(), f"regenerate: python -m {module} > {page}"


def _site_nav_paths() -> set[str]:
    import yaml

    def walk(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from walk(value)

    return set(walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]))


def test_every_page_and_notebook_is_in_the_site_navigation():
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    pages |= {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs" / "notebooks").glob("*.py")}
    assert pages - _site_nav_paths() == set(), "add these to the nav in mkdocs.yml"


def test_the_api_reference_covers_every_public_subpackage():
    import ast

    tree = ast.parse((ROOT / "docs" / "_site" / "hooks.py").read_text())
    reference = next(ast.literal_eval(node.value) for node in tree.body
                     if isinstance(node, ast.AnnAssign | ast.Assign) and "REFERENCE" in ast.unparse(node))
    subpackages = {f"resflow.{p.parent.name}" for p in (ROOT / "resflow").glob("*/__init__.py")}
    # the command line is documented by `resflow --help`; sims/ holds experiment declarations (docs/experiments.md)
    public = (subpackages - {"resflow.cli"}) | {"resflow", "resflow.theory", "resflow.laws"}
    assert public - set(reference) == set()


def test_rest_docstrings_become_markdown_with_maths_and_tables():
    from resflow.theory.render import rest_to_markdown

    rest = (":math:`h^2` and :class:`~resflow.Teacher` use ``code``.\n\n"
            "=====  ===========\nname   what\n=====  ===========\n``a``  first line\n"
            "       continued\n``b``  :math:`x_1`\n=====  ===========\n\n"
            ".. math::\n\n    e^{x}\n    + 1\n")
    assert rest_to_markdown(rest) == (
        "$h^2$ and `resflow.Teacher` use `code`.\n\n"
        "| name | what |\n|---|---|\n| `a` | first line continued |\n| `b` | $x_1$ |\n\n"
        "$$\ne^{x} + 1\n$$\n\n")


def test_rest_double_dashes_become_en_dashes_outside_code():
    from resflow.theory.render import rest_to_markdown

    assert rest_to_markdown("Runge--Kutta, 40k--80k, ``--set`` and ``x--y``; a -- b.\n>>> f(a--b)") == (
        "Runge–Kutta, 40k–80k, `--set` and `x--y`; a -- b.\n>>> f(a--b)")


def test_the_theory_page_shows_no_double_dash_between_words():
    """docs/theory.md is Markdown: reST's `--` (an en dash) would show as two hyphens (issue 36)."""
    text = (ROOT / "docs" / "theory.md").read_text()
    prose = re.sub(r"`[^`\n]*`", "``", text)  # commands in code spans keep their --options
    assert not re.findall(r"\w+--\w+", prose) and "Runge–Kutta" in text
