import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import PositionEmbedding
from keras_attention.layers import SinusoidalPositionEncoding

try:
    import tensorflow as tf
except ImportError:  # a JAX-only machine: the tf_only tests skip
    tf = None


def _paper(pos, k, d, base=10000.0):
    """PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(...)."""
    i = k // 2
    angle = pos / base ** (2 * i / d)
    return np.sin(angle) if k % 2 == 0 else np.cos(angle)


@pytest.mark.parametrize("d", [8, 7])
def test_sinusoidal_values_follow_the_paper(d):
    pe = SinusoidalPositionEncoding()(np.zeros((1, 60, d), "float32"))
    pe = ops.convert_to_numpy(pe)[0]
    for pos, k in [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
        (5, 2),
        (5, 3),
        (17, 6),
        (59, d - 1),
    ]:
        np.testing.assert_allclose(pe[pos, k], _paper(pos, k, d), atol=1e-5)
    assert pe.shape == (60, d)


def test_sinusoidal_custom_wavelength_and_batch_broadcast():
    x = np.zeros((3, 5, 4), "float32")
    pe = ops.convert_to_numpy(SinusoidalPositionEncoding(max_wavelength=100)(x))
    assert pe.shape == (3, 5, 4)
    np.testing.assert_allclose(pe[2, 4, 3], _paper(4, 3, 4, 100.0), atol=1e-6)
    np.testing.assert_array_equal(pe[0], pe[2])


@pytest.mark.parametrize(
    "layer_fn",
    [lambda: SinusoidalPositionEncoding(), lambda: PositionEmbedding(64)],
    ids=["sinusoidal", "learned"],
)
def test_start_index_gives_the_slice_of_a_longer_encoding(layer_fn):
    layer = layer_fn()
    full = ops.convert_to_numpy(layer(np.zeros((2, 40, 6), "float32")))
    for k, n in [(0, 3), (7, 1), (13, 20)]:
        part = layer(np.zeros((2, n, 6), "float32"), start_index=k)
        np.testing.assert_allclose(part, full[:, k : k + n], atol=1e-6)
    # A per-example start (B,).
    part = layer(np.zeros((2, 2, 6), "float32"), start_index=np.array([3, 9]))
    np.testing.assert_allclose(part[0], full[0, 3:5], atol=1e-6)
    np.testing.assert_allclose(part[1], full[1, 9:11], atol=1e-6)


@pytest.mark.tf_only
@pytest.mark.parametrize(
    "layer_fn",
    [lambda: SinusoidalPositionEncoding(), lambda: PositionEmbedding(64)],
    ids=["sinusoidal", "learned"],
)
def test_traced_start_index_compiles_once(layer_fn):
    layer = layer_fn()
    x = np.zeros((1, 1, 4), "float32")
    layer(x)
    traces = []

    @tf.function(jit_compile=True)
    def step(start):
        traces.append(1)
        return layer(x, start_index=start)

    outputs = [ops.convert_to_numpy(step(tf.constant(t))) for t in range(5)]
    assert len(traces) == 1
    full = ops.convert_to_numpy(layer(np.zeros((1, 5, 4), "float32")))
    np.testing.assert_allclose(np.concatenate(outputs, 1), full, atol=1e-6)


def test_sinusoidal_any_length_and_dtype():
    keras.config.set_dtype_policy("mixed_float16")
    layer = SinusoidalPositionEncoding()
    pe = layer(np.zeros((1, 3000, 8), "float16"))
    assert pe.dtype == "float16" and pe.shape == (1, 3000, 8)
    assert np.isfinite(ops.convert_to_numpy(pe)).all()


def test_bad_arguments():
    with pytest.raises(ValueError, match="`sequence_length`"):
        PositionEmbedding(0)
    with pytest.raises(ValueError, match="`max_wavelength`"):
        SinusoidalPositionEncoding(max_wavelength=0)
    with pytest.raises(ValueError, match="`inputs`"):
        PositionEmbedding(4)(np.zeros((1, 5, 2), "float32"))
    with pytest.raises(ValueError, match=r"rank >= 2.*inputs.shape=\(5,\)"):
        SinusoidalPositionEncoding()(np.zeros((5,), "float32"))


