"""Attention pooling: a sequence summarized by learned context vectors.

`AttentionPooling` scores each position against one or more learned
contexts and returns their weighted sums, the word and sentence encoders
of the Hierarchical Attention Network (Yang et al. 2016;
`keras_attention.models.HierarchicalAttentionNetwork`).
"""
