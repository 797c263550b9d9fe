import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.decoding import greedy_search
from keras_attention.decoding import sample
from keras_attention.decoding import top_k_filter
from keras_attention.decoding import top_p_filter
from keras_attention.decoding.sampling import gumbel_noise
from keras_attention.decoding.sampling import seed_tensor

ROWS, STEPS = 1000, 20  # 20,000 draws per call


def _fixed_step(logits):
    """A step function whose logits `(V,)` are the same for every row and step."""
    logits = ops.convert_to_tensor(np.asarray(logits, "float32"))

    def step_fn(tokens, state, index):
        batch = ops.shape(tokens)[0]
        return ops.tile(logits[None], (batch, 1)), state, None

    return step_fn


def _draws(logits, **kwargs):
    tokens, _ = sample(
        _fixed_step(logits), np.zeros(ROWS, "int32"), (), STEPS, seed=0, **kwargs
    )
    return ops.convert_to_numpy(tokens).ravel()


def _frequencies(tokens, vocab):
    return np.bincount(tokens, minlength=vocab) / tokens.size


def _softmax(x):
    x = np.asarray(x, "float64")
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _chi_square(tokens, probs):
    """Pearson's statistic of the token counts against `probs` (> 0 only)."""
    counts = np.bincount(tokens, minlength=len(probs))
    expected = tokens.size * probs
    support = probs > 0
    assert counts[~support].sum() == 0, "a token outside the support was drawn"
    return ((counts - expected)[support] ** 2 / expected[support]).sum()


# -- the filters, against NumPy ---------------------------------------------


def _numpy_top_k(logits, k):
    order = np.argsort(-logits, axis=-1, kind="stable")  # ties: lowest id first
    keep = np.zeros(logits.shape, bool)
    np.put_along_axis(keep, order[..., :k], True, axis=-1)
    return keep


def _numpy_top_p(logits, p):
    order = np.argsort(-logits, axis=-1, kind="stable")
    probs = np.take_along_axis(_softmax(logits), order, axis=-1)
    before = np.cumsum(probs, axis=-1) - probs
    keep = np.zeros(logits.shape, bool)
    np.put_along_axis(keep, order, before < p, axis=-1)
    return keep


@pytest.mark.parametrize("k", [1, 3, 7, 12])
def test_top_k_filter_keeps_exactly_the_k_largest(rng, k):
    # Rounded logits: many ties, broken towards the lowest token id.
    logits = np.round(rng.normal(size=(4, 3, 10)), 0).astype("float32")
    out = ops.convert_to_numpy(top_k_filter(logits, k))
    keep = _numpy_top_k(logits, k)
    np.testing.assert_array_equal(out > -1e29, keep)
    np.testing.assert_array_equal(out[keep], logits[keep])  # kept ones unchanged
    assert (out.reshape(-1, 10) > -1e29).sum(-1).tolist() == [min(k, 10)] * 12


@pytest.mark.parametrize("p", [0.05, 0.3, 0.6, 0.9, 0.99, 1.0])
def test_top_p_filter_keeps_the_smallest_set_reaching_p(rng, p):
    logits = (2.0 * rng.normal(size=(64, 12))).astype("float32")
    out = ops.convert_to_numpy(top_p_filter(logits, p))
    keep = _numpy_top_p(logits, p)
    np.testing.assert_array_equal(out > -1e29, keep)
    np.testing.assert_array_equal(out[keep], logits[keep])
    mass = np.where(keep, _softmax(logits), 0.0).sum(-1)
    assert (mass >= p - 1e-6).all()  # the kept mass reaches p ...
    smallest = np.where(keep, _softmax(logits), np.inf).min(-1)
    assert (mass - smallest < p).all()  # ... and one token fewer would not


def test_top_p_filter_always_keeps_the_most_likely_and_breaks_ties_by_id():
    logits = np.array([[0.0, 5.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]], "float32")
    out = ops.convert_to_numpy(top_p_filter(logits, 0.01)) > -1e29
    np.testing.assert_array_equal(out, [[0, 1, 0, 0], [1, 0, 0, 0]])
    out = ops.convert_to_numpy(top_p_filter(logits, 0.6)) > -1e29
    np.testing.assert_array_equal(out, [[0, 1, 0, 0], [1, 1, 1, 0]])
    # Two of four equal tokens reach 0.5 exactly: a third is not needed.
    out = ops.convert_to_numpy(top_p_filter(logits[1:], 0.5)) > -1e29
    np.testing.assert_array_equal(out, [[1, 1, 0, 0]])


# -- sampling never leaves the top-k set or the nucleus ----------------------

