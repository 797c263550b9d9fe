"""The fused path: `keras.ops.dot_product_attention` with this package's
masks, modifiers and zero rows.

Keras' op reaches cuDNN's flash attention under JAX on an NVIDIA GPU (see
`keras_attention.ops.fused.fused_plan.fused_kernel`) and otherwise runs its
own composition of einsums and a float32 softmax (on a TPU too: the
dispatch passes `flash_attention=False` there, Keras 3.15's splash path
giving wrong results). This module
translates a call of `multi_head_attention` into its arguments:

- grouped key/value heads are passed as they are (`G` heads; under
  TensorFlow, whose composition repeats them only for `G > 1`, repeated
  here);
- a causal mask without a cache offset on `T = S` is its `is_causal`
  (the kernels skip the blocks above the diagonal); any other causal mask,
  the key padding, `attention_mask`, `sliding_window` and a mask modifier
  are merged into one boolean `mask`, broadcast to the full `(T, S)` that
  cuDNN's wrapper needs and kept at one batch or head where they do not
  vary;
- a score modifier that is an additive bias (`additive_bias = True`:
  ALiBi, T5's relative bias) is evaluated once at score 0 and passed as
  `bias`; its gradient (a learned table's) flows through the kernel's;
- the kernel gives a query whose keys are all masked a uniform average,
  so such rows (and, in `multi_head_attention`, padded queries) are set to
  exactly 0 afterwards, with zero gradient, as on the other paths.

Numerics: the composition computes the logits in float32 (from
float16/bfloat16 inputs too) and the softmax in float32. cuDNN's kernel
keeps the softmax statistics (row maximum, sum) in float32 but rounds the
probabilities to the input dtype before multiplying by the values (so does
this package's dense path) and reads a mask or bias in the input dtype, so
a bias in bfloat16 carries 8 bits of mantissa (the other paths add biases
in float32). float16 inputs that reach no kernel are computed in float32,
as on the dense path: the composition would multiply them in float16.
"""

import math

import keras
from keras import ops

from keras_attention.ops.boolean_masks import causal_mask
from keras_attention.ops.boolean_masks import merge_masks
from keras_attention.ops.boolean_masks import sliding_window_mask
from keras_attention.ops.modifier_calls import position_indices


def fused_attention(
    query,
    key,
    value,
    key_mask=None,
    attention_mask=None,
    use_causal_mask=False,
    causal_offset=0,
    sliding_window=None,
    score_modifier=None,
    mask_modifier=None,
    flash_attention=None,
):
    """Attention through `keras.ops.dot_product_attention`.

    Args:
        query: `(B, T, N, H)`.
        key: `(B, S, G, H)`, `G` dividing `N`.
        value: `(B, S, G, Hv)`; `Hv != H` is padded to the larger size
            (zeros, which change neither the logits nor the output).
        key_mask: `(B, S)` (or `(1, S)`), True = real key.
        attention_mask: `(T, S)`, `(B, T, S)` or `(B, N, T, S)`.
        use_causal_mask, causal_offset, sliding_window: as in
            `multi_head_attention`.
        score_modifier: `None` or an additive bias (see above).
        mask_modifier: `None` or a mask modifier.
        flash_attention: passed to Keras (`None`: its kernel where it can,
            `False`: its composition, `True`: its kernel or an error).

    Returns:
        `(B, T, N, Hv)` in the dtype of `value`; rows whose keys are all
        masked are 0.
    """
    t_len, s_len = ops.shape(query)[1], ops.shape(key)[1]
    q_pos = ops.cast(causal_offset, "int32") + ops.arange(t_len, dtype="int32")
    k_pos = ops.arange(s_len, dtype="int32")
    indices = position_indices(ops.shape(query)[0], query.shape[2], q_pos, k_pos)
    is_causal = use_causal_mask and kernel_causal(
        query.shape[1], key.shape[1], causal_offset
    )
    mask = merge_masks(
        None if key_mask is None else ops.cast(key_mask, "bool")[:, None, None, :],
        _as_rank_4(attention_mask),
        _positional_mask(t_len, s_len, use_causal_mask and not is_causal,
                         sliding_window, causal_offset),
        None if mask_modifier is None else mask_modifier(*indices),
    )  # fmt: skip
    bias = None
    if score_modifier is not None:
        # An additive bias: its value at score 0 (broadcast to (1, N, T, S)).
        bias = score_modifier(ops.zeros((1, 1, 1, 1), "float32"), *indices)
    mask, bias = _full_length(mask, t_len, s_len), _full_length(bias, t_len, s_len)
    q, k, v = _kernel_inputs(query, key, value, flash_attention)
    if bias is not None:
        bias = ops.cast(bias, q.dtype)
    output = ops.dot_product_attention(
        q,
        k,
        v,
        bias=bias,
        mask=mask,
        scale=1.0 / math.sqrt(query.shape[-1]),
        is_causal=is_causal,
        flash_attention=flash_attention,
    )[..., : value.shape[-1]]  # (B, T, N, Hv)
    if mask is not None:
        output = _zero_rows_without_keys(output, mask, is_causal)
    return ops.cast(output, value.dtype)


