"""Self-checks for attention layers: run them on this library's layers or your own.

Each check calls the layer or model on the inputs you give, and raises an
`AssertionError` with an explanation when the layer breaks the property
(these are test helpers, so they fail like tests do). They return `None`
when all is well, except `check_jit_fit`, which returns the training history.

- `check_config_round_trip(layer, inputs)`: `from_config(get_config())`
  rebuilds the same layer (every constructor argument is in the config, the
  clone accepts the weights and gives the same outputs).
- `check_serialization(model, inputs)`: `.keras` save/load with
  `safe_mode=True` and (TensorFlow) SavedModel export give identical outputs.
- `check_mixed_precision(layer_factory, inputs)`: under `mixed_float16` and
  `mixed_bfloat16`, large-magnitude inputs give finite outputs and gradients.
- `check_jit_fit(model, x, y)`: `fit(jit_compile=True)` runs, the loss is
  finite and the weights move.
- `check_causality(layer, inputs)`: the gradient of output `t` with respect to
  every input position after `t` is exactly zero.
- `check_padding_invariance(layer, query, value)`: appending masked garbage
  keys changes nothing.
- `make_model(layer, inputs)`: a functional model around one layer, for the
  model-level checks.
- `CompiledOnJax(layer)`: calls the layer as JAX users run it (built
  symbolically, through `jax.jit`); eagerly on other backends.

Inputs are one array or a list/tuple of arrays passed positionally; other
call arguments go in `call_kwargs`.

Example:

>>> import numpy as np
>>> import keras_attention as ka
>>> from keras_attention import testing
>>> q = np.random.rand(2, 4, 8).astype("float32")
>>> layer = ka.layers.ScoredAttention(score="dot")
>>> testing.check_causality(layer, [q, q], call_kwargs={"use_causal_mask": True})
>>> testing.check_padding_invariance(layer, q, q)
"""

import inspect
import json
import os
import tempfile
import warnings

import keras
import numpy as np
from keras import ops

__all__ = [
    "CompiledOnJax",
    "check_causality",
    "check_config_round_trip",
    "check_jit_fit",
    "check_mixed_precision",
    "check_padding_invariance",
    "check_serialization",
    "input_gradients",
    "make_model",
]


def _as_list(inputs):
    if isinstance(inputs, (list, tuple)):
        return list(inputs)
    return [inputs]


def _to_numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def _outputs(result):
    """The layer's outputs as a flat list of numpy arrays."""
    return [_to_numpy(x) for x in keras.tree.flatten(result)]


def _is_float(x):
    return np.issubdtype(np.asarray(x).dtype, np.floating) or "float" in str(
        getattr(x, "dtype", "")
    )


def _fail(message):
    raise AssertionError(message)


def _compare(name, expected, actual, rtol=0.0, atol=0.0):
    expected, actual = _outputs(expected), _outputs(actual)
    if len(expected) != len(actual):
        _fail(f"{name}: {len(actual)} outputs instead of {len(expected)}.")
    for i, (a, b) in enumerate(zip(expected, actual, strict=True)):
        if a.shape != b.shape:
            _fail(f"{name}: output {i} has shape {b.shape} instead of {a.shape}.")
        a64, b64 = a.astype("float64"), b.astype("float64")
        if not np.allclose(a64, b64, rtol=rtol, atol=atol, equal_nan=True):
            diff = np.max(np.abs(a64 - b64))
            _fail(
                f"{name}: output {i} differs (max abs difference {diff:.3g}, "
                f"allowed atol={atol}, rtol={rtol})."
            )


def input_gradients(fn, inputs, jit=False):
    """Gradients of the scalar `fn(*inputs)` with respect to each input.

    Works on the TensorFlow, JAX and PyTorch backends; inputs that do not
    reach the output get zero gradients. With `jit=True`, JAX compiles the
    gradient with `jax.jit` (eager JAX compiles each primitive on its own,
    seconds for a whole layer); `fn` must then create no variables (build
    its layers first). Other backends ignore `jit`.
    """
    backend = keras.backend.backend()
    inputs = [ops.convert_to_tensor(x) for x in inputs]
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            tape.watch(inputs)
            value = fn(*inputs)
        return tape.gradient(
            value, inputs, unconnected_gradients=tf.UnconnectedGradients.ZERO
        )
    if backend == "jax":
        import jax

        grad = jax.grad(fn, argnums=tuple(range(len(inputs))))
        return list((jax.jit(grad) if jit else grad)(*inputs))
    if backend == "torch":
        import torch

        inputs = [x.detach().requires_grad_(True) for x in inputs]
        grads = torch.autograd.grad(fn(*inputs), inputs, allow_unused=True)
        return [
            torch.zeros_like(x) if g is None else g
            for x, g in zip(inputs, grads, strict=True)
        ]
    raise ValueError(
        "`input_gradients` supports the tensorflow, jax and torch backends. "
        f"Received: backend={backend!r}"
    )


