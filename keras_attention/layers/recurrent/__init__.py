"""Attention for recurrent models: a query vector (or sequence) against a memory.

`ScoredAttention` is the general layer: a score (dot, general, concat,
additive, cosine, location; `keras_attention.scores`), a probability map
(softmax, sparsemax, hardmax, sampled hard attention) and an optional
window (local-m or local-p). `BahdanauAttention` and `LuongAttention` are
the two papers' presets of it, `PointerAttention` returns its logits as a
pointer over the inputs, and `AttentionRNNCell` / `AttentionRNNDecoder` wrap
any Keras RNN cell into a decoder that attends at every step (Bahdanau et
al. 2015; Luong et al. 2015; Vinyals et al. 2015). `LSTMN` is an LSTM that
attends over the tape of its own earlier states at every step (Cheng et al.
2016); `LSTMNShallowFusionDecoder` and `LSTMNDeepFusionDecoder` are the
paper's two ways of making it the decoder of an encoder-decoder (inter-
attention after the step, or read into its memory cell).
"""
