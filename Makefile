# Every target bootstraps .venv when it is missing or older than pyproject.toml.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 2
PYTEST_ARGS ?=
# `--dist worksteal`: a worker that runs out of tests takes some of the other's
# queue, so one long test near the end of a queue no longer leaves a core idle.

.PHONY: venv demo test test-large test-large-only test-jax test-jax-slow bench bench-jax gpu-wheels gpu-bundle gpu-check docs docs-serve docs-test test-browser figures lint format clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[all]"
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/nlp/translate_dates.py --output-dir outputs/dates

test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist worksteal $(PYTEST_ARGS)

# Everything: the quick suite, then the large set in its parts (one pytest
# run of both would hold all their compiled programs in two workers; see
# test-large-only).
test-large: test test-large-only

# The large set alone (`@pytest.mark.large`: the example scripts end to end,
# the variants' compiled fits, multi-process and wheel installs, the browser
# test): .ci/run runs it after `make test` and `make test-jax`.
# It runs in parts, each a fresh pytest run with fresh workers: a worker keeps
# what TensorFlow compiled and traced for every test it ran (gc, Keras'
# clear_session and glibc's malloc_trim free almost none of it), so the whole
# set on one pair of workers grew them to 13.2 and 9.9 GiB, leaving 0.4 of
# 23 GiB (2026-12-07); on CI the last tests' subprocesses then stalled past
# their 10-minute timeouts. Each part ignores the paths of the parts before
# it, and the last one (`tests`) ignores them all, so no large test runs
# twice or falls between them. The translation tests are a part of their own:
# each leaves up to 1.3 GiB in its worker (6 GiB for the nine). Every part runs even when one fails; the
# target fails if any did. LARGE_PYTEST=echo prints the parts' arguments.
LARGE_PARTS := tests/test_every_layer.py,tests/test_implicit_masks.py \
	tests/examples/test_nmt.py tests/examples
LARGE_PYTEST := $(PY) -m pytest -q -n 2 --dist worksteal -m large $(PYTEST_ARGS)
test-large-only: $(STAMP)
	failed=0; ignored=; \
	for part in $(LARGE_PARTS) tests; do \
	  paths=$$(echo $$part | tr , ' '); \
	  $(LARGE_PYTEST) $$ignored $$paths || failed=1; \
	  for path in $$paths; do ignored="$$ignored --ignore=$$path"; done; \
	done; \
	exit $$failed

# The whole suite on JAX (CPU). Tests that are TensorFlow-only by nature
# (SavedModel export, tf.function tracing of unknown shapes, the tf.data /
# tf.function example scripts) carry `tf_only` and skip with their reason
# (`PYTEST_ARGS=-rs` lists them); those marked `slow_on_jax` (eager loops
# that JAX runs op by op, and the slowest compiled fits) are left to
# `make test-jax-slow`, which .ci/run runs next, to keep this run under 10
# minutes on 2 cores.
JAX_STAMP := $(VENV)/.installed-jax
$(JAX_STAMP): $(STAMP)
	$(PY) -m pip install -q -e ".[all,jax]"
	@touch $(JAX_STAMP)

test-jax: $(JAX_STAMP)
	KERAS_BACKEND=jax $(PY) -m pytest -q -n 2 --dist worksteal -m "not large and not slow_on_jax" $(PYTEST_ARGS)

# The rest of the quick suite on JAX: the tests marked `slow_on_jax`.
test-jax-slow: $(JAX_STAMP)
	KERAS_BACKEND=jax $(PY) -m pytest -q -n 2 --dist worksteal -m "slow_on_jax and not large" $(PYTEST_ARGS)

# One process (a fresh child per memory point); prints markdown tables.
# BENCH_ARGS="--sections layer --rounds 7" to narrow it; see benchmarks/README.md.
BENCH_ARGS ?=
bench: $(STAMP)
	PYTHONPATH=. $(PY) benchmarks/bench.py $(BENCH_ARGS)

# The comparisons on the JAX backend (benchmarks/bench_jax.py, ~2 min).
bench-jax: $(JAX_STAMP)
	PYTHONPATH=. $(PY) benchmarks/bench_jax.py