def make_model(layer, inputs, call_kwargs=None):
    """A functional `keras.Model` whose inputs match `inputs` and that calls `layer`.

    Args:
        layer: the layer to wrap.
        inputs: one array or a list of arrays; their shapes (without the batch
            axis) and dtypes define the model inputs.
        call_kwargs: extra keyword arguments of the layer call.

    Nested outputs (e.g. an RNN cell's `(output, [states], weights)`) are
    flattened into a list, which a SavedModel signature can return.
    """
    arrays = _as_list(inputs)
    symbolic = [
        keras.Input(shape=np.shape(x)[1:], dtype=str(np.asarray(x).dtype))
        for x in arrays
    ]
    outputs = keras.tree.flatten(layer(*symbolic, **(call_kwargs or {})))
    return keras.Model(
        symbolic if len(symbolic) > 1 else symbolic[0],
        outputs if len(outputs) > 1 else outputs[0],
    )


def _model_inputs(inputs):
    arrays = _as_list(inputs)
    return arrays if len(arrays) > 1 else arrays[0]


def check_config_round_trip(layer, inputs=None, call_kwargs=None):
    """`type(layer).from_config(layer.get_config())` rebuilds the same layer.

    Checks that the config is JSON-serializable, that it names every
    constructor argument, that the clone's config is identical and, when
    `inputs` are given, that the clone takes the layer's weights and returns
    exactly the same outputs.
    """
    cls = type(layer)
    config = layer.get_config()
    try:
        json.dumps(keras.saving.serialize_keras_object(layer))
    except TypeError as error:
        _fail(f"{cls.__name__}.get_config() is not JSON-serializable: {error}")
    parameters = inspect.signature(cls.__init__).parameters.values()
    missing = [
        p.name
        for p in parameters
        if p.name != "self"
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and p.name not in config
    ]
    if missing:
        _fail(
            f"{cls.__name__}.get_config() lacks constructor arguments {missing}; "
            f"got keys {sorted(config)}."
        )
    clone = cls.from_config(config)
    if clone.get_config() != config:
        _fail(
            f"{cls.__name__}: from_config(config).get_config() differs from "
            f"config.\n  original: {config}\n  clone:    {clone.get_config()}"
        )
    revived = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(layer)
    )
    if type(revived) is not cls:
        _fail(
            f"{cls.__name__} deserializes as {type(revived).__name__}; is it "
            "registered with keras.saving.register_keras_serializable?"
        )
    if inputs is None:
        return
    args, call_kwargs = _as_list(inputs), call_kwargs or {}
    expected = layer(*args, **call_kwargs)
    clone(*args, **call_kwargs)
    try:
        clone.set_weights(layer.get_weights())
    except ValueError as error:
        _fail(
            f"{cls.__name__}: the layer rebuilt from its config has different "
            f"weights ({error})."
        )
    _compare(
        f"{cls.__name__} rebuilt from config", expected, clone(*args, **call_kwargs)
    )


def check_serialization(
    model, inputs, saved_model=None, rtol=0.0, atol=0.0, saved_model_atol=1e-6
):
    """Saving and reloading `model` gives identical outputs.

    `.keras` format, loaded back with `safe_mode=True`; with TensorFlow also a
    SavedModel written by `model.export()` and read by
    `tf.saved_model.load()`, called through its `serve` endpoint.

    Args:
        model: a built `keras.Model`.
        inputs: what `model` is called on (one array or a list).
        saved_model: also check the SavedModel export; by default when the
            backend is TensorFlow.
        rtol, atol: tolerance of the `.keras` round trip (exact by default).
        saved_model_atol: absolute (and relative) tolerance of the SavedModel
            outputs: the exported graph runs other (fused, oneDNN) kernels
            than eager execution, which may round differently by an ulp.
    """
    inputs = _model_inputs(inputs)
    expected = model(inputs, training=False)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, safe_mode=True)
        if len(loaded.weights) != len(model.weights):
            _fail(
                f"The reloaded model has {len(loaded.weights)} weights instead "
                f"of {len(model.weights)}."
            )
        # Weights are matched by position: auto-generated names of sublayers
        # may legitimately get another suffix when loaded in the same session.
        for w, v in zip(model.weights, loaded.weights, strict=True):
            if not np.array_equal(_to_numpy(w), _to_numpy(v)):
                _fail(f"Weight {w.path} changed in the .keras round trip.")
        _compare(
            ".keras round trip", expected, loaded(inputs, training=False), rtol, atol
        )

        if saved_model is None:
            saved_model = keras.backend.backend() == "tensorflow"
        if saved_model:
            import tensorflow as tf

            export_dir = os.path.join(tmp, "saved_model")
            model.export(export_dir, verbose=False)
            reloaded = tf.saved_model.load(export_dir)  # keep: owns the variables
            served = reloaded.serve(inputs)
            _compare(
                "SavedModel export",
                expected,
                served,
                saved_model_atol,
                saved_model_atol,
            )


