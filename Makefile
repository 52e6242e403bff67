# resflow: the README's two commands are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU build by default; for a GPU run `make demo TORCH=torch` (a CUDA build, several GB).
TORCH  ?= torch==2.13.0

.PHONY: demo test test-slow install install-dev lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e ".[dev,llm]"
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: install
	$(BIN)/resflow run smooth-vs-rough --preset cpu --out results

test: install-dev
	$(BIN)/ruff check resflow theory sims tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -m "not slow" -n 2 -q

test-slow: install-dev
	HYPOTHESIS_PROFILE=slow $(BIN)/python -m pytest -m slow -q
	HYPOTHESIS_PROFILE=slow $(BIN)/python -m pytest tests/properties -q

lint: install-dev
	$(BIN)/ruff check resflow theory sims tests benchmarks
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) results .pytest_cache .hypothesis
