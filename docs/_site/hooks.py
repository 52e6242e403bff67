"""MkDocs hooks for the resflow site (``mkdocs.yml``: ``hooks``).

- **Generated pages.**  ``theory.md`` and ``experiments.md`` are rendered afresh from the sympy
  derivations and the experiment registry at every build (the committed copies are checked equal by
  ``tests/test_docs.py``); one API-reference page per public subpackage (mkdocstrings), appended
  to the navigation; the home page's figure is drawn by the demo it names.
- **Maths without a CDN, without JavaScript.**  ``pymdownx.arithmatex`` marks the maths of every
  Markdown page and docstring; here each formula is converted to MathML at build time by
  ``latex2mathml`` (a PyPI package), which browsers render natively.  A formula it cannot convert
  fails the build.  The nbconvert template of notebook pages would load MathJax from a CDN: that
  block is removed (our notebooks write maths in Unicode).
"""

from __future__ import annotations

import re
import tempfile
from html import unescape
from pathlib import Path

from latex2mathml.converter import convert as latex_to_mathml
from mkdocs.structure.files import File, Files

#: Public subpackages, from the foundation up (docs/design/layout.md), with what each holds.
REFERENCE = {
    "resflow": "Everything users need, re-exported",
    "resflow.dynamics": "Flows: tableaux, stepper, stacks",
    "resflow.noise": "Noise along depth and ensembles",
    "resflow.theory": "Symbolic derivations",
    "resflow.laws": "Evaluating the laws",
    "resflow.training": "Teachers, students, engine",
    "resflow.analysis": "Fits, probes, figures: the public names",
    "resflow.fitting": "Exponents, intervals, verdicts",
    "resflow.probing": "Hidden-state metrics, probes, interventions",
    "resflow.presenting": "Tables, figures, the comparison",
    "resflow.llm": "Trained-LLM fits and probes",
    "resflow.store": "The result store",
    "resflow.records": "What each record holds",
    "resflow.experiments": "Experiment configurations",
    "resflow.workflows": "One function per command",
    "resflow.demos": "Classroom demos",
    "resflow.testing": "Hypothesis strategies and law checks",
}
#: The figure on the home page and the demo that draws it (``resflow demo stack_to_ode``).
HOME_FIGURE = ("assets/figures/stack_to_ode.png", "stack_to_ode")
_ARITHMATEX = re.compile(
    r'<span class="arithmatex">\\\((.*?)\\\)</span>|<div class="arithmatex">\\\[(.*?)\\\]</div>', re.S
)
_NBCONVERT_MATHJAX = re.compile(
    r'<!-- Load mathjax -->\s*<script src="RESFLOW-MATHJAX-URL">\s*</script>.*?<!-- End of mathjax configuration -->',
    re.S,
)


def reference_page(module: str) -> str:
    return f"reference/{module.removeprefix('resflow.').replace('resflow', 'index')}.md"


def on_config(config):
    config.nav.append({"API reference": [{module: reference_page(module)} for module in REFERENCE]})
    return config


def _demo_png(name: str) -> bytes:
    from resflow.demos import run_demo

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.png"
        run_demo(name, seed=0).save(path)  # with the provenance footer
        return path.read_bytes()


def on_files(files: Files, config) -> Files:
    from resflow.experiments.render import render_markdown as experiments_md
    from resflow.theory.render import render_markdown as theory_md

    for src_uri, render in (("theory.md", theory_md), ("experiments.md", experiments_md)):
        files.remove(files.get_file_from_path(src_uri))
        files.append(File.generated(config, src_uri, content=render()))
    for module in REFERENCE:
        # theory/ is installed as resflow.theory but lives at the top of the repository (layout.md)
        source = module.removeprefix("resflow.") if module == "resflow.theory" else module
        page = f"# `{module}` — {REFERENCE[module]}\n\n::: {source}\n    options:\n      show_root_heading: false\n"
        files.append(File.generated(config, reference_page(module), content=page))
    files.append(File.generated(config, HOME_FIGURE[0], content=_demo_png(HOME_FIGURE[1])))
    return files


def mathml(match: re.Match) -> str:
    inline, block = match.groups()
    latex = unescape(inline if inline is not None else block).strip()
    try:
        converted = latex_to_mathml(latex, display="inline" if inline is not None else "block")
    except Exception as error:  # noqa: BLE001 - reported with the formula, and the build stops
        raise RuntimeError(f"latex2mathml cannot convert {latex!r}: {error}") from error
    if "<mi>\\" in converted or "<mo>\\" in converted:  # an unknown command is kept as text, not refused
        raise RuntimeError(f"latex2mathml does not know a command in {latex!r}: {converted}")
    return converted if inline is not None else f'<div class="arithmatex">{converted}</div>'  # scrolls if wide


def on_page_content(html: str, page, config, files) -> str:
    return _ARITHMATEX.sub(mathml, html)


def on_post_page(output: str, page, config) -> str:
    if page.file.src_uri.startswith("notebooks/"):
        output, n = _NBCONVERT_MATHJAX.subn("", output)
        if n != 1:
            raise RuntimeError(f"{page.file.src_uri}: nbconvert's MathJax block not found ({n}); update hooks.py")
    return output
