# `make demo` and `make test` work on a fresh machine with only Python 3.11+ and make: each creates .venv
# when missing and installs the locked environment (uv.lock, every extra) into it first. uv does the
# installing; it is bootstrapped into .venv with pip, at the version pinned in pyproject's dev dependency group.
# After changing dependencies in pyproject.toml, run `make lock` and commit uv.lock with the change.
# The authors' published data ships in latte_lab/data/published; set LATTE_PUBLISHED_DIR to use another copy.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
UV     := $(BIN)/uv
UV_VERSION := $(shell sed -n 's/.*"uv==\([^"]*\)".*/\1/p' pyproject.toml)
export UV_PROJECT_ENVIRONMENT := $(VENV)
export NO_MKDOCS_2_WARNING := 1  # mkdocs-material's notice about a future MkDocs, printed on every build

.PHONY: demo test test-fast test-lowest data-contract lint bench compare-waits figures docs docs-numbers lock lab sensitivity clean class calibrate validate-sim

$(UV):
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@test -n "$(UV_VERSION)" || { echo 'pyproject.toml pins no "uv==<version>" in the dev dependency group' >&2; exit 1; }
	$(BIN)/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)

# --locked: refuse to install when uv.lock no longer matches pyproject.toml, rather than resolve anew.
# uv writes no bytecode; the packages that sandboxed runs import are compiled here (every run is a fresh
# interpreter, and inside bubblewrap a read-only one: without .pyc files each test run compiled pytest).
$(STAMP): pyproject.toml uv.lock | $(UV)
	@$(UV) sync --locked --all-extras --quiet || { \
	  echo "make: uv.lock does not match pyproject.toml (or could not be installed); run 'make lock'," \
	       "then commit uv.lock with the dependency change" >&2; exit 1; }
	@$(BIN)/python latte_lab/sandbox/bytecode.py
	@sh .ci/bubblewrap
	@touch $(STAMP)

# Refresh uv.lock after editing dependencies in pyproject.toml; `make lock UPGRADE=1` also moves every
# package to its newest allowed version.
lock: | $(UV)
	$(UV) lock $(if $(UPGRADE),--upgrade)

demo: $(STAMP)
	$(BIN)/latte-lab demo

# The test processes keep compiled bytecode even where PYTHONDONTWRITEBYTECODE is set: uv installs no .pyc
# files, and without them every fresh interpreter the suite starts (notebook kernels, CLI runs, the
# two-process checks) compiles pandas, scipy and matplotlib anew, seconds of CPU each time.
# TEST_WORKERS: pytest-xdist processes (each test file runs whole on one of them, so module fixtures
# such as the JupyterLab server and the Ray cluster start once); 0 runs everything in this process.
# The longest files go first (the browser test, then the files with tests marked slow: tests/conftest.py orders
# them; --no-loadscope-reorder keeps xdist from reordering files by their number of tests) so that no worker
# starts one at the end; the documentation site's build alone goes last, since it shows the notebooks as the
# browser test ran them rather than run them again.
# Three on 2 cores: a good part of the suite waits rather than computes (kernels and JupyterLab starting,
# chromium, fresh interpreters, Ray), and a third worker fills those waits: 267 s against 285-348 s with two.
TEST_WORKERS ?= 3
# seconds one notebook cell may take (the slowest takes about 30 s on an idle machine)
CELL_TIMEOUT := 300
PYTEST := env -u PYTHONDONTWRITEBYTECODE MPLBACKEND=Agg $(BIN)/python -m pytest -q -p no:cacheprovider
# PYTEST_ARGS: more pytest options for the suite, e.g. make test PYTEST_ARGS="--durations=30"
SUITE  := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests/browser notebooks tests --nbval-lax \
          --nbval-cell-timeout=$(CELL_TIMEOUT) \
          $(PYTEST_ARGS)

