"""LoRA and quantization for layers built from Keras sublayers (private).

Keras implements LoRA (`enable_lora`) and quantization (`quantize`) on its
`Dense` and `EinsumDense` layers; `keras.Model.quantize` walks a model's
leaf layers. This mixin gives the same two hooks to a composite layer (the
attention layers, the Transformer blocks and stacks), delegating to its
leaves, and keeps a quantized layer saveable: its config records the
leaves' quantized dtype policies as a `keras.dtype_policies.DTypePolicyMap`
keyed by layer path (what keras-hub's backbones do), so that `build` on
reload creates the int8 variables the saved weights need.
"""

import keras


def _leaves(layer):
    return [
        sub
        for sub in layer._flatten_layers(include_self=False)
        if not list(sub._flatten_layers(include_self=False))
    ]


class FineTuningMixin:
    """`enable_lora`, `quantize` and a quantization-aware `dtype` config."""

    # Names of the sublayers that `enable_lora` adapts by default: the
    # query and value projections, as keras-hub's `Backbone.enable_lora`
    # (the fused Q/K/V projection of self-attention is one sublayer).
    LORA_TARGETS = ("query", "value", "qkv")

    def enable_lora(self, rank, lora_alpha=None, target_names=None):
        """Enable LoRA (Hu et al., 2021) on the named projection sublayers.

        Args:
            rank: the rank of the low-rank update of each kernel.
            lora_alpha: its scale (`rank` when `None`), as in Keras.
            target_names: names of the `Dense` / `EinsumDense` sublayers to
                adapt; by default `LORA_TARGETS` ("query", "value" and the
                fused "qkv"). Their original kernels are frozen.
        """
        if not self.built:
            raise ValueError(
                "Build the layer (or call it once) before `enable_lora`. "
                f"Received: an unbuilt {self.__class__.__name__}"
            )
        targets = tuple(target_names or self.LORA_TARGETS)
        adapted = [
            leaf
            for leaf in _leaves(self)
            if leaf.name in targets and hasattr(leaf, "enable_lora")
        ]
        if not adapted:
            raise ValueError(
                f"`target_names` must name sublayers of {self.name} that "
                "support LoRA (Dense or EinsumDense). Received: "
                f"target_names={target_names!r}; sublayers: "
                f"{sorted({leaf.name for leaf in _leaves(self)})}"
            )
        for leaf in adapted:
            leaf.enable_lora(rank, lora_alpha=lora_alpha)

    def quantize(self, mode=None, type_check=True, config=None):
        """Quantize every sublayer that supports it (Dense, EinsumDense),
        as `keras.Model.quantize` does for a model's layers."""
        if not self.built:
            raise ValueError(
                "Build the layer (or call it once) before `quantize`. "
                f"Received: an unbuilt {self.__class__.__name__}"
            )
        for leaf in _leaves(self):
            try:
                leaf.quantize(mode, type_check=type_check, config=config)
            except NotImplementedError:
                continue  # e.g. LayerNormalization: nothing to quantize

    def _dtype_config(self):
        """The `dtype` entry of `get_config`: the layer's policy, or a
        `DTypePolicyMap` when some sublayers are quantized."""
        policy = self.dtype_policy
        if isinstance(policy, keras.dtype_policies.DTypePolicyMap):
            return keras.dtype_policies.serialize(policy)
        quantized = {
            leaf.path: leaf.dtype_policy
            for leaf in _leaves(self)
            if leaf.quantization_mode is not None
        }
        if not quantized:
            return keras.dtype_policies.serialize(policy)
        policy_map = keras.dtype_policies.DTypePolicyMap(
            default_policy=policy, policy_map=quantized
        )
        return keras.dtype_policies.serialize(policy_map)
