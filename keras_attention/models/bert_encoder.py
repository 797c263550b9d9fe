"""`BertEncoder`: BERT's encoder (Devlin et al., 2019) from the library's
Transformer blocks, convertible to and from keras-hub's `BertBackbone`."""

import keras

from keras_attention.layers.transformer.position_embedding import PositionEmbedding
from keras_attention.layers.transformer.transformer_encoder import TransformerEncoder
from keras_attention.models._block_arguments import block_arguments
from keras_attention.models._block_arguments import block_config
from keras_attention.models._block_arguments import check_model_arguments
from keras_attention.models._block_arguments import set_block_arguments
from keras_attention.modifiers import ALiBi

POSITION_ENCODINGS = ("learned", "rope", "alibi")
INPUT_KEYS = ("token_ids", "segment_ids", "padding_mask")
# The model's own positive integers (the stack checks the blocks').
POSITIVE_ARGUMENTS = (
    "vocabulary_size",
    "num_layers",
    "hidden_dim",
    "num_heads",
    "max_sequence_length",
    "num_segments",
)
# keras-hub's BertBackbone arguments, the same here.
_KERAS_HUB_ARGS = (
    "vocabulary_size",
    "num_layers",
    "num_heads",
    "hidden_dim",
    "intermediate_dim",
    "dropout",
    "max_sequence_length",
    "num_segments",
)


@keras.saving.register_keras_serializable(package="keras_attention")
def gelu_approximate(x):
    """GELU with the tanh approximation, as BERT's reference code and
    keras-hub's `BertBackbone` compute it. Defined here rather than taken
    from keras-hub so that importing the library does not import keras-hub
    (several seconds)."""
    return keras.activations.gelu(x, approximate=True)


def bert_kernel_initializer():
    """BERT's initializer: a normal of standard deviation 0.02, cut at 2."""
    return keras.initializers.TruncatedNormal(stddev=0.02)


