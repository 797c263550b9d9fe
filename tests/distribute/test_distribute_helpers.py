"""The strategy helpers of the examples, in-process (no extra devices)."""

import argparse
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from examples.common import distribute

pytestmark = pytest.mark.tf_only


def _worker_strategy(task_type, task_id, cluster):
    """A stand-in with what the helpers read from a multi-worker strategy."""
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type=task_type, task_id=task_id
    )
    return argparse.Namespace(cluster_resolver=resolver, num_replicas_in_sync=2)


def test_flags_and_default_strategy():
    parser = distribute.add_strategy_flags(argparse.ArgumentParser())
    args = parser.parse_args([])
    assert (args.strategy, args.devices, args.communication) == (
        "default",
        None,
        "auto",
    )
    strategy = distribute.make_strategy(args)
    assert strategy is tf.distribute.get_strategy()
    assert distribute.global_batch_size(64, strategy) == 64
    assert distribute.jit_compile_default(strategy)
    assert distribute.describe(strategy).endswith("with 1 replica(s)")
    with pytest.raises(SystemExit):
        parser.parse_args(["--strategy", "tpu"])


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="`strategy` must be one of .* strategy='gpu'"):
        distribute.make_strategy(strategy="gpu")
    with pytest.raises(ValueError, match="`devices` must be a positive .* devices=0"):
        distribute.split_cpu(0)


def test_split_cpu_after_initialisation():
    tf.constant(0)  # devices are initialised in this process
    # Enough logical CPUs already: reused; too few: a clear error.
    assert distribute.split_cpu(1) == ["/device:CPU:0"]
    count = len(tf.config.list_logical_devices("CPU"))
    with pytest.raises(RuntimeError, match="before any other TensorFlow op"):
        distribute.split_cpu(count + 1)


@pytest.mark.parametrize(
    "task, cluster, chief",
    [
        (("worker", 0), {"worker": ["a:1", "b:1"]}, True),
        (("worker", 1), {"worker": ["a:1", "b:1"]}, False),
        (("chief", 0), {"chief": ["c:1"], "worker": ["a:1"]}, True),
        (("worker", 0), {"chief": ["c:1"], "worker": ["a:1"]}, False),
    ],
)
def test_only_the_chief_keeps_its_outputs(task, cluster, chief, tmp_path):
    strategy = _worker_strategy(*task, cluster)
    assert distribute.is_chief(strategy) is chief
    path = distribute.output_dir_for(str(tmp_path), strategy)
    assert (path == str(tmp_path)) is chief
    with open(os.path.join(path, "out.txt"), "w") as f:
        f.write("x")
    distribute.cleanup_output_dir(path, strategy)
    assert os.path.exists(path) is chief  # the chief's files stay
    assert distribute.describe(strategy).endswith(
        f"task {task[0]}:{task[1]} of {len(cluster['worker'])} worker(s)"
    )


def test_clip_after_all_reduce_is_plain_clipping_on_one_replica():
    # On one replica the subclass must be the optimizer it extends; several
    # replicas are covered by test_distributed_training.py.
    rng = np.random.default_rng(0)
    grads = [rng.normal(size=(3, 4)).astype("float32"), rng.normal(size=(4,))]
    results = []
    for cls in (
        keras.optimizers.SGD,
        distribute.clip_after_all_reduce(keras.optimizers.SGD),
    ):
        variables = [keras.Variable(np.zeros(g.shape, "float32")) for g in grads]
        optimizer = cls(1.0, clipnorm=0.5)
        optimizer.apply(grads, variables)
        results.append([v.numpy() for v in variables])
    for plain, subclass in zip(*results, strict=True):
        np.testing.assert_array_equal(subclass, plain)
    # clipnorm=0.5 clipped each gradient to norm 0.5 (the step is -1.0 * g).
    for g, update in zip(grads, results[0], strict=True):
        np.testing.assert_allclose(update, -0.5 * g / np.linalg.norm(g), rtol=1e-6)
    assert distribute.clip_after_all_reduce(keras.optimizers.Adam).__name__ == (
        "AdamClipAfterAllReduce"
    )


def test_shard_by_data_sets_the_policy():
    dataset = distribute.shard_by_data(tf.data.Dataset.range(4))
    policy = dataset.options().experimental_distribute.auto_shard_policy
    assert policy == tf.data.experimental.AutoShardPolicy.DATA
    assert list(dataset.as_numpy_iterator()) == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "task, suffix",
    [(None, ""), (("worker", 0), ""), (("worker", 1), "_worker1")],
)
def test_every_worker_keeps_its_own_backup(task, suffix, tmp_path):
    path = str(tmp_path / "backup")
    strategy = tf.distribute.get_strategy()
    if task is not None:
        strategy = _worker_strategy(*task, {"worker": ["a:1", "b:1"]})
    assert distribute.backup_dir_for(path, strategy) == path + suffix


def test_resumed_epoch_reads_the_backup(tmp_path):
    assert distribute.resumed_epoch(str(tmp_path / "none")) == 0
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    backup = keras.callbacks.BackupAndRestore(str(tmp_path), delete_checkpoint=False)
    x = np.zeros((4, 2), "float32")
    model.fit(x, x[:, :1], epochs=3, callbacks=[backup], verbose=0)
    assert distribute.resumed_epoch(str(tmp_path)) == 3


def test_jit_compile_flag():
    parser = distribute.add_jit_compile_flag(argparse.ArgumentParser())
    strategy = tf.distribute.get_strategy()
    for argv, expected in (([], True), (["--no-jit-compile"], False)):
        assert distribute.jit_compile_for(parser.parse_args(argv), strategy) is expected
