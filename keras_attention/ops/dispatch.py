"""Which attention path a call takes, and why: the one place that decides.

Three paths compute the same attention:

- `"dense"`: this package's einsums and float32 softmax, O(T S) memory;
  the only path that can return the weights;
- `"chunked"`: this package's exact online-softmax loop over blocks,
  O(T + S) memory (`keras_attention.ops.chunked_attention`);
- `"fused"`: `keras.ops.dot_product_attention`, which runs the fused
  kernel of the hardware where Keras has one (cuDNN's flash attention on
  an NVIDIA GPU under JAX, the splash kernel on a TPU) and Keras' own
  composition of einsums and softmax elsewhere
  (`keras_attention.ops.fused_attention`).

`plan_attention` chooses among them from what is static at tracing time
(shapes, dtype, the options of the call, the device) and returns an
`AttentionPlan`: the path, the kernel it reaches and a reason in words.
`multi_head_attention` follows it; `recording_attention_plans` collects the
plans of every attention call traced inside it, so that a user can see
which kernel each layer of a model runs:

    with ka.ops.recording_attention_plans() as plans:
        model(x)
    for plan in plans:
        print(plan)

`"auto"` takes the fused path only on an accelerator whose fused kernel the
call can use (see `fused_kernel`); on a CPU it never changes the rule of
earlier releases (dense below `CHUNKED_MIN_SIZE` score entries per head,
chunked from there on).
"""

import contextlib
import dataclasses
import functools

import keras

from keras_attention.ops.fused_attention import kernel_causal
from keras_attention.validation import check_choice

ATTENTION_IMPLS = ("auto", "dense", "chunked", "fused")

# `attention_impl="auto"` switches to the chunked path when the score matrix
# of one head, `T * S`, reaches this size. Measured (benchmarks/README.md,
# "Choosing the threshold"; B=1, 8 heads, key_dim 64, forward+backward under
# XLA on a 2-core CPU), chunked / dense time: 1.35 at L=1024, 1.23 at 2048,
# 1.19 at 4096. The dense path is never much faster, while its memory (4 B N
# T S bytes per (T, S) tensor, several alive in the backward pass) grows
# quadratically: at L=2048 it already holds ~0.4 GiB of weights per example.
CHUNKED_MIN_SIZE = 2048 * 2048

# The fused kernels take a mask or a bias only as a tensor of the scores'
# shape, at most `(B, N, T, S)` in the compute dtype (JAX's cuDNN wrapper
# turns a boolean mask into such a bias; a learned bias also gets a
# gradient of that size). `"auto"` passes one to the fused kernel while
# that tensor stays within this budget; beyond it the chunked path, which
# computes masks and biases block by block, costs less memory. A cap on
# memory, not a measured crossover of speed (no GPU has been lent yet:
# `benchmarks/gpu_check.sh` measures it).
FUSED_BIAS_MAX_BYTES = 2**30

KERNELS = {
    "dense": "keras_attention's dense kernel",
    "chunked": "keras_attention's chunked kernel",
    "runtime": "dense or chunked, chosen from the lengths when the graph runs",
    "composition": "Keras' dot_product_attention composition (einsum, softmax)",
    "cudnn": "cuDNN flash attention (keras.ops.dot_product_attention)",
    "splash": "splash attention, TPU (keras.ops.dot_product_attention)",
}


@dataclasses.dataclass(frozen=True)
class AttentionPlan:
    """The path of one attention call.

    Attributes:
        impl: `"dense"`, `"chunked"`, `"fused"` or `"runtime"` (a TensorFlow
            graph traced for an unknown length: dense or chunked, decided
            when it runs).
        kernel: what computes it, in words (`KERNELS`).
        reason: why this path, in words.
        flash_attention: what the fused path passes to
            `keras.ops.dot_product_attention` (`None`: let Keras use its
            fused kernel; `False`: its composition; `True`: the kernel or
            an error). `None` on the other paths.
        where: the Keras name scope of the call (the layer), when known.
    """

    impl: str
    kernel: str
    reason: str
    flash_attention: bool | None = None
    where: str = ""

    def __str__(self):
        where = f"{self.where}: " if self.where else ""
        return f"{where}{self.impl} [{self.kernel}]: {self.reason}"