@keras.saving.register_keras_serializable(package="keras_attention")
class BertEncoder(keras.Model):
    """BERT's encoder: token + position + segment embeddings, a stack of
    `TransformerEncoderBlock`s and a pooled output for classification.

    `x = Dropout(LayerNorm(E_tok[t] + E_pos[i] + E_seg[s]))`, then
    `num_layers` encoder blocks (post-LN as in the paper, or pre-LN with a
    final norm), then `pooled = tanh(W h_[CLS] + b)` over the first token.
    The same inputs, outputs, weights and arguments as keras-hub's
    `BertBackbone` (`from_keras_hub` and `to_keras_hub` convert either way
    with the same outputs), plus the library's attention options:
    `attention_impl` (`"chunked"` keeps memory linear in the sequence
    length), pre-LN blocks, and positions inside the attention (RoPE or
    symmetric ALiBi) instead of the learned table, so that an encoder can
    be pre-trained on sequences longer than `max_sequence_length`.
    `BertMaskedLM` adds the masked-LM head for pre-training.

    Args:
        vocabulary_size: size of the token vocabulary.
        num_layers: encoder blocks.
        num_heads: attention heads; must divide `hidden_dim`.
        hidden_dim: model width.
        intermediate_dim: feed-forward width.
        dropout: residual, embedding and attention dropout rate.
        max_sequence_length: rows of the learned position table.
        num_segments: rows of the segment table (sentence A / B).
        attention_dropout: dropout on the attention weights; `dropout` if
            `None` (keras-hub's BERT has one rate).
        activation: feed-forward activation; BERT's tanh-approximated GELU.
        normalize_first: pre-LN blocks (and a final LayerNorm) instead of
            BERT's post-LN.
        layer_norm_epsilon: epsilon of every LayerNorm (BERT's 1e-12).
        position_encoding: `"learned"` (BERT's table, added to the
            embeddings), `"rope"` (rotary queries and keys, wavelength
            10000) or `"alibi"` (symmetric linear biases): the last two have
            no length limit.
        seed: seed of the dropouts.
        attention_impl: `"auto"`, `"dense"`, `"chunked"` or `"fused"`, for
            every block (see `keras_attention.ops.plan_attention`).
        **kwargs: base model arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: a dict with `"token_ids"` `(B, T)` int and, optionally,
            `"segment_ids"` `(B, T)` (default all 0) and `"padding_mask"`
            `(B, T)` (True or 1 = real token; default all real), as
            keras-hub's BERT takes them; or the token ids alone.
        training: whether dropout is active.

    Returns:
        A dict: `"sequence_output"` `(B, T, hidden_dim)` and
        `"pooled_output"` `(B, hidden_dim)`.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> encoder = ka.models.BertEncoder(
    ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=12)
    >>> outputs = encoder({
    ...     "token_ids": np.array([[2, 7, 9, 3, 0]]),
    ...     "segment_ids": np.array([[0, 0, 0, 0, 0]]),
    ...     "padding_mask": np.array([[1, 1, 1, 1, 0]])})
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 5, 8), (1, 8))

    References:
        - Devlin et al., 2019: https://arxiv.org/abs/1810.04805
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        max_sequence_length=512,
        num_segments=2,
        attention_dropout=None,
        activation=gelu_approximate,
        normalize_first=False,
        layer_norm_epsilon=1e-12,
        position_encoding="learned",
        seed=None,
        attention_impl="auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_model_arguments(locals(), POSITIVE_ARGUMENTS, POSITION_ENCODINGS)
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.position_encoding = position_encoding
        set_block_arguments(self, locals())
        self._make_sublayers()

    def _make_sublayers(self):
        dtype = self.dtype_policy
        # Keras' ReversibleEmbedding: `BertMaskedLM` reads its transpose.
        self.token_embedding = self._embedding(
            keras.layers.ReversibleEmbedding, self.vocabulary_size, "token_embedding"
        )
        self.position_embedding = None
        if self.position_encoding == "learned":
            self.position_embedding = PositionEmbedding(
                self.max_sequence_length,
                initializer=bert_kernel_initializer(),
                dtype=dtype,
                name="position_embedding",
            )
        self.segment_embedding = self._embedding(
            keras.layers.Embedding, self.num_segments, "segment_embedding"
        )
        self.embeddings_layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=dtype, name="embeddings_layer_norm"
        )
        self.embeddings_dropout = keras.layers.Dropout(
            self.dropout, seed=self.seed, dtype=dtype, name="embeddings_dropout"
        )
        self.encoder = TransformerEncoder(
            self.num_layers,
            kernel_initializer=bert_kernel_initializer(),
            name="encoder",
            **block_arguments(self),
            **self._attention_positions(),
        )
        self.pooled_dense = keras.layers.Dense(
            self.hidden_dim,
            activation="tanh",
            kernel_initializer=bert_kernel_initializer(),
            dtype=dtype,
            name="pooled_dense",
        )

    def _embedding(self, layer_class, count, name):
        """`count` vectors of width `hidden_dim`, drawn as BERT's kernels."""
        return layer_class(
            count,
            self.hidden_dim,
            embeddings_initializer=bert_kernel_initializer(),
            dtype=self.dtype_policy,
            name=name,
        )

    def _attention_positions(self):
        """The blocks' arguments for positions inside the attention."""
        if self.position_encoding == "rope":
            return {"rope_max_wavelength": 10000}
        if self.position_encoding == "alibi":
            return {"score_modifier": ALiBi(self.num_heads, symmetric=True)}
        return {}

    def build(self, inputs_shape=None):
        sequence_shape = (None, None, self.hidden_dim)
        for layer in (self.token_embedding, self.segment_embedding):
            layer.build((None, None))
        if self.position_embedding is not None:
            self.position_embedding.build(sequence_shape)
        self.embeddings_layer_norm.build(sequence_shape)
        self.encoder.build(sequence_shape)
        self.pooled_dense.build((None, self.hidden_dim))
        self.built = True

    def call(self, inputs, training=None):
        token_ids, segment_ids, padding_mask = self._inputs(inputs)
        x = self.token_embedding(token_ids)  # (B, T, D)
        if self.position_embedding is not None:  # else inside the attention
            x = x + self.position_embedding(x)
        x = x + self.segment_embedding(segment_ids)
        x = self.embeddings_layer_norm(x)
        x = self.embeddings_dropout(x, training=training)
        x = self.encoder(x, padding_mask=padding_mask, training=training)
        pooled = self.pooled_dense(x[:, 0, :])  # the [CLS] token
        return {"sequence_output": x, "pooled_output": pooled}

    def _inputs(self, inputs):
        """`(token_ids, segment_ids, padding_mask)` with their defaults."""
        if not isinstance(inputs, dict):
            inputs = {"token_ids": inputs}
        unknown = sorted(set(inputs) - set(INPUT_KEYS))
        if unknown or "token_ids" not in inputs:
            raise ValueError(
                f"`inputs` must be a dict with the keys {INPUT_KEYS} "
                "('token_ids' required), or the token ids alone. Received: "
                f"keys {sorted(inputs)}"
            )
        token_ids = keras.ops.convert_to_tensor(inputs["token_ids"], "int32")
        segment_ids = inputs.get("segment_ids")
        if segment_ids is None:
            segment_ids = keras.ops.zeros_like(token_ids)
        padding_mask = inputs.get("padding_mask")
        if padding_mask is not None:
            padding_mask = keras.ops.cast(padding_mask, "bool")
        return token_ids, segment_ids, padding_mask

    # -- fine-tuning ----------------------------------------------------------

    def enable_lora(self, rank, lora_alpha=None, target_names=None):
        """As keras-hub's `Backbone.enable_lora`: every weight of the
        encoder frozen, then LoRA (Hu et al., 2021) on the blocks' query and
        value projections (by default the fused Q/K/V projection, see
        `TransformerEncoder.enable_lora`): their low-rank factors and
        biases train, nothing else.

        Args:
            rank: the rank of each kernel's low-rank update.
            lora_alpha: its scale (`rank` when `None`), as in Keras.
            target_names: names of the projections to adapt (default
                `TransformerEncoder.LORA_TARGETS`).
        """
        if not self.built:
            self.build()
        targets = tuple(target_names or self.encoder.LORA_TARGETS)
        for layer in self._flatten_layers(include_self=False):
            if not list(layer._flatten_layers(include_self=False)):  # a leaf
                layer.trainable = layer.name in targets
        self.encoder.enable_lora(rank, lora_alpha=lora_alpha, target_names=targets)

    # -- conversion from and to keras-hub -----------------------------------

    @classmethod
    def from_keras_hub(cls, backbone, **kwargs):
        """A copy of keras-hub's `BertBackbone` `backbone` (built: it is a
        functional model): its config and weights, each block's query, key
        and value kernels fused. `**kwargs` override arguments that keep
        the weights' meaning (e.g. `attention_impl`, `dropout`)."""
        config = backbone.get_config()
        arguments = {name: config[name] for name in _KERAS_HUB_ARGS}
        arguments.update(name=config["name"], dtype=backbone.dtype_policy)
        ours = cls(**{**arguments, **kwargs})
        ours._check_keras_hub_compatible()
        _copy_weights(ours, backbone, to_keras_hub=False)
        return ours

    def to_keras_hub(self):
        """keras-hub's `BertBackbone` with this encoder's config and weights
        (needs `keras_hub`)."""
        import keras_hub

        self._check_keras_hub_compatible()
        arguments = {name: getattr(self, name) for name in _KERAS_HUB_ARGS}
        backbone = keras_hub.models.BertBackbone(
            **arguments, name=self.name, dtype=self.dtype_policy
        )
        _copy_weights(self, backbone, to_keras_hub=True)
        return backbone

    def _check_keras_hub_compatible(self):
        """keras-hub's BERT is post-LN with a learned position table, one
        dropout rate, BERT's GELU and LayerNorm epsilon."""
        ours = {
            "normalize_first": self.normalize_first,
            "position_encoding": self.position_encoding,
            "attention_dropout": self.attention_dropout,
            "activation": keras.activations.serialize(self.activation),
            "layer_norm_epsilon": self.layer_norm_epsilon,
        }
        hub = {
            "normalize_first": False,
            "position_encoding": "learned",
            "attention_dropout": None,
            "activation": keras.activations.serialize(gelu_approximate),
            "layer_norm_epsilon": 1e-12,
        }
        different = {k: v for k, v in ours.items() if v != hub[k]}
        if different:
            raise ValueError(
                "keras-hub's BertBackbone has only "
                f"{hub}, so this encoder cannot be converted. Received: {different}"
            )

    def get_config(self):
        return {
            **super().get_config(),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "max_sequence_length": self.max_sequence_length,
            "num_segments": self.num_segments,
            **block_config(self),
            "position_encoding": self.position_encoding,
        }


# The sublayers of the same type and name in both models.
_SAME_SUBLAYERS = (
    "token_embedding",
    "position_embedding",
    "segment_embedding",
    "embeddings_layer_norm",
    "pooled_dense",
)


def _copy_weights(encoder, backbone, *, to_keras_hub):
    """Every weight from keras-hub's `BertBackbone` `backbone` into our
    `encoder` (built here if it is not), or the other way round
    (`to_keras_hub`): `_SAME_SUBLAYERS` as they are, then each block's,
    whose query, key and value kernels are fused in ours."""
    if not encoder.built:
        encoder.build()
    source, target = (encoder, backbone) if to_keras_hub else (backbone, encoder)
    for name in _SAME_SUBLAYERS:
        getattr(target, name).set_weights(getattr(source, name).get_weights())
    blocks = zip(encoder.encoder.blocks, backbone.transformer_layers, strict=True)
    for block, hub_block in blocks:  # layer by layer
        if to_keras_hub:
            block.copy_weights_to_keras_hub(hub_block)
        else:
            block.copy_keras_hub_weights(hub_block)
