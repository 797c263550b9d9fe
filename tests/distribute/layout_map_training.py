"""A few `fit` steps of a small `models.Transformer` under `keras.distribution`.

Run by `test_layout_map.py` in a fresh process, because JAX must see eight
virtual CPU devices from its start (the pytest process may be TensorFlow,
or JAX already initialised with one device):

    python tests/distribute/layout_map_training.py --out DIR

sets `KERAS_BACKEND=jax` and `--xla_force_host_platform_device_count=8`
itself, then trains the same model from the same initial weights on the same
global batches three ways:

- `one_device`: no distribution (JAX's default device);
- `data_parallel`: `keras.distribution.DataParallel` over the 8 devices;
- `model_parallel`: `keras.distribution.ModelParallel` on a
  `(batch=2, model=4)` mesh with `keras_attention.distribution.layout_map`.

It writes `DIR/results.npz` (per run: the loss after each step, as `fit`
reports it, and the final weights, in `model.weights` order) and
`DIR/shardings.json` (the model config and mesh, then per distributed run
and weight path: the `PartitionSpec` of the weight and of its momentum, and
the shape of the shard on the first device).
"""

import argparse
import json
import os
import pathlib
import sys

os.environ["KERAS_BACKEND"] = "jax"
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = " ".join(
    [os.environ.get("XLA_FLAGS", ""), "--xla_force_host_platform_device_count=8"]
).strip()
ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attention as ka  # noqa: E402

RUNS = ("one_device", "data_parallel", "model_parallel")
MESH = {"batch": 2, "model": 4}
GLOBAL_BATCH = 8
STEPS = 3
VOCABULARY = 32  # divisible by the model axis: the vocabulary is sharded
CONFIG = dict(
    encoder_vocabulary_size=VOCABULARY,
    decoder_vocabulary_size=VOCABULARY,
    hidden_dim=16,  # divisible by the batch axis (the map splits D over it)
    num_heads=4,  # one head per model-axis device
    intermediate_dim=32,
    num_encoder_layers=1,
    num_decoder_layers=1,
    dropout=0.0,  # dropout masks would differ between layouts
    name="transformer",
)


def make_data():
    """`((source, target_in), target_out)` for `STEPS` global batches."""
    rng = np.random.default_rng(0)
    count = GLOBAL_BATCH * STEPS
    source = rng.integers(1, VOCABULARY, (count, 7))
    source[::2, 5:] = 0  # padded rows, so the masks matter
    target = rng.integers(1, VOCABULARY, (count, 6))
    return (source, target[:, :-1]), target[:, 1:]


def distribution(run):
    """The `keras.distribution` of `run` (`None` for one device)."""
    if run == "one_device":
        return None
    devices = keras.distribution.list_devices("cpu")
    if run == "data_parallel":
        return keras.distribution.DataParallel(devices=devices)
    mesh = keras.distribution.DeviceMesh(
        tuple(MESH.values()), tuple(MESH), devices=devices
    )
    layouts = ka.distribution.layout_map(mesh)
    return keras.distribution.ModelParallel(layout_map=layouts, batch_dim_name="batch")


def train(run, initial_weights=None):
    """`STEPS` steps of `fit`; the model and its optimizer are returned too."""
    keras.utils.set_random_seed(0)
    x, y = make_data()
    scope = distribution(run)
    keras.distribution.set_distribution(scope)
    try:
        model = ka.models.Transformer(**CONFIG)
        model.build()
        if initial_weights is not None:
            model.set_weights(initial_weights)
        initial = [np.asarray(w) for w in model.get_weights()]
        model.compile(
            # SGD, not Adam: dividing by a second moment would turn last-bit
            # differences of tiny gradients into visible weight differences.
            optimizer=keras.optimizers.SGD(0.5, momentum=0.9, name="sgd"),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        # The running mean of the loss after every step, as `fit` reports it.
        losses = []
        callback = keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda batch, logs: losses.append(float(logs["loss"]))
        )
        model.fit(
            x,
            y,
            batch_size=GLOBAL_BATCH,
            epochs=1,
            shuffle=False,
            verbose=0,
            callbacks=[callback],
        )
    finally:
        keras.distribution.set_distribution(None)
    return model, initial, losses


def shardings(model):
    """`{path: {"spec", "shard_shape", "momentum_spec"}}` of every weight."""
    momenta = {variable.path: variable for variable in model.optimizer.variables}
    table = {}
    for variable in model.weights:
        value = variable.value
        entry = {
            "shape": list(variable.shape),
            "spec": _spec(value),
            "shard_shape": list(value.addressable_shards[0].data.shape),
        }
        # SGD's momentum of `a/b/kernel` is `sgd/a_b_kernel_momentum`.
        key = "sgd/" + variable.path.replace("/", "_") + "_momentum"
        if key in momenta:
            entry["momentum_spec"] = _spec(momenta[key].value)
        table[variable.path] = entry
    return table


def _spec(value):
    """The `PartitionSpec` as a list, with `None` for replicated axes."""
    spec = getattr(value.sharding, "spec", ())
    axes = [axis for axis in spec] + [None] * (value.ndim - len(spec))
    return [None if axis is None else str(axis) for axis in axes]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=pathlib.Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    assert keras.backend.backend() == "jax", keras.backend.backend()
    assert len(keras.distribution.list_devices("cpu")) == 8

    arrays, tables = {}, {}
    initial = None
    for run in RUNS:
        model, start, losses = train(run, initial)
        if initial is None:
            initial = start
            arrays["initial"] = np.array(len(start))
            for i, value in enumerate(start):
                arrays[f"initial/{i:03d}"] = value
        arrays[f"{run}/losses"] = np.array(losses)
        for i, value in enumerate(model.get_weights()):
            arrays[f"{run}/final/{i:03d}"] = value
        if run != "one_device":
            tables[run] = shardings(model)
    np.savez(args.out / "results.npz", **arrays)
    meta = {"config": CONFIG, "mesh": MESH, "runs": tables}
    (args.out / "shardings.json").write_text(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
