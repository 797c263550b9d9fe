"""The chunked path: exact attention in O(T + S) memory, an online softmax
over blocks whose backward pass recomputes them.

`chunked_attention.py` is the entry (`chunked_attention`); `blocks.py` says
which key blocks each query block visits and with which mask; `kernel.py`
runs the forward and backward loops over them; `block_plan.py` is the one
rule for the block sizes and head groups (`plan_blocks`, with its cost
model); `autodiff.py` takes a score modifier's gradients inside the
hand-written backward. Public names are re-exported by `keras_attention.ops`.
"""
