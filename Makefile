# Every target bootstraps .venv when it is missing or older than pyproject.toml.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 2
PYTEST_ARGS ?=

.PHONY: venv demo test test-large test-jax bench docs docs-serve lint format clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[all]"
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/nlp/translate_dates.py --output-dir outputs/dates

test: $(STAMP)
	$(PY) -m pytest -q -n 2 $(PYTEST_ARGS)

test-large: $(STAMP)
	$(PY) -m pytest -q -n 2 -m "" $(PYTEST_ARGS)

# The whole suite on JAX (CPU). Tests that are TensorFlow-only by nature
# (SavedModel export, tf.function tracing of unknown shapes, the tf.data /
# tf.function example scripts) carry `tf_only` and skip with their reason
# (`PYTEST_ARGS=-rs` lists them).
JAX_STAMP := $(VENV)/.installed-jax
$(JAX_STAMP): $(STAMP)
	$(PY) -m pip install -q -e ".[all,jax]"
	@touch $(JAX_STAMP)

test-jax: $(JAX_STAMP)
	KERAS_BACKEND=jax $(PY) -m pytest -q -n 2 $(PYTEST_ARGS)

# One process (a fresh child per memory point); prints markdown tables.
# BENCH_ARGS="--sections layer --rounds 7" to narrow it; see benchmarks/README.md.
BENCH_ARGS ?=
bench: $(STAMP)
	PYTHONPATH=. $(PY) benchmarks/bench.py $(BENCH_ARGS)

# The documentation site (mkdocs-material + mkdocstrings) into site/: redraws
# the guide's figures (docs/img/, about 30 s), then builds with --strict, so a
# broken reference or a docstring griffe cannot parse fails the build.
docs: $(STAMP)
	PYTHONPATH=. MPLBACKEND=Agg $(PY) docs/figures.py
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

docs-serve: $(STAMP)
	PYTHONPATH=. MPLBACKEND=Agg $(PY) docs/figures.py
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve

lint: $(STAMP)
	$(PY) -m ruff check keras_attention tests examples benchmarks docs/figures.py
	$(PY) -m ruff format --check keras_attention tests examples benchmarks docs/figures.py

format: $(STAMP)
	$(PY) -m ruff check --fix keras_attention tests examples benchmarks docs/figures.py
	$(PY) -m ruff format keras_attention tests examples benchmarks docs/figures.py

clean:
	rm -rf $(VENV) outputs site .pytest_cache .ruff_cache
