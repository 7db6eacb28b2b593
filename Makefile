# The two commands of the README: `make demo` (the main job, no download) and `make test`.
# Each creates .venv with the package installed if it is missing (needs only python3.11, pip, git, make).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_DIR ?= demo_output
DEMO_STEPS ?= 1000
# Tests run in parallel processes; 2 workers suit a 2-core machine (override: make test TEST_WORKERS=4).
TEST_WORKERS ?= 2

.PHONY: demo test test-all bench docs install clean

install: $(STAMP)

$(STAMP): setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,plot]'
	touch $(STAMP)

# Train a relative-position Transformer on reversal of digit strings of length <= 40 (generated, no
# download), then decode 200 evaluation strings of length up to 400 and print the accuracy by length.
# Running it again resumes (or just re-evaluates) the run in $(DEMO_DIR).
demo: $(STAMP)
	$(BIN)/t2t-relpos-trainer --problem=algorithmic_reverse_decimal40 --hparams_set=transformer_cpu_rel \
	    --output_dir=$(DEMO_DIR) --train_steps=$(DEMO_STEPS) --checkpoint_every=250 --eval_steps=4 \
	    --log_every=100 --seed=1
	$(BIN)/t2t-relpos-decoder --output_dir=$(DEMO_DIR) --decode_split=eval \
	    --decode_hparams=beam_size=1,batch_size=50,num_samples=200 --decode_to_file=$(DEMO_DIR)/decoded_eval.txt

# The JAX backend is checked always (the test extra installs it); PyTorch only where torch is installed.
test: $(STAMP)
	T2T_RELPOS_REQUIRE_BACKENDS=jax $(BIN)/python -m pytest -q -n $(TEST_WORKERS) tests

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
