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

# pytest: a worker a core, at most 4 (the demo's one run is the longest file: more workers wait for it and
# hold PostgreSQL connections); a file's tests share one worker, and so their module fixtures.
test: $(STAMP)
	$(BIN)/ruff check bot handlers runners tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest -n auto --maxprocesses 4 --dist loadfile

bench: $(STAMP)
	$(BIN)/python benchmarks/plan_bench.py
	$(BIN)/python benchmarks/pick_bench.py
	$(BIN)/python benchmarks/webhook_bench.py

clean:
	rm -rf $(VENV) build *.egg-info
