import fnmatch
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The tests' programs are tiny, so XLA's LLVM code generation, not running
# them, dominates a compiled test: its lowest optimisation level compiles
# them faster (same HLO passes, same semantics; measured: 126 s -> 103 s for
# three JAX test files, 2 workers). Set before keras imports its backend; a
# level given in XLA_FLAGS already wins. Benchmarks never run under it.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
    ).strip()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _reset_keras_state():
    """Every test starts from float32, a fixed seed and a clean session."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(0)
    yield
    keras.config.set_dtype_policy("float32")
    # free_memory=False: a full gc.collect() costs ~0.5 s per test with TF.
    keras.backend.clear_session(free_memory=False)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def jit():
    """Compile a function with XLA on the current backend:
    `tf.function(jit_compile=True)` on TensorFlow, `jax.jit` on JAX."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return lambda fn: tf.function(fn, jit_compile=True)
    if backend == "jax":
        import jax

        return jax.jit
    pytest.skip(f"no XLA compilation helper for the {backend} backend")


@pytest.fixture
def optimized_hlo():
    """`optimized_hlo(fn, *args)`: the text of the XLA program `fn` compiles
    to, after XLA's optimisations, on the current backend."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        def text(fn, *args):
            compiled = tf.function(fn, jit_compile=True)
            return compiled.experimental_get_compiler_ir(*args)(stage="optimized_hlo")

        return text
    if backend == "jax":
        import jax

        return lambda fn, *args: jax.jit(fn).lower(*args).compile().as_text()
    pytest.skip(f"no XLA compiler IR on the {backend} backend")


def _listed(name):
    """The node ids (or fnmatch patterns) listed in tests/<name>."""
    path = os.path.join(os.path.dirname(__file__), name)
    with open(path, encoding="utf-8") as f:
        lines = (line.strip() for line in f)
        return {line for line in lines if line and not line.startswith("#")}


def _slow_on_jax():
    """The node ids listed in tests/slow_on_jax.txt."""
    return _listed("slow_on_jax.txt")


def _is_variant(nodeid, patterns):
    """Whether tests/variants.txt lists `nodeid` (`[` is literal there)."""
    return any(fnmatch.fnmatchcase(nodeid, p.replace("[", "[[]")) for p in patterns)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    """Mark the tests listed in tests/slow_on_jax.txt `slow_on_jax`, and
    those of tests/variants.txt `large` on TensorFlow and `slow_on_jax` on
    another backend; skip `tf_only` tests (SavedModel, tf.function
    tracing, GradientTape on weights, tf.distribute) when the suite runs on
    another backend."""
    slow = _slow_on_jax()
    variants = _listed("variants.txt")
    on_tensorflow = keras.backend.backend() == "tensorflow"
    for item in items:
        if item.nodeid in slow or item.nodeid.split("[")[0] in slow:
            item.add_marker(pytest.mark.slow_on_jax)
        if _is_variant(item.nodeid, variants):
            marker = pytest.mark.large if on_tensorflow else pytest.mark.slow_on_jax
            item.add_marker(marker)
    if keras.backend.backend() == "tensorflow":
        return
    for item in items:
        marker = item.get_closest_marker("tf_only")
        if marker is None:
            continue
        why = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
        reason = "TensorFlow-only by nature (marked tf_only)" + (
            f": {why}" if why else ""
        )
        item.add_marker(pytest.mark.skip(reason=reason))
