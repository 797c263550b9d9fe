"""Argument checks shared by every level (ops, layers, decoding, models).

Each check raises a `ValueError` (or a `TypeError` for a wrong type) whose
message names the argument, states the rule and shows the received value
after "Received:". Checks read static shapes and Python values only, never
tensor data inside a compiled function, so they cost nothing in a loop.
This module imports nothing from the package: every level may use it.
"""

import keras
import numpy as np


def check_int(name, value, minimum, allow_none=False, meaning=None):
    """ValueError unless `value` is an int (not a bool) `>= minimum`, or
    `None` when `allow_none`; `meaning` says what the number counts."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        rule = {1: "a positive integer", 0: "a non-negative integer"}.get(
            minimum, f"an integer >= {minimum}"
        )
        raise ValueError(
            f"Invalid argument `{name}`: `{name}` must be {rule}"
            f"{' or None' if allow_none else ''}"
            f"{f' ({meaning})' if meaning else ''}. Received: {name}={value!r}"
        )


def check_positive_int(name, value, allow_none=False):
    check_int(name, value, 1, allow_none)


def check_rate(name, value):
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0.0 <= value < 1.0
    ):
        raise ValueError(
            f"Invalid argument `{name}`: `{name}` must be in [0, 1). "
            f"Received: {name}={value!r}"
        )


def check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(
            f"Invalid argument `{name}`: `{name}` must be one of {list(choices)}. "
            f"Received: {name}={value!r}"
        )


def check_rank(name, shape, ranks):
    ranks = (ranks,) if isinstance(ranks, int) else tuple(ranks)
    if len(shape) not in ranks:
        wanted = " or ".join(str(r) for r in ranks)
        raise ValueError(
            f"`{name}` must have rank {wanted}. Received: {name}.shape={tuple(shape)}"
        )


def check_same(name_a, a, name_b, b, what):
    if a is not None and b is not None and a != b:
        raise ValueError(
            f"`{name_a}` and `{name_b}` must have the same {what}. "
            f"Received: {name_a} {what}={a}, {name_b} {what}={b}"
        )


def check_last_dim(name, shape, expected):
    """ValueError unless the static last dimension of `shape` is `expected`."""
    if shape[-1] is not None and expected is not None and shape[-1] != expected:
        raise ValueError(
            f"The last dimension of `{name}` must be {expected} (the width the "
            f"layer was built with). Received: {name}.shape={tuple(shape)}"
        )


def static_int(value):
    """`value` as a Python int when it is known without running anything (a
    Python or numpy integer), else `None` (e.g. a traced tensor)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
        return int(value)
    return None


def check_index(name, value, length, limit, limit_name):
    """ValueError unless `length` positions from `value` fit in `[0, limit)`.

    Only static indices (see `static_int`) are checked; `length` or `limit`
    `None` (unknown) skips the upper bound.
    """
    index = static_int(value)
    if index is None:
        return
    if index < 0:
        raise ValueError(f"`{name}` must be >= 0. Received: {name}={index}")
    if length is not None and limit is not None and index + length > limit:
        raise ValueError(
            f"`{name}` + the {length} new position(s) must not exceed "
            f"`{limit_name}`={limit}: `{name}` must be <= {limit - length}. "
            f"Received: {name}={index}"
        )


def _keras_get(getter, name, value, rule):
    """`getter(value)` (a `keras.*.get`) with an error naming the argument."""
    try:
        return getter(value)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"`{name}` must be {rule}. Received: {name}={value!r}"
        ) from error


def get_activation(value, name="activation"):
    """`keras.activations.get(value)` with an error naming the argument."""
    rule = "the name of a Keras activation or a callable"
    return _keras_get(keras.activations.get, name, value, rule)


def get_initializer(value, name="kernel_initializer"):
    """`keras.initializers.get(value)` with an error naming the argument."""
    rule = "a Keras initializer, its name or its config"
    return _keras_get(keras.initializers.get, name, value, rule)


