"""Layouts for `keras.distribution`: shard this package's layers across devices.

Keras' distribution API (JAX backend) places each variable when it is
created, by looking its `variable.path` up in a `keras.distribution.LayoutMap`
of regular expressions. `layout_map` returns one whose keys match the
variables of this package's attention layers, Transformer blocks and
`models.Transformer`, in the Megatron pattern (tensor parallelism):

| variable (path ends with) | shape | layout |
|---|---|---|
| `query/kernel`, `key/kernel`, `value/kernel`, `gate/kernel` | `(D, N, H)` | `(batch, model, None)` |
| their biases | `(N, H)` | `(model, None)` |
| `qkv/kernel` (fused, `MultiHeadSelfAttention`) | `(D, 3 N H)` | `(batch, model)` |
| `qkv/bias` | `(3 N H,)` | `(model,)` |
| `attention_output/kernel` | `(N, H, D)` | `(model, None, batch)` |
| `feedforward_intermediate_dense/kernel` | `(D, F)` | `(batch, model)` |
| `feedforward_intermediate_dense/bias` | `(F,)` | `(model,)` |
| `feedforward_output_dense/kernel` | `(F, D)` | `(model, batch)` |
| `encoder_embedding/embeddings`, `decoder_embedding/embeddings`, `token_embedding/embeddings` | `(V, D)` | `(model, batch)` |
| `output_projection/kernel` | `(D, V)` | `(batch, model)` |
| `output_projection/bias` | `(V,)` | `(model,)` |

`model` and `batch` stand for `model_parallel_dim_name` and
`data_parallel_dim_name`. The heads of the query/key/value projections,
the feed-forward width (first kernel split by columns, second by rows) and
the vocabulary are split over the model axis, so each device computes its
own heads and its own slice of the feed-forward layer. As in keras-hub's
`get_layout_map` (Gemma, Llama), the other axis of each large kernel is
split over the data axis too, so every device holds a different piece
(XLA gathers what a step needs); `data_parallel_dim_name=None` keeps the
weights whole on each data-parallel replica (tensor parallelism only).
Everything else (layer norms, output biases, position embeddings, relative
position tables, the Universal Transformer's halting unit) matches no key
and is replicated.

The fused `qkv` kernel of `MultiHeadSelfAttention` is `[W^Q | W^K | W^V]`:
its columns are split into contiguous slices, so a device does not hold the
query, key and value of the same heads, and XLA moves the projected
activations between devices before the attention: the results are those
of one device (up to float rounding), the communication is not minimal.

JAX requires each sharded axis to be divisible by the size of its mesh
axis: `num_heads`, `intermediate_dim` and the vocabulary sizes by the model
axis, the width `D` by the data axis. `check_layout_map(model, layout_map)`
reports a variable that breaks this, and lists the variables the map leaves
replicated.

Example:

>>> import keras
>>> import keras_attention as ka
>>> mesh = keras.distribution.DeviceMesh(
...     shape=(2, 4),
...     axis_names=("batch", "model"),
...     devices=[f"cpu:{i}" for i in range(8)],
... )
>>> layouts = ka.distribution.layout_map(mesh)
>>> layouts["transformer/encoder/block_0/self_attention/qkv/kernel"].axes
('batch', 'model')
>>> layouts["transformer/decoder/block_0/cross_attention/query/kernel"].axes
('batch', 'model', None)
>>> layouts["transformer/decoder/block_0/feedforward_output_dense/kernel"].axes
('model', 'batch')
>>> layouts["transformer/encoder/block_0/self_attention_layer_norm/gamma"] is None
True

On JAX with several devices, create the model inside the distribution:

```python
distribution = keras.distribution.ModelParallel(
    layout_map=layouts, batch_dim_name="batch"
)
keras.distribution.set_distribution(distribution)
model = ka.models.Transformer(...)  # variables are created sharded
```

References:
    - Shoeybi et al., 2019 (Megatron-LM tensor parallelism):
      https://arxiv.org/abs/1909.08053
"""

import math

import keras

__all__ = ["check_layout_map", "layout_map"]

# A variable path ends with one of these; `(?:.*/)?` allows any parents and
# keeps "monkey/kernel" from matching "key/kernel".
_PREFIX = "(?:.*/)?"


def _layouts(model, data):
    """`{path regex: axes}` for mesh axis names `model` and `data`."""
    return {
        # MultiHeadAttention (query, key, value, gate): (D, N, H), (N, H).
        "(?:query|key|value|gate)/kernel": (data, model, None),
        "(?:query|key|value|gate)/bias": (model, None),
        # MultiHeadSelfAttention's fused projection: (D, 3 N H), (3 N H,).
        "qkv/kernel": (data, model),
        "qkv/bias": (model,),
        # Output projection of the heads: (N, H, D); its bias is replicated.
        "attention_output/kernel": (model, None, data),
        # Feed-forward: column-parallel (D, F), then row-parallel (F, D).
        "feedforward_intermediate_dense/kernel": (data, model),
        "feedforward_intermediate_dense/bias": (model,),
        "feedforward_output_dense/kernel": (model, data),
        # Token embeddings (V, D) and the vocabulary projection (D, V).
        "(?:encoder|decoder|token)_embedding/embeddings": (model, data),
        "output_projection/kernel": (data, model),
        "output_projection/bias": (model,),
    }


