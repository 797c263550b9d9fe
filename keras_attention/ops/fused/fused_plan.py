"""Whether the fused path can take a call, and which kernel Keras runs.

The fused half of the dispatch (`keras_attention.ops.dispatch.attention_plan`): what
keeps a call off `keras.ops.dot_product_attention` (`fused_obstacle`,
`auto_obstacle`) and what that function runs for it on this machine
(`fused_kernel`: cuDNN's flash attention, or Keras' composition). The
calls are the dispatch's `_Call` records; the device comes from
`keras_attention.ops.devices.accelerator`.

On a TPU the answer is always Keras' composition: Keras 3.15's TPU branch
of `keras.ops.dot_product_attention` (its splash kernel) gives wrong
results (it scales the queries by `sqrt(H)` for a kernel that does not
divide by it, and builds a causal mask when none is given; a review
reproduced both in Pallas' interpret mode), so no call is sent there
(docs/performance.md, "Why not the TPU's splash kernel").
"""

import keras

from keras_attention.keras_compat import keras_can_use_flash_attention
from keras_attention.ops import devices

# The fused kernels take a mask or a bias only as a tensor of the scores'
# shape, at most `(B, N, T, S)` in the compute dtype (JAX's cuDNN wrapper
# turns a boolean mask into such a bias; a learned bias also gets a
# gradient of that size). `"auto"` passes one to the fused kernel while
# that tensor stays within this budget; beyond it the chunked path, which
# computes masks and biases block by block, costs less memory. A cap on
# memory, not a measured crossover of speed (no GPU has been lent yet:
# `benchmarks/gpu_check.sh` measures it).
FUSED_BIAS_MAX_BYTES = 2**30


def is_additive_bias(score_modifier):
    """Whether `score_modifier` adds a bias that does not depend on the
    score (`score + b(batch, head, query, key)`), so that the fused kernels
    can take it as their `bias`: modifiers that say so with an
    `additive_bias = True` attribute (ALiBi, T5's relative bias, chains of
    such). A plain function is not known to be one."""
    return bool(getattr(score_modifier, "additive_bias", False))


def fused_obstacle(call):
    """Why the fused path cannot compute `call` at all, or `None`."""
    if call.return_weights:
        return (
            "the weights were asked for (`return_attention_scores=True`) and "
            "keras.ops.dot_product_attention does not return them"
        )
    if call.dropout:
        return (
            "attention dropout is active and keras.ops.dot_product_attention has none"
        )
    if call.score_modifier is not None and not is_additive_bias(call.score_modifier):
        return (
            f"the score modifier {call.score_modifier!r} is not an additive bias "
            "(`additive_bias = True`): the fused kernels add a bias, they do not "
            "call a function of the score"
        )
    return None


def fused_kernel(call):
    """`(kernel, reason)`: what `keras.ops.dot_product_attention` runs for
    `call` here: `"cudnn"` or `"composition"` (its einsums and softmax, no
    fused kernel), with the reason in words.

    The rules follow Keras 3.15 and JAX 0.10: under JAX on an NVIDIA GPU,
    cuDNN's flash attention for float16/bfloat16 inputs with a head size
    that is a multiple of 8 and at most 128 (256 from compute capability
    9.0), and even lengths when a mask or bias is passed (JAX's
    `check_is_flash_attention`); everywhere else the composition: under
    TensorFlow, on a CPU, and on a TPU, where Keras' splash path gives
    wrong results and is never asked for (see the module's docstring).
    """
    backend = keras.backend.backend()
    if backend != "jax":
        return "composition", (
            f"backend {backend}: Keras has no fused attention kernel there "
            "(einsum and softmax, under XLA when compiled)"
        )
    device = devices.accelerator()
    if device is None:
        return "composition", "no accelerator visible (on a CPU Keras has no kernel)"
    if device.kind == "tpu":
        return "composition", (
            "Keras 3.15's splash path on a TPU gives wrong results (unscaled "
            "logits, a causal mask when none is given), so it is not used"
        )
    return _cudnn_kernel(call, device)


def _cudnn_kernel(call, device):
    if call.dtype not in ("float16", "bfloat16"):
        return "composition", (
            f"cuDNN's flash attention takes float16/bfloat16, not {call.dtype}"
        )
    head = call.query_shape[-1]
    head = None if head is None or call.value_dim is None else max(head, call.value_dim)
    largest = 256 if (device.compute_capability or (0,)) >= (9, 0) else 128
    if head is None or head % 8 or head > largest:
        return "composition", (
            f"cuDNN's flash attention needs a head size that is a multiple of 8, "
            f"at most {largest} here; this call has {head}"
        )
    t_len, s_len = call.lengths
    odd = any(n is None or n % 2 for n in (t_len, s_len))
    if call.needs_mask_or_bias and odd:
        return "composition", (
            f"cuDNN's flash attention needs even lengths with a mask or bias "
            f"(T={t_len}, S={s_len})"
        )
    refused = _keras_refuses_cudnn(call, head)
    if refused:
        return "composition", refused
    return "cudnn", f"cuDNN flash attention on {device.name or 'the GPU'}"


def _keras_refuses_cudnn(call, head):
    """Keras' own test of cuDNN's kernel for these shapes (cuDNN's version,
    the compute capability, the layout), asked only on a real GPU: where it
    says no, Keras runs its composition, quietly. A reason, or `None`.

    The test is private to Keras (`keras_compat.keras_can_use_flash_attention`);
    it is not asked where it is missing.
    """
    import jax

    if jax.devices()[0].platform != "gpu":
        return None  # a faked accelerator (tests), or none
    (batch, t_len, heads, _), (_, s_len, groups, _) = call.query_shape, call.key_shape
    batch = batch or 1
    query = jax.ShapeDtypeStruct((batch, t_len, heads, head), call.dtype)
    key = jax.ShapeDtypeStruct((batch, s_len, groups, head), call.dtype)
    bias = None
    if call.needs_mask_or_bias:
        bias = jax.ShapeDtypeStruct((1, 1, t_len, s_len), call.dtype)
    if keras_can_use_flash_attention(query, key, key, bias) is not False:
        return None
    return "Keras' own test refuses cuDNN's kernel for these inputs here"


def auto_obstacle(call, plain):
    """Why `"auto"` keeps a call the fused path could compute off it."""
    if call.flash_attention is False:
        return "flash_attention=False"
    if any(n is None for n in call.lengths):
        return "a length is unknown while tracing"
    banded = call.sliding_window is not None or getattr(
        call.mask_modifier, "banded", False
    )
    if banded and plain.impl == "chunked":
        return "a banded mask, of which the chunked path visits only the band"
    size = _bias_bytes(call)
    if size > FUSED_BIAS_MAX_BYTES:
        return (
            f"its mask or bias would take {size / 2**30:.1f} GiB "
            f"(> FUSED_BIAS_MAX_BYTES = {FUSED_BIAS_MAX_BYTES / 2**30:g} GiB)"
        )
    return None


def _bias_bytes(call):
    """An upper bound of the mask/bias tensor the fused kernel would read:
    `(B, N, T, S)` in the compute dtype, twice for a learned bias (its
    gradient); 0 without one."""
    if not call.needs_mask_or_bias:
        return 0
    batch, t_len, heads, _ = call.query_shape
    size = (batch or 1) * (heads or 1) * t_len * call.lengths[1]
    size *= 2 if call.dtype in ("float16", "bfloat16") else 4
    if isinstance(call.score_modifier, keras.layers.Layer):
        size *= 2 if call.score_modifier.trainable_weights else 1
    return size
