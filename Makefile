# `make demo` and `make test` work on a fresh machine with only Python 3.11+ and make:
# each creates .venv when missing and installs the project into it first.
# The authors' published data ships in latte_lab/data/published; set LATTE_PUBLISHED_DIR to use another copy.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test lint bench figures sensitivity clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/latte-lab demo

# The doctests of every latte_lab module (conftest.py leaves the task payloads out) in a process of their
# own, so that what test modules register at import cannot show in them; then the tests and the notebooks.
test: $(STAMP)
	MPLBACKEND=Agg $(BIN)/python -m pytest -q -p no:cacheprovider --doctest-modules latte_lab
	MPLBACKEND=Agg $(BIN)/python -m pytest -q -p no:cacheprovider tests notebooks --nbval-lax

lint: $(STAMP)
	$(BIN)/ruff check latte_lab tests benchmarks

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

figures: $(STAMP)
	$(BIN)/latte-lab figures --out figures/   # $$LATTE_PUBLISHED_DIR, else the bundled published data

# The sensitivity study behind notebook 05 (hours of compute; resumable): reruns every trial not yet under
# runs/sensitivity and rewrites latte_lab/data/sensitivity.csv, which the notebook and its tests read.
sensitivity: $(STAMP)
	$(BIN)/python -m latte_lab.analysis.sensitivity --seeds 10 --jobs 2 --out runs/sensitivity

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