def get_layer(name, value, layer_class, rule, attribute=None):
    """`value`, a layer or its config, as a layer: a `ValueError` naming the
    argument and stating `rule` unless it is a `layer_class` (with the
    `attribute`, when one is given)."""
    if isinstance(value, dict):
        value = keras.saving.deserialize_keras_object(value)
    if not isinstance(value, layer_class) or (
        attribute is not None and not hasattr(value, attribute)
    ):
        raise ValueError(f"`{name}` must be {rule}. Received: {name}={value!r}")
    return value


# -- masks ---------------------------------------------------------------


def _concrete_values(x):
    """The values of `x` when they are known without a trace (a NumPy array,
    a Python list, an eager tensor), else `None`."""
    if isinstance(x, (np.ndarray, list, tuple)):
        return np.asarray(x)
    if isinstance(x, keras.KerasTensor):
        return None
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        if tf.executing_eagerly() and not tf.is_symbolic_tensor(x):
            return np.asarray(x)
        return None
    if keras.backend.backend() == "jax":
        import jax

        if isinstance(x, jax.core.Tracer):
            return None
        return np.asarray(x)
    return None


def check_below(name, value, limit, rule):
    """ValueError when the values of `value` are known (see
    `_concrete_values`: eager tensors, arrays) and one is `>= limit`;
    nothing inside a traced function. `rule` says what `limit` is."""
    values = _concrete_values(value)
    if values is not None and limit is not None and np.any(values >= limit):
        raise ValueError(
            f"`{name}` must be below {limit} ({rule}). Received: {name}={values.max()}"
        )


def check_mask_dtype(name, mask):
    """TypeError unless `mask` is boolean or numeric; ValueError if its known
    values are not 0/1.

    Keras casts masks to bool (non-zero = may attend), so integer and float
    0/1 masks are accepted as Keras accepts them. An additive mask (0 =
    attend, -inf or -1e9 = hide) would silently mean the opposite once cast;
    its values are caught when they are known (NumPy arrays, eager tensors).
    Inside a compiled function the values are not read (that would cost a
    pass over the mask on every call).
    """
    dtype = getattr(mask, "dtype", None)
    dtype = np.asarray(mask).dtype if dtype is None else dtype
    dtype = keras.backend.standardize_dtype(dtype)
    if dtype == "bool":
        return
    if "int" not in dtype and "float" not in dtype:
        raise TypeError(
            f"`{name}` must be boolean (True = may attend) or 0/1 numbers. "
            f"Received: {name}.dtype={dtype}"
        )
    values = _concrete_values(mask)
    if values is None:
        return
    wrong = values[(values != 0) & (values != 1)]
    if wrong.size:
        raise ValueError(
            f"`{name}` must be boolean (True = may attend) or hold only 0 and 1; "
            "an additive mask (0 = attend, a large negative = hide) would mean "
            f"the opposite once cast to bool. Received: {name} with the value "
            f"{float(wrong.flat[0])} (dtype {dtype})"
        )


def check_mask(name, mask, expected=None):
    """Check a mask's dtype and static shape against `expected`.

    `expected` is a shape tuple (`None` entries are not checked): the mask
    must have its rank and broadcast to it (each dimension equal or 1).
    See `check_mask_dtype` for the dtype rule.
    """
    check_mask_dtype(name, mask)
    if expected is None:
        return
    shape = tuple(getattr(mask, "shape", np.shape(mask)))
    if len(shape) != len(expected):
        raise ValueError(
            f"`{name}` must have rank {len(expected)} (shape {expected}). "
            f"Received: {name}.shape={shape}"
        )
    for got, want in zip(shape, expected, strict=True):
        if got is not None and want is not None and got not in (1, want):
            raise ValueError(
                f"`{name}` must have shape {expected} (or broadcast to it). "
                f"Received: {name}.shape={shape}"
            )