def check_mixed_precision(
    layer_factory,
    inputs,
    policies=("mixed_float16", "mixed_bfloat16"),
    scale=1e4,
    call_kwargs=None,
    gradients=True,
):
    """Large inputs give finite outputs (and gradients) under low precision.

    For each policy, `layer_factory()` is called with that global dtype
    policy set (restored afterwards), and the layer is run on the floating
    inputs multiplied by `scale`, so that raw dot products reach 1e8 and
    more: far beyond float16's 65504 unless the logits are computed in
    float32. With `gradients=True` the gradients of the mean output with
    respect to the inputs (and, on TensorFlow, the trainable weights) must
    be finite too.

    Args:
        layer_factory: a function returning a fresh, unbuilt layer.
        inputs: one array or a list of arrays.
        policies: dtype policy names to try.
        scale: multiplier of the floating inputs.
        call_kwargs: extra keyword arguments of the layer call.
        gradients: also check the gradients.
    """
    call_kwargs = call_kwargs or {}
    args = [
        np.asarray(x) * np.asarray(scale, dtype=np.asarray(x).dtype)
        if _is_float(x)
        else x
        for x in _as_list(inputs)
    ]
    previous = keras.config.dtype_policy()
    try:
        for policy in policies:
            keras.config.set_dtype_policy(policy)
            layer = layer_factory()
            expected_dtype = keras.config.dtype_policy().compute_dtype
            if layer.compute_dtype != expected_dtype:
                _fail(
                    f"{type(layer).__name__} built under policy {policy!r} "
                    f"computes in {layer.compute_dtype}, not {expected_dtype}."
                )
            outputs = _outputs(_call_as_users_run_it(layer, args, call_kwargs))
            for i, out in enumerate(outputs):
                if not np.all(np.isfinite(out.astype("float32"))):
                    _fail(
                        f"{type(layer).__name__} under {policy!r}: output {i} has "
                        f"non-finite values for inputs scaled by {scale:g}."
                    )
            if gradients:
                _check_finite_gradients(layer, args, call_kwargs, policy)
    finally:
        keras.config.set_dtype_policy(previous)


def _call_as_users_run_it(layer, args, call_kwargs):
    """`layer(*args, **call_kwargs)`; on JAX built symbolically and compiled
    (see `CompiledOnJax`)."""
    return CompiledOnJax(layer)(*args, **call_kwargs)


class CompiledOnJax:
    """Calls `layer` eagerly on TensorFlow, through `jax.jit` on JAX.

    Eager JAX compiles every primitive for every new shape, one by one (a
    Transformer decoder's first eager call costs ~5 s, its compiled call
    ~1 s), and JAX users run layers under `jit` (`fit`, `predict`). So on
    JAX the layer is built from `keras.KerasTensor`s, as a functional model
    builds it, and called through `jax.jit`: array arguments are traced,
    other keyword arguments (flags, Python numbers, `None`) are static, one
    compiled function per set of static values. Other attributes are the
    layer's.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> from keras_attention import testing
    >>> x = np.random.rand(2, 4, 8).astype("float32")
    >>> layer = testing.CompiledOnJax(ka.layers.MultiHeadSelfAttention(2, 4))
    >>> tuple(layer(x, use_causal_mask=True).shape)
    (2, 4, 8)
    """

    def __init__(self, layer):
        self.layer = layer
        self._compiled = {}

    def __getattr__(self, name):
        return getattr(self.layer, name)

    def __call__(self, *args, **kwargs):
        if keras.backend.backend() != "jax":
            return self.layer(*args, **kwargs)
        import jax

        traced = {k: v for k, v in kwargs.items() if _is_array(v)}
        static = tuple(sorted((k, v) for k, v in kwargs.items() if k not in traced))
        if not self.layer.built:
            symbolic = keras.tree.map_structure(_symbolic, (args, traced))
            self.layer(*symbolic[0], **symbolic[1], **dict(static))
        key = (static, tuple(sorted(traced)))
        if key not in self._compiled:
            self._compiled[key] = jax.jit(
                lambda args, traced: self.layer(*args, **traced, **dict(static))
            )
        return self._compiled[key](args, traced)


