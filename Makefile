# Two commands on a fresh machine (Python 3.11 + pip):  make run  |  make test
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: run test lint typecheck check bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -c "from regimetune.regimes.detector import compile_kernel; compile_kernel()"
	touch $(STAMP)

## run: set up, then run the main job on embedded defaults
run: $(STAMP)
	$(BIN)/regimetune demo

## test: set up, then lint and run the test suite (one worker per core)
test: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/pytest -n auto

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

bench: $(STAMP)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
