"""The self-checks must pass on correct layers and FAIL on broken ones."""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention import testing


@pytest.fixture
def qv(rng):
    return (
        rng.normal(size=(2, 4, 3)).astype("float32"),
        rng.normal(size=(2, 4, 3)).astype("float32"),
    )


@keras.saving.register_keras_serializable(package="test_testing")
class LeakyAttention(keras.layers.Layer):
    """Dot attention that ignores `value_mask` and `use_causal_mask`, and
    computes its logits in the compute dtype (float16 overflows)."""

    def __init__(self, temperature=1.0, **kwargs):
        super().__init__(**kwargs)
        self.temperature = temperature

    def build(self, query_shape, value_shape):
        self.w = self.add_weight(shape=(value_shape[-1],), initializer="ones")

    def call(self, query, value, value_mask=None, use_causal_mask=False):
        logits = ops.matmul(query, ops.swapaxes(value, 1, 2)) / self.temperature
        return ops.matmul(ops.softmax(logits, axis=-1), value * self.w)

    def get_config(self):
        # Forgets `temperature`.
        return super().get_config()


def test_causality_passes_with_a_causal_mask(qv):
    layer = ka.layers.ScoredAttention(score="general")
    testing.check_causality(layer, list(qv), call_kwargs={"use_causal_mask": True})


def test_causality_fails_without_a_causal_mask(qv):
    with pytest.raises(AssertionError, match=r"not causal: output 0 depends on"):
        testing.check_causality(ka.layers.ScoredAttention(), list(qv))


def test_causality_fails_for_a_layer_that_ignores_its_past(qv):
    layer = keras.layers.Dense(3)
    with pytest.raises(AssertionError, match="no output depends on an earlier"):
        testing.check_causality(layer, qv[0])


def test_padding_invariance_passes_for_masked_attention(qv):
    q, v = qv
    testing.check_padding_invariance(ka.layers.ScoredAttention(score="additive"), q, v)
    testing.check_padding_invariance(
        ka.layers.ScoredAttention(), q, v, key=v[..., ::-1].copy()
    )
    partial = np.array([[1, 1, 0, 1], [1, 0, 0, 0]], bool)
    testing.check_padding_invariance(
        ka.layers.BahdanauAttention(units=2),
        q[:, 0],
        v,
        call_kwargs={"value_mask": partial},
    )


def test_padding_invariance_fails_when_the_mask_is_ignored(qv):
    with pytest.raises(AssertionError, match="masked padding positions"):
        testing.check_padding_invariance(LeakyAttention(), *qv)


class MaskedMeanSelfAttention(keras.layers.Layer):
    """Self-attention with uniform weights over the unmasked positions."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, x, mask=None):
        w = ops.ones(ops.shape(x)[:2] + (ops.shape(x)[1],))
        if mask is not None:
            w = w * ops.cast(mask, "float32")[:, None, :]
        w = w / ops.sum(w, axis=-1, keepdims=True)
        return ops.matmul(w, x)


def test_padding_invariance_self_attention_mode(qv):
    testing.check_padding_invariance(MaskedMeanSelfAttention(), qv[0])


def test_config_round_trip_fails_on_incomplete_config(qv):
    with pytest.raises(
        AssertionError, match=r"lacks constructor arguments \['temperature'\]"
    ):
        testing.check_config_round_trip(LeakyAttention(temperature=2.0), list(qv))


def test_serialization_fails_when_reloaded_outputs_differ(qv):
    model = testing.make_model(LeakyAttention(temperature=3.0), list(qv))
    with pytest.raises(AssertionError, match=r"\.keras round trip: output 0 differs"):
        testing.check_serialization(model, list(qv), saved_model=False)


def test_serialization_passes_with_a_vector_query(qv):
    q, v = qv
    layer = ka.layers.ScoredAttention(score="additive")
    testing.check_serialization(testing.make_model(layer, [q[:, 0], v]), [q[:, 0], v])


def test_mixed_precision_fails_on_float16_logits(qv):
    with pytest.raises(
        AssertionError, match=r"under 'mixed_float16': output 0 has non-finite"
    ):
        testing.check_mixed_precision(LeakyAttention, list(qv), gradients=False)
    # The policy is restored afterwards.
    assert keras.config.dtype_policy().name == "float32"


def test_mixed_precision_passes_with_float32_logits(qv):
    testing.check_mixed_precision(
        lambda: ka.layers.ScoredAttention(score="dot"), list(qv)
    )


def test_mixed_precision_fails_when_the_factory_ignores_the_policy(qv):
    with pytest.raises(AssertionError, match="computes in float32"):
        testing.check_mixed_precision(
            lambda: ka.layers.ScoredAttention(dtype="float32"), list(qv)
        )


def test_jit_fit_fails_on_nan_loss(qv):
    q, v = qv
    model = testing.make_model(ka.layers.ScoredAttention(score="general"), [q, v])
    with pytest.raises(AssertionError, match="non-finite losses"):
        testing.check_jit_fit(model, [q, v], np.full((2, 4, 3), np.nan, "float32"))


def test_input_gradients_match_analytic(rng):
    x = rng.normal(size=(3,)).astype("float32")
    y = rng.normal(size=(3,)).astype("float32")
    gx, gy = testing.input_gradients(lambda a, b: ops.sum(a * a * b), [x, y])
    np.testing.assert_allclose(ops.convert_to_numpy(gx), 2 * x * y, rtol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(gy), x * x, rtol=1e-6)
    (unused,) = testing.input_gradients(lambda a: ops.sum(y), [x])
    np.testing.assert_array_equal(ops.convert_to_numpy(unused), 0.0)