def _is_array(x):
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _symbolic(x):
    if not _is_array(x):
        return x
    return keras.KerasTensor(tuple(x.shape), dtype=str(x.dtype))


def _mean_output(result):
    outs = [
        ops.mean(ops.cast(x, "float32"))
        for x in keras.tree.flatten(result)
        if "float" in str(x.dtype)
    ]
    return ops.sum(ops.stack(outs))


def _check_finite_gradients(layer, args, call_kwargs, policy):
    name = type(layer).__name__
    positions = [i for i, x in enumerate(args) if _is_float(x)]

    def loss(*float_args):
        full = list(args)
        for i, x in zip(positions, float_args, strict=True):
            full[i] = x
        return _mean_output(layer(*full, **call_kwargs))

    # The layer is built (`CompiledOnJax`): JAX may compile the gradient.
    grads = input_gradients(loss, [args[i] for i in positions], jit=True)
    for i, g in zip(positions, grads, strict=True):
        if not np.all(np.isfinite(_to_numpy(ops.cast(g, "float32")))):
            _fail(f"{name} under {policy!r}: the gradient of input {i} is not finite.")
    if keras.backend.backend() != "tensorflow" or not layer.trainable_weights:
        return
    import tensorflow as tf

    with tf.GradientTape() as tape:
        value = _mean_output(layer(*args, **call_kwargs))
    weights = layer.trainable_weights
    grads = tape.gradient(value, weights)
    for w, g in zip(weights, grads, strict=True):
        if g is not None and not np.all(np.isfinite(_to_numpy(ops.cast(g, "float32")))):
            _fail(f"{name} under {policy!r}: the gradient of {w.path} is not finite.")


def check_jit_fit(model, x, y, epochs=2, batch_size=None, optimizer="adam", loss="mse"):
    """`model.fit` compiled with XLA runs, keeps a finite loss and moves weights.

    The model is (re)compiled with `jit_compile=True`, `optimizer` and `loss`.
    A model without trainable weights only has to run with a finite loss.

    Returns:
        the `History` of the fit.
    """
    before = [_to_numpy(w).copy() for w in model.trainable_weights]
    model.compile(optimizer=optimizer, loss=loss, jit_compile=True)
    with warnings.catch_warnings():
        # A weightless model (e.g. plain dot-product attention) still has to
        # compile and run; Keras merely warns that there is nothing to train.
        warnings.filterwarnings(
            "ignore",
            message=".*does not have any trainable weights",
            category=UserWarning,
        )
        history = model.fit(
            _model_inputs(x), y, epochs=epochs, batch_size=batch_size, verbose=0
        )
    losses = history.history["loss"]
    if not np.all(np.isfinite(losses)):
        _fail(f"fit(jit_compile=True) gave non-finite losses {losses}.")
    after = [_to_numpy(w) for w in model.trainable_weights]
    if after and all(np.array_equal(a, b) for a, b in zip(before, after, strict=True)):
        _fail("fit(jit_compile=True) left every trainable weight unchanged.")
    return history


