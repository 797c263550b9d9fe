"""`BertMaskedLM`: a `BertEncoder` with BERT's masked-LM head, for
pre-training."""

import keras

from keras_attention.models.bert_encoder import BertEncoder
from keras_attention.models.bert_encoder import bert_kernel_initializer


@keras.saving.register_keras_serializable(package="keras_attention")
class BertMaskedLM(keras.Model):
    """Masked language modelling on a `BertEncoder` (Devlin et al., 2019).

    At each masked position `p`, the logits over the vocabulary are
    `LayerNorm(gelu(W h_p + b)) E^T + c`: the head's output projection is
    the encoder's token embedding `E` transposed (tied), plus a bias. The
    head is keras-hub's `MaskedLMHead`, built as keras-hub's
    `BertMaskedLM` builds it (exact GELU, BERT's initializer), so its
    weights copy from and to keras-hub's with `set_weights`.

    Pair it with keras-hub's `MaskedLMMaskGenerator`, which chooses the
    positions (15% of tokens, 80% replaced by the mask token, 10% by a
    random token, 10% kept) and gives `mask_positions`, `mask_ids` (the
    labels) and `mask_weights` (0 for padded slots: use them as sample
    weights).

    Args:
        encoder: a `BertEncoder` (its weights are shared, not copied:
            fine-tune the same encoder afterwards).
        **kwargs: base model arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: the encoder's dict (`"token_ids"`, optional `"segment_ids"`
            and `"padding_mask"`) plus `"mask_positions"` `(B, P)` int: the
            positions to predict.
        training: whether dropout is active.

    Returns:
        float32 logits `(B, P, vocabulary_size)`.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> encoder = ka.models.BertEncoder(
    ...     vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=12)
    >>> model = ka.models.BertMaskedLM(encoder)
    >>> logits = model({"token_ids": np.array([[2, 4, 4, 3]]),
    ...                 "mask_positions": np.array([[1, 2]])})
    >>> tuple(logits.shape)
    (1, 2, 50)

    References:
        - Devlin et al., 2019: https://arxiv.org/abs/1810.04805
    """

    def __init__(self, encoder, **kwargs):
        import keras_hub  # the head; imported here, not with the library

        super().__init__(**kwargs)
        if not isinstance(encoder, BertEncoder):
            raise TypeError(
                "`encoder` must be a `keras_attention.models.BertEncoder`. "
                f"Received: encoder={encoder!r}"
            )
        self.encoder = encoder
        self.masked_lm_head = keras_hub.layers.MaskedLMHead(
            vocabulary_size=encoder.vocabulary_size,
            token_embedding=encoder.token_embedding,
            intermediate_activation="gelu",
            kernel_initializer=bert_kernel_initializer(),
            dtype=encoder.dtype_policy,
            name="mlm_head",
        )

    def build(self, inputs_shape=None):
        if not self.encoder.built:
            self.encoder.build()
        self.masked_lm_head.build((None, None, self.encoder.hidden_dim))
        self.built = True

    def call(self, inputs, training=None):
        if not isinstance(inputs, dict) or "mask_positions" not in inputs:
            keys = sorted(inputs) if isinstance(inputs, dict) else type(inputs)
            raise ValueError(
                "`inputs` must be a dict with 'mask_positions' and the "
                f"encoder's keys. Received: {keys}"
            )
        encoder_inputs = {k: v for k, v in inputs.items() if k != "mask_positions"}
        sequence = self.encoder(encoder_inputs, training=training)["sequence_output"]
        positions = keras.ops.convert_to_tensor(inputs["mask_positions"], "int32")
        logits = self.masked_lm_head(sequence, mask_positions=positions)
        return keras.ops.cast(logits, "float32")

    def get_config(self):
        return {
            **super().get_config(),
            "encoder": keras.saving.serialize_keras_object(self.encoder),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
