"""SavedModel export shared by the example scripts.

`save_for_serving` writes a `tf.Module` whose serving signature reads
Keras layers so that every loader serves it: `tf.saved_model.load` and the
graph-and-checkpoint path of `tf.compat.v1.saved_model.loader.load`,
`saved_model_cli run` and TensorFlow Serving.

Why it is needed: a Keras 3 variable (TensorFlow backend) wraps a
`tf.Variable`, and traced functions capture that inner `tf.Variable`. When
a SavedModel is written, the Keras variable exports itself as a *new*
`tf.Variable` (`keras.src.backend.tensorflow.core.Variable.
_export_to_saved_model_graph`), and the checkpoint's restore op writes
that new one. `tf.saved_model.load` binds the functions to the restored
objects, so it works; the TF1 loader only runs the restore op, which
never writes the variables that the functions read, and the first read
fails ("Could not find variable ...", or under XLA "Read variable failure
... tf2xla conversion failed").
Tracking the inner `tf.Variable`s themselves puts them in the checkpoint,
so the restore op initialises exactly what the signature reads.
"""

import os
import pathlib
import subprocess
import sys

import numpy as np
import tensorflow as tf


def serving_variables(function):
    """The `tf.Variable`s that the traced `function` reads, each once.

    `function` is a `tf.function` with an `input_signature`; the variables
    read by the `tf.function`s it calls (e.g. an XLA-compiled search) count.
    """
    unique = {}
    for variable in function.get_concrete_function().variables:
        unique.setdefault(id(variable), variable)
    return list(unique.values())


def save_for_serving(module, export_dir, signature):
    """`tf.saved_model.save(module)` with `signature` as `serving_default`,
    servable by the TF1 loader too.

    Sets `module.serving_variables` to the `tf.Variable`s the signature
    reads (see the module docstring), so the SavedModel restores them under
    either loader. Keep the Keras model itself off `module` (do not assign
    it to an attribute): its tracked Keras variables would be saved a second
    time, and its optimizer state with them, for nothing.
    """
    module.serving_variables = serving_variables(signature)
    tf.saved_model.save(module, export_dir, signatures={"serving_default": signature})


def run_v1_signature(export_dir, feeds, signature_key="serving_default"):
    """Outputs of a SavedModel signature loaded the TF1 way.

    `tf.compat.v1.saved_model.loader.load` in a `tf.compat.v1.Session` of a
    fresh graph: the graph-and-checkpoint path that `saved_model_cli run`
    and TensorFlow Serving use. `feeds` maps the signature's input keys to
    values; returns `{output key: numpy value}`. Custom ops (e.g.
    SentencePiece) must be registered first (`import tensorflow_text`).
    """
    with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as sess:
        meta_graph = tf.compat.v1.saved_model.loader.load(
            sess, [tf.saved_model.SERVING], export_dir
        )
        signature = meta_graph.signature_def[signature_key]
        feed_dict = {signature.inputs[k].name: v for k, v in feeds.items()}
        fetches = {k: t.name for k, t in signature.outputs.items()}
        return sess.run(fetches, feed_dict)


def run_saved_model_cli(export_dir, inputs, workdir, signature_key="serving_default"):
    """Outputs of `saved_model_cli run` on a SavedModel signature.

    The command-line tool that ships with TensorFlow, run in a fresh
    process: the TF1 loader of `run_v1_signature`, without custom ops.
    `inputs` maps the signature's input keys to arrays (written to
    `workdir` as `.npy`, where the outputs go too); returns `{output key:
    numpy value}`. Raises `RuntimeError` with the tool's error if it fails.
    """
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    arguments = []
    for key, value in inputs.items():
        np.save(workdir / f"input_{key}.npy", np.asarray(value))
        arguments.append(f"{key}={workdir / f'input_{key}.npy'}")
    outdir = workdir / "outputs"
    command = [
        str(pathlib.Path(sys.executable).with_name("saved_model_cli")),
        "run", "--dir", str(export_dir), "--tag_set", tf.saved_model.SERVING,
        "--signature_def", signature_key, "--inputs", ";".join(arguments),
        "--outdir", str(outdir), "--overwrite",
    ]  # fmt: skip
    process = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    if process.returncode:
        raise RuntimeError(
            f"`saved_model_cli run` failed on {export_dir}:\n{process.stderr[-4000:]}"
        )
    # The tool saves string outputs as pickled object arrays.
    return {
        path.stem: np.load(path, allow_pickle=True)
        for path in sorted(outdir.glob("*.npy"))
    }