# --- keras-hub compatibility (issue 12): positions=, rank > 3, the table ----


def _paper_table(positions, d, base=10000.0):
    """The paper's encoding of an array of positions: `positions.shape + (d,)`."""
    positions = np.asarray(positions, "float64")[..., None]
    k = np.arange(d)
    angle = positions / base ** ((k - k % 2) / d)
    return np.where(k % 2 == 0, np.sin(angle), np.cos(angle))


def _np(x):
    return ops.convert_to_numpy(x)


def _table(layer):
    return ops.convert_to_numpy(layer.position_embeddings)


@pytest.mark.parametrize(
    "positions",
    [
        np.array([3, 0, 7, 7]),  # (T,)
        np.array([[0, 1, 2, 3], [9, 2, 2, 0]]),  # (B, T)
        np.array([[0.5, 1.5, 100.25, 3.0], [1.0, 0.0, 2.0, 3.0]], "float32"),
    ],
    ids=["T", "BT", "float"],
)
def test_sinusoidal_positions_follow_the_paper(positions):
    x = np.zeros((2, 4, 6), "float32")
    layer = SinusoidalPositionEncoding()
    # `start_index` is ignored when `positions` is given (as in keras-hub).
    pe = _np(layer(x, start_index=5, positions=positions))
    expected = np.broadcast_to(_paper_table(positions, 6), x.shape)
    np.testing.assert_allclose(pe, expected, atol=1e-5)


@pytest.mark.parametrize(
    "positions",
    [np.array([3, 0, 9, 9]), np.array([[0, 1, 2, 3], [9, 2, 2, 0]])],
    ids=["T", "BT"],
)
def test_embedding_positions_are_table_rows(positions):
    x = np.zeros((2, 4, 5), "float32")
    layer = PositionEmbedding(10)
    out = _np(layer(x, start_index=3, positions=positions))
    expected = np.broadcast_to(_table(layer)[positions], x.shape)
    np.testing.assert_array_equal(out, expected)


def test_rank4_inputs_put_the_sequence_on_the_second_to_last_axis():
    b, heads, t, d = 2, 3, 5, 6
    x = np.zeros((b, heads, t, d), "float32")
    sine, learned = SinusoidalPositionEncoding(), PositionEmbedding(12)
    starts = np.array([1, 6])
    for start, rows in [(0, np.arange(t)), (4, 4 + np.arange(t))]:
        np.testing.assert_allclose(
            _np(sine(x, start_index=start)),
            np.broadcast_to(_paper_table(rows, d), x.shape),
            atol=1e-5,
        )
        np.testing.assert_array_equal(
            _np(learned(x, start_index=start)),
            np.broadcast_to(_table(learned)[rows], x.shape),
        )
    # Per-example starts (B,) and (B, T) positions index the batch axis.
    rows = starts[:, None] + np.arange(t)  # (B, T)
    for kwargs in ({"start_index": starts}, {"positions": rows}):
        np.testing.assert_allclose(
            _np(sine(x, **kwargs)),
            np.broadcast_to(_paper_table(rows, d)[:, None], x.shape),
            atol=1e-5,
        )
        np.testing.assert_array_equal(
            _np(learned(x, **kwargs)),
            np.broadcast_to(_table(learned)[rows][:, None], x.shape),
        )
    # Positions of the full leading shape: every (example, head) its own.
    rows = np.arange(b * heads * t).reshape(b, heads, t) % 12
    np.testing.assert_allclose(
        _np(sine(x, positions=rows)), _paper_table(rows, d), atol=1e-4
    )
    np.testing.assert_array_equal(
        _np(learned(x, positions=rows)), _table(learned)[rows]
    )


