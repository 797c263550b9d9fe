"""The one result structure of the attention layers and blocks (private)."""

from typing import Any
from typing import NamedTuple


class LayerResult(NamedTuple):
    """What an attention layer or block computed, whatever was asked.

    `output` always; `scores` the attention weights (a tensor, or a dict of
    them for a block) or `None`; `caches` the updated caches in the order
    the call took them (empty without a cache); `cache_entries`, in the same
    order, what each call wrote into its cache, the new keys and values
    `(B, 2, T, G, H)` (`None` for a cache read as is): a stack writes these
    into its own cache instead of reading them back out of the updated
    ones (`TransformerDecoder._updated_cache` says why). `keras_outputs`
    turns it into the public return value, Keras' convention: `output`, then the
    scores if asked, then the caches, as `keras.layers.MultiHeadAttention`
    and keras-hub's `CachedMultiHeadAttention` / `TransformerDecoder` return.
    """

    output: Any
    scores: Any = None
    caches: tuple = ()
    cache_entries: tuple = ()

    def keras_outputs(self, return_attention_scores):
        outputs = (self.output,)
        if return_attention_scores:
            outputs += (self.scores,)
        outputs += tuple(self.caches)
        return outputs[0] if len(outputs) == 1 else outputs
