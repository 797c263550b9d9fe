"""The dense path: `dot_product_attention`, this package's einsums and float32
softmax over the whole `(B, N, T, S)` scores.

`dot_product_attention.py` holds it and the grouped-head helpers
(`check_key_value_heads`, `repeat_key_value_heads`); it is the only path
that returns the weights, and the one every step of cached decoding takes.
Public names are re-exported by `keras_attention.ops`.
"""
