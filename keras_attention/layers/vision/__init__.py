"""Attention over images: SAGAN's self-attention and the Image Transformer.

`SelfAttention2D` is the self-attention layer of SAGAN over feature maps
(Zhang et al. 2019); `ImageTransformerBlock` is the Image Transformer's
decoder block over flattened pixels with 1-D or 2-D local attention
(Parmar et al. 2018; `keras_attention.models.ImageTransformer`).
"""
