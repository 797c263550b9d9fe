"""`plan_attention`: which path a call takes, and why.

The device query (`devices.accelerator`) is monkeypatched to fake a GPU or
a TPU; on the real CPU `"auto"` must keep the rule of earlier releases.
"""

import importlib

import keras
import numpy as np
import pytest

import keras_attention as ka
from keras_attention.ops import Accelerator

dispatch = importlib.import_module("keras_attention.ops.dispatch.attention_plan")
devices = importlib.import_module("keras_attention.ops.devices")
plan = ka.ops.plan_attention
JAX = keras.backend.backend() == "jax"
BIG = 2048


def _shapes(t_len, s_len=None, batch=2, heads=8, kv_heads=None, head=64):
    s_len = t_len if s_len is None else s_len
    return (batch, t_len, heads, head), (batch, s_len, kv_heads or heads, head)


@pytest.fixture
def gpu(monkeypatch):
    device = Accelerator("gpu", "fake H200", (9, 0))
    monkeypatch.setattr(devices, "accelerator", lambda: device)
    return device


@pytest.fixture
def tpu(monkeypatch):
    device = Accelerator("tpu", "fake TPU v5")
    monkeypatch.setattr(devices, "accelerator", lambda: device)
    return device


# -- on this CPU: the rule of earlier releases -------------------------------------


@pytest.mark.parametrize("length", [1, 16, BIG - 1, BIG])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
def test_auto_on_a_cpu_keeps_the_size_rule(length, dtype, causal):
    assert ka.ops.accelerator() is None  # the suite runs on a CPU
    got = plan("auto", *_shapes(length, BIG), dtype=dtype, use_causal_mask=causal)
    assert got.impl == (
        "chunked" if length * BIG >= ka.ops.CHUNKED_MIN_SIZE else "dense"
    )
    assert "no accelerator" in got.reason
    weights = plan("auto", *_shapes(length, BIG), return_weights=True)
    assert weights.impl == "dense"
    unknown = plan("auto", *_shapes(None, BIG)).impl
    assert unknown == ("dense" if JAX else "runtime")


def test_explicit_paths_are_taken_and_checked():
    assert plan("dense", *_shapes(BIG)).impl == "dense"
    assert plan("chunked", *_shapes(4)).impl == "chunked"
    fused = plan("fused", *_shapes(4))
    assert fused.impl == "fused" and fused.flash_attention is False  # no kernel here
    assert "composition" in fused.kernel
    with pytest.raises(ValueError, match="return_attention_scores=True"):
        plan("fused", *_shapes(4), return_weights=True)
    with pytest.raises(ValueError, match="attention dropout is active"):
        plan("fused", *_shapes(4), dropout=True)
    with pytest.raises(ValueError, match="SoftCap.*not an additive bias"):
        plan("fused", *_shapes(4), score_modifier=ka.modifiers.SoftCap(3.0))
    with pytest.raises(ValueError, match="attention_impl='flash'"):
        plan("flash", *_shapes(4))


def test_choose_attention_impl_is_the_plans_path():
    assert ka.ops.choose_attention_impl("auto", BIG, BIG) == "chunked"
    assert ka.ops.choose_attention_impl("fused", 3, 5) == "fused"
    with pytest.raises(ValueError, match="fused"):
        ka.ops.choose_attention_impl("fused", 3, 5, return_weights=True)


# -- a faked GPU -----------------------------------------------------------------------


def test_auto_takes_cudnn_on_a_gpu_for_eligible_calls(gpu):
    for length in (16, BIG):  # short (dense today) and long (chunked today)
        got = plan("auto", *_shapes(length), dtype="bfloat16", use_causal_mask=True)
        if JAX:
            assert got.impl == "fused", got
            assert "cuDNN" in got.kernel and got.flash_attention is None
        else:  # TensorFlow: Keras has no fused kernel
            assert got.impl == ("dense" if length == 16 else "chunked")
            assert "backend tensorflow" in got.reason
    if JAX:  # grouped heads, padding, additive biases: still the kernel
        got = plan(
            "auto",
            *_shapes(256, kv_heads=2),
            dtype="float16",
            masked=True,
            score_modifier=ka.modifiers.ALiBi(8),
            mask_modifier=ka.modifiers.PrefixLM(4),
        )
        assert got.impl == "fused", got


