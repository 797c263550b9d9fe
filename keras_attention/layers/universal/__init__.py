"""The Universal Transformer: one block applied again and again, with ACT.

`UniversalTransformerEncoder` and `UniversalTransformerDecoder` share one
Transformer block across depth, add the timestep signal at every step and
halt each position with Adaptive Computation Time (Dehghani et al. 2019;
Graves 2016); the recurrence and the halting live in
`universal_base.py` (`UniversalTransformerBase`) and
`keras_attention.ops.act`.
"""
