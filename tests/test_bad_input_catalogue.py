"""A catalogue of wrong calls: each must raise a clear error.

Every entry is a wrong constructor argument or call across the public
layers (and the decoding functions): wrong rank, mismatched widths, lengths
or batch sizes, masks of the wrong shape or dtype, non-positive sizes,
unknown names, caches of the wrong size, `start_index` / `cache_update_index` out
of range. Each must raise `ValueError` or `TypeError` whose message names
the argument (in backticks, as the library writes it) and shows the received
value after "Received:", so the user sees at once what to fix.

Not in the catalogue: NaN inputs. Detecting them needs a pass over the data
(and, inside a compiled loop, a device-to-host sync) on every call, which the
library does not add to its hot paths; use `tf.debugging.enable_check_numerics`
or `jax.config.update("jax_debug_nans", True)` to hunt them.
"""

import keras
import numpy as np
import pytest

import keras_attention as ka
from keras_attention import scores

L = ka.layers


def _x(*shape):
    return np.random.default_rng(0).normal(size=shape).astype("float32")


def _ones(*shape, dtype=bool):
    return np.ones(shape, dtype=dtype)


def _built(layer, *inputs, **kwargs):
    layer(*inputs, **kwargs)
    return layer


def _gru_cell():
    return L.AttentionRNNCell(keras.layers.GRUCell(4), L.BahdanauAttention(units=3))


def _past_max_length():
    """A second step on a state made for one."""
    decoder = _built(
        L.LSTMNDeepFusionDecoder(L.LSTMN(4)), _x(2, 3, 5), _x(2, 6, 3), _x(2, 6, 4)
    )
    cache = decoder.prepare_memory(_x(2, 6, 3), _x(2, 6, 4))
    _, state, _ = decoder.step(_x(2, 5), decoder.get_initial_state(2, 1), cache)
    return decoder.step(_x(2, 5), state, cache)


def _mha():
    return _built(
        L.MultiHeadAttention(num_heads=2, key_dim=2), _x(2, 3, 4), _x(2, 5, 4)
    )


def _additive(*shape):
    """An additive mask (0 = attend, -1e9 = hide): refused, since cast to
    bool it would mean the opposite."""
    mask = np.zeros(shape, "float32")
    mask[..., -1] = -1e9
    return mask


def _cache(*shape):
    return np.zeros(shape, "float32")


