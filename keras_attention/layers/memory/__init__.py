"""External memory addressed by attention: the Neural Turing Machine.

`NeuralTuringMachineCell` is a Keras RNN cell whose controller reads and
writes a memory matrix through content- and location-based addressing
(Graves et al. 2014; the addressing maths is in
`keras_attention.ops.addressing`).
"""