def test_rank2_inputs_without_a_batch_axis():
    x = np.zeros((5, 4), "float32")
    learned = PositionEmbedding(8)
    np.testing.assert_array_equal(_np(learned(x, start_index=2)), _table(learned)[2:7])
    np.testing.assert_allclose(
        _np(SinusoidalPositionEncoding()(x, start_index=2)),
        _paper_table(np.arange(2, 7), 4),
        atol=1e-5,
    )


@pytest.mark.parametrize("kind", ["sinusoidal", "learned"])
def test_rank4_functional_model_symbolic_then_on_data(kind):
    """Issue 12, item 6.1: a model built on `Input((None, 100, 32))` runs."""
    layer = (
        SinusoidalPositionEncoding()
        if kind == "sinusoidal"
        else (PositionEmbedding(100))
    )
    inputs = keras.Input((None, 100, 32))
    outputs = layer(inputs)
    assert tuple(outputs.shape) == (None, None, 100, 32)
    assert layer.compute_output_shape((None, None, 100, 32)) == (None, None, 100, 32)
    model = keras.Model(inputs, outputs)
    x = np.random.default_rng(0).normal(size=(2, 3, 100, 32)).astype("float32")
    got = model.predict(x, verbose=0)
    if kind == "sinusoidal":
        expected = _paper_table(np.arange(100), 32)
    else:
        expected = _table(layer)
    np.testing.assert_allclose(got, np.broadcast_to(expected, x.shape), atol=1e-5)


def test_positions_as_a_model_input():
    tokens = keras.Input((None, 8))
    positions = keras.Input((None,), dtype="int32")
    sine, learned = SinusoidalPositionEncoding(), PositionEmbedding(16)
    model = keras.Model(
        [tokens, positions],
        [sine(tokens, positions=positions), learned(tokens, positions=positions)],
    )
    rows = np.array([[5, 1, 1], [0, 15, 2]], "int32")
    got_sine, got_learned = model.predict(
        [np.zeros((2, 3, 8), "float32"), rows], verbose=0
    )
    np.testing.assert_allclose(got_sine, _paper_table(rows, 8), atol=1e-5)
    np.testing.assert_array_equal(got_learned, _table(learned)[rows])


@pytest.mark.parametrize(
    "layer_fn",
    [lambda: SinusoidalPositionEncoding(), lambda: PositionEmbedding(32)],
    ids=["sinusoidal", "learned"],
)
def test_traced_per_example_start_and_positions_under_jit(layer_fn, jit):
    layer = layer_fn()
    x = np.zeros((2, 3, 4), "float32")
    full = _np(layer(np.zeros((2, 32, 4), "float32")))
    starts = np.array([7, 20], "int32")
    by_start = jit(lambda s: layer(x, start_index=s))(starts)
    rows = starts[:, None] + np.arange(3)
    by_positions = jit(lambda p: layer(x, positions=p))(rows)
    expected = np.stack([full[0, 7:10], full[1, 20:23]])
    np.testing.assert_allclose(_np(by_start), expected, atol=1e-6)
    np.testing.assert_allclose(_np(by_positions), expected, atol=1e-6)


def test_position_embeddings_is_the_weight_and_embeddings_an_alias():
    layer = PositionEmbedding(6, initializer="ones")
    layer(np.zeros((1, 2, 3), "float32"))
    assert layer.position_embeddings is layer.weights[0]
    assert layer.embeddings is layer.position_embeddings
    assert layer.position_embeddings.path.endswith("embeddings")
    assert tuple(layer.position_embeddings.shape) == (6, 3)
    with pytest.raises(AttributeError):
        layer.embeddings = None
    assert PositionEmbedding(np.int64(6)).sequence_length == 6


