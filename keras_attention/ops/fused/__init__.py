"""The fused path: `keras.ops.dot_product_attention` with this package's
masks, modifiers and zero rows.

`fused_attention.py` translates a call into Keras' arguments;
`fused_plan.py` says whether the path can take a call at all
(`fused_obstacle`, `auto_obstacle`) and which kernel Keras runs for it
here (`fused_kernel`: cuDNN's flash attention on an NVIDIA GPU under JAX,
Keras' composition everywhere else). Public names are re-exported by
`keras_attention.ops`.
"""
