# resflow: the README's two commands are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU build by default; for a GPU run `make demo TORCH=torch` (a CUDA build, several GB).
TORCH  ?= torch==2.13.0

# `make docs` executes the notebooks in their fast mode; `make docs DOCS_FAST=0` runs them in full.
DOCS_FAST ?= 1

.PHONY: demo test test-slow install install-dev lint docs chromium clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e ".[dev,llm,docs]"
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: install
	$(BIN)/resflow run smooth-vs-rough --preset cpu --out results

test: install-dev docs chromium
	$(BIN)/ruff check resflow theory sims tests benchmarks docs/_site
	$(BIN)/lint-imports
	RESFLOW_SITE_DIR=site $(BIN)/python -m pytest -m "not slow" -n 2 -q --durations=25

# The documentation site, built into site/ with --strict (warnings are errors).
docs: install-dev
	NO_MKDOCS_2_WARNING=1 RESFLOW_NOTEBOOK_FAST=$(DOCS_FAST) $(BIN)/mkdocs build --strict --quiet

# Debian's chromium for tests/test_site.py, installed when missing (needs root or sudo); without it
# the site test skips, unless RESFLOW_REQUIRE_BROWSER=1 (.ci/run) makes that a failure.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { command -v apt-get >/dev/null 2>&1 && \
	    { if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	      $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; } ; } || \
	  echo "make: could not install chromium (apt-get install chromium); the site test will skip" >&2

test-slow: install-dev
	HYPOTHESIS_PROFILE=slow $(BIN)/python -m pytest -m slow -q
	HYPOTHESIS_PROFILE=slow $(BIN)/python -m pytest tests/properties tests/test_fuzz.py -q

lint: install-dev
	$(BIN)/ruff check resflow theory sims tests benchmarks docs/_site
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) results site build/site-screenshots .pytest_cache .hypothesis