@dataclasses.dataclass(frozen=True)
class Accelerator:
    """The accelerator a backend computes on (see `accelerator`).

    `kind` is `"gpu"` or `"tpu"`; `compute_capability` a `(major, minor)`
    pair for NVIDIA GPUs (`None` when unknown).
    """

    kind: str
    name: str = ""
    compute_capability: tuple | None = None


def accelerator():
    """The `Accelerator` the current backend computes on, `None` on a CPU.

    The device query of the dispatch: tests fake an accelerator by
    monkeypatching this function.
    """
    return _detect_accelerator(keras.backend.backend())


@functools.cache
def _detect_accelerator(backend):
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        if device.platform not in ("gpu", "tpu"):
            return None
        capability = getattr(device, "compute_capability", None)
        if capability:
            capability = tuple(int(x) for x in str(capability).split(".")[:2])
        return Accelerator(device.platform, device.device_kind, capability or None)
    if backend == "tensorflow":
        import tensorflow as tf

        for kind in ("TPU", "GPU"):
            if tf.config.list_logical_devices(kind):
                return Accelerator(kind.lower())
    return None


def check_attention_impl(attention_impl):
    """ValueError unless `attention_impl` is one of `ATTENTION_IMPLS`."""
    check_choice("attention_impl", attention_impl, ATTENTION_IMPLS)


def is_additive_bias(score_modifier):
    """Whether `score_modifier` adds a bias that does not depend on the
    score (`score + b(batch, head, query, key)`), so that the fused kernels
    can take it as their `bias`: modifiers that say so with an
    `additive_bias = True` attribute (ALiBi, T5's relative bias, chains of
    such). A plain function is not known to be one."""
    return bool(getattr(score_modifier, "additive_bias", False))


@dataclasses.dataclass(frozen=True)
class _Call:
    """The static facts of one attention call that the dispatch reads."""

    query_shape: tuple  # (B, T, N, H)
    key_shape: tuple  # (B, S, G, H)
    value_dim: int | None
    dtype: str
    return_weights: bool
    dropout: bool
    masked: bool
    use_causal_mask: bool
    causal_offset: object
    sliding_window: int | None
    score_modifier: object
    mask_modifier: object
    flash_attention: bool | None

    @property
    def lengths(self):
        return self.query_shape[1], self.key_shape[1]

    @property
    def kernel_causal(self):
        """Causal, and the kernels' `is_causal` (`fused_attention`'s rule)."""
        return self.use_causal_mask and kernel_causal(*self.lengths, self.causal_offset)

    @property
    def needs_mask_or_bias(self):
        """Whether the fused path passes the kernel a mask or a bias."""
        return bool(
            self.masked
            or self.score_modifier is not None
            or self.mask_modifier is not None
            or self.sliding_window is not None
            or (self.use_causal_mask and not self.kernel_causal)
        )