def check_causality(layer, inputs, call_kwargs=None, time_axis=1):
    """Output `t` does not depend on any input position after `t`.

    For each query position `t`, the gradient of output `t` with respect to
    every floating input whose length (along `time_axis`) equals the output's
    is computed; its entries for positions `> t` must be exactly zero. Some
    gradient must reach earlier positions, otherwise the check would pass
    for a layer that ignores its inputs.

    Args:
        layer: the layer, called as `layer(*inputs, **call_kwargs)`; pass
            e.g. `{"use_causal_mask": True}` in `call_kwargs`.
        inputs: one array or a list of arrays.
        call_kwargs: extra keyword arguments of the layer call.
        time_axis: the sequence axis of inputs and output.
    """
    call_kwargs = call_kwargs or {}
    args = _as_list(inputs)
    name = type(layer).__name__

    def first_output(*full):
        return keras.tree.flatten(layer(*full, **call_kwargs))[0]

    reference = _to_numpy(first_output(*args))
    length = reference.shape[time_axis]
    # A fixed random projection of output `t`, not its plain sum: the sum of
    # a LayerNorm output over features is constant (its gradient is 0 up to
    # rounding), which would hide any dependence of a post-LN block.
    projection = np.random.default_rng(0).normal(
        size=np.delete(reference.shape, time_axis)
    )
    projection = ops.convert_to_tensor(projection.astype("float32"))
    positions = [
        i
        for i, x in enumerate(args)
        if _is_float(x) and np.ndim(x) > time_axis and np.shape(x)[time_axis] == length
    ]
    if not positions:
        _fail(f"{name}: no floating input has the output's length {length}.")
    reaches_past = False
    for t in range(length):

        def loss(*float_args, t=t):
            full = list(args)
            for i, x in zip(positions, float_args, strict=True):
                full[i] = x
            out = ops.cast(first_output(*full), "float32")
            return ops.sum(ops.take(out, t, axis=time_axis) * projection)

        grads = input_gradients(loss, [args[i] for i in positions])
        for i, g in zip(positions, grads, strict=True):
            g = np.moveaxis(_to_numpy(ops.cast(g, "float32")), time_axis, 0)
            future = np.abs(g[t + 1 :])
            if np.any(future != 0):
                leak = t + 1 + int(np.argmax(future.reshape(len(future), -1).max(1)))
                _fail(
                    f"{name} is not causal: output {t} depends on position {leak} "
                    f"of input {i} (gradient up to {future.max():.3g})."
                )
            if t > 0 and np.any(g[:t] != 0):
                reaches_past = True
    if length > 1 and not reaches_past:
        _fail(
            f"{name}: no output depends on an earlier input position, so "
            "causality cannot be told apart from ignoring the inputs."
        )


def check_padding_invariance(
    layer,
    query,
    value=None,
    key=None,
    mask_argument=None,
    num_padding=3,
    call_kwargs=None,
    garbage_scale=1e3,
    rtol=1e-5,
    atol=1e-5,
    seed=0,
):
    """Appending masked garbage positions changes nothing.

    Cross-attention (`value` given): the layer is called as
    `layer(query, value[, key=key])`, then with `num_padding` random keys
    and values of magnitude `garbage_scale` appended and masked out through
    `mask_argument` (default `"value_mask"`); the outputs must agree. A mask
    already in `call_kwargs` under that name is extended with False.

    Self-attention (`value=None`): the layer is called as `layer(query)` and
    as `layer(padded_query, mask=...)` (`mask_argument`, default `"mask"`),
    and the outputs of the original positions must agree.

    Only the first output is compared (not the attention weights).
    """
    call_kwargs = dict(call_kwargs or {})
    name = type(layer).__name__
    rng = np.random.default_rng(seed)
    self_attention = value is None
    if mask_argument is None:
        mask_argument = "mask" if self_attention else "value_mask"
    padded_seq = query if self_attention else value
    batch, length = np.shape(padded_seq)[:2]
    mask = call_kwargs.pop(mask_argument, None)
    mask = np.ones((batch, length), bool) if mask is None else _to_numpy(mask)
    padded_mask = np.concatenate([mask, np.zeros((batch, num_padding), bool)], 1)

    def pad(x):
        x = np.asarray(x)
        garbage = rng.normal(size=(x.shape[0], num_padding, *x.shape[2:]))
        garbage = (garbage * garbage_scale).astype(x.dtype)
        return np.concatenate([x, garbage], axis=1)

    if self_attention:
        expected = layer(query, **{mask_argument: mask}, **call_kwargs)
        actual = layer(pad(query), **{mask_argument: padded_mask}, **call_kwargs)
        actual = keras.tree.flatten(actual)[0][:, :length]
    else:
        extra = {} if key is None else {"key": key}
        expected = layer(query, value, **extra, **{mask_argument: mask}, **call_kwargs)
        extra = {} if key is None else {"key": pad(key)}
        actual = layer(
            query, pad(value), **extra, **{mask_argument: padded_mask}, **call_kwargs
        )
        actual = keras.tree.flatten(actual)[0]
    expected = keras.tree.flatten(expected)[0]
    _compare(
        f"{name} with {num_padding} masked padding positions",
        expected,
        actual,
        rtol,
        atol,
    )
