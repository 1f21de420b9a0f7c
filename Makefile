# stateward — the two commands of the README, and the checks.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo serve test lint check bench docs

$(BIN)/stateward: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $(BIN)/stateward

setup: $(BIN)/stateward

# Start the server on SQLite (./stateward.db) with the example workflows and a ready token.
# `make demo PORT=8001` picks the port (the same as STATEWARD_PORT=8001; default 8000).
PORT ?=
demo: setup
	$(if $(PORT),STATEWARD_PORT=$(PORT) )$(BIN)/stateward serve --demo

# Run the whole test suite (PostgreSQL/Redis tests run when STATEWARD_TEST_POSTGRES_URL /
# STATEWARD_TEST_REDIS_URL are set, as .ci/run does; they skip with a reason otherwise).
# Two pytest-xdist workers by default (most tests wait on real servers and databases, so two
# workers halve the wall time on two cores); `make test TEST_WORKERS=0` runs them in one process.
TEST_WORKERS ?= 2
test: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy stateward
	$(BIN)/lint-imports

check: lint test

bench: setup
	for b in engine store api sla limits; do $(BIN)/python bench/$$b.py --quick || exit 1; done

# Build the documentation site into site/ (strict: broken links and warnings fail the build).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
