# The two commands of the README: `make demo` (the main job, no download) and `make test`.
# Each creates .venv with the package installed if it is missing (needs only Python 3.10-3.13, pip, git, make): the
# package alone for `make demo`, with its test extras (JAX, CTranslate2, pytest, ruff, Sphinx) for `make test`.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two installs: the package alone for `make demo`; with the test and plot extras for the rest.
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed-test
DEMO_DIR ?= demo_output
DEMO_STEPS ?= 900
# Tests run in parallel processes; 2 workers suit a 2-core machine (override: make test TEST_WORKERS=4).
TEST_WORKERS ?= 2

.PHONY: demo test test-all bench docs install clean

install: $(STAMP)

$(DEMO_STAMP): setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(DEMO_STAMP)

$(STAMP): $(DEMO_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,plot]'
	touch $(STAMP)

# Train a relative-position Transformer (transformer_demo_rel) to reverse digit strings of length 1-20 (generated,
# no download), decode 200 new strings of those lengths (sequence accuracy 0.985 on 2026-12-03), then 200
# evaluation strings of length up to 200 (accuracy by length: how far it generalises beyond the training lengths).
# About 4 CPU-minutes in all: 2.5-3 minutes on 2 idle cores, more on a busy machine.
# Running it again resumes (or just re-evaluates) the run in $(DEMO_DIR).
demo: $(DEMO_STAMP)
	@echo "== 1/3 Training a relative-position Transformer to reverse digit strings of length 1-20 ($(DEMO_STEPS) steps);"
	@echo "   its closing evaluation is on the eval split: strings of length 1-200, mostly longer than any it trained on"
	$(BIN)/t2t-relpos-trainer --problem=algorithmic_reverse_decimal20 --hparams_set=transformer_demo_rel \
	    --output_dir=$(DEMO_DIR) --train_steps=$(DEMO_STEPS) --checkpoint_every=200 --eval_every=0 \
	    --eval_steps=4 --log_every=100 --seed=1
	@echo "== 2/3 Reversing 200 new strings of the training lengths (1-20 digits)"
	$(BIN)/python -m t2t_relpos.cli.demo --problem=algorithmic_reverse_decimal20 --count=200 --output=$(DEMO_DIR)/strings
	$(BIN)/t2t-relpos-decoder --output_dir=$(DEMO_DIR) --decode_from_file=$(DEMO_DIR)/strings.txt \
	    --decode_reference=$(DEMO_DIR)/strings.ref.txt --decode_to_file=$(DEMO_DIR)/strings.decoded.txt \
	    --decode_hparams=batch_size=100
	@paste -d '>' $(DEMO_DIR)/strings.txt $(DEMO_DIR)/strings.decoded.txt | head -n 3 | \
	    sed 's/>/  ->  /; s/^/  for example  /'
	@echo "== 3/3 Length generalisation: 200 strings of length 1-200 (the eval split), accuracy by length"
	$(BIN)/t2t-relpos-decoder --output_dir=$(DEMO_DIR) --decode_split=eval \
	    --decode_hparams=batch_size=100,num_samples=200 --decode_to_file=$(DEMO_DIR)/decoded_eval.txt
	@echo "== Next: your digits: echo 0123456789 | $(BIN)/t2t-relpos-decoder --output_dir=$(DEMO_DIR) --decode_from_file=-"
	@echo "   then the README's quickstarts and the user guide in docs/guide/ (make docs builds it as a site)"

# ruff first (ruff.toml; a finding fails the run), then the tests, naming the 15 slowest (the suite is to stay under
# ~15 minutes on 2 cores). The JAX backend is checked always (the test extra installs it); PyTorch only where torch
# is installed.
test: $(STAMP)
	$(BIN)/ruff check .
	T2T_RELPOS_REQUIRE_BACKENDS=jax $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --durations=15 tests

# Also the long checks marked `slow`.
test-all: $(STAMP)
	T2T_RELPOS_REQUIRE_BACKENDS=jax $(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "" tests

# Quick versions of the speed and memory benchmarks: they print their tables and
# leave benchmarks/README.md alone; its full tables come from the commands recorded there.
bench: $(STAMP)
	$(BIN)/python benchmarks/attention.py --lengths 256,2048 --reps 3
	$(BIN)/python benchmarks/decoding.py --models rel64 --lengths 25,100 --reps 3
	$(BIN)/python benchmarks/train_step.py --shapes small --reps 3

# The documentation site (user guide and API reference) into docs/_build/html, as tests/test_docs.py builds it:
# warnings are errors, every cross reference is checked (open docs/_build/html/index.html).
docs: $(STAMP)
	$(BIN)/python -c "import sphinx, myst_parser, furo" 2>/dev/null || $(BIN)/python -m pip install --quiet -e '.[docs]'
	$(BIN)/python -m sphinx -b html -W --keep-going -n -q docs docs/_build/html

clean:
	rm -rf $(VENV) $(DEMO_DIR) build *.egg-info docs/_build
