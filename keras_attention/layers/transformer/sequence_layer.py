"""The rules of a layer that maps a sequence to a sequence of its shape
(private): the Transformer blocks, their stacks and the Universal
Transformer.

Its output has the first input's shape and Keras mask; its padding mask is
filled from that Keras mask and checked with its attention mask under the
caller's names; its heads split the input width evenly.
"""

from keras_attention.keras_compat import first_mask
from keras_attention.keras_compat import trace_output_spec
from keras_attention.validation import check_attention_mask
from keras_attention.validation import check_mask
from keras_attention.validation import check_rank


class SequenceLayerMixin:
    """The shape, mask and spec rules of a layer whose output is its first
    input's shape, with that input's Keras mask (private)."""

    def compute_mask(self, inputs, previous_mask=None):
        return previous_mask

    def compute_output_shape(self, *shapes, **named_shapes):
        # The output has the shape of the first input (`inputs` or
        # `decoder_sequence`), however the shapes are passed (Keras'
        # `summary` passes the build shapes by name).
        return (list(shapes) + list(named_shapes.values()))[0]

    def compute_output_spec(self, *args, **kwargs):
        # Traced from `call`: the weights and caches when asked for.
        return trace_output_spec(self, *args, **kwargs)


def head_size(name, shape, num_heads):
    """`key_dim = width // num_heads`; ValueError unless it divides."""
    check_rank(name, tuple(shape), 3)
    width = shape[-1]
    if width is None or width % num_heads:
        raise ValueError(
            f"The width of `{name}` must be known and divisible by "
            f"`num_heads`={num_heads}. Received: {name}.shape={tuple(shape)}"
        )
    return width // num_heads


def check_self_attention_masks(inputs, padding_mask, attention_mask, heads, prefix):
    """`{prefix}padding_mask` `(B, T)` and `{prefix}attention_mask` (`(T, T)`,
    `(B, T, T)` or `(B, N, T, T)`) of a self-attention over `inputs`."""
    batch, length = inputs.shape[0], inputs.shape[1]
    if padding_mask is not None:
        check_mask(f"{prefix}padding_mask", padding_mask, (batch, length))
    if attention_mask is not None:
        check_attention_mask(
            f"{prefix}attention_mask", attention_mask, batch, heads, length, length
        )


def filled_padding_mask(inputs, padding_mask, attention_mask, num_heads):
    """The `padding_mask` of an encoder-style call (the block, the stack,
    the Universal Transformer), filled from the Keras mask of `inputs` and
    checked with `attention_mask` under the caller's names."""
    padding_mask = first_mask(padding_mask, inputs)
    check_self_attention_masks(inputs, padding_mask, attention_mask, num_heads, "")
    return padding_mask


def offset_seed(seed, offset):
    """Distinct but reproducible seeds for the sublayers of one block."""
    return None if seed is None else seed + offset