LOGITS = np.log([0.02, 0.3, 0.05, 0.25, 0.08, 0.2, 0.1])  # V = 7


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("temperature", [1.0, 5.0])  # 5: flat, outsiders likely
def test_sampling_never_leaves_the_top_k_set(k, temperature):
    tokens = _draws(LOGITS, top_k=k, temperature=temperature)
    allowed = set(np.argsort(-LOGITS)[:k].tolist())
    assert set(tokens.tolist()) == allowed  # never outside, and all of it drawn
    probs = np.where(_numpy_top_k(LOGITS, k), _softmax(LOGITS / temperature), 0)
    assert _chi_square(tokens, probs / probs.sum()) < 30.0  # df <= 3


@pytest.mark.parametrize(
    "p, nucleus",
    [(0.25, {1}), (0.5, {1, 3}), (0.7, {1, 3, 5}), (0.9, {1, 3, 5, 6, 4})],
)
def test_sampling_never_leaves_the_top_p_nucleus(p, nucleus):
    tokens = _draws(LOGITS, top_p=p)
    assert set(tokens.tolist()) == nucleus
    probs = np.where(_numpy_top_p(LOGITS, p), np.exp(LOGITS), 0.0)
    assert _chi_square(tokens, probs / probs.sum()) < 30.0


def test_top_k_then_top_p_takes_the_nucleus_of_the_top_k():
    # Top-3 renormalized: 0.3, 0.25, 0.2 -> 0.4, 0.33, 0.27: p = 0.5 keeps 2.
    tokens = _draws(LOGITS, top_k=3, top_p=0.5)
    assert set(tokens.tolist()) == {1, 3}


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_frequencies_follow_softmax_of_logits_over_temperature(temperature):
    tokens = _draws(LOGITS, temperature=temperature)
    probs = _softmax(LOGITS / temperature)
    assert _chi_square(tokens, probs) < 30.0  # df = 6; P(> 30) < 1e-4
    np.testing.assert_allclose(_frequencies(tokens, 7), probs, atol=0.015)


def test_lower_temperature_concentrates_on_the_most_likely_token():
    shares = [
        _frequencies(_draws(LOGITS, temperature=t), 7)[1] for t in (4.0, 1.0, 0.25)
    ]
    assert shares[0] < shares[1] < shares[2]
    near_greedy = _draws(LOGITS, temperature=1e-3)
    assert set(near_greedy.tolist()) == {1}


# -- seeds -----------------------------------------------------------------


def _uniform_step(tokens, state, index):
    return ops.zeros((ops.shape(tokens)[0], 50)), state, None


def _uniform_tokens(seed):
    tokens, _ = sample(_uniform_step, ops.zeros((4,), "int32"), (), 8, seed=seed)
    return tokens


def _sample_uniform(seed):
    return ops.convert_to_numpy(_uniform_tokens(seed))


def test_same_seed_same_tokens_other_seed_other_tokens():
    first = _sample_uniform(7)
    np.testing.assert_array_equal(first, _sample_uniform(7))
    assert not np.array_equal(first, _sample_uniform(8))
    # Rows and steps are not copies of each other.
    assert len({tuple(row) for row in first}) == 4
    assert len({tuple(col) for col in first.T}) == 8


def test_compiled_sampling_equals_eager_sampling(jit):
    # The seed is an argument: one compiled function serves every seed.
    compiled = jit(_uniform_tokens)
    runs = {
        seed: ops.convert_to_numpy(compiled(ops.convert_to_tensor(seed, "int32")))
        for seed in (7, 8)
    }
    for seed, tokens in runs.items():
        np.testing.assert_array_equal(tokens, _sample_uniform(seed))
    assert not np.array_equal(runs[7], runs[8])
    closed_over = jit(lambda: _uniform_tokens(7))  # a Python seed inside the trace
    np.testing.assert_array_equal(
        ops.convert_to_numpy(closed_over()), _sample_uniform(7)
    )


def test_no_seed_follows_keras_set_random_seed():
    keras.utils.set_random_seed(3)
    first = _sample_uniform(None)
    assert not np.array_equal(first, _sample_uniform(None))  # a fresh seed each call
    keras.utils.set_random_seed(3)
    np.testing.assert_array_equal(first, _sample_uniform(None))


def _numpy_lowbias32(x):
    x = x.astype(np.uint64)
    mask = np.uint64(0xFFFFFFFF)
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x7FEB352D)) & mask
    x ^= x >> np.uint64(15)
    x = (x * np.uint64(0x846CA68B)) & mask
    x ^= x >> np.uint64(16)
    return x


