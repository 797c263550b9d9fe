"""Multi-head attention, the Transformer's blocks and stacks, and positions.

`MultiHeadAttention` is a drop-in for `keras.layers.MultiHeadAttention`
with this package's open core (grouped key/value heads, score and mask
modifiers, RoPE, caches, the dense/chunked/fused kernels of
`keras_attention.ops`), mixed in from `modified_attention.py`;
`MultiHeadSelfAttention` fuses the Q/K/V projection. The blocks
(`TransformerEncoderBlock`, `TransformerDecoderBlock`) and stacks
(`TransformerEncoder`, `TransformerDecoder`) are drop-ins for keras-hub's
and share their base classes, `TransformerBlockBase` in `block_base.py`
and `TransformerStackBase` in `stack_base.py`;
`SinusoidalPositionEncoding` and `PositionEmbedding` add positions
(Vaswani et al. 2017). `MemoryCompressedAttention`, its block
`MemoryCompressedDecoderBlock` and the stack `MemoryCompressedDecoder`
(local and memory-compressed layers, T-DMCA) read long documents (Liu et
al. 2018).
"""