# Two jobs at once: the doctests of every latte_lab module (conftest.py leaves the task payloads out) and of
# the documentation's pages (DOC_PAGES: every number a page shows from code is a >>> example's output;
# docs/conftest.py runs them in a temporary folder, one trial per config), in the background with its output
# kept until the end, and the tests and the notebooks in the foreground. The doctests run in a process of
# their own, so that what test modules register at import cannot show in them. When a change moves what the
# pages' examples print (the simulated model's numbers), `make docs-numbers` rewrites them.
# The documentation site is built strictly (a broken link or a missing docstring reference fails it), with
# every notebook run, by tests/package/test_docs_site.py inside the suite. Every test has a time limit (pyproject's
# [tool.pytest.ini_options] timeout). The target fails if either fails, and prints the doctests' output if
# they did.
DOC_PAGES := docs/*.md docs/concepts/*.md docs/api/cli.md
DOCTESTS := --doctest-modules latte_lab --doctest-glob='*.md' $(DOC_PAGES)
test: $(STAMP)
	@$(PYTEST) $(DOCTESTS) > $(VENV)/doctests.log 2>&1 & doctests=$$!; \
	  $(PYTEST) $(SUITE); status=$$?; \
	  if wait $$doctests; then echo "doctests: $$(tail -n 1 $(VENV)/doctests.log)"; \
	  else cat $(VENV)/doctests.log >&2; echo "make: the doctests failed (see above)" >&2; status=1; fi; \
	  exit $$status

# The same suite without the tests marked slow (the notebooks, the browser test, the Ray cluster, the wheel
# install, the checks across fresh interpreters): a quick check while editing; `make test` is the one that counts.
test-fast: $(STAMP)
	$(PYTEST) $(DOCTESTS)
	$(PYTEST) $(SUITE) -m "not slow"

# The lowest versions pyproject.toml allows (uv --resolution lowest-direct: every direct dependency at its lower
# bound, the core, the openai, anthropic and parquet extras, and the test tools), in a venv of their own
# (.venv-lowest, made anew each time), running the quick tests of the core, the providers' SDKs, the run
# directory, sweeps, the command line and the analysis: the lower bounds are tested versions. CI runs it beside
# make test. About two minutes the first time on two cores (the downloads), then one.
LOWEST := .venv-lowest
LOWEST_TESTS := tests/graph/test_graph.py tests/teams/test_actions.py tests/trial/test_events.py tests/rundir/test_rundir.py \
                tests/rundir/test_data_contract.py tests/package/test_packaging.py tests/trial/test_trial_runner.py tests/sweep/test_sweep.py \
                tests/models/test_models_providers.py tests/models/test_models_key_routing.py tests/trial/test_trial_real_provider.py \
                tests/models/test_models_cache.py tests/sandbox/test_sandbox_pytest.py tests/cli/test_cli.py tests/cli/test_cli_runs.py \
                tests/analysis/test_analysis_published.py tests/analysis/test_analysis_own.py tests/package/test_api_docstrings.py
test-lowest: | $(UV)
	rm -rf $(LOWEST)
	env -u VIRTUAL_ENV $(UV) venv -q --python $(BIN)/python $(LOWEST)
	env -u VIRTUAL_ENV $(UV) pip install -q --python $(LOWEST)/bin/python --resolution lowest-direct \
	  -e '.[openai,anthropic,parquet]' 'hypothesis>=6.90' 'pytest-timeout>=2.2' 'pytest-xdist>=3.5'
	@$(LOWEST)/bin/python -c "import importlib.metadata as m; print('lowest:', ', '.join(f'{p} {m.version(p)}' \
	  for p in ('numpy', 'pandas', 'networkx', 'matplotlib', 'scipy', 'pydantic', 'tqdm', 'psutil', 'pytest', \
	  'openai', 'anthropic', 'pyarrow', 'python-dotenv')))"
	env -u PYTHONDONTWRITEBYTECODE MPLBACKEND=Agg $(LOWEST)/bin/python -m pytest -q -p no:cacheprovider \
	  -n $(TEST_WORKERS) --dist loadfile -m "not slow" $(LOWEST_TESTS)

# docs/data-contract.md, generated from latte_lab/events.py and latte_lab.schema.TRIAL_COLUMNS (tests/rundir/test_data_contract.py
# fails when it is out of date): after declaring an event type or a results column, run it and commit the page.
data-contract: $(STAMP)
	$(BIN)/python -c "from latte_lab.rundir.contract import main; main(['docs/data-contract.md'])"

# JupyterLab from .venv, so the notebooks' kernel is the project's Python with latte_lab installed.
# LAB_ARGS passes options through, e.g. make lab LAB_ARGS="--ip=0.0.0.0 --port=8899 --no-browser".
# As root (a container, a hosted machine) JupyterLab refuses to start without --allow-root: it is added then.
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $(LAB_ROOT) $(LAB_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check latte_lab tests benchmarks docs

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Every row of what a user waits for (fresh clone + make demo, make test, figures, a simulated trial, the
# orchestration per round, the 10^5-node graph), for HEAD and BASELINE in one run: about 15 minutes.
# SKIP_TEST=1 leaves out the two make test runs.
BASELINE ?= 07f0dd7
compare-waits: $(STAMP)
	$(BIN)/python benchmarks/compare_waits.py --baseline $(BASELINE) $(if $(SKIP_TEST),--skip-test)

figures: $(STAMP)
	$(BIN)/latte-lab figures --out figures/   # $$LATTE_PUBLISHED_DIR, else the bundled published data

# The documentation site, every notebook page with its outputs: docs/hooks.py runs the notebooks first
# (LATTE_DOCS_EXECUTE=1; nbclient, one kernel per CPU, the simulated model: offline) and draws the paper's
# figures with latte-lab figures. About a minute on two cores. make test builds the site without running the
# notebooks (in the background) and tests/package/test_docs_site.py builds it with them and counts every page's images.
docs: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE LATTE_DOCS_EXECUTE=1 $(BIN)/mkdocs build --strict --site-dir site
	@echo "open site/index.html (it works from disk), or serve it with: LATTE_DOCS_EXECUTE=1 $(BIN)/mkdocs serve"

# Rewrites, in place, what every >>> example of the documentation's pages (DOC_PAGES) prints, as it runs now:
# run it after a change that moves the examples' outputs (the simulated model's trials above all; make test
# fails on a page whose numbers no longer come out), read `git diff docs`, commit the pages with the change.
# About half a minute. DOCS_NUMBERS_ARGS="--check" only lists the outputs that differ.
docs-numbers: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python docs/doc_examples.py $(DOCS_NUMBERS_ARGS) $(DOC_PAGES)

# The sensitivity study behind notebook 05 and docs/simulated-model.md (1,200 trials; resumable): runs
# every trial not yet under runs/sensitivity and rewrites latte_lab/data/sensitivity.csv, which the notebook
# and its tests read. SENSITIVITY_SEEDS: seeds of the base profile; SENSITIVITY_GRID_SEEDS and _TASKS: of each
# varied setting (the shipped file: see latte_lab/data/README.md).
SENSITIVITY_SEEDS ?= 10
SENSITIVITY_GRID_SEEDS ?= 5
SENSITIVITY_GRID_TASKS ?= debug,eda,textproc
sensitivity: $(STAMP)
	$(BIN)/python -m latte_lab.sweep.sensitivity --seeds $(SENSITIVITY_SEEDS) --grid-seeds $(SENSITIVITY_GRID_SEEDS) \
		--grid-tasks $(SENSITIVITY_GRID_TASKS) --jobs 2 --out runs/sensitivity --markdown

# The calibration of the simulated model, as docs/calibration.md's second pre-registration set it (resumable): the
# fit (at most 40 evaluations of 24 trials each, on the published process moments only) writes
# latte_lab/data/calibration.json, whose best point is the `calibrated` profile; validate-sim runs seeds 0-29 of
# every team on every task under both profiles (900 trials) into latte_lab/data/sim_validation.csv and prints
# ll.analysis.validate_sim()'s tables.
calibrate: $(STAMP)
	$(BIN)/python -m latte_lab.sweep.calibrate fit --out runs/calibration --write latte_lab/data/calibration.json
validate-sim: $(STAMP)
	$(BIN)/python -m latte_lab.sweep.calibrate validate --out runs/sim_validation --csv latte_lab/data/sim_validation.csv

# A zip a teacher hands out (build/class/latte-lab-class.zip): the student notebooks (04's student edition is
# written from teaching/04_teaching_scheduling.ipynb first, without its solution and teacher cells), the
# latte_lab wheel and a requirements.txt that installs it with the core dependencies only (no Ray, no docs or
# test tooling), for a plain Jupyter or a hosted notebook service: pip install -r requirements.txt.
# The teacher's edition, with solutions and the guide, goes to build/class/teacher/, outside the zip, run (every
# answer beside its check; about half a minute), with an HTML copy and answer-key.md beside it.
CLASS_DIR := build/class
CLASS_NOTEBOOKS := 01_quickstart 02_trial_explorer 04_teaching_scheduling 05_when_does_latte_help
class: $(STAMP)
	env -u MPLBACKEND $(BIN)/python -m latte_lab.teaching teaching/04_teaching_scheduling.ipynb \
	  notebooks/04_teaching_scheduling.ipynb $(CLASS_DIR)/teacher/04_teaching_scheduling_teacher.ipynb --execute
	rm -rf $(CLASS_DIR)/latte-lab-class $(CLASS_DIR)/latte-lab-class.zip
	mkdir -p $(CLASS_DIR)/latte-lab-class
	$(BIN)/python -m pip wheel -q --no-deps --no-build-isolation --disable-pip-version-check . -w $(CLASS_DIR)/latte-lab-class
	rm -rf build/lib build/bdist.*  # setuptools' staging copy: the tasks' hidden material must live only in the package
	for nb in $(CLASS_NOTEBOOKS); do cp notebooks/$$nb.ipynb $(CLASS_DIR)/latte-lab-class/; done
	cd $(CLASS_DIR)/latte-lab-class && wheel=$$(ls latte_lab-*.whl) && version=$${wheel#latte_lab-} && \
	  printf '%s\n' "# latte_lab from the wheel beside this file, with the core and the lab extra (JupyterLab, widgets)." \
	  "# pip reads --find-links relative to this file, so this works from any folder: pip install -r <path>/requirements.txt" \
	  "--find-links ." "latte_lab[lab]==$${version%%-*}" > requirements.txt
	cd $(CLASS_DIR) && $(abspath $(BIN))/python -m zipfile -c latte-lab-class.zip latte-lab-class
	size=$$(du -k $(CLASS_DIR)/latte-lab-class.zip | cut -f1); \
	  printf '%s\n' "latte_lab notebooks for a class. Install (Python 3.11+): pip install -r requirements.txt" \
	  "(from any folder: pip install -r path/to/requirements.txt; in a hosted notebook: %pip install -r requirements.txt)," \
	  "then open the notebooks with Jupyter. Everything runs offline on the simulated model; no API key is needed." \
	  "Size: this zip is about $$size kB; the install downloads latte_lab's core and lab dependencies (numpy, pandas," \
	  "matplotlib, scipy, JupyterLab, ...: about 120 packages, 550 MB installed, fewer where Jupyter is already there)." \
	  > $(CLASS_DIR)/latte-lab-class/README.txt
	rm -f $(CLASS_DIR)/latte-lab-class.zip
	cd $(CLASS_DIR) && $(abspath $(BIN))/python -m zipfile -c latte-lab-class.zip latte-lab-class
	@ls -l $(CLASS_DIR)/latte-lab-class.zip; echo "teacher's edition (run, with its answers) and answer key: $(CLASS_DIR)/teacher/"

clean:
	rm -rf $(VENV) $(LOWEST) .pytest_cache .hypothesis site