def test_gumbel_noise_is_the_documented_hash_on_every_backend():
    # A NumPy re-implementation: TensorFlow and JAX both match it bit for bit,
    # so a seed gives the same tokens on either backend.
    seed, index = 123456789, 5
    h = _numpy_lowbias32
    u32 = np.uint64(0xFFFFFFFF)
    step = h(np.uint64(seed) ^ h((np.uint64(index) + np.uint64(0x9E3779B9)) & u32))
    row = h((step + h(np.arange(3, dtype=np.uint64)[:, None])) & u32)
    bits = h(h(row ^ np.arange(6, dtype=np.uint64)[None, :]) ^ step)
    uniform = ((bits >> np.uint64(8)).astype("float64") + 0.5) * 2.0**-24
    want = -np.log(-np.log(uniform))
    got = gumbel_noise(seed_tensor(seed), ops.convert_to_tensor(index), (3, 6))
    np.testing.assert_allclose(ops.convert_to_numpy(got), want, rtol=1e-5, atol=1e-6)
    # Gumbel-distributed: mean Euler's gamma, variance pi^2 / 6.
    many = ops.convert_to_numpy(gumbel_noise(seed_tensor(1), 0, (400, 500)))
    assert abs(many.mean() - 0.5772) < 0.01
    assert abs(many.var() - np.pi**2 / 6) < 0.03


# -- the loop is greedy search's ---------------------------------------------


def _counting_step_fn(tokens, state, index):
    """Likes `tokens + 1`; aux is the step index."""
    logits = keras.ops.one_hot(tokens + 1, 10) * 5.0
    aux = {"index": keras.ops.full(keras.ops.shape(tokens), index + 100)}
    return logits, state + 1, aux


def test_top_k_one_is_greedy_search_with_its_end_token_and_aux():
    start = np.array([0, 5, 7], "int32")
    args = (_counting_step_fn, start, np.zeros(3), 5)
    tokens, aux = sample(*args, end_token=8, pad_token=-1, top_k=1, temperature=9.0)
    want_tokens, want_aux = greedy_search(*args, end_token=8, pad_token=-1)
    np.testing.assert_array_equal(tokens, want_tokens)
    np.testing.assert_array_equal(aux["index"], want_aux["index"])
    assert ops.convert_to_numpy(tokens)[2].tolist() == [8, -1, -1, -1, -1]


def test_pads_and_zeroes_aux_after_a_sampled_end_token():
    def step_fn(tokens, state, index):  # end (3) is as likely as 1 or 2
        logits = ops.log(ops.convert_to_tensor([[1e-9, 1.0, 1.0, 1.0]] * 64))
        return logits, state, ops.full((64, 2), index + 1)

    tokens, aux = sample(step_fn, np.zeros(64, "int32"), (), 12, end_token=3, seed=4)
    tokens, aux = ops.convert_to_numpy(tokens), ops.convert_to_numpy(aux)
    ended = np.cumsum(tokens == 3, axis=1) > 0
    after = ended & ~(tokens == 3)  # strictly after the first end token
    assert after.any() and (~ended).any()  # both cases occur
    assert (tokens[after] == 0).all() and (aux[after] == 0).all()
    assert (tokens[~after] != 0).all() and (aux[~after] > 0).all()
    assert aux.shape == (64, 12, 2)


# -- arguments ---------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"temperature": 0}, ValueError, r"`temperature` must be finite and > 0"),
        ({"temperature": -1.0}, ValueError, r"Received: temperature=-1.0"),
        ({"temperature": float("inf")}, ValueError, r"temperature=inf"),
        ({"temperature": "hot"}, TypeError, r"`temperature` must be a number"),
        ({"top_k": 0}, ValueError, r"`top_k` must be a positive integer or None"),
        ({"top_k": 2.5}, ValueError, r"Received: top_k=2.5"),
        ({"top_p": 0.0}, ValueError, r"`top_p` must be in \(0, 1\]"),
        ({"top_p": 1.5}, ValueError, r"Received: top_p=1.5"),
        ({"top_p": "0.9"}, TypeError, r"`top_p` must be a number"),
        ({"seed": 1.5}, TypeError, r"`seed` must be an int.*Received: seed=1.5"),
        ({"seed": True}, TypeError, r"Received: seed=True"),
        ({"max_length": 0}, ValueError, r"`max_length` must be a positive integer"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, error, match):
    kwargs = {"max_length": 3, **kwargs}
    with pytest.raises(error, match=match):
        sample(_uniform_step, np.zeros(2, "int32"), (), **kwargs)


def test_bad_filter_arguments():
    with pytest.raises(ValueError, match=r"`k` must be a positive integer"):
        top_k_filter(np.zeros((1, 4)), 0)
    with pytest.raises(ValueError, match=r"`p` must be in \(0, 1\]. Received: p=0"):
        top_p_filter(np.zeros((1, 4)), 0)