def plan_attention(
    attention_impl="auto",
    query_shape=(None, None, None, None),
    key_shape=(None, None, None, None),
    value_dim=None,
    dtype="float32",
    *,
    return_weights=False,
    dropout=False,
    masked=False,
    use_causal_mask=False,
    causal_offset=0,
    sliding_window=None,
    score_modifier=None,
    mask_modifier=None,
    flash_attention=None,
):
    """The `AttentionPlan` of an attention call: its path and why.

    Args:
        attention_impl: `"auto"`, `"dense"`, `"chunked"` or `"fused"`.
        query_shape: `(B, T, N, H)` (static; `None` where unknown).
        key_shape: `(B, S, G, H)`.
        value_dim: `Hv`, the values' head size (`H` when `None`).
        dtype: the dtype of the queries (the compute dtype).
        return_weights: the weights are asked for.
        dropout: attention dropout is active in this call.
        masked: a padding mask or an `attention_mask` is given (causal
            masks and windows are their own arguments).
        use_causal_mask, causal_offset, sliding_window: as in
            `multi_head_attention`.
        score_modifier, mask_modifier: as in `multi_head_attention`.
        flash_attention: Keras' switch (`keras.layers.MultiHeadAttention`):
            `None` lets the dispatch decide, `False` keeps `"auto"` off the
            fused kernels, `True` asks for them (an error when the call
            cannot use them).

    Returns:
        An `AttentionPlan`. Raises a ValueError when the requested path
        cannot compute the call (the chunked or fused path with the
        weights asked for, the fused path with attention dropout or a
        score modifier that is not an additive bias).

    Example:

    >>> import keras_attention as ka
    >>> plan = ka.ops.plan_attention("auto", (1, 4096, 8, 64), (1, 4096, 8, 64))
    >>> plan.impl
    'chunked'
    """
    check_attention_impl(attention_impl)
    call = _Call(
        tuple(query_shape),
        tuple(key_shape),
        value_dim if value_dim is not None else tuple(query_shape)[-1],
        keras.backend.standardize_dtype(dtype),
        bool(return_weights),
        bool(dropout),
        bool(masked),
        bool(use_causal_mask),
        causal_offset,
        sliding_window,
        score_modifier,
        mask_modifier,
        flash_attention,
    )
    if flash_attention is True:
        return _flash_plan(attention_impl, call)
    if attention_impl == "fused":
        _raise_if_not_fusable(call, "attention_impl='fused'")
        return _fused_plan(call, "attention_impl='fused' was asked for")
    if attention_impl == "chunked":
        _raise_if_weights(call, "chunked")
        return AttentionPlan(
            "chunked", KERNELS["chunked"], "attention_impl='chunked' was asked for"
        )
    if attention_impl == "dense":
        return AttentionPlan(
            "dense", KERNELS["dense"], "attention_impl='dense' was asked for"
        )
    return _auto_plan(call)


def _raise_if_weights(call, impl):
    if call.return_weights:
        raise ValueError(
            f'attention_impl="{impl}" cannot be used with '
            "`return_attention_scores=True` (the "
            f"{impl} path never holds the (T, S) weights). Use "
            f'attention_impl="dense" or "auto". Received: attention_impl={impl!r}'
        )


def _fused_obstacle(call):
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


def _raise_if_not_fusable(call, what):
    if call.return_weights:
        _raise_if_weights(call, "fused")
    obstacle = _fused_obstacle(call)
    if obstacle is not None:
        raise ValueError(
            f"{what} cannot run this call: {obstacle}. Use attention_impl='auto' "
            f"(or 'dense'/'chunked'). Received: {what}"
        )


def _fused_plan(call, why):
    if call.flash_attention is False:
        reason = f"{why}; flash_attention=False: Keras' composition"
        return AttentionPlan("fused", KERNELS["composition"], reason, False)
    kernel, detail = fused_kernel(call)
    flash = None if kernel in ("cudnn", "splash") else False
    return AttentionPlan("fused", KERNELS[kernel], f"{why}; {detail}", flash)


def _flash_plan(attention_impl, call):
    """`flash_attention=True` (Keras' meaning): the fused kernel or an
    error, Keras' own when its kernel cannot take the inputs."""
    if attention_impl not in ("auto", "fused"):
        raise ValueError(
            "`flash_attention=True` runs the fused path: `attention_impl` must be "
            f"'auto' or 'fused'. Received: attention_impl={attention_impl!r}"
        )
    if call.return_weights:
        # Keras' words (keras.layers.MultiHeadAttention), which its tests match.
        raise ValueError(
            "Returning attention scores is not supported when flash attention "
            "is enabled. Please disable flash attention to access attention "
            "scores. Received: flash_attention=True, return_attention_scores=True"
        )
    _raise_if_not_fusable(call, "flash_attention=True")
    device = accelerator()
    if device is not None and device.kind == "tpu":
        raise ValueError(
            "flash_attention=True on a TPU: Keras 3.15's splash path gives wrong "
            "results (unscaled logits, a causal mask when none is given). Use "
            "flash_attention=None. Received: flash_attention=True"
        )
    kernel, detail = fused_kernel(call)
    if kernel == "composition":
        kernel = "cudnn" if device is None or device.kind == "gpu" else "splash"
    reason = f"flash_attention=True: Keras' fused kernel or its error ({detail})"
    return AttentionPlan("fused", KERNELS[kernel], reason, True)