NOT_FUSED = {
    "float32": (dict(dtype="float32"), "takes float16/bfloat16"),
    "weights": (dict(return_weights=True), "weights were asked for"),
    "dropout": (dict(dropout=True), "attention dropout"),
    "soft-cap": (dict(score_modifier=ka.modifiers.SoftCap(3.0)), "additive bias"),
    "flash-off": (dict(flash_attention=False), "flash_attention=False"),
    "head-size": (dict(head=60), "multiple of 8"),
    "head-size-ampere": (dict(head=192, capability=(8, 0)), "at most 128"),
    "odd-length-mask": (dict(length=255, masked=True), "even lengths"),
    "long-window": (dict(length=BIG, sliding_window=128), "banded"),
    "huge-bias": (dict(length=16384, batch=8, masked=True), "FUSED_BIAS_MAX_BYTES"),
}


@pytest.mark.skipif(not JAX, reason="the fused kernels are JAX's (TensorFlow: none)")
@pytest.mark.parametrize("case", sorted(NOT_FUSED))
def test_auto_says_why_a_call_stays_off_the_kernel(gpu, monkeypatch, case):
    options, why = NOT_FUSED[case]
    options = {"dtype": "bfloat16", **options}
    shape = dict(
        length=options.pop("length", 256),
        batch=options.pop("batch", 2),
        head=options.pop("head", 64),
    )
    if "capability" in options:
        device = Accelerator("gpu", "fake A100", options.pop("capability"))
        monkeypatch.setattr(devices, "accelerator", lambda: device)
    q_shape, k_shape = _shapes(
        shape["length"], batch=shape["batch"], head=shape["head"]
    )
    got = plan("auto", q_shape, k_shape, **options)
    assert got.impl != "fused", got
    assert why in got.reason, got.reason
    expected = "dense" if shape["length"] ** 2 < ka.ops.CHUNKED_MIN_SIZE else "chunked"
    assert got.impl == expected  # today's rule otherwise


@pytest.mark.skipif(not JAX, reason="the fused kernels are JAX's (TensorFlow: none)")
def test_a_tpu_never_takes_kerass_splash_path(tpu):
    causal = plan("auto", *_shapes(512), use_causal_mask=True)
    assert causal.impl == "dense" and "wrong results" in causal.reason
    fused = plan("fused", *_shapes(512))
    assert fused.flash_attention is False and "composition" in fused.kernel
    offset = plan("auto", *_shapes(1, 512), use_causal_mask=True, causal_offset=7)
    assert offset.impl == "dense"  # decoding: a causal mask with an offset
    with pytest.raises(ValueError, match="on a TPU"):
        plan("auto", *_shapes(512), flash_attention=True)


def _tpu_plans():
    """The plans of a spread of calls on the faked TPU (none raises)."""
    calls = [
        dict(),
        dict(use_causal_mask=True),
        dict(masked=True),
        dict(use_causal_mask=True, causal_offset=7),
        dict(score_modifier=ka.modifiers.ALiBi(8)),
        dict(mask_modifier=ka.modifiers.SlidingWindow(16)),
    ]
    for dtype in ("float32", "bfloat16"):
        for impl in ("auto", "fused"):
            for options in calls:
                yield plan(impl, *_shapes(512), dtype=dtype, **options)


def test_no_plan_names_the_splash_kernel_that_the_code_refuses(tpu):
    # Keras 3.15's TPU splash path gives wrong results: no call is sent
    # there, so no plan (nor the table of kernels) may name it.
    kernels = dispatch.KERNELS.items()
    assert not any("splash" in name or "TPU" in words for name, words in kernels)
    for got in _tpu_plans():
        assert got.impl != "fused" or got.flash_attention is False, got
        assert "splash" not in got.kernel, got
        assert got.kernel in dispatch.KERNELS.values(), got
    with pytest.raises(ValueError, match="on a TPU.*wrong results"):
        plan("fused", *_shapes(512), dtype="bfloat16", flash_attention=True)


def _docstrings():
    """The docstrings that say what the fused path runs."""
    fused = importlib.import_module("keras_attention.ops.fused.fused_attention")
    fused_plan = importlib.import_module("keras_attention.ops.fused.fused_plan")
    objects = {
        "MultiHeadAttention": ka.layers.MultiHeadAttention,
        "TransformerEncoderBlock": ka.layers.TransformerEncoderBlock,
        "Transformer": ka.models.Transformer,
        "ops.dispatch.attention_plan": dispatch,
        "ops.fused.fused_attention": fused,
        "ops.fused.fused_plan": fused_plan,
        "fused_kernel": fused_plan.fused_kernel,
        "plan_attention": ka.ops.plan_attention,
    }
    return {
        name: " ".join((obj.__doc__ or "").split()) for name, obj in objects.items()
    }