# (id, call, argument named in the message, received value shown)
CASES = [
    # -- constructors: non-positive sizes, rates, unknown names --------------
    ("score-unknown", lambda: L.ScoredAttention(score="bogus"), "score", "'bogus'"),
    ("score-type", lambda: L.ScoredAttention(score=3), "score", "score=3"),
    (
        "probability-unknown",
        lambda: L.ScoredAttention(probability="softmin"),
        "probability",
        "probability='softmin'",
    ),
    ("dropout>1", lambda: L.ScoredAttention(dropout=1.5), "dropout", "dropout=1.5"),
    ("window=0", lambda: L.ScoredAttention(window=0), "window", "window=0"),
    (
        "alignment-unknown",
        lambda: L.ScoredAttention(window=2, alignment="local"),
        "alignment",
        "'local'",
    ),
    (
        "alignment-predictive-no-window",
        lambda: L.LuongAttention(alignment="predictive"),
        "window",
        "window=None",
    ),
    (
        "alignment_units-monotonic",
        lambda: L.LuongAttention(window=2, alignment_units=4),
        "alignment_units",
        "alignment_units=4",
    ),
    ("units=0", lambda: L.BahdanauAttention(units=0), "units", "units=0"),
    ("units-float", lambda: L.BahdanauAttention(units=2.0), "units", "units=2.0"),
    (
        "luong-score-unknown",
        lambda: L.LuongAttention(score="softmax"),
        "score",
        "score='softmax'",
    ),
    (
        "luong-score-location-by-name",
        lambda: L.LuongAttention(score="location"),
        "score",
        "score='location'",
    ),
    (
        "luong-scale-without-learned-scale",
        lambda: L.LuongAttention(score="cosine", scale=True),
        "scale",
        "scale=True",
    ),
    (
        "luong-units-on-a-score-object",
        lambda: L.LuongAttention(score=scores.Additive(), units=3),
        "units",
        "units=3",
    ),
    (
        "luong-units-without-concat",
        lambda: L.LuongAttention("general", units=3),
        "units",
        "units=3",
    ),
    (
        "location-max_length",
        lambda: scores.Location(max_length=0),
        "max_length",
        "max_length=0",
    ),
    (
        "num_heads=0",
        lambda: L.MultiHeadAttention(num_heads=0, key_dim=2),
        "num_heads",
        "num_heads=0",
    ),
    (
        "key_dim<0",
        lambda: L.MultiHeadAttention(num_heads=2, key_dim=-1),
        "key_dim",
        "key_dim=-1",
    ),
    (
        "mca-compression_factor=0",
        lambda: L.MemoryCompressedAttention(2, 2, compression_factor=0),
        "compression_factor",
        "compression_factor=0",
    ),
    (
        "mca-num_heads=0",
        lambda: L.MemoryCompressedAttention(num_heads=0, key_dim=2),
        "num_heads",
        "num_heads=0",
    ),
    (
        "mca-per-head-attention_mask",
        lambda: L.MemoryCompressedAttention(2, 2)(
            _x(2, 3, 4), _x(2, 5, 4), attention_mask=_ones(2, 2, 3, 5)
        ),
        "attention_mask",
        "attention_mask.shape=(2, 2, 3, 5)",
    ),
    (
        "mca-key-length",
        lambda: L.MemoryCompressedAttention(2, 2)(
            _x(2, 3, 4), _x(2, 5, 4), key=_x(2, 6, 4)
        ),
        "key",
        "key length=6",
    ),
    (
        "mca-value-width",
        lambda: _built(L.MemoryCompressedAttention(2, 2), _x(2, 3, 4), _x(2, 5, 4))(
            _x(2, 3, 4), _x(2, 5, 3)
        ),
        "value",
        "value.shape=(2, 5, 3)",
    ),
    (
        "mcd-layer_pattern",
        lambda: L.MemoryCompressedDecoder("LXM", num_heads=2, intermediate_dim=8),
        "layer_pattern",
        "layer_pattern='LXM'",
    ),
    (
        "mcd-local_memory_flange",
        lambda: L.MemoryCompressedDecoder(
            num_heads=2, intermediate_dim=8, local_memory_flange=-1
        ),
        "local_memory_flange",
        "local_memory_flange=-1",
    ),
    (
        "mcd-block-num_key_value_heads",
        lambda: L.MemoryCompressedDecoderBlock(
            num_heads=2, intermediate_dim=8, num_key_value_heads=1
        ),
        "num_key_value_heads",
        "num_key_value_heads=1",
    ),
    (
        "attention_impl-unknown",
        lambda: L.MultiHeadAttention(2, 2, attention_impl="flash"),
        "attention_impl",
        "attention_impl='flash'",
    ),
    (
        "num_key_value_heads-not-dividing",
        lambda: L.MultiHeadAttention(4, 2, num_key_value_heads=3),
        "num_key_value_heads",
        "num_key_value_heads=3",
    ),
    (
        "rope-odd-key_dim",
        lambda: L.MultiHeadAttention(2, 5, rope_max_wavelength=10000),
        "key_dim",
        "key_dim=5",
    ),
    (
        "score_modifier-not-callable",
        lambda: L.TransformerDecoderBlock(
            num_heads=2, intermediate_dim=8, score_modifier="alibi"
        ),
        "score_modifier",
        "score_modifier of type str",
    ),
    (
        "sliding-window-0",
        lambda: ka.modifiers.SlidingWindow(0),
        "window",
        "window=0",
    ),
    (
        "alibi-heads-0",
        lambda: ka.modifiers.ALiBi(num_heads=0),
        "num_heads",
        "num_heads=0",
    ),
    (
        "self-attention-axes",
        lambda: L.MultiHeadSelfAttention(2, 2, attention_axes=(1,)),
        "attention_axes",
        "attention_axes=(1,)",
    ),
    (
        "attention_dropout-renamed",
        lambda: L.MultiHeadAttention(2, 2, attention_dropout=0.1),
        "attention_dropout",
        "attention_dropout=0.1",
    ),
    (
        "activation-unknown",
        lambda: L.TransformerEncoderBlock(
            num_heads=2, intermediate_dim=8, activation="nope"
        ),
        "activation",
        "activation='nope'",
    ),
    (
        "intermediate_dim=0",
        lambda: L.TransformerDecoderBlock(num_heads=2, intermediate_dim=0),
        "intermediate_dim",
        "intermediate_dim=0",
    ),
    (
        "num_layers=0",
        lambda: L.TransformerDecoder(0, num_heads=2, intermediate_dim=8),
        "num_layers",
        "num_layers=0",
    ),
    (
        "block-positional-heads",  # keras-hub's order is the other one
        lambda: L.TransformerEncoderBlock(8, 2),
        "num_heads",
        "(8, 2)",
    ),
    (
        "stack-positional-heads",
        lambda: L.TransformerDecoder(2, 8, 2),
        "intermediate_dim",
        "(2, 8, 2)",
    ),
    (
        "attention_dropout<0",
        lambda: L.TransformerEncoder(
            1, num_heads=2, intermediate_dim=8, attention_dropout=-0.1
        ),
        "attention_dropout",
        "attention_dropout=-0.1",
    ),
    (
        "stack-attention_impl",
        lambda: L.TransformerEncoder(
            1, num_heads=2, intermediate_dim=8, attention_impl="flash"
        ),
        "attention_impl",
        "attention_impl='flash'",
    ),
    ("pointer-units", lambda: L.PointerAttention(units=-2), "units", "units=-2"),
    (
        "channels_reduction=0",
        lambda: L.SelfAttention2D(channels_reduction=0),
        "channels_reduction",
        "channels_reduction=0",
    ),
    (
        "max_wavelength=1",
        lambda: L.SinusoidalPositionEncoding(max_wavelength=1),
        "max_wavelength",
        "max_wavelength=1",
    ),
    (
        "sequence_length=0",
        lambda: L.PositionEmbedding(sequence_length=0),
        "sequence_length",
        "sequence_length=0",
    ),
    (
        "rnn-style-unknown",
        lambda: L.AttentionRNNCell(
            keras.layers.GRUCell(4), L.BahdanauAttention(3), style="transformer"
        ),
        "style",
        "style='transformer'",
    ),
    (
        "rnn-cell-not-a-cell",
        lambda: L.AttentionRNNCell(keras.layers.Dense(3), L.BahdanauAttention(3)),
        "cell",
        "cell=<Dense",
    ),
    (
        "rnn-attention-not-scored",
        lambda: L.AttentionRNNCell(keras.layers.GRUCell(4), L.MultiHeadAttention(2, 2)),
        "attention",
        "attention=<MultiHeadAttention",
    ),
    (
        "rnn-decoder-plain-cell",
        lambda: L.AttentionRNNDecoder(keras.layers.GRUCell(4)),
        "cell",
        "cell=<GRUCell",
    ),
    # -- calls: ranks, widths, lengths, batch sizes ------------------------
    (
        "query-rank-4",
        lambda: L.ScoredAttention()(_x(2, 3, 4, 1), _x(2, 5, 4)),
        "query",
        "query.shape=(2, 3, 4, 1)",
    ),
    (
        "value-rank-2",
        lambda: L.ScoredAttention()(_x(2, 3, 4), _x(2, 5)),
        "value",
        "value.shape=(2, 5)",
    ),
    (
        "key-value-lengths",
        lambda: L.ScoredAttention()(_x(2, 3, 4), _x(2, 5, 4), key=_x(2, 4, 4)),
        "key",
        "key length=4",
    ),
    (
        "query-value-batch",
        lambda: L.ScoredAttention()(_x(2, 3, 4), _x(3, 5, 4)),
        "query",
        "query batch size=2",
    ),
    (
        "dot-widths",
        lambda: L.ScoredAttention("dot")(_x(2, 3, 4), _x(2, 5, 6)),
        "query",
        "query.shape[-1]=4",
    ),
    (
        "location-too-many-keys",
        lambda: L.ScoredAttention(scores.Location(max_length=4))(
            _x(2, 3, 4), _x(2, 6, 4)
        ),
        "max_length",
        "key length 6",
    ),
    (
        "causal-vector-query",
        lambda: L.ScoredAttention()(_x(2, 4), _x(2, 5, 4), use_causal_mask=True),
        "use_causal_mask",
        "query.shape=(2, 4)",
    ),
    (
        "window-vector-query",
        lambda: L.ScoredAttention(window=1)(_x(2, 4), _x(2, 5, 4)),
        "window",
        "query.shape=(2, 4)",
    ),
    (
        "mha-query-width-changed",
        lambda: _mha()(_x(2, 3, 5), _x(2, 5, 4)),
        "query",
        "query.shape=(2, 3, 5)",
    ),
    (
        "mha-key-value-lengths",
        lambda: _mha()(_x(2, 3, 4), _x(2, 5, 4), key=_x(2, 4, 4)),
        "key",
        "key length=4",
    ),
    (
        "mha-batch",
        lambda: _mha()(_x(2, 3, 4), _x(3, 5, 4)),
        "query",
        "query batch size=2",
    ),
    (
        "encoder-heads-do-not-divide",
        lambda: L.TransformerEncoderBlock(num_heads=3, intermediate_dim=8)(_x(2, 5, 4)),
        "num_heads",
        "inputs.shape=(2, 5, 4)",
    ),
    (
        "pointer-query-rank",
        lambda: L.PointerAttention(3)(_x(2, 3, 4, 1), _x(2, 5, 4)),
        "query",
        "query.shape=(2, 3, 4, 1)",
    ),
    (
        "2d-rank-3",
        lambda: L.SelfAttention2D(channels_reduction=2)(_x(2, 4, 4)),
        "inputs",
        "inputs.shape=(2, 4, 4)",
    ),
    (
        "2d-odd-height-pooled",
        lambda: L.SelfAttention2D(channels_reduction=2, pool_keys=True)(_x(2, 3, 4, 4)),
        "inputs",
        "inputs.shape=(2, 3, 4, 4)",
    ),
    (
        "image-block-query-block",
        lambda: L.ImageTransformerBlock(2, 8, query_block="2d"),
        "query_block",
        "query_block='2d'",
    ),
    (
        "image-block-flange-1d",
        lambda: L.ImageTransformerBlock(2, 8, query_block=4, memory_flange=-1),
        "memory_flange",
        "memory_flange=-1",
    ),
    (
        "image-block-rank-3",
        lambda: L.ImageTransformerBlock(2, 8)(_x(2, 4, 4)),
        "inputs",
        "(2, 4, 4)",
    ),
    (
        "image-model-levels",
        lambda: ka.models.ImageTransformer((4, 4), num_levels=1),
        "num_levels",
        "num_levels=1",
    ),
    (
        "image-model-width",
        lambda: ka.models.ImageTransformer(
            (4, 4), 4, mask_modifier=ka.modifiers.BlockLocal2D(5, (2, 2), (1, 1))
        ),
        "image_width",
        "image_shape=(4, 4)",
    ),
    (
        "2d-reduction-too-large",
        lambda: L.SelfAttention2D(channels_reduction=8)(_x(2, 4, 4, 4)),
        "channels_reduction",
        "channels_reduction=8",
    ),
    (
        "position-embedding-too-long",
        lambda: L.PositionEmbedding(4)(_x(2, 5, 3)),
        "inputs",
        "inputs.shape=(2, 5, 3)",
    ),
    (
        "rnn-decoder-inputs-rank",
        lambda: L.AttentionRNNDecoder(_gru_cell())(_x(2, 5), _x(2, 6, 4)),
        "inputs",
        "inputs.shape=(2, 5)",
    ),
    (
        "rnn-decoder-batch",
        lambda: L.AttentionRNNDecoder(_gru_cell())(_x(2, 3, 5), _x(3, 6, 4)),
        "inputs",
        "inputs batch size=2",
    ),
    (
        "rnn-cell-state-width",
        lambda: _gru_cell()(_x(2, 5), [_x(2, 3)], _x(2, 6, 4)),
        "states[0]",
        "states[0].shape=(2, 3)",
    ),
    (
        "rnn-cell-state-count",
        lambda: _gru_cell()(_x(2, 5), [_x(2, 4), _x(2, 4)], _x(2, 6, 4)),
        "states",
        "Received: 2 tensors",
    ),
    # -- masks: shape and dtype ------------------------------------------------
    (
        "value_mask-length",
        lambda: L.ScoredAttention()(_x(2, 3, 4), _x(2, 5, 4), value_mask=_ones(2, 6)),
        "value_mask",
        "value_mask.shape=(2, 6)",
    ),
    (
        "value_mask-additive",
        lambda: L.ScoredAttention()(
            _x(2, 3, 4), _x(2, 5, 4), value_mask=_additive(2, 5)
        ),
        "value_mask",
        "value_mask with the value -1000000000.0 (dtype float32)",
    ),
    (
        "attention_mask-rank",
        lambda: _mha()(_x(2, 3, 4), _x(2, 5, 4), attention_mask=_ones(4, 5)),
        "attention_mask",
        "attention_mask.shape=(4, 5)",
    ),
    (
        "query_mask-additive",
        lambda: _mha()(_x(2, 3, 4), _x(2, 5, 4), query_mask=_additive(2, 3)),
        "query_mask",
        "query_mask with the value -1000000000.0",
    ),
    (
        "query_mask-complex",
        lambda: _mha()(
            _x(2, 3, 4), _x(2, 5, 4), query_mask=np.ones((2, 3), "complex64")
        ),
        "query_mask",
        "query_mask.dtype=complex64",
    ),
    (
        "pointer-value_mask-rank",
        lambda: L.PointerAttention(3)(
            _x(2, 3, 4), _x(2, 5, 4), value_mask=_ones(2, 5, 1)
        ),
        "value_mask",
        "value_mask.shape=(2, 5, 1)",
    ),
    (
        "pointer-attention_mask-length",
        lambda: L.PointerAttention(3)(
            _x(2, 3, 4), _x(2, 5, 4), attention_mask=_ones(2, 3, 4)
        ),
        "attention_mask",
        "attention_mask length=4",
    ),
    (
        "padding_mask-length",
        lambda: L.TransformerEncoderBlock(num_heads=2, intermediate_dim=8)(
            _x(2, 5, 4), padding_mask=_ones(2, 6)
        ),
        "padding_mask",
        "padding_mask.shape=(2, 6)",
    ),
    (
        "decoder_padding_mask-additive",
        lambda: L.TransformerDecoderBlock(num_heads=2, intermediate_dim=8)(
            _x(2, 5, 4), decoder_padding_mask=_additive(2, 5)
        ),
        "decoder_padding_mask",
        "decoder_padding_mask with the value -1000000000.0",
    ),
    (
        "encoder_padding_mask-length",
        lambda: L.TransformerDecoder(1, num_heads=2, intermediate_dim=8)(
            _x(2, 5, 4), _x(2, 3, 4), encoder_padding_mask=_ones(2, 6)
        ),
        "encoder_padding_mask",
        "encoder_padding_mask.shape=(2, 6)",
    ),
    (
        "memory_mask-length",
        lambda: _gru_cell()(_x(2, 5), [_x(2, 4)], _x(2, 6, 4), memory_mask=_ones(2, 7)),
        "memory_mask",
        "memory_mask.shape=(2, 7)",
    ),
    (
        "decoder-memory_mask-length",
        lambda: L.AttentionRNNDecoder(_gru_cell())(
            _x(2, 3, 5), _x(2, 6, 4), memory_mask=_ones(2, 7)
        ),
        "memory_mask",
        "memory_mask length=7",
    ),
    (
        "ut-max_steps=0",
        lambda: L.UniversalTransformerEncoder(2, 8, max_steps=0),
        "max_steps",
        "max_steps=0",
    ),
    (
        "ut-halting_threshold>1",
        lambda: L.UniversalTransformerEncoder(2, 8, halting_threshold=1.5),
        "halting_threshold",
        "halting_threshold=1.5",
    ),
    (
        "ut-ponder_cost_weight<0",
        lambda: L.UniversalTransformerDecoder(2, 8, ponder_cost_weight=-1.0),
        "ponder_cost_weight",
        "ponder_cost_weight=-1.0",
    ),
    (
        "ut-freeze_halted-not-bool",
        lambda: L.UniversalTransformerEncoder(2, 8, freeze_halted="no"),
        "freeze_halted",
        "freeze_halted='no'",
    ),
    (
        "ut-decoder-cache-steps",
        lambda: L.UniversalTransformerDecoder(2, 8, max_steps=3)(
            _x(2, 1, 4),
            self_attention_cache=_x(2, 2, 2, 5, 2, 2),
            self_attention_cache_update_index=0,
        ),
        "self_attention_cache",
        "self_attention_cache.shape=(2, 2, 2, 5, 2, 2)",
    ),
    (
        "ut-padding_mask-length",
        lambda: L.UniversalTransformerEncoder(2, 8)(
            _x(2, 5, 4), padding_mask=_ones(2, 6)
        ),
        "padding_mask",
        "padding_mask.shape=(2, 6)",
    ),
    (
        "ut-decoder-encoder_padding_mask-length",
        lambda: L.UniversalTransformerDecoder(2, 8)(
            _x(2, 5, 4), _x(2, 3, 4), encoder_padding_mask=_ones(2, 6)
        ),
        "encoder_padding_mask",
        "encoder_padding_mask.shape=(2, 6)",
    ),
    # -- caches and indices ---------------------------------------------------
    (
        "cache-heads",
        lambda: _mha()(
            _x(2, 1, 4), _x(2, 1, 4), cache=_cache(2, 2, 4, 3, 2), cache_update_index=0
        ),
        "cache",
        "cache.shape=(2, 2, 4, 3, 2)",
    ),
    (
        "cache_update_index-past-the-end",
        lambda: _mha()(
            _x(2, 3, 4), _x(2, 3, 4), cache=_cache(2, 2, 4, 2, 2), cache_update_index=3
        ),
        "cache_update_index",
        "cache_update_index=3",
    ),
    (
        "cache_update_index-negative",
        lambda: L.MultiHeadSelfAttention(2, 2)(
            _x(2, 1, 4), cache=_cache(2, 2, 4, 2, 2), cache_update_index=-1
        ),
        "cache_update_index",
        "cache_update_index=-1",
    ),
    (
        "cache_update_index-without-cache",
        lambda: _mha()(_x(2, 1, 4), _x(2, 1, 4), cache_update_index=0),
        "cache_update_index",
        "cache_update_index=0",
    ),
    (
        "self-attention-cache-without-index",
        lambda: L.MultiHeadSelfAttention(2, 2)(
            _x(2, 1, 4), cache=_cache(2, 2, 4, 2, 2)
        ),
        "cache_update_index",
        "cache_update_index=None",
    ),
    (
        "block-self_attention_cache",
        lambda: L.TransformerDecoderBlock(num_heads=2, intermediate_dim=8)(
            _x(2, 1, 4),
            self_attention_cache=_cache(2, 2, 4, 3, 2),
            self_attention_cache_update_index=0,
        ),
        "self_attention_cache",
        "self_attention_cache.shape=(2, 2, 4, 3, 2)",
    ),
    (
        "stack-cache-num_layers",
        lambda: L.TransformerDecoder(2, num_heads=2, intermediate_dim=8)(
            _x(2, 1, 4), cache=_cache(2, 3, 2, 4, 2, 2), cache_update_index=0
        ),
        "cache",
        "cache.shape=(2, 3, 2, 4, 2, 2)",
    ),
    (
        "stack-cache_update_index-without-cache",
        lambda: L.TransformerDecoder(1, num_heads=2, intermediate_dim=8)(
            _x(2, 1, 4), cache_update_index=1
        ),
        "cache_update_index",
        "cache_update_index=1",
    ),
    (
        "sinusoidal-start_index-negative",
        lambda: L.SinusoidalPositionEncoding()(_x(2, 3, 4), start_index=-1),
        "start_index",
        "start_index=-1",
    ),
    (
        "embedding-start_index-past-the-end",
        lambda: L.PositionEmbedding(4)(_x(2, 3, 4), start_index=2),
        "start_index",
        "start_index=2",
    ),
    # -- Neural Turing Machine ------------------------------------------------
    (
        "ntm-memory_size=0",
        lambda: L.NeuralTuringMachineCell(keras.layers.Dense(4), 0, 3),
        "memory_size",
        "memory_size=0",
    ),
    (
        "ntm-num_write_heads=0",
        lambda: L.NeuralTuringMachineCell(
            keras.layers.Dense(4), 8, 3, num_write_heads=0
        ),
        "num_write_heads",
        "num_write_heads=0",
    ),
    (
        "ntm-shift_range-too-wide",
        lambda: L.NeuralTuringMachineCell(keras.layers.Dense(4), 4, 3, shift_range=2),
        "shift_range",
        "shift_range=2",
    ),
    (
        "ntm-clip_value=0",
        lambda: L.NeuralTuringMachineCell(keras.layers.Dense(4), 8, 3, clip_value=0),
        "clip_value",
        "clip_value=0",
    ),
    (
        "ntm-controller-not-a-layer",
        lambda: L.NeuralTuringMachineCell("lstm", 8, 3),
        "controller",
        "controller='lstm'",
    ),
    (
        "ntm-controller-without-units",
        lambda: L.NeuralTuringMachineCell(keras.layers.Flatten(), 8, 3),
        "controller",
        "controller=<Flatten",
    ),
    (
        "ntm-sequence-input",
        lambda: L.NeuralTuringMachineCell(keras.layers.Dense(4), 8, 3).build((2, 5, 3)),
        "inputs",
        "inputs.shape=(2, 5, 3)",
    ),
    (
        "ntm-state-count",
        lambda: _built(
            L.NeuralTuringMachineCell(keras.layers.LSTMCell(4), 8, 3), _x(2, 5)
        )(_x(2, 5), [_x(2, 4)]),
        "states",
        "Received: 1 tensors",
    ),
    (
        "ntm-state-width",
        lambda: L.NeuralTuringMachineCell(keras.layers.Dense(4), 8, 3)(
            _x(2, 5), [_x(2, 6), _x(2, 3 + 16 + 24)]
        ),
        "states[0]",
        "states[0].shape=(2, 6)",
    ),
    # -- LSTMN ------------------------------------------------------------------
    ("lstmn-units=0", lambda: L.LSTMN(0), "units", "units=0"),
    (
        "lstmn-attention_units=0",
        lambda: L.LSTMN(4, attention_units=0),
        "attention_units",
        "attention_units=0",
    ),
    (
        "lstmn-recurrent_dropout=1",
        lambda: L.LSTMN(4, recurrent_dropout=1.0),
        "recurrent_dropout",
        "recurrent_dropout=1.0",
    ),
    (
        "lstmn-stateful",
        lambda: L.LSTMN(4, stateful=True),
        "stateful",
        "stateful=True",
    ),
    (
        "lstmn-return_sequences-not-a-bool",
        lambda: L.LSTMN(4, return_sequences="yes"),
        "return_sequences",
        "return_sequences='yes'",
    ),
    (
        "lstmn-activation-unknown",
        lambda: L.LSTMN(4, recurrent_activation="sigmoidal"),
        "recurrent_activation",
        "recurrent_activation='sigmoidal'",
    ),
    (
        "lstmn-rank-2-input",
        lambda: L.LSTMN(4)(_x(2, 5)),
        "sequences",
        "sequences.shape=(2, 5)",
    ),
    (
        "lstmn-input-width",
        lambda: _built(L.LSTMN(4), _x(2, 5, 3))(_x(2, 5, 6)),
        "sequences",
        "sequences.shape=(2, 5, 6)",
    ),
    (
        "lstmn-initial_state-one-tensor",
        lambda: L.LSTMN(4)(_x(2, 5, 3), initial_state=[_x(2, 4)]),
        "initial_state",
        "[(2, 4)]",
    ),
    (
        "lstmn-initial_state-width",
        lambda: L.LSTMN(4)(_x(2, 5, 3), initial_state=[_x(2, 4), _x(2, 3)]),
        "initial_state",
        "[(2, 4), (2, 3)]",
    ),
    (
        "lstmn-mask-length",
        lambda: L.LSTMN(4)(_x(2, 5, 3), mask=_ones(2, 4)),
        "mask",
        "mask.shape=(2, 4)",
    ),
    # -- LSTMN fusion decoders ---------------------------------------------------
    (
        "lstmn-decoder-lstmn-not-an-lstmn",
        lambda: L.LSTMNShallowFusionDecoder(keras.layers.LSTM(4), L.LuongAttention()),
        "lstmn",
        "lstmn=<LSTM",
    ),
    (
        "lstmn-decoder-lstmn-backwards",
        lambda: L.LSTMNDeepFusionDecoder(L.LSTMN(4, go_backwards=True)),
        "lstmn",
        "lstmn.go_backwards=True",
    ),
    (
        "lstmn-decoder-attention-not-scored",
        lambda: L.LSTMNShallowFusionDecoder(L.LSTMN(4), keras.layers.Dense(3)),
        "attention",
        "attention=<Dense",
    ),
    (
        "lstmn-decoder-inter_attention_units=0",
        lambda: L.LSTMNDeepFusionDecoder(L.LSTMN(4), inter_attention_units=0),
        "inter_attention_units",
        "inter_attention_units=0",
    ),
    (
        "lstmn-decoder-memory-rank-2",
        lambda: L.LSTMNShallowFusionDecoder(L.LSTMN(4), L.LuongAttention())(
            _x(2, 3, 5), _x(2, 6)
        ),
        "memory",
        "memory.shape=(2, 6)",
    ),
    (
        "lstmn-decoder-memory_cells-width",
        lambda: L.LSTMNDeepFusionDecoder(L.LSTMN(4))(
            _x(2, 3, 5), _x(2, 6, 3), _x(2, 6, 3)
        ),
        "memory_cells",
        "memory_cells.shape=(2, 6, 3)",
    ),
    (
        "lstmn-decoder-memory_cells-length",
        lambda: L.LSTMNDeepFusionDecoder(L.LSTMN(4))(
            _x(2, 3, 5), _x(2, 6, 3), _x(2, 5, 4)
        ),
        "memory_cells",
        "memory_cells length=5",
    ),
    (
        "lstmn-decoder-memory-width",
        lambda: _built(
            L.LSTMNDeepFusionDecoder(L.LSTMN(4)), _x(2, 3, 5), _x(2, 6, 3), _x(2, 6, 4)
        )(_x(2, 3, 5), _x(2, 6, 5), _x(2, 6, 4)),
        "memory",
        "memory.shape=(2, 6, 5)",
    ),
    (
        "lstmn-decoder-inputs_mask-length",
        lambda: L.LSTMNDeepFusionDecoder(L.LSTMN(4))(
            _x(2, 3, 5), _x(2, 6, 3), _x(2, 6, 4), inputs_mask=_ones(2, 4)
        ),
        "inputs_mask",
        "inputs_mask.shape=(2, 4)",
    ),
    (
        "lstmn-decoder-max_length=0",
        lambda: _built(
            L.LSTMNShallowFusionDecoder(L.LSTMN(4), L.LuongAttention("general")),
            _x(2, 3, 5),
            _x(2, 6, 4),
        ).get_initial_state(2, 0),
        "max_length",
        "max_length=0",
    ),
    (
        "lstmn-decoder-step-past-max_length",
        lambda: _past_max_length(),
        "state['length']",
        "state['length']=1",
    ),
    # -- decoding ---------------------------------------------------------------
    (
        "greedy-max_length",
        lambda: ka.decoding.greedy_search(
            lambda t, s, i: (None, s), np.zeros(2, "int32"), None, max_length=0
        ),
        "max_length",
        "max_length=0",
    ),
    (
        "beam-num_beams",
        lambda: ka.decoding.beam_search(
            lambda t, s, i: (None, s),
            np.zeros(2, "int32"),
            None,
            max_length=3,
            num_beams=0,
        ),
        "num_beams",
        "num_beams=0",
    ),
]