def test_float16_dtype():
    x = np.zeros((1, 4000, 8), "float16")
    pe = SinusoidalPositionEncoding(dtype="float16")(x, start_index=0)
    assert pe.dtype == "float16"
    # Angles are float32 before the cast: position 3999 is exact, not
    # rounded to a float16 position (4000 there).
    np.testing.assert_allclose(
        _np(pe)[0, 3999].astype("float64"), _paper_table(3999, 8), atol=2e-3
    )
    learned = PositionEmbedding(6, dtype="float16")
    out = learned(np.zeros((2, 3, 4), "float16"), positions=[5, 0, 1])
    assert out.dtype == "float16"
    assert learned.position_embeddings.dtype == "float16"
    np.testing.assert_array_equal(_np(out)[1], _table(learned)[[5, 0, 1]])


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: PositionEmbedding(4)(_x(2, 3, 4), positions=[0, 4, 1]),
            ValueError,
            r"`positions` must be in \[0, `sequence_length`=4\)\. "
            r"Received: positions=\[0, 4, 1\]",
        ),
        (
            lambda: PositionEmbedding(4)(_x(2, 20, 4), positions=np.arange(20) % 5),
            ValueError,
            r"Received: positions of shape \(20,\) in \[0, 4\]",
        ),
        (
            lambda: PositionEmbedding(4)(_x(2, 3, 4), positions=[[0, -1, 1]] * 2),
            ValueError,
            r"`positions` must be in \[0",
        ),
        (
            lambda: PositionEmbedding(4)(_x(2, 3, 4), positions=np.zeros(3, "float32")),
            TypeError,
            r"`positions` must be integers.*Received: positions.dtype=float32",
        ),
        (
            lambda: SinusoidalPositionEncoding()(_x(2, 3, 4), positions=[0, 1]),
            ValueError,
            r"last axis of size T=3.*Received: positions.shape=\(2,\)",
        ),
        (
            lambda: SinusoidalPositionEncoding()(
                _x(2, 3, 4), positions=np.zeros((3, 3))
            ),
            ValueError,
            r"first axis of size B=2 or 1.*Received: positions.shape=\(3, 3\)",
        ),
        (
            lambda: PositionEmbedding(9)(
                _x(2, 3, 4), positions=np.zeros((2, 3, 1), "int32")
            ),
            ValueError,
            r"rank 1 or 2.*Received: positions.shape=\(2, 3, 1\)",
        ),
        (
            lambda: SinusoidalPositionEncoding()(
                _x(2, 3, 4), start_index=np.array([1, 2, 3])
            ),
            ValueError,
            r"one start per example \(B=2\)\. Received: start_index.shape=\(3,\)",
        ),
        (
            lambda: SinusoidalPositionEncoding()(
                _x(2, 3, 4), start_index=np.zeros((2, 1), "int32")
            ),
            ValueError,
            r"`start_index` must be a scalar.*start_index.shape=\(2, 1\)",
        ),
        (
            lambda: SinusoidalPositionEncoding()(_x(3, 4), start_index=np.array([1])),
            ValueError,
            r"`start_index` must be a scalar, or of shape `\(B,\)`",
        ),
        (
            lambda: SinusoidalPositionEncoding()(
                _x(2, 3, 4), start_index=np.array([0, -2])
            ),
            ValueError,
            r"`start_index` must be >= 0. Received: start_index=\[0, -2\]",
        ),
        (
            lambda: PositionEmbedding(8)(_x(2, 3, 4), start_index=np.array([5, 6])),
            ValueError,
            r"must be <= 5. Received: start_index=\[5, 6\]",
        ),
        (
            lambda: PositionEmbedding(8)(_x(2, 9, 3, 4), start_index=6),
            ValueError,
            r"must be <= 5. Received: start_index=6",
        ),
    ],
    ids=[
        "positions-past-the-table",
        "many-positions-past-the-table",
        "negative-positions",
        "float-positions-for-a-table",
        "positions-of-the-wrong-length",
        "positions-of-the-wrong-batch",
        "positions-of-the-wrong-rank",
        "start_index-of-the-wrong-batch",
        "start_index-of-rank-2",
        "per-example-start_index-without-a-batch-axis",
        "negative-per-example-start_index",
        "per-example-start_index-past-the-table",
        "rank4-start_index-past-the-table",
    ],
)
def test_bad_positions_and_start_index(call, error, match):
    with pytest.raises(error, match=match):
        call()


def _x(*shape):
    return np.zeros(shape, "float32")