@pytest.mark.parametrize("name", sorted(_docstrings()))
def test_docstrings_claim_no_tpu_kernel_the_code_refuses(name):
    """Where a docstring names the TPU's splash kernel, it says why it is
    not used; none says the fused path runs a TPU kernel."""
    text = _docstrings()[name]
    for sentence in text.split(". "):
        if "splash" in sentence:
            assert "wrong results" in sentence, f"{name}: {sentence!r}"
    assert "TPU's fused kernel" not in text and "TPU's kernel" not in text, name
    assert "GPU or TPU" not in text and "GPU's or TPU's" not in text, name


def test_flash_attention_false_keeps_fused_on_the_composition(gpu):
    got = plan("fused", *_shapes(512), dtype="bfloat16", flash_attention=False)
    assert got.flash_attention is False and "composition" in got.kernel


# -- flash_attention=True (Keras' meaning) -----------------------------------------------


def test_flash_attention_true_asks_for_the_kernel():
    got = plan("auto", *_shapes(8))
    forced = plan("auto", *_shapes(8), flash_attention=True)
    assert got.impl == "dense" and forced.impl == "fused"
    assert forced.flash_attention is True
    with pytest.raises(ValueError, match="Returning attention scores is not supported"):
        plan("auto", *_shapes(8), return_weights=True, flash_attention=True)
    with pytest.raises(ValueError, match="must be 'auto' or 'fused'"):
        plan("chunked", *_shapes(8), flash_attention=True)


def test_layers_check_the_fused_options_at_construction():
    with pytest.raises(ValueError, match="Dropout is not supported"):
        ka.layers.MultiHeadAttention(2, 4, dropout=0.1, attention_impl="fused")
    with pytest.raises(ValueError, match="must be 'auto' or 'fused'"):
        ka.layers.MultiHeadAttention(2, 4, attention_impl="dense", flash_attention=True)
    with pytest.raises(ValueError, match="Dropout is not supported"):
        ka.layers.TransformerEncoderBlock(
            num_heads=2, intermediate_dim=8, dropout=0.1, attention_impl="fused"
        )
    # The block's residual dropout stays; only the attention's must be 0.
    block = ka.layers.TransformerEncoderBlock(
        num_heads=2,
        intermediate_dim=8,
        dropout=0.1,
        attention_dropout=0.0,
        attention_impl="fused",
    )
    assert block.attention_impl == "fused"
    with pytest.raises(ValueError, match="Dropout is not supported"):
        ka.models.Transformer(9, 9, hidden_dim=4, num_heads=2, attention_impl="fused")


# -- layers and the recorded plans ------------------------------------------------------


def test_recorded_plans_name_the_layers_and_their_paths():
    x = np.random.default_rng(0).normal(size=(2, 6, 8)).astype("float32")
    auto = ka.layers.MultiHeadSelfAttention(2, 4, name="auto_attention")
    fused = ka.layers.MultiHeadSelfAttention(2, 4, attention_impl="fused", name="f")
    with ka.ops.recording_attention_plans() as plans:
        auto(x)
        fused(x, use_causal_mask=True)
        auto(x, return_attention_scores=True)
    assert [p.impl for p in plans] == ["dense", "fused", "dense"]
    assert plans[0].where.endswith("auto_attention")
    assert plans[1].where.endswith("f")
    assert "weights were asked for" in plans[2].reason
    assert "auto_attention" in str(plans[0])
    auto(x)
    assert len(plans) == 3  # recording stops with the block


@pytest.mark.skipif(not JAX, reason="the fused kernels are JAX's (TensorFlow: none)")
def test_a_model_on_a_faked_gpu_runs_the_fused_path(gpu):
    """Planned for cuDNN, the call still computes here (Keras finds no
    cuDNN on this CPU and runs its composition): the dense path's values."""
    keras.config.set_dtype_policy("mixed_bfloat16")
    x = np.random.default_rng(1).normal(size=(2, 8, 16)).astype("float32")
    auto = ka.layers.MultiHeadSelfAttention(2, 8)
    dense = ka.layers.MultiHeadSelfAttention(2, 8, attention_impl="dense")
    auto.build(x.shape)
    dense.build(x.shape)
    dense.set_weights(auto.get_weights())
    mask = np.ones((2, 8), bool)
    mask[1, 6:] = False
    with ka.ops.recording_attention_plans() as plans:
        got = auto(x, query_mask=mask, use_causal_mask=True)
    assert plans[0].impl == "fused" and "cuDNN" in plans[0].kernel
    want = dense(x, query_mask=mask, use_causal_mask=True)
    np.testing.assert_allclose(
        np.asarray(got, "float32"), np.asarray(want, "float32"), atol=3e-2
    )
    np.testing.assert_array_equal(np.asarray(got, "float32")[1, 6:], 0.0)
