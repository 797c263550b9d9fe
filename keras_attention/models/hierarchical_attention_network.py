from typing import Any
from typing import NamedTuple

import keras
from keras import ops

from keras_attention.layers.pooling.attention_pooling import AttentionPooling
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rank
from keras_attention.validation import check_rate


class HierarchicalAttention(NamedTuple):
    """What `HierarchicalAttentionNetwork.explain` returns.

    `logits` `(B, num_classes)`; `word_weights` `(B, N, W)`, the weight of
    each word inside its sentence; `sentence_weights` `(B, N)`, the weight
    of each sentence in the document (float32; 0 on padding).
    """

    logits: Any
    word_weights: Any
    sentence_weights: Any


@keras.saving.register_keras_serializable(package="keras_attention")
class HierarchicalAttentionNetwork(keras.Model):
    """Hierarchical attention network for document classification.

    Yang et al. (2016): a document is a sequence of sentences, a sentence a
    sequence of words. A bidirectional GRU reads the words of each sentence
    and `AttentionPooling` (a learned word context vector) turns them into
    a sentence vector; a second bidirectional GRU reads the sentence
    vectors and a second `AttentionPooling` (a sentence context vector)
    turns them into the document vector, which a dense layer classifies:

        h_it = BiGRU(W_e w_it),   s_i = sum_t alpha_it h_it,
        h_i = BiGRU(s_i),         v = sum_i alpha_i h_i,
        p = softmax(W_c v + b_c).

    Input: token ids `(B, N, W)`, N sentences of W words, 0 = padding. A
    padded word is masked in its sentence (the GRUs skip it, the pooling
    gives it weight 0); a sentence of padding only is masked in the
    document. Padding therefore changes nothing, whatever its length or
    place.

    Args:
        vocabulary_size: the number of token ids, padding (0) included.
        num_classes: the number of classes (the width of the logits).
        embedding_dim: width of the word embeddings.
        word_units: GRU units per direction at the word level.
        sentence_units: GRU units per direction at the sentence level.
        attention_units: width of `u_t` in both poolings.
        dropout: dropout on the embeddings and on the document vector
            while training.
        seed: seed of the dropout.
        **kwargs: base model arguments (`name`, `dtype`).

    Call arguments:
        tokens: int `(B, N, W)`.
        training: whether dropout is active.

    Returns:
        logits `(B, num_classes)`; `explain(tokens)` also gives the word
        and sentence weights (`HierarchicalAttention`).

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> model = ka.models.HierarchicalAttentionNetwork(
    ...     vocabulary_size=50, num_classes=2, embedding_dim=8,
    ...     word_units=4, sentence_units=4, attention_units=6)
    >>> tokens = np.random.randint(1, 50, size=(2, 3, 5))
    >>> tokens[1, 2] = 0  # a padded sentence
    >>> result = model.explain(tokens)
    >>> tuple(result.logits.shape), tuple(result.word_weights.shape)
    ((2, 2), (2, 3, 5))
    >>> tuple(result.sentence_weights.shape)
    (2, 3)

    References:
        - Yang et al., 2016, Hierarchical Attention Networks for Document
          Classification: https://aclanthology.org/N16-1174/
    """

    def __init__(
        self,
        vocabulary_size,
        num_classes,
        embedding_dim=100,
        word_units=50,
        sentence_units=50,
        attention_units=100,
        dropout=0.0,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (
            ("vocabulary_size", vocabulary_size),
            ("num_classes", num_classes),
            ("embedding_dim", embedding_dim),
            ("word_units", word_units),
            ("sentence_units", sentence_units),
            ("attention_units", attention_units),
        ):
            check_positive_int(name, value)
        check_rate("dropout", dropout)
        self.vocabulary_size = vocabulary_size
        self.num_classes = num_classes
        self.embedding_dim = embedding_dim
        self.word_units = word_units
        self.sentence_units = sentence_units
        self.attention_units = attention_units
        self.dropout = dropout
        self.seed = seed
        policy = self.dtype_policy
        self.embedding = keras.layers.Embedding(
            vocabulary_size, embedding_dim, dtype=policy, name="embedding"
        )
        self.word_encoder = _bigru(word_units, policy, "word_encoder")
        self.word_attention = AttentionPooling(
            attention_units, dtype=policy, name="word_attention"
        )
        self.sentence_encoder = _bigru(sentence_units, policy, "sentence_encoder")
        self.sentence_attention = AttentionPooling(
            attention_units, dtype=policy, name="sentence_attention"
        )
        self.dropout_layer = keras.layers.Dropout(dropout, seed=seed, dtype=policy)
        self.classifier = keras.layers.Dense(
            num_classes, dtype=policy, name="classifier"
        )

    def call(self, tokens, training=None):
        return self.explain(tokens, training=training).logits

    def explain(self, tokens, training=None):
        """Logits and the attention of both levels (`HierarchicalAttention`)."""
        tokens = ops.convert_to_tensor(tokens)
        check_rank("tokens", tuple(tokens.shape), 3)
        batch, sentences, words = ops.shape(tokens)
        flat = ops.reshape(tokens, (-1, words))  # (B N, W)
        word_mask = ops.not_equal(flat, 0)
        x = self.dropout_layer(self.embedding(flat), training=training)
        h = self.word_encoder(x, mask=word_mask, training=training)  # (B N, W, 2u)
        s, alpha = self.word_attention(
            h, mask=word_mask, return_attention_scores=True, training=training
        )  # (B N, 2u), (B N, W)
        s = ops.reshape(s, (batch, sentences, 2 * self.word_units))
        sentence_mask = ops.any(ops.not_equal(tokens, 0), axis=-1)  # (B, N)
        h = self.sentence_encoder(s, mask=sentence_mask, training=training)
        v, beta = self.sentence_attention(
            h, mask=sentence_mask, return_attention_scores=True, training=training
        )  # (B, 2u'), (B, N)
        logits = self.classifier(self.dropout_layer(v, training=training))
        word_weights = ops.reshape(alpha, (batch, sentences, words))
        return HierarchicalAttention(logits, word_weights, beta)

    def get_config(self):
        return {
            **super().get_config(),
            "vocabulary_size": self.vocabulary_size,
            "num_classes": self.num_classes,
            "embedding_dim": self.embedding_dim,
            "word_units": self.word_units,
            "sentence_units": self.sentence_units,
            "attention_units": self.attention_units,
            "dropout": self.dropout,
            "seed": self.seed,
        }


def _bigru(units, policy, name):
    return keras.layers.Bidirectional(
        keras.layers.GRU(units, return_sequences=True, dtype=policy),
        dtype=policy,
        name=name,
    )