def kernel_causal(query_length, key_length, causal_offset):
    """Whether a causal mask is the kernels' `is_causal`: square (static
    `T = S`) and no cache offset (a Python 0). cuDNN's alignment for
    `T != S` was not checked here, so every other causal mask is passed
    as a `mask`."""
    offset_zero = isinstance(causal_offset, int) and causal_offset == 0
    return offset_zero and query_length is not None and query_length == key_length


def _as_rank_4(attention_mask):
    """`(T, S)` / `(B, T, S)` / `(B, N, T, S)` as a boolean rank-4 mask."""
    if attention_mask is None:
        return None
    mask = ops.cast(attention_mask, "bool")
    if len(mask.shape) == 2:
        return mask[None, None]
    return mask[:, None] if len(mask.shape) == 3 else mask


def _positional_mask(t_len, s_len, causal, sliding_window, offset):
    """The causal mask (when not the kernels' `is_causal`) and the window,
    `(1, 1, T, S)`, or `None`."""
    mask = causal_mask(t_len, s_len, offset) if causal else None
    if sliding_window is not None:
        band = sliding_window_mask(t_len, s_len, sliding_window, offset)
        mask = merge_masks(mask, band)
    return None if mask is None else mask[None, None]


def _full_length(x, t_len, s_len):
    """`x` (rank 4) broadcast to the full `(T, S)`, keeping its batch and
    head dimensions (cuDNN's wrapper checks that a bias has both lengths)."""
    if x is None:
        return None
    shape = ops.shape(x)
    return ops.broadcast_to(x, (shape[0], shape[1], t_len, s_len))


def _kernel_inputs(query, key, value, flash_attention):
    """`(q, k, v)` as the kernel takes them: one head size, a common dtype,
    float16 widened where no kernel runs, heads repeated under TensorFlow."""
    head, value_dim = query.shape[-1], value.shape[-1]
    if value_dim < head:
        value = _pad_last(value, head - value_dim)
    elif value_dim > head:
        query, key = (
            _pad_last(query, value_dim - head),
            _pad_last(key, value_dim - head),
        )
    dtypes = {keras.backend.standardize_dtype(x.dtype) for x in (query, key, value)}
    if flash_attention is False and "float16" in dtypes:
        dtypes = {"float32"}  # the composition would multiply in float16
    dtype = "float32" if len(dtypes) > 1 else dtypes.pop()
    query, key, value = (ops.cast(x, dtype) for x in (query, key, value))
    if keras.backend.backend() == "tensorflow" and key.shape[2] != query.shape[2]:
        repeats = query.shape[2] // key.shape[2]
        key, value = (
            ops.repeat(key, repeats, axis=2),
            ops.repeat(value, repeats, axis=2),
        )
    return query, key, value


def _pad_last(x, extra):
    return ops.pad(x, [(0, 0)] * (len(x.shape) - 1) + [(0, extra)])


def _zero_rows_without_keys(output, mask, is_causal):
    """`output` `(B, T, N, Hv)` with 0 where a query sees no key under
    `mask` `(B', N', T, S)` (and the kernels' causal mask)."""
    if is_causal:
        t_len, s_len = ops.shape(mask)[2], ops.shape(mask)[3]
        mask = ops.logical_and(mask, causal_mask(t_len, s_len)[None, None])
    sees = ops.transpose(ops.any(mask, axis=-1), (0, 2, 1))[..., None]  # (B', T, N', 1)
    return ops.where(sees, output, ops.zeros_like(output))