def test_catalogue_is_large_and_unique():
    ids = [case[0] for case in CASES]
    assert len(ids) == len(set(ids))
    assert len(CASES) >= 30


@pytest.mark.parametrize(
    "call, argument, received", [case[1:] for case in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_raises_a_clear_error(call, argument, received):
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    message = str(info.value)
    assert f"`{argument}`" in message, f"argument `{argument}` not named: {message}"
    assert "Received" in message, message
    # The received value is shown after "Received" (not only in the
    # argument dump that Keras appends to errors raised inside `call`).
    library_part = message.split("Arguments received by")[0]
    tail = library_part[library_part.index("Received") :]
    assert received in tail, f"{received!r} not shown: {message}"


def test_numeric_masks_are_taken_as_keras_takes_them():
    """0/1 integer and float masks mean the same as booleans (Keras casts
    them); other values (an additive mask) are refused, see the catalogue."""
    layer = L.ScoredAttention()
    mask = np.array([[1, 1, 0, 1, 0], [0, 1, 1, 1, 1]])
    q, v = _x(2, 3, 4), _x(2, 5, 4)
    expected = keras.ops.convert_to_numpy(layer(q, v, value_mask=mask.astype(bool)))
    for numeric in (mask, mask.astype("float32")):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(layer(q, v, value_mask=numeric)), expected
        )


def test_each_argument_is_checked_once_under_the_callers_name(monkeypatch):
    """A block checks its masks under its own argument names, and the
    attention inside does not check them again (`validate=False`)."""
    from keras_attention import validation

    calls = []
    real = validation.check_mask

    def spy(name, mask, expected=None):
        calls.append(name)
        return real(name, mask, expected)

    for module in (
        "keras_attention.ops.boolean_masks",
        "keras_attention.layers.transformer.sequence_layer",
        "keras_attention.layers.transformer.transformer_decoder_block",
    ):
        monkeypatch.setattr(f"{module}.check_mask", spy)
    block = L.TransformerDecoderBlock(num_heads=2, intermediate_dim=8)
    block(_x(2, 5, 4), _x(2, 3, 4))
    calls.clear()
    block(
        _x(2, 5, 4),
        _x(2, 3, 4),
        decoder_padding_mask=_ones(2, 5),
        encoder_padding_mask=_ones(2, 3),
    )
    assert sorted(calls) == ["decoder_padding_mask", "encoder_padding_mask"]
    with pytest.raises(ValueError, match="`decoder_attention_mask`"):
        block(_x(2, 5, 4), _x(2, 3, 4), decoder_attention_mask=_ones(2, 5, 3))
    with pytest.raises(ValueError, match="`encoder_attention_mask`"):
        block(_x(2, 5, 4), _x(2, 3, 4), encoder_attention_mask=_ones(2, 5, 5))