def layout_map(
    device_mesh, model_parallel_dim_name="model", data_parallel_dim_name="batch"
):
    """A `keras.distribution.LayoutMap` that shards this package's layers.

    Heads, feed-forward width and vocabulary go over the model axis of the
    mesh, the width `D` of the large kernels over the data axis (see the
    module docstring for the table). Pass the result to
    `keras.distribution.ModelParallel` and create the model inside that
    distribution: variables take their layout when they are created. The
    returned map is an ordinary `LayoutMap`: add keys for your own layers
    (each path may match one key only).

    Args:
        device_mesh: a `keras.distribution.DeviceMesh`.
        model_parallel_dim_name: the mesh axis that splits heads,
            feed-forward width and vocabulary.
        data_parallel_dim_name: the mesh axis that splits the batch; the
            large kernels are split over it on their other axis, as in
            keras-hub. `None` keeps the weights whole on that axis.

    Returns:
        A `keras.distribution.LayoutMap` on `device_mesh`.

    Example:

    >>> import keras
    >>> import keras_attention as ka
    >>> mesh = keras.distribution.DeviceMesh(
    ...     (1, 2), ("data", "heads"), devices=["cpu:0", "cpu:1"])
    >>> layouts = ka.distribution.layout_map(
    ...     mesh, model_parallel_dim_name="heads", data_parallel_dim_name=None)
    >>> layouts["encoder/block_0/self_attention/attention_output/kernel"].axes
    ('heads', None, None)
    """
    if not isinstance(device_mesh, keras.distribution.DeviceMesh):
        raise TypeError(
            "`device_mesh` must be a `keras.distribution.DeviceMesh`. "
            f"Received: device_mesh={device_mesh!r} of type "
            f"{type(device_mesh).__name__}"
        )
    axis_names = tuple(device_mesh.axis_names)
    for name, value in (
        ("model_parallel_dim_name", model_parallel_dim_name),
        ("data_parallel_dim_name", data_parallel_dim_name),
    ):
        if value is None and name == "data_parallel_dim_name":
            continue
        if value not in axis_names:
            raise ValueError(
                f"`{name}` must be one of the mesh's axis names {axis_names}. "
                f"Received: {name}={value!r}"
            )
    if model_parallel_dim_name == data_parallel_dim_name:
        raise ValueError(
            "`model_parallel_dim_name` and `data_parallel_dim_name` must be "
            "different mesh axes. Received: "
            f"model_parallel_dim_name={model_parallel_dim_name!r}, "
            f"data_parallel_dim_name={data_parallel_dim_name!r}"
        )
    layouts = keras.distribution.LayoutMap(device_mesh)
    for suffix, axes in _layouts(
        model_parallel_dim_name, data_parallel_dim_name
    ).items():
        layouts[_PREFIX + suffix] = axes
    return layouts


def check_layout_map(model, layout_map):
    """Check that `layout_map` fits `model`; return what it leaves replicated.

    Every variable that a key of `layout_map` matches must have at least as
    many axes as the layout and each sharded axis must be divisible by the
    size of its mesh axis, or JAX cannot place it. The model can be built
    on one device, with no distribution, as long as it has the same
    variable paths and shapes as the one to distribute.

    Args:
        model: a built Keras model or layer.
        layout_map: a `keras.distribution.LayoutMap`, e.g. from
            `layout_map`.

    Returns:
        The variables of `model` that no key matches (`ModelParallel`
        replicates them on every device), largest first.

    Example:

    >>> import math
    >>> import keras
    >>> import keras_attention as ka
    >>> mesh = keras.distribution.DeviceMesh(
    ...     (2, 4), ("batch", "model"), devices=[f"cpu:{i}" for i in range(8)])
    >>> model = ka.models.Transformer(32, 32, hidden_dim=16, num_heads=4,
    ...     intermediate_dim=32, num_encoder_layers=1, num_decoder_layers=1)
    >>> model.build()
    >>> replicated = ka.distribution.check_layout_map(
    ...     model, ka.distribution.layout_map(mesh))
    >>> max(math.prod(v.shape) for v in replicated)  # LayerNorm and biases
    16
    """
    if not isinstance(model, keras.layers.Layer):
        raise TypeError(
            "`model` must be a Keras model or layer. "
            f"Received: model={model!r} of type {type(model).__name__}"
        )
    if not isinstance(layout_map, keras.distribution.LayoutMap):
        raise TypeError(
            "`layout_map` must be a `keras.distribution.LayoutMap`. "
            f"Received: layout_map of type {type(layout_map).__name__}"
        )
    if not model.built:
        raise ValueError(
            "`model` must be built (its variables get their paths when it is "
            f"built). Received: model={model.name!r} with built=False"
        )
    mesh = layout_map.device_mesh
    sizes = dict(zip(mesh.axis_names, mesh.shape, strict=True))
    replicated = []
    for variable in model.variables:
        layout = layout_map[variable.path]
        if layout is None:
            replicated.append(variable)
            continue
        _check_fits(variable, layout.axes, sizes)
    return sorted(replicated, key=lambda v: -math.prod(v.shape))


def _check_fits(variable, axes, sizes):
    """Raise if JAX cannot shard `variable` with `axes` on a mesh of `sizes`."""
    shape = tuple(variable.shape)
    problem = None
    if len(axes) > len(shape):
        problem = f"the layout has {len(axes)} axes, the variable {len(shape)}"
    else:
        for dim, axis in zip(shape, axes, strict=False):
            if axis is not None and dim % sizes[axis]:
                problem = (
                    f"an axis of size {dim} is split over mesh axis {axis!r} "
                    f"of size {sizes[axis]}, which does not divide it"
                )
                break
    if problem is not None:
        raise ValueError(
            f"`layout_map` cannot shard variable {variable.path!r}: {problem}. "
            f"Received: shape={shape}, layout axes={axes}, mesh={sizes}"
        )
