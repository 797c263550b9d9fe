"""The Transformer-block arguments of `Transformer` and `ImageTransformer`
(private): checked, kept as attributes, passed to their stacks and saved in
their configs in one place, so the two models cannot drift apart (a new
block argument is added here once)."""

import keras

from keras_attention.ops import check_attention_impl
from keras_attention.ops.dispatch.attention_plan import check_fused_options
from keras_attention.validation import check_positive_int
from keras_attention.validation import get_activation

# What every stack of the model gets, in the order of the models' signatures.
BLOCK_ARGUMENTS = (
    "num_heads",
    "intermediate_dim",
    "dropout",
    "attention_dropout",
    "activation",
    "normalize_first",
    "layer_norm_epsilon",
    "seed",
    "attention_impl",
)


def check_heads_divide(hidden_dim, num_heads):
    """Every head gets `hidden_dim // num_heads` features, so it must divide."""
    if hidden_dim % num_heads:
        raise ValueError(
            "`hidden_dim` must be divisible by `num_heads`. Received: "
            f"hidden_dim={hidden_dim}, num_heads={num_heads}"
        )


def check_attention_options(attention_impl, dropout, attention_dropout):
    """`attention_impl` is known and, when `"fused"`, the attention weights
    (which the fused kernel never shows) have no dropout."""
    check_attention_impl(attention_impl)
    check_fused_options(
        attention_impl, dropout if attention_dropout is None else attention_dropout
    )


def check_model_arguments(arguments, positive_names, position_encodings):
    """A model's own arguments in `arguments` (its `__init__` locals): the
    attention options, the `positive_names` positive integers, the heads
    dividing `hidden_dim`, a known `position_encoding`. The stacks check
    the blocks' arguments."""
    check_attention_options(
        arguments["attention_impl"],
        arguments["dropout"],
        arguments["attention_dropout"],
    )
    for name in positive_names:
        check_positive_int(name, arguments[name])
    check_heads_divide(arguments["hidden_dim"], arguments["num_heads"])
    if arguments["position_encoding"] not in position_encodings:
        raise ValueError(
            f"`position_encoding` must be one of {position_encodings}. "
            f"Received: position_encoding={arguments['position_encoding']!r}"
        )


def set_block_arguments(model, arguments):
    """Keep `hidden_dim` and the `BLOCK_ARGUMENTS` of `arguments` (the
    model's `__init__` locals, so its signature stays the one place they
    are spelled out) as attributes of `model`; the activation as a
    function, as the blocks resolve it."""
    model.hidden_dim = arguments["hidden_dim"]
    for name in BLOCK_ARGUMENTS:
        setattr(model, name, arguments[name])
    model.activation = get_activation(arguments["activation"])


def block_arguments(model):
    """The arguments of `model`'s encoder and decoder stacks."""
    arguments = {name: getattr(model, name) for name in BLOCK_ARGUMENTS}
    return {**arguments, "dtype": model.dtype_policy}


def block_config(model):
    """`hidden_dim` and the `BLOCK_ARGUMENTS` as `get_config` entries."""
    config = {"hidden_dim": model.hidden_dim}
    config.update({name: getattr(model, name) for name in BLOCK_ARGUMENTS})
    config["activation"] = keras.activations.serialize(model.activation)
    return config
