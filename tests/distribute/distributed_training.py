"""A few training steps of small keras_attention models under a strategy.

Imported by `test_distributed_training.py` for the single-device reference,
and run as a script in fresh processes for the distributed runs (logical
devices and multi-worker collectives must be set up before TensorFlow
initialises, so they cannot share a pytest process):

    python tests/distribute/distributed_training.py --strategy mirrored --out DIR

writes `DIR/<strategy>_<worker index>.npz` with, for every model, the
initial weights, the loss after each step and the final weights.
"""

import argparse
import json
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_attention as ka  # noqa: E402
from examples.common import distribute  # noqa: E402

MODELS = ("encoder", "transformer")
GLOBAL_BATCH = 8  # split 4 + 4 over two replicas
STEPS = 3
VOCABULARY = 20


def make_data(kind):
    """`(x, y)` numpy arrays for `STEPS` global batches; id 0 is padding."""
    rng = np.random.default_rng(0)
    count = GLOBAL_BATCH * STEPS
    source = rng.integers(1, VOCABULARY, (count, 7))
    source[::2, 5:] = 0  # some padded rows, so the masks matter
    if kind == "encoder":
        return source, rng.integers(0, 3, (count,))
    target = rng.integers(1, VOCABULARY, (count, 6))
    return (source, target[:, :-1]), target[:, 1:]


def build_model(kind):
    """A `TransformerEncoderBlock` classifier or a one-layer `Transformer`.

    No dropout: each replica draws its own dropout masks, so a distributed
    step with dropout is a different (equally valid) random step.
    """
    if kind == "encoder":
        tokens = keras.Input((None,), dtype="int32")
        x = keras.layers.Embedding(VOCABULARY, 16, mask_zero=True)(tokens)
        x = ka.layers.TransformerEncoderBlock(
            num_heads=2, intermediate_dim=32, dropout=0.0
        )(x)
        x = keras.layers.GlobalAveragePooling1D()(x)  # masked mean
        return keras.Model(tokens, keras.layers.Dense(3)(x))
    model = ka.models.Transformer(
        VOCABULARY,
        VOCABULARY,
        hidden_dim=16,
        num_heads=2,
        intermediate_dim=32,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dropout=0.0,
    )
    model.build()
    return model


def make_optimizer(kind):
    """SGD with momentum; the Transformer also clips (after the all-reduce).

    SGD keeps the comparison tight: Adam divides by the root of its second
    moment, which turns last-bit differences of tiny gradients into visible
    weight differences. `clipnorm=0.05` is far below these gradients' norms,
    so clipping is active on every step.
    """
    if kind == "encoder":
        return keras.optimizers.SGD(0.1, momentum=0.9)
    sgd = distribute.clip_after_all_reduce(keras.optimizers.SGD)
    return sgd(0.1, momentum=0.9, clipnorm=0.05)


class StepLosses(keras.callbacks.Callback):
    """The running mean of the loss after every step, as `fit` reports it."""

    def __init__(self):
        super().__init__()
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))


def train(kind, strategy, initial_weights=None):
    """`STEPS` steps of `fit` on `GLOBAL_BATCH`-sized batches under `strategy`.

    Returns `{"initial": [...], "losses": [...], "final": [...]}`.
    """
    keras.utils.set_random_seed(0)
    x, y = make_data(kind)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    dataset = distribute.shard_by_data(dataset)
    with strategy.scope():
        model = build_model(kind)
        if initial_weights is not None:
            model.set_weights(initial_weights)
        model.compile(
            optimizer=make_optimizer(kind),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=False,  # the same kernels everywhere, and no compile time
        )
    initial = [w.numpy() for w in model.weights]
    callback = StepLosses()
    model.fit(dataset, epochs=1, shuffle=False, verbose=0, callbacks=[callback])
    final = [w.numpy() for w in model.weights]
    return {"initial": initial, "losses": callback.losses, "final": final}


def to_arrays(kind, result):
    arrays = {f"{kind}/losses": np.array(result["losses"])}
    for key in ("initial", "final"):
        for i, value in enumerate(result[key]):
            arrays[f"{kind}/{key}/{i:03d}"] = value
    return arrays


def from_arrays(arrays, kind):
    """The `train` result of `kind` read back from a `.npz` file."""

    def weights(key):
        names = sorted(n for n in arrays.files if n.startswith(f"{kind}/{key}/"))
        return [arrays[n] for n in names]

    return {
        "initial": weights("initial"),
        "losses": list(arrays[f"{kind}/losses"]),
        "final": weights("final"),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    distribute.add_strategy_flags(parser)
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--out", required=True, help="output directory")
    args = parser.parse_args(argv)
    strategy = distribute.make_strategy(args)  # before any other TF op
    arrays = {"replicas": np.array(strategy.num_replicas_in_sync)}
    for kind in args.models:
        arrays.update(to_arrays(kind, train(kind, strategy)))
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    path = os.path.join(args.out, f"{args.strategy}_{task.get('index', 0)}.npz")
    np.savez(path, **arrays)
    print(f"{distribute.describe(strategy)}: wrote {path}")


if __name__ == "__main__":
    main()