# GPU machines with JAX but no TensorFlow and no package registry
# (benchmarks/gpu_check.sh): keras and its dependencies as wheels in .whl/
# (git-ignored; about 15 MB), at the versions this venv tests with, for
# GPU_PYTHON (the GPU machine's Python). gpu_check.sh installs only those the
# machine lacks (keras always). GPU_WHEELS_EXTRA="pytest hypothesis ..." adds
# more (pinned to this venv's versions too).
GPU_PYTHON ?= 3.12
GPU_WHEELS_EXTRA ?=
GPU_WHEELS := keras namex optree absl-py rich markdown-it-py mdurl pygments \
	h5py ml-dtypes packaging typing-extensions $(GPU_WHEELS_EXTRA)
gpu-wheels: $(STAMP)
	$(PY) -m pip download -q --no-deps --only-binary=:all: \
		--python-version $(GPU_PYTHON) --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
		--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
		--platform manylinux1_x86_64 -d .whl \
		$$($(PY) -c 'import importlib.metadata as m, sys; print(" ".join(f"{n}=={m.version(n)}" for n in sys.argv[1:]))' $(GPU_WHEELS))
	@ls .whl

# The Multi30k training split, tokenized here (TensorFlow, keras-hub) as the
# translation example does, for `gpu_check.py --sections fit` on a machine
# without them: .gpu/multi30k_de_en.npz (git-ignored, about 1 MB; carry
# .gpu with .whl). GPU_DATA_DIR: train.{de,en}.gz (canonical SHA-256).
GPU_DATA_DIR ?= ../shared/data/multi30k
gpu-bundle: $(STAMP)
	PYTHONPATH=. $(PY) benchmarks/gpu_bundle.py --data-dir $(GPU_DATA_DIR)

# The whole GPU check (tests, layer benchmark, Multi30k fit); `--smoke` works
# on a CPU.
GPU_CHECK_ARGS ?=
gpu-check:
	benchmarks/gpu_check.sh $(GPU_CHECK_ARGS)

# The documentation site (mkdocs-material + mkdocstrings) into site/: redraws
# the guide's figures (docs/img/, about 30 s), then builds with --strict, so a
# broken reference or a docstring griffe cannot parse fails the build. The
# formulas are typeset into MathML at build time (docs/hooks/mathml.py), so
# the site shows them with no network; one it cannot typeset fails the build.
docs: $(STAMP)
	PYTHONPATH=. MPLBACKEND=Agg $(PY) docs/figures.py
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

docs-serve: $(STAMP)
	PYTHONPATH=. MPLBACKEND=Agg $(PY) docs/figures.py
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve

# The built site's formulas, offline: every page's HTML, and the guide pages in
# headless Chromium with the network off (tests/test_docs_offline_math.py,
# about 10 s). The browser part skips without Debian's chromium
# (`apt-get install chromium`) or a CHROMIUM=/path/to/chromium.
docs-test: $(STAMP)
	$(PY) -m pytest -q -m "" -rs tests/test_docs_offline_math.py $(PYTEST_ARGS)

# The views (head, model, alignment, image) in headless Chromium
# (tests/test_visualization_browser.py, about 20 s): Debian's chromium and
# chromium-driver (`apt-get install chromium chromium-driver`), selenium from
# the `browser` extra (in `all`). They skip without them, and fail instead
# under KERAS_ATTENTION_REQUIRE_BROWSER=1. They are `large` too, so CI runs
# them once, in `make test-large-only`.
test-browser: $(STAMP)
	$(PY) -m pytest -q -m browser -rs tests/test_visualization_browser.py $(PYTEST_ARGS)

# The quoted figures (the examples' results.json under FIGURES_ARGS, and the
# dated "Measured" paragraphs of the example headers, the READMEs and docs/)
# with their date, commit and command, flagged STALE when their example
# changed since (tools/figures.py), "reviewed" when every such change is one
# that tools/figures_reviewed.txt says leaves its results as they were.
# FIGURES_ARGS="outputs --metrics" lists every number; "--check" exits with
# 1 when one is stale.
FIGURES_ARGS ?= outputs
figures:
	$(PYTHON) tools/figures.py $(FIGURES_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check keras_attention tests examples benchmarks docs/figures.py tools
	$(PY) -m ruff format --check keras_attention tests examples benchmarks docs/figures.py tools

format: $(STAMP)
	$(PY) -m ruff check --fix keras_attention tests examples benchmarks docs/figures.py tools
	$(PY) -m ruff format keras_attention tests examples benchmarks docs/figures.py tools

clean:
	rm -rf $(VENV) outputs site .pytest_cache .ruff_cache
