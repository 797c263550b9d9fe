import keras
from keras import ops

from keras_attention.ops.modifier_calls import relative_position_bucket
from keras_attention.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_attention")
class RelativePositionBias(keras.layers.Layer):
    """T5's learned relative position bias (Raffel et al., 2020), as a score
    modifier: `score + table[bucket(key - query), head]`.

    Relative positions fall into `num_buckets` buckets
    (`keras_attention.ops.modifier_calls.relative_position_bucket`): exact for
    near distances, logarithmic up to `max_distance`, shared beyond. The
    table `(num_buckets, num_heads)` is learned; pass the layer as
    `score_modifier` to an attention layer, which tracks and builds it. Its
    gradients reach the table on the dense, chunked and decoding paths.

    Args:
        num_heads: number of heads `N`.
        num_buckets: number of buckets (32 in T5).
        max_distance: distance from which all positions share a bucket.
        bidirectional: separate buckets for keys after the query (encoder);
            `False` for causal attention.
        embeddings_initializer: initializer of the table.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> bias = ka.modifiers.RelativePositionBias(num_heads=2)
    >>> layer = ka.layers.MultiHeadAttention(2, 8, score_modifier=bias)
    >>> x = np.ones((1, 5, 16), "float32")
    >>> tuple(layer(x, x).shape)
    (1, 5, 16)

    References:
        - Raffel et al., 2020: https://arxiv.org/abs/1910.10683
    """

    additive_bias = True

    def __init__(
        self,
        num_heads,
        num_buckets=32,
        max_distance=128,
        bidirectional=True,
        embeddings_initializer="zeros",
        **kwargs,
    ):
        kwargs.setdefault("autocast", False)  # scores stay float32
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("num_buckets", num_buckets)
        check_positive_int("max_distance", max_distance)
        if num_buckets < (4 if bidirectional else 2):
            raise ValueError(
                "`num_buckets` must be at least 4 (bidirectional) or 2. "
                f"Received: num_buckets={num_buckets}"
            )
        self.num_heads = num_heads
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bool(bidirectional)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, input_shape=None):
        self.table = self.add_weight(
            name="table",
            shape=(self.num_buckets, self.num_heads),
            initializer=self.embeddings_initializer,
            dtype="float32",
        )
        self.built = True

    def call(self, score, batch, head, query, key):
        bucket = relative_position_bucket(
            key - query, self.bidirectional, self.num_buckets, self.max_distance
        )  # (1, 1, T, S)
        table = ops.convert_to_tensor(self.table)
        if _one_index_per_head(head) and tuple(bucket.shape[:2]) == (1, 1):
            # Rows of the heads' values, one row per (query, key) pair: XLA
            # gathers (and scatter-adds for the gradient) T S rows instead
            # of N T S scalars. Under TensorFlow's XLA on a CPU, causal
            # chunked attention with this bias went from 1.55x to 1.34x the
            # time without it (256-blocks of 4 heads; benchmarks/RESULTS.md).
            columns = ops.take(table, ops.reshape(head, (-1,)), axis=1)  # (K, N)
            bias = ops.take(columns, bucket[0, 0], axis=0)  # (T, S, N)
            bias = ops.transpose(bias, (2, 0, 1))[None]  # (1, N, T, S)
        else:  # any other broadcastable indices
            flat = ops.reshape(table, (-1,))
            bias = ops.take(flat, bucket * self.num_heads + head)
        return ops.cast(score, "float32") + bias

    def compute_output_shape(self, input_shape, *args):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "num_buckets": self.num_buckets,
            "max_distance": self.max_distance,
            "bidirectional": self.bidirectional,
            "embeddings_initializer": keras.initializers.serialize(
                self.embeddings_initializer
            ),
        }


def _one_index_per_head(head):
    """Whether `head` is shaped `(1, N, 1, 1)`, as the attention layers and
    ops pass it (`ops.modifier_calls.position_indices`)."""
    shape = tuple(head.shape)
    return len(shape) == 4 and shape[0] == shape[2] == shape[3] == 1