def check_attention_mask(name, mask, batch, num_heads, query_length, key_length):
    """An explicit attention mask: `(T, S)`, `(B, T, S)` or, per head,
    `(B, N, T, S)` (`num_heads=None` refuses the per-head form). Each
    dimension may be 1 (broadcast), as in `keras.layers.MultiHeadAttention`.
    """
    rank = len(getattr(mask, "shape", np.shape(mask)))
    shapes = {
        2: (query_length, key_length),
        3: (batch, query_length, key_length),
        4: (batch, num_heads, query_length, key_length),
    }
    if num_heads is None:
        del shapes[4]
    if rank not in shapes:
        forms = ", ".join(str(shape) for shape in shapes.values())
        shape = tuple(getattr(mask, "shape", np.shape(mask)))
        raise ValueError(
            f"`{name}` must have one of the shapes {forms}. "
            f"Received: {name}.shape={shape}"
        )
    check_mask(name, mask, shapes[rank])


def check_shape(name, tensor, expected, layout):
    """ValueError unless `tensor`'s static shape matches `expected` (a
    tuple; `None` matches any size, as does an unknown size); `layout`
    names the axes in the message, e.g. `"(batch, 2, max_length, ...)"`."""
    shape = tuple(tensor.shape)
    ok = len(shape) == len(expected) and all(
        want is None or got is None or got == want
        for got, want in zip(shape, expected, strict=True)
    )
    if not ok:
        raise ValueError(
            f"`{name}` must have shape {layout} = {expected}. "
            f"Received: {name}.shape={shape}"
        )


def check_cache(name, cache, batch, num_heads, head_dim):
    """ValueError unless `cache` has the static shape `(B, 2, S, N, H)`."""
    expected = (batch, 2, None, num_heads, head_dim)
    layout = "(batch, 2, max_length, num_heads, key_dim)"
    check_shape(name, cache, expected, layout)


def build_key_shape(value_shape, key_shape):
    """The key shape of an attention layer's `build(query_shape,
    value_shape, key_shape)`: `value_shape` when `key_shape` is `None`. A
    value shape is required (its width sets the value projection)."""
    if value_shape is None:
        raise ValueError(
            "`value` is needed to build the layer (its width sets the "
            "value projection). Received: value=None"
        )
    return value_shape if key_shape is None else key_shape


def input_widths(query_shape, value_shape, key_shape):
    """The widths `(B, L, D)` -> `D` an attention layer is built for, by
    input name, as `check_attention_inputs` takes them."""
    return {"query": query_shape[-1], "value": value_shape[-1], "key": key_shape[-1]}


def check_attention_inputs(query, value, key, widths):
    """The sequences of an attention call, `(B, L, D)` each: ranks, the
    widths `widths[name]` the layer was built for, the key's and value's
    length, and the batch sizes; `key=None` stands for `value`, and
    `value=None` (a cache read as is) checks the query alone."""
    check_rank("query", tuple(query.shape), 3)
    check_last_dim("query", query.shape, widths["query"])
    if value is None:
        return
    key = value if key is None else key
    for name, x in (("value", value), ("key", key)):
        check_rank(name, tuple(x.shape), 3)
        check_last_dim(name, x.shape, widths[name])
    check_same("key", key.shape[1], "value", value.shape[1], "length")
    check_same("query", query.shape[0], "value", value.shape[0], "batch size")
    check_same("key", key.shape[0], "value", value.shape[0], "batch size")


def check_cache_index(cache, cache_update_index, prefix=""):
    """A `{prefix}cache_update_index` needs a `{prefix}cache` (`prefix`:
    whose cache, e.g. `"self_attention_"`)."""
    if cache is None and cache_update_index is not None:
        raise ValueError(
            f"`{prefix}cache_update_index` needs a `{prefix}cache`. Received: "
            f"{prefix}cache=None, {prefix}cache_update_index={cache_update_index}"
        )


def check_cache_arguments(cache, cache_update_index, query, num_heads, key_dim):
    """A key/value `cache` `(B, 2, S, N, H)` and its `cache_update_index`:
    the index needs a cache, and the query's new positions from it fit in
    the cache (static values only)."""
    check_cache_index(cache, cache_update_index)
    if cache is None:
        return
    check_cache("cache", cache, query.shape[0], num_heads, key_dim)
    check_index(
        "cache_update_index",
        cache_update_index,
        query.shape[1],
        cache.shape[2],
        "cache.shape[2]",
    )
