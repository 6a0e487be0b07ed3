# `make demo` and `make test` work on a fresh machine with only Python 3.11+ and make:
# each creates .venv when missing and installs the project into it first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# The authors' published data, used by the reproduction tests and notebook when present.
export LATTE_PUBLISHED_DIR ?= $(abspath ../shared/published)

.PHONY: demo test lint bench figures clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/latte-lab demo

test: $(STAMP)
	MPLBACKEND=Agg $(BIN)/python -m pytest -q -p no:cacheprovider tests notebooks --nbval-lax

lint: $(STAMP)
	$(BIN)/ruff check latte_lab tests benchmarks

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

figures: $(STAMP)
	$(BIN)/latte-lab figures --data $(LATTE_PUBLISHED_DIR) --out figures/

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
