import math

import keras
from keras import ops

from keras_attention.decoding.beam_search import beam_search
from keras_attention.decoding.sampling import sample
from keras_attention.layers.transformer.position_embedding import PositionEmbedding
from keras_attention.layers.transformer.sinusoidal_position_encoding import (
    SinusoidalPositionEncoding,
)
from keras_attention.layers.transformer.transformer_decoder import TransformerDecoder
from keras_attention.layers.transformer.transformer_encoder import TransformerEncoder
from keras_attention.models._block_arguments import block_arguments
from keras_attention.models._block_arguments import block_config
from keras_attention.models._block_arguments import check_model_arguments
from keras_attention.models._block_arguments import set_block_arguments
from keras_attention.models._compiled_loop import run_compiled
from keras_attention.modifiers import ALiBi
from keras_attention.modifiers import RelativePositionBias
from keras_attention.ops.softmax import MASK_VALUE

POSITION_ENCODINGS = ("sinusoidal", "learned", "rope", "alibi", "relative")


# The model's own positive integers (the stacks check the blocks').
POSITIVE_ARGUMENTS = (
    "encoder_vocabulary_size",
    "decoder_vocabulary_size",
    "hidden_dim",
    "num_heads",
    "max_length",
)


@keras.saving.register_keras_serializable(package="keras_attention")
class Transformer(keras.Model):
    """The encoder-decoder Transformer of Vaswani et al. (2017), ready to fit.

    Token embeddings (scaled by `sqrt(hidden_dim)`) plus position encodings
    feed a `TransformerEncoder` and a `TransformerDecoder`; a final dense
    layer (or, with `tie_weights=True`, the transposed decoder embedding)
    gives next-token logits. Token id `padding_id` is padding: it is masked
    in the encoder's self-attention, in the decoder's cross-attention (the
    ENCODER's padding) and in the decoder's self-attention. In the spirit of
    `torch.nn.Transformer`, with embeddings and generation included.

    Training is teacher forcing: inputs `{"encoder_tokens": (B, S),
    "decoder_tokens": (B, T)}` (or a tuple in that order), where the decoder
    tokens are the targets shifted right behind a start token; the output is
    float32 logits `(B, T, decoder_vocabulary_size)`. `generate` decodes
    with the KV cache in one compiled loop (greedy, beam search or
    sampling).

    Args:
        encoder_vocabulary_size: size of the source vocabulary.
        decoder_vocabulary_size: size of the target vocabulary.
        hidden_dim: model width `d_model`.
        num_heads: attention heads; must divide `hidden_dim`.
        intermediate_dim: feed-forward width `d_ff`.
        num_encoder_layers: encoder blocks.
        num_decoder_layers: decoder blocks.
        dropout: residual and embedding dropout rate.
        attention_dropout: dropout on attention weights; `dropout` if `None`.
        activation: feed-forward activation.
        normalize_first: pre-LN blocks instead of the paper's post-LN.
        layer_norm_epsilon: epsilon of the layer normalizations.
        position_encoding: how positions enter: added to the embeddings,
            `"sinusoidal"` (the paper) or `"learned"`; or inside every
            self-attention, `"rope"` (rotary queries and keys, max
            wavelength 10000), `"alibi"` (linear biases; symmetric in the
            encoder) or `"relative"` (T5's learned bucketed bias, a table
            per block; bidirectional in the encoder). Cross-attention has
            no positions in the last three.
        max_length: longest sequence for `"learned"` positions (and the
            default `generate` length).
        tie_weights: use the decoder embedding matrix as output projection.
        padding_id: the padding token id.
        seed: seed of the dropouts.
        attention_impl: `"auto"`, `"dense"`, `"chunked"` or `"fused"`,
            passed to every attention layer of the encoder and decoder
            stacks (see `keras_attention.ops.plan_attention`): `"chunked"`
            is the exact O(L)-memory path (every mask, attention dropout);
            `"fused"` runs `keras.ops.dot_product_attention` (the GPU's
            fused kernel) and needs `attention_dropout=0`; neither
            returns attention scores.
        **kwargs: base model arguments (`name`, `dtype`, ...).

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> model = ka.Transformer(20, 20, hidden_dim=16, num_heads=2,
    ...     intermediate_dim=32, num_encoder_layers=1, num_decoder_layers=1)
    >>> src = np.array([[5, 6, 7, 0]])
    >>> tgt_in = np.array([[1, 7, 6]])
    >>> tuple(model({"encoder_tokens": src, "decoder_tokens": tgt_in}).shape)
    (1, 3, 20)
    >>> tuple(model.generate(src, max_length=5, start_id=1, end_id=2).shape)
    (1, 5)

    References:
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
        - Press & Wolf, 2017 (weight tying): https://arxiv.org/abs/1608.05859
    """

    def __init__(
        self,
        encoder_vocabulary_size,
        decoder_vocabulary_size,
        hidden_dim=512,
        num_heads=8,
        intermediate_dim=2048,
        num_encoder_layers=6,
        num_decoder_layers=6,
        dropout=0.1,
        attention_dropout=None,
        activation="relu",
        normalize_first=False,
        layer_norm_epsilon=1e-5,
        position_encoding="sinusoidal",
        max_length=256,
        tie_weights=False,
        padding_id=0,
        seed=None,
        attention_impl="auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_model_arguments(locals(), POSITIVE_ARGUMENTS, POSITION_ENCODINGS)
        self.encoder_vocabulary_size = encoder_vocabulary_size
        self.decoder_vocabulary_size = decoder_vocabulary_size
        self.num_encoder_layers = num_encoder_layers
        self.num_decoder_layers = num_decoder_layers
        self.position_encoding = position_encoding
        self.max_length = max_length
        self.tie_weights = tie_weights
        self.padding_id = padding_id
        set_block_arguments(self, locals())
        self._make_sublayers()
        self._generate_functions = {}

    def _make_sublayers(self):
        """The embeddings, positions, stacks and output projection, from
        the arguments kept as attributes."""
        self.encoder_embedding, self.decoder_embedding = (
            keras.layers.Embedding(
                size, self.hidden_dim, dtype=self.dtype_policy, name=f"{side}_embedding"
            )
            for side, size in (
                ("encoder", self.encoder_vocabulary_size),
                ("decoder", self.decoder_vocabulary_size),
            )
        )
        self.encoder_positions = self._position_layer("encoder_positions")
        self.decoder_positions = self._position_layer("decoder_positions")
        self.embedding_dropout = keras.layers.Dropout(
            self.dropout, seed=self.seed, dtype=self.dtype_policy
        )
        common = block_arguments(self)
        self.encoder = TransformerEncoder(
            self.num_encoder_layers,
            name="encoder",
            **common,
            **self._attention_positions(bidirectional=True),
        )
        self.decoder = TransformerDecoder(
            self.num_decoder_layers,
            name="decoder",
            **common,
            **self._attention_positions(bidirectional=False),
        )
        self.output_projection = None
        if not self.tie_weights:
            self.output_projection = keras.layers.Dense(
                self.decoder_vocabulary_size,
                dtype=self.dtype_policy,
                name="output_projection",
            )

    def _position_layer(self, name):
        """The additive position layer, `None` when positions are inside
        the attention."""
        if self.position_encoding == "sinusoidal":
            return SinusoidalPositionEncoding(dtype=self.dtype_policy, name=name)
        if self.position_encoding == "learned":
            return PositionEmbedding(
                self.max_length, dtype=self.dtype_policy, name=name
            )
        return None

    def _attention_positions(self, bidirectional):
        """The self-attention arguments of `position_encoding`."""
        if self.position_encoding == "rope":
            return {"rope_max_wavelength": 10000}
        if self.position_encoding == "alibi":
            return {"score_modifier": ALiBi(self.num_heads, symmetric=bidirectional)}
        if self.position_encoding == "relative":
            bias = RelativePositionBias(self.num_heads, bidirectional=bidirectional)
            return {"score_modifier": bias}
        return {}

    def build(self, inputs_shape=None):
        encoder_shape = (None, None, self.hidden_dim)
        for layer in (self.encoder_embedding, self.decoder_embedding):
            layer.build((None, None))
        for layer in (self.encoder_positions, self.decoder_positions):
            if layer is not None:
                layer.build(encoder_shape)
        self.encoder.build(encoder_shape)
        self.decoder.build(encoder_shape, encoder_shape)
        if self.output_projection is not None:
            self.output_projection.build(encoder_shape)
        self.built = True

    # -- the pieces ---------------------------------------------------------

    def _embed(self, tokens, embedding, positions, start_index=0, training=None):
        x = embedding(tokens) * ops.cast(math.sqrt(self.hidden_dim), self.compute_dtype)
        if positions is not None:  # else they are inside the attention
            x = x + positions(x, start_index=start_index)
        return self.embedding_dropout(x, training=training)  # (B, T, D)

    def encode(self, encoder_tokens, training=None):
        """`(encoder_output (B, S, D), encoder_padding_mask (B, S))`."""
        encoder_tokens = ops.convert_to_tensor(encoder_tokens, "int32")
        mask = ops.not_equal(encoder_tokens, self.padding_id)
        x = self._embed(
            encoder_tokens,
            self.encoder_embedding,
            self.encoder_positions,
            training=training,
        )
        return self.encoder(x, padding_mask=mask, training=training), mask

    def logits(self, decoder_output):
        """Next-token logits, float32 `(B, T, V)`."""
        if self.output_projection is None:
            kernel = ops.cast(self.decoder_embedding.embeddings, decoder_output.dtype)
            logits = ops.matmul(decoder_output, ops.transpose(kernel))
        else:
            logits = self.output_projection(decoder_output)
        return ops.cast(logits, "float32")

    def call(self, inputs, training=None):
        if isinstance(inputs, dict):
            encoder_tokens = inputs["encoder_tokens"]
            decoder_tokens = inputs["decoder_tokens"]
        else:
            encoder_tokens, decoder_tokens = inputs
        encoder_output, encoder_mask = self.encode(encoder_tokens, training=training)
        decoder_tokens = ops.convert_to_tensor(decoder_tokens, "int32")
        x = self._embed(
            decoder_tokens,
            self.decoder_embedding,
            self.decoder_positions,
            training=training,
        )
        x = self.decoder(
            x,
            encoder_output,
            decoder_padding_mask=ops.not_equal(decoder_tokens, self.padding_id),
            encoder_padding_mask=encoder_mask,
            training=training,
        )
        return self.logits(x)

    # -- generation ---------------------------------------------------------

    def _search(
        self,
        encoder_tokens,
        seed,
        start_id,
        max_length,
        end_id,
        num_beams,
        length_penalty_alpha,
        return_attention_scores,
        sampling,
    ):
        encoder_output, encoder_mask = self.encode(encoder_tokens)
        cross_cache = self.decoder.compute_cross_attention_cache(encoder_output)
        # The step function closes over per-example constants: one row per beam.
        cross_cache = ops.repeat(cross_cache, num_beams, axis=0)
        encoder_mask = ops.repeat(encoder_mask, num_beams, axis=0)
        batch = ops.shape(encoder_tokens)[0]

        def step_fn(tokens, cache, index):
            x = self._embed(
                tokens[:, None],
                self.decoder_embedding,
                self.decoder_positions,
                start_index=index,
            )  # (B, 1, D)
            # Weights only when asked for: the chunked path has none.
            outputs = self.decoder(
                x,
                encoder_padding_mask=encoder_mask,
                cache=cache,
                cache_update_index=index,
                cross_attention_cache=cross_cache,
                return_attention_scores=return_attention_scores,
            )
            if return_attention_scores:
                x, weights, cache = outputs
            else:
                x, cache = outputs
            logits = self.logits(x)[:, 0]  # (B, V)
            # Padding is never an output: generated tokens stay unmasked.
            is_pad = ops.equal(ops.arange(ops.shape(logits)[-1]), self.padding_id)
            logits = ops.where(is_pad, MASK_VALUE, logits)
            aux = None
            if return_attention_scores:
                aux = weights["cross_attention"][:, :, :, 0]  # (B, L, N, S)
            return logits, cache, aux

        start = ops.full((batch,), start_id, dtype="int32")
        cache = self.decoder.init_cache(batch, max_length)
        loop = (step_fn, start, cache, max_length)
        ends = dict(end_token=end_id, pad_token=self.padding_id)
        if sampling is not None:
            temperature, top_k, top_p = sampling
            tokens, aux = sample(
                *loop,
                **ends,
                temperature=temperature,
                top_k=top_k,
                top_p=top_p,
                seed=seed,
            )
        else:
            tokens, aux, _ = beam_search(
                *loop,
                **ends,
                num_beams=num_beams,
                length_penalty_alpha=length_penalty_alpha,
            )
        if not return_attention_scores:
            return tokens
        return tokens, ops.transpose(aux, (0, 2, 3, 1, 4))  # (B, L, N, T, S)

    def generate(
        self,
        encoder_tokens,
        max_length=None,
        start_id=1,
        end_id=2,
        num_beams=1,
        length_penalty_alpha=0.6,
        return_attention_scores=False,
        jit_compile=True,
        sample=False,
        temperature=1.0,
        top_k=None,
        top_p=None,
        seed=None,
    ):
        """Translate `encoder_tokens` `(B, S)` with the KV-cached decoder.

        `num_beams=1` is greedy search; more beams use beam search with the
        GNMT length penalty `((5 + len) / 6) ** length_penalty_alpha`.
        `sample=True` draws every token instead (one sequence per example,
        `num_beams=1`) from `softmax(logits / temperature)`, restricted to
        the `top_k` most likely tokens and then to the nucleus of mass
        `top_p` (see `keras_attention.decoding.sample`). The same `seed` (an
        int) gives the same tokens; `seed=None` draws a new one from Python's
        `random` at every call. The whole search is one loop compiled with
        XLA (`jit_compile=True`: `tf.function` on TensorFlow, `jax.jit` on
        JAX), traced once per argument combination (the seed is an input: a
        new seed does not retrace).

        Returns:
            int32 tokens `(B, max_length)` (after `end_id`: `padding_id`),
            and with `return_attention_scores=True` the cross-attention
            weights of every layer and head, `(B, L, N, max_length, S)`
            (zeros after the end).
        """
        if not self.built:
            self.build()
        from keras_attention.decoding import sampling as sampling_module

        max_length = self.max_length if max_length is None else max_length
        sampling = None
        if sample:
            if num_beams != 1:
                raise ValueError(
                    "`sample=True` draws one sequence per example: `num_beams` "
                    f"must be 1. Received: num_beams={num_beams!r}"
                )
            sampling_module.check_sampling_arguments(temperature, top_k, top_p, seed)
            sampling = (temperature, top_k, top_p)
        elif temperature != 1.0 or any(x is not None for x in (top_k, top_p, seed)):
            raise ValueError(
                "`temperature`, `top_k`, `top_p` and `seed` apply only with "
                f"`sample=True`. Received: sample={sample!r}, "
                f"temperature={temperature!r}, top_k={top_k!r}, "
                f"top_p={top_p!r}, seed={seed!r}"
            )
        args = (start_id, max_length, end_id, num_beams, length_penalty_alpha)
        args += (bool(return_attention_scores), sampling)
        encoder_tokens = ops.convert_to_tensor(encoder_tokens, "int32")
        seed = sampling_module.seed_tensor(seed if sample else 0)
        if not jit_compile:
            return self._search(encoder_tokens, seed, *args)
        return run_compiled(
            self._generate_functions, args, self._search, encoder_tokens, seed
        )

    def get_config(self):
        return {
            **super().get_config(),
            "encoder_vocabulary_size": self.encoder_vocabulary_size,
            "decoder_vocabulary_size": self.decoder_vocabulary_size,
            "num_encoder_layers": self.num_encoder_layers,
            "num_decoder_layers": self.num_decoder_layers,
            **block_config(self),
            "position_encoding": self.position_encoding,
            "max_length": self.max_length,
            "tie_weights": self.tie_weights,
            "padding_id": self.padding_id,
        }
