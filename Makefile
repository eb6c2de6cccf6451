# RankLab. `make app` and `make test` each set everything up on a fresh machine first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# Never wait for the Hugging Face hub: pretrained weights are used when cached, else random init.
export HF_HUB_OFFLINE ?= 1

.PHONY: setup app test bench assignments clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[app,notebooks,dev]"
	touch $(STAMP)

app: setup
	$(BIN)/python -m lab demo

# Exit code 5 (no tests collected, e.g. with a -k filter) is not a failure.
test: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS) || { rc=$$?; [ $$rc -eq 5 ] && echo "pytest: no tests collected" || exit $$rc; }

# Student versions, hidden tests and an nbgrader source folder in build/assignments/.
assignments: setup
	$(BIN)/python -m lab.grading.generate

bench: setup
	$(BIN)/python bench/losses.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis test-artifacts
