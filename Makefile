# One entry point for people and CI. Everything installs from this repository's own files:
# a virtualenv from pyproject.toml, the control-plane binaries from their Go modules
# (e2e/build.sh, cached outside the repository).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_FLAGS ?=

.PHONY: venv lint unit binaries e2e test demo bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

venv: $(BIN)/.installed

lint: venv
	$(BIN)/ruff check .
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest tests -p no:cacheprovider $(PYTEST_FLAGS)

binaries:
	bash e2e/build.sh

e2e: venv binaries
	$(BIN)/pytest e2e -p no:cacheprovider $(PYTEST_FLAGS)

# The test command of the README and of CI.
test: lint unit e2e

# The main job: a local control plane, the operator, a fan-out/fan-in PipelineRun, a verdict.
demo: venv binaries
	$(BIN)/python -m e2e.demo

bench: venv
	$(BIN)/python -m bench.admission

clean:
	rm -rf $(VENV) build *.egg-info
