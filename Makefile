# The two quick-start commands: `make demo` and `make test`. Both create the venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/sluice demo

test: $(STAMP)
	$(BIN)/ruff check bot handlers runners tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest -n auto --dist loadfile  # a worker a core; a file's tests share one worker (and its module fixtures)

bench: $(STAMP)
	$(BIN)/python benchmarks/plan_bench.py
	$(BIN)/python benchmarks/pick_bench.py
	$(BIN)/python benchmarks/webhook_bench.py

clean:
	rm -rf $(VENV) build *.egg-info
