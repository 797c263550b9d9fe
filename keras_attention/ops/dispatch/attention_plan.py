"""Which attention path a call takes, and why: the one place that decides.

Three paths compute the same attention:

- `"dense"`: this package's einsums and float32 softmax, O(T S) memory;
  the only path that can return the weights;
- `"chunked"`: this package's exact online-softmax loop over blocks,
  O(T + S) memory (`keras_attention.ops.chunked.chunked_attention`);
- `"fused"`: `keras.ops.dot_product_attention`, which runs cuDNN's flash
  attention under JAX on an NVIDIA GPU and Keras' own composition of
  einsums and softmax everywhere else
  (`keras_attention.ops.fused.fused_attention`). On a TPU too: Keras
  3.15's splash path there gives wrong results, so the dispatch never
  sends a call to it (`"fused"` runs the composition, `"auto"` stays on
  dense / chunked, `flash_attention=True` raises).

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

`"auto"` takes the fused path only on a GPU whose fused kernel the call
can use (see `fused_kernel`); on a CPU or a TPU it keeps the rule of
earlier releases (dense below `CHUNKED_MIN_SIZE` score entries per head,
chunked from there on).
"""

import dataclasses

import keras

from keras_attention.ops import devices
from keras_attention.ops.fused.fused_attention import kernel_causal
from keras_attention.ops.fused.fused_plan import auto_obstacle
from keras_attention.ops.fused.fused_plan import fused_kernel
from keras_attention.ops.fused.fused_plan import fused_obstacle
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


KERNELS = {
    "dense": "keras_attention's dense kernel",
    "chunked": "keras_attention's chunked kernel",
    "runtime": "dense or chunked, chosen from the lengths when the graph runs",
    "composition": "Keras' dot_product_attention composition (einsum, softmax)",
    "cudnn": "cuDNN flash attention (keras.ops.dot_product_attention)",
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


def check_attention_impl(attention_impl):
    """ValueError unless `attention_impl` is one of `ATTENTION_IMPLS`."""
    check_choice("attention_impl", attention_impl, ATTENTION_IMPLS)


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
    if attention_impl == "auto":
        return _auto_plan(call)
    return _asked_plan(attention_impl, call)


def _asked_plan(attention_impl, call):
    """The plan of an explicit `attention_impl`, or its error."""
    asked = f"attention_impl={attention_impl!r} was asked for"
    if attention_impl == "fused":
        _raise_if_not_fusable(call, "attention_impl='fused'")
        return _fused_plan(call, asked)
    if attention_impl == "chunked":
        _raise_if_weights(call, "chunked")
    return AttentionPlan(attention_impl, KERNELS[attention_impl], asked)


def _raise_if_weights(call, impl):
    if call.return_weights:
        raise ValueError(
            f'attention_impl="{impl}" cannot be used with '
            "`return_attention_scores=True` (the "
            f"{impl} path never holds the (T, S) weights). Use "
            f'attention_impl="dense" or "auto". Received: attention_impl={impl!r}'
        )


def _raise_if_not_fusable(call, what):
    if call.return_weights:
        _raise_if_weights(call, "fused")
    obstacle = fused_obstacle(call)
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
    flash = None if kernel == "cudnn" else False
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
    device = devices.accelerator()
    if device is not None and device.kind == "tpu":
        raise ValueError(
            "flash_attention=True on a TPU: Keras 3.15's splash path gives wrong "
            "results (unscaled logits, a causal mask when none is given). Use "
            "flash_attention=None. Received: flash_attention=True"
        )
    # Keras' kernel under JAX on a GPU; anywhere else Keras raises its error.
    _, detail = fused_kernel(call)
    reason = f"flash_attention=True: Keras' fused kernel or its error ({detail})"
    return AttentionPlan("fused", KERNELS["cudnn"], reason, True)


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
    if devices.accelerator() is None:
        return dataclasses.replace(plain, reason=f"{plain.reason}; no accelerator")
    obstacle = fused_obstacle(call) or auto_obstacle(call, plain)
    if obstacle is None:
        kernel, detail = fused_kernel(call)
        if kernel != "composition":
            return AttentionPlan("fused", KERNELS[kernel], detail, None)
        obstacle = detail
    return dataclasses.replace(plain, reason=f"{plain.reason}; not fused: {obstacle}")


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
