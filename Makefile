# RankLab. `make app` and `make test` each set everything up on a fresh machine first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# Never wait for the Hugging Face hub: pretrained weights are used when cached, else random init.
export HF_HUB_OFFLINE ?= 1

.PHONY: setup browser sandbox slurm app class lab lint test test-fast bench figures assignments docs clean

# Grading needs bubblewrap (lab/grading/sandbox.py): setup installs it, as root, where apt-get exists.
setup: $(STAMP) sandbox

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[all,dev]"
	touch $(STAMP)

# The dashboard, on http://localhost:8501. It listens on this machine only; to serve a room (students' laptops on
# the same network), `make app APP_ADDRESS=0.0.0.0`: then anyone who reaches the machine can drive its training.
# Trainings run in WORKERS processes (default: one per core), each training RUNS_PER_WORKER sessions at once (3),
# the others queue: `make app WORKERS=3`.
APP_ADDRESS ?= 127.0.0.1
ifdef WORKERS
export RANKLAB_WORKERS := $(WORKERS)
endif
ifdef RUNS_PER_WORKER
export RANKLAB_RUNS_PER_WORKER := $(RUNS_PER_WORKER)
endif
# The trainings run WORKER_NICE nice levels below the page (10): heavy work beside a class at normal priority
# starves them; run that work under `nice -n 19`, or `make app WORKER_NICE=0` to share the CPU evenly.
ifdef WORKER_NICE
export RANKLAB_WORKER_NICE := $(WORKER_NICE)
endif
# The largest model a page (or a link) may make the server build: `make app MAX_PARAMS=25M` (default 100M).
ifdef MAX_PARAMS
export RANKLAB_APP_MAX_PARAMS := $(MAX_PARAMS)
endif
# The memory one page's runs may ask for: `make app SESSION_MEMORY=3GB` (default: no cap of a page's own). The open
# pages together hold at most the memory available at the start, and no more than the cap x WORKERS x RUNS_PER_WORKER.
ifdef SESSION_MEMORY
export RANKLAB_APP_SESSION_MEMORY := $(SESSION_MEMORY)
endif
# The Reproduction view's data are computed first (once per state of results/; milliseconds when stored).
app: setup
	$(BIN)/python -m lab.dashboard
	$(BIN)/python -m app_pages.studies_page
	$(BIN)/python -m streamlit run app.py --server.headless true --browser.gatherUsageStats false \
	  --server.fileWatcherType none --client.toolbarMode minimal --server.address $(APP_ADDRESS)

# The class page on http://localhost:8502: the dashboard's training view as one small HTML page (the same links,
# runs and worker pool; the analysis views are the dashboard's). For a class whose browsers run on the server
# itself, where six first visits of the dashboard take 7-10 s on 2 cores; the same variables as `make app`.
CLASS_PORT ?= 8502
class: setup
	$(BIN)/python -m lab.dashboard
	$(BIN)/python -m lab.dashboard.class_server --address $(APP_ADDRESS) --port $(CLASS_PORT)

# JupyterLab on the notebooks (RANKLAB_FAST=1 make lab: trainings shrink to seconds).
lab: setup
	$(BIN)/jupyter lab --notebook-dir=notebooks

# The dashboard's browser tests drive Debian's chromium (Playwright cannot download browsers
# offline). Installed here when missing and possible; otherwise those tests say how and skip.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium not found (apt-get install chromium): the browser tests will be skipped"; fi; }

# Grading runs student code in a bubblewrap sandbox (lab/grading/sandbox.py). Installed here when
# missing and possible; otherwise grading refuses (or --no-sandbox) and its tests say how and skip.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	  else echo "bwrap not found (apt-get install bubblewrap): the grading sandbox tests will be skipped"; fi; }

# The cluster tests (tests/test_study_slurm.py) start a one-node SLURM cluster from Debian's slurm-wlm (munge comes
# with it), as root, in a temporary folder. Installed here when missing and possible; otherwise those tests say how
# and skip.
slurm:
	@{ test -x /usr/sbin/slurmctld && test -x /usr/sbin/slurmd && command -v sbatch >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm >/dev/null; \
	  else echo "slurmctld not found (apt-get install slurm-wlm): the SLURM tests will be skipped"; fi; }

# ruff's line limit (120) and pyflakes' errors, nothing stylistic ([tool.ruff] in pyproject.toml); `make test` runs it first.
lint: setup
	@$(BIN)/ruff check --quiet || { echo "make lint: fix the lines above by hand (\`$(BIN)/ruff check --fix\` removes unused imports), then rerun make lint"; exit 1; }

# The tests run in one pytest worker per core (pytest-xdist), a whole test file to one worker (--dist loadfile):
# a module's fixture (a sandboxed batch, a notebook's run, an nbgrader course) is then built once, not once per
# worker. Serial: `make test TEST_WORKERS=0`. Exit code 5 (no tests collected, e.g. with a -k filter) is not a
# failure. The cores are the ones this process may run on; nproc also obeys OMP_NUM_THREADS, which a CI may set
# to 1 for BLAS (CI's nproc said 1 of 2 cores once), so that variable is left out.
TEST_WORKERS ?= $(shell env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 1)
XDIST := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: setup lint browser sandbox slurm
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS) || { rc=$$?; [ $$rc -eq 5 ] && echo "pytest: no tests collected" || exit $$rc; }

# The edit loop's subset: tests/ without the assignments' notebooks (nbmake), the tests marked slow, the browser
# and AppTest tests of the app, the grading's end-to-end tests (sandbox, nbgrader, assignments) and the benchmarks'
# own tests: 5.3 min of CPU time (2026-11-27), spread over one worker per core like make test's; how many tests,
# no comment can keep up with: `make test-fast PYTEST_ARGS=--collect-only` counts them. No lint: `make lint`.
# `make test` (what CI runs) stays the whole suite.
FAST_SKIP := --ignore=tests/test_app.py --ignore=tests/test_app_browser.py --ignore=tests/test_notebook_browser.py \
  --ignore=tests/test_grade.py --ignore=tests/test_grade_nbgrader.py --ignore=tests/test_grading_sandbox.py \
  --ignore=tests/test_grading_hostile.py --ignore=tests/test_assignments.py --ignore-glob='tests/test_bench_*.py'
test-fast: setup
	$(BIN)/python -m pytest tests -m "not slow" $(FAST_SKIP) $(XDIST) $(PYTEST_ARGS) || { rc=$$?; [ $$rc -eq 5 ] && echo "pytest: no tests collected" || exit $$rc; }

# Student versions (the notebooks as nbgrader releases them: needs the dev extra), hidden tests and an
# nbgrader source folder in build/assignments/.
assignments: setup
	$(BIN)/python -m lab.grading.generate

bench: setup
	$(BIN)/python -m bench.losses
	$(BIN)/python -m bench.metrics
	$(BIN)/python -m bench.gap
	$(BIN)/python -m bench.train

# docs/figures/*.png and docs/figures.md (add ARGS=--training for the trained-model figures).
figures: setup
	$(BIN)/python -m lab.docs_figures $(ARGS)

# The API reference, from the docstrings (pdoc, in the dev extra), to build/api/index.html. tests/test_api_docs.py
# builds the same modules and fails on any pdoc warning or broken link.
API_MODULES := lab.losses lab.metrics lab.ranking lab.core lab.train lab.data lab.models
docs: setup
	$(BIN)/python -m pdoc -o build/api $(API_MODULES)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache test-artifacts