def fused_kernel(call):
    """`(kernel, reason)`: what `keras.ops.dot_product_attention` runs for
    `call` here: `"cudnn"`, `"splash"` or `"composition"` (its einsums and
    softmax, no fused kernel), with the reason in words.

    The rules follow Keras 3.15 and JAX 0.10: under JAX on an NVIDIA GPU,
    cuDNN's flash attention for float16/bfloat16 inputs with a head size
    that is a multiple of 8 and at most 128 (256 from compute capability
    9.0), and even lengths when a mask or bias is passed (JAX's
    `check_is_flash_attention`); on a TPU the splash kernel, which Keras
    takes only without a mask or bias (it needs a concrete mask shared by
    the batch and drops a bias) and for square causal masks; under
    TensorFlow, and on a CPU, the composition.
    """
    backend = keras.backend.backend()
    if backend != "jax":
        return "composition", (
            f"backend {backend}: Keras has no fused attention kernel there "
            "(einsum and softmax, under XLA when compiled)"
        )
    device = accelerator()
    if device is None:
        return "composition", "no accelerator visible (on a CPU Keras has no kernel)"
    if device.kind == "tpu":
        return _splash_kernel(call)
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

    The test is private to Keras (`keras.src.backend.jax.nn.
    _can_use_flash_attention`, 3.15); it is not asked where it is missing.
    """
    import jax

    if jax.devices()[0].platform != "gpu":
        return None  # a faked accelerator (tests), or none
    try:
        from keras.src.backend.jax.nn import _can_use_flash_attention
    except ImportError:
        return None
    (batch, t_len, heads, _), (_, s_len, groups, _) = call.query_shape, call.key_shape
    batch = batch or 1
    query = jax.ShapeDtypeStruct((batch, t_len, heads, head), call.dtype)
    key = jax.ShapeDtypeStruct((batch, s_len, groups, head), call.dtype)
    bias = None
    if call.needs_mask_or_bias:
        bias = jax.ShapeDtypeStruct((1, 1, t_len, s_len), call.dtype)
    if _can_use_flash_attention(query, key, key, bias):
        return None
    return "Keras' own test refuses cuDNN's kernel for these inputs here"


def _splash_kernel(call):
    # Keras 3.15's TPU branch scales the queries by sqrt(H) for a splash
    # kernel that does not divide by it, and builds a causal mask when none
    # is given: its results are wrong (a review reproduced both in Pallas'
    # interpret mode). Until a fixed Keras is checked, never send a call there.
    del call
    return "composition", (
        "Keras 3.15's splash path on a TPU gives wrong results (unscaled "
        "logits, a causal mask when none is given), so it is not used"
    )


def _plain_plan(call):
    """The rule of earlier releases: dense, chunked, or decided at run time."""
    t_len, s_len = call.lengths
    if isinstance(t_len, int) and isinstance(s_len, int):
        size = t_len * s_len
        if size < CHUNKED_MIN_SIZE:
            why = f"T * S = {size} < CHUNKED_MIN_SIZE = {CHUNKED_MIN_SIZE}"
            return AttentionPlan("dense", KERNELS["dense"], why)
        why = f"T * S = {size} >= CHUNKED_MIN_SIZE = {CHUNKED_MIN_SIZE}"
        return AttentionPlan("chunked", KERNELS["chunked"], why)
    if keras.backend.backend() == "tensorflow":
        why = "a length is unknown while the graph is traced"
        return AttentionPlan("runtime", KERNELS["runtime"], why)
    # JAX traces every call with concrete sizes; a symbolic dimension only
    # appears while a functional model infers its output shapes, where the
    # dense path's shapes are the same and cheaper to infer.
    why = "a symbolic length (shape inference only)"
    return AttentionPlan("dense", KERNELS["dense"], why)


def _auto_plan(call):
    if call.return_weights:
        why = "the weights were asked for and only the dense path holds them"
        return AttentionPlan("dense", KERNELS["dense"], why)
    plain = _plain_plan(call)
    if accelerator() is None:
        return dataclasses.replace(plain, reason=f"{plain.reason}; no accelerator")
    obstacle = _fused_obstacle(call) or _auto_obstacle(call, plain)
    if obstacle is None:
        kernel, detail = fused_kernel(call)
        if kernel != "composition":
            return AttentionPlan("fused", KERNELS[kernel], detail, None)
        obstacle = detail
    return dataclasses.replace(plain, reason=f"{plain.reason}; not fused: {obstacle}")


def _auto_obstacle(call, plain):
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


def choose_attention_impl(
    attention_impl,
    query_length,
    key_length,
    return_weights=False,
):
    """`"dense"`, `"chunked"`, `"fused"` or `"runtime"`: the path
    `multi_head_attention` takes for lengths `T`, `S` and no other options
    (`plan_attention` with every option, and the reason).

    `"auto"` takes the chunked path when `query_length * key_length` is at
    least `CHUNKED_MIN_SIZE` and the dense one below; on a TensorFlow graph
    traced for an unknown length, `"runtime"` (the graph holds both paths
    and picks one from the actual lengths each time it runs). On an
    accelerator with a fused kernel for the call, `plan_attention` gives
    `"fused"`. `"chunked"` or `"fused"` with `return_weights=True` raises a
    ValueError saying why.
    """
    return plan_attention(
        attention_impl,
        (None, query_length, None, None),
        (None, key_length, None, None),
        return_weights=return_weights,
    ).impl


# -- recording the plans ------------------------------------------------------

_RECORDERS = []


@contextlib.contextmanager
def recording_attention_plans():
    """Collect the `AttentionPlan` of every attention call traced (or run
    eagerly) inside the block, in order, each with the name scope of its
    layer (`plan.where`).

    A compiled function that was traced before the block is not traced
    again, so its calls are not seen: call the model directly (eagerly)
    or build it anew inside the block.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> layer = ka.layers.MultiHeadSelfAttention(num_heads=2, key_dim=4)
    >>> with ka.ops.recording_attention_plans() as plans:
    ...     _ = layer(np.zeros((1, 6, 8), "float32"))
    >>> plans[0].impl
    'dense'
    """
    plans = []
    _RECORDERS.append(plans)
    try:
        yield plans
    finally:
        _RECORDERS.remove(plans)


def record(plan):
    """Hand `plan` to the open `recording_attention_plans` blocks."""
    if _RECORDERS:
        plan = dataclasses.replace(plan, where=_name_scope())
        for plans in _RECORDERS:
            plans.append(plan)
    return plan


def _name_scope():
    try:
        from keras.src.backend.common.name_scope import current_path
    except ImportError:  # a Keras without it: no name
        return ""
    return current_path()


def check_fused_options(attention_impl, attention_dropout, flash_attention=None):
    """ValueError for layer options the fused path cannot honour, at
    construction: `attention_impl="fused"` with attention dropout (the
    kernels have none), `flash_attention=True` with another explicit path.
    """
    if flash_attention is True and attention_impl in ("dense", "chunked"):
        raise ValueError(
            "`flash_attention=True` runs the fused path: `attention_impl` must be "
            f"'auto' or 'fused'. Received: attention_impl={attention_impl!r}"
        )
    if attention_dropout and (attention_impl == "fused" or flash_attention is True):
        # Keras' words first (keras.layers.MultiHeadAttention's check).
        raise ValueError(
            "Dropout is not supported when flash attention is enabled. Please "
            "set dropout to 0.0 to use flash attention: attention_impl='fused' "
            "and flash_attention=True run keras.ops.dot_product_attention, "
            "which has no attention dropout. Received: attention dropout="
            f"{attention_dropout}, attention_impl={attention_impl!r}, "
            f"flash_attention={flash_attention!r}"
        )
