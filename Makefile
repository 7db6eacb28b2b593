# The two commands of the README: `make demo` (the main job, no download) and `make test`.
# Each creates .venv with the package installed if it is missing (needs only python3.11, pip, git, make).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_DIR ?= demo_output
# Tests run in parallel processes; 2 workers suit a 2-core machine (override: make test TEST_WORKERS=4).
TEST_WORKERS ?= 2

.PHONY: demo test test-all bench install clean

install: $(STAMP)

$(STAMP): setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,plot]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m t2t_relpos.cli.demo --output_dir=$(DEMO_DIR)

test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) tests

# Also the long checks marked `slow`.
test-all: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "" tests

bench: $(STAMP)
	$(BIN)/python benchmarks/run_quick.py

clean:
	rm -rf $(VENV) $(DEMO_DIR) build *.egg-info
