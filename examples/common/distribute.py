"""Pick a `tf.distribute` strategy from a command-line flag.

Shared by the examples (`nlp/translate_dates.py`, the NMT scripts,
`vision/sagan.py`): `add_strategy_flags(parser)` adds `--strategy
{default,mirrored,multiworker}`, `--devices` and `--communication`,
`add_jit_compile_flag(parser)` adds `--jit-compile`; `make_strategy(args)`
builds the strategy. Build and compile the model inside
`strategy.scope()`, batch the dataset with the GLOBAL batch size
(`global_batch_size(per_replica, strategy)`), and let `model.fit` split each
global batch across the replicas:

    strategy = distribute.make_strategy(args)  # before any other TF work
    with strategy.scope():
        model = build_model()
        model.compile(optimizer=distribute.clip_after_all_reduce(
            keras.optimizers.Adam)(1e-3, clipnorm=1.0), ...)
    model.fit(dataset.batch(distribute.global_batch_size(64, strategy)), ...)

The same flag on other hardware:

- `default`: one device (the first GPU if there is one, else the CPU).
- `mirrored`: `tf.distribute.MirroredStrategy`, synchronous data parallelism
  over the devices of one machine. With GPUs it mirrors the variables on
  the first `--devices` GPUs (all of them by default) and all-reduces the
  gradients with NCCL. Without a GPU it splits the CPU into `--devices`
  logical devices (2 by default), which is how the tests and the example
  exercise the same code path on a laptop. This must run before TensorFlow
  initialises its devices, i.e. before the first op.
- `multiworker`: `tf.distribute.MultiWorkerMirroredStrategy`, the same over
  several machines. Start the same command on every node with its own
  `TF_CONFIG`, e.g. on node `i` of two:

      TF_CONFIG='{"cluster": {"worker": ["node0:12345", "node1:12345"]},
                  "task": {"type": "worker", "index": i}}'

  Each node uses all its local GPUs (or its CPU); `--communication` picks
  the collective implementation (`auto`: NCCL between GPUs, ring over
  gRPC otherwise). Worker 0 (or the `chief` task, when the cluster has one)
  is the chief: it writes the outputs; the other workers still take part in
  every collective (including saving) but write to a temporary directory
  (`output_dir_for(path, strategy)`), the pattern of the Keras multi-worker
  guide.
- TPUs are not a flag value here (untested on this machine); the same
  script runs on a TPU slice by replacing `make_strategy` with

      resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="")
      tf.config.experimental_connect_to_cluster(resolver)
      tf.tpu.experimental.initialize_tpu_system(resolver)
      strategy = tf.distribute.TPUStrategy(resolver)

  (the training step is then always compiled with XLA for the TPU).

What it takes to get the single-device numbers back (Keras 3.x, TF 2.x):

- XLA: `model.compile(jit_compile=True)` cannot compile a step that touches
  variables mirrored on several devices; `jit_compile_default(strategy)`
  says whether to ask for it.
- Gradient clipping: Keras optimizers clip each replica's gradient BEFORE
  the all-reduce (`clipnorm`, `global_clipnorm`, `clipvalue`), so a clipped
  distributed step differs from the single-device step on the same global
  batch. `clip_after_all_reduce(optimizer_class)` returns a subclass that
  clips the all-reduced gradient, as one device would.
- Multi-worker `fit`: Keras' `fit` fails under the stock
  `MultiWorkerMirroredStrategy` (keras-team/keras#20585); `make_strategy`
  returns the subclass `MultiWorkerMirroredStrategy` below, which fixes it.
- Data order: under a strategy `fit` opens one extra iterator on the
  dataset (to build the model), which advances a reshuffling
  `Dataset.shuffle`, so each epoch sees another order than on one device.
  Draw the epoch orders up front (as `translate_dates.make_dataset` does).
- Random numbers in the step: a `SeedGenerator` draws the same numbers on
  every replica (or other numbers than one device would); draw them as
  part of the data (`sagan.make_dataset` brings the latent vectors).
- Losses normalised by a count that varies per batch (tokens, not rows):
  Keras divides each replica's loss by its own count; all-reduce the count
  instead (`nmt_common.SmoothedCrossentropy`).
- Custom `train_step`: divide each replica's loss by the number of
  replicas (the optimizers sum the replicas' gradients), and build the
  optimizers inside `strategy.scope()` before `fit` (`optimizer.build`);
  created inside the distributed step, their variables fail.
- `BatchNormalization`: `synchronized=True` with several replicas, for the
  moments of the global batch (`sagan.build_generator`).
- Backups: `BackupAndRestore(backup_dir_for(path, strategy))` gives every
  worker its own lasting directory, and `resumed_epoch(path)` the epoch
  to start the data at.
- Dropout: each replica draws its own masks, so runs with dropout agree in
  distribution, not number for number.

References:
    - https://www.tensorflow.org/guide/distributed_training
    - https://www.tensorflow.org/tutorials/distribute/multi_worker_with_keras
"""

import argparse
import json
import os
import shutil
import tempfile

import tensorflow as tf
from keras import ops

STRATEGIES = ("default", "mirrored", "multiworker")
COMMUNICATIONS = {
    "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
    "ring": tf.distribute.experimental.CommunicationImplementation.RING,
    "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
}


def add_strategy_flags(parser):
    """Add `--strategy`, `--devices` and `--communication` to an argparse parser."""
    parser.add_argument("--strategy", choices=STRATEGIES, default="default",
                        help="tf.distribute strategy: one device, mirrored over the "
                        "local devices, or multi-worker from TF_CONFIG")  # fmt: skip
    parser.add_argument("--devices", type=int, default=None,
                        help="replicas of --strategy mirrored: the first N GPUs "
                        "(default all), or N logical CPU devices without a GPU "
                        "(default 2)")  # fmt: skip
    parser.add_argument("--communication", choices=sorted(COMMUNICATIONS),
                        default="auto", help="all-reduce implementation of "
                        "--strategy multiworker")  # fmt: skip
    return parser


def add_jit_compile_flag(parser):
    """Add `--jit-compile/--no-jit-compile`; unset, `jit_compile_for` decides."""
    parser.add_argument("--jit-compile", action=argparse.BooleanOptionalAction,
                        default=None, help="compile the training step with XLA "
                        "(default: only with --strategy default)")  # fmt: skip
    return parser


def jit_compile_for(args, strategy):
    """`args.jit_compile` if given, else `jit_compile_default(strategy)`."""
    if args.jit_compile is None:
        return jit_compile_default(strategy)
    return args.jit_compile


def split_cpu(count):
    """Split the physical CPU into `count` logical devices; returns their names.

    Must run before TensorFlow initialises its devices. If they are already
    initialised (e.g. a second call in the same process), the existing
    logical CPUs are reused when there are enough of them.
    """
    if not isinstance(count, int) or count < 1:
        raise ValueError(
            f"`devices` must be a positive integer. Received: devices={count!r}"
        )
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
        )
    except RuntimeError as error:  # devices already initialised
        existing = tf.config.list_logical_devices("CPU")
        if len(existing) < count:
            raise RuntimeError(
                f"Cannot split the CPU into {count} logical devices: TensorFlow "
                f"already initialised {len(existing)}. Create the strategy "
                "before any other TensorFlow op (in a fresh process)."
            ) from error
    return [device.name for device in tf.config.list_logical_devices("CPU")[:count]]


def make_strategy(args=None, *, strategy="default", devices=None, communication="auto"):
    """The `tf.distribute.Strategy` named by `args.strategy` (or `strategy=`).

    `args` is the namespace of a parser given `add_strategy_flags`; keyword
    arguments serve callers without one. See the module docstring for what
    each name means on CPUs, GPUs and clusters.
    """
    if args is not None:
        strategy, devices = args.strategy, args.devices
        communication = args.communication
    if strategy not in STRATEGIES:
        raise ValueError(
            f"`strategy` must be one of {STRATEGIES}. Received: strategy={strategy!r}"
        )
    if strategy == "default":
        return tf.distribute.get_strategy()
    if strategy == "mirrored":
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            count = len(gpus) if devices is None else devices
            names = [f"/gpu:{i}" for i in range(count)]
        else:
            names = split_cpu(2 if devices is None else devices)
        return tf.distribute.MirroredStrategy(names)
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=COMMUNICATIONS[communication]
    )
    return MultiWorkerMirroredStrategy(communication_options=options)


class MultiWorkerMirroredStrategy(tf.distribute.MultiWorkerMirroredStrategy):
    """`tf.distribute.MultiWorkerMirroredStrategy` with a lenient `reduce`.

    Keras 3's `fit` fails on every multi-worker run with this strategy as
    TensorFlow ships it (keras-team/keras#20585), through two calls of
    `strategy.reduce`: to build the model it reduces a whole `(x, y)` batch
    structure, and the multi-worker strategy reduces single values only
    ("Attempt to convert a value (PerReplica...)"); then it reduces every
    scalar metric with `axis=0` ("Invalid reduction dimension 0 for input
    with 0 dimensions"). This `reduce` takes nests, leaf by leaf, and
    reduces scalars across replicas only (`axis=None`), which is what both
    calls mean.
    """

    def reduce(self, reduce_op, value, axis):
        def reduce_leaf(leaf):
            local = self.experimental_local_results(leaf)[0]
            scalar = getattr(local, "shape", None) is not None and local.shape.rank == 0
            return super(MultiWorkerMirroredStrategy, self).reduce(
                reduce_op, leaf, None if scalar else axis
            )

        return tf.nest.map_structure(reduce_leaf, value)


def describe(strategy):
    """One line: the strategy class, its replicas and, for workers, the task."""
    text = f"{type(strategy).__name__} with {strategy.num_replicas_in_sync} replica(s)"
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is not None and resolver.task_type is not None:
        workers = len(resolver.cluster_spec().as_dict().get("worker", []))
        text += f", task {resolver.task_type}:{resolver.task_id} of {workers} worker(s)"
    return text


def global_batch_size(per_replica, strategy):
    """The batch size to give `Dataset.batch`: `per_replica` x replicas."""
    return per_replica * strategy.num_replicas_in_sync


def shard_by_data(dataset):
    """Shard a dataset across workers by batches (for in-memory datasets).

    `MultiWorkerMirroredStrategy` shards input by files when it can; a
    dataset built from tensors has none, so say `DATA` up front: every
    worker runs the same pipeline and keeps its part of each global batch.
    """
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
    )
    return dataset.with_options(options)


def is_chief(strategy):
    """Whether this process writes the outputs (always, outside multi-worker)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or resolver.task_type is None:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def output_dir_for(output_dir, strategy):
    """`output_dir` for the chief, a fresh temporary directory for other workers.

    Every worker must run the saving code (it can involve collectives), but
    only the chief's files are kept; remove the others' with
    `cleanup_output_dir`.
    """
    if is_chief(strategy):
        return output_dir
    resolver = strategy.cluster_resolver
    return tempfile.mkdtemp(prefix=f"{resolver.task_type}{resolver.task_id}_")


def cleanup_output_dir(path, strategy):
    """Delete a non-chief worker's temporary output directory."""
    if not is_chief(strategy):
        shutil.rmtree(path, ignore_errors=True)


def backup_dir_for(backup_dir, strategy):
    """Where this worker's `keras.callbacks.BackupAndRestore` keeps its state.

    Every worker must resume from its own backup at the same epoch as the
    chief, so the directory must outlive the run (not `output_dir_for`'s
    temporary one) and must not be shared: Keras 3's `BackupAndRestore`
    has no notion of workers (TF 2's `tf.keras` one had), and workers
    writing the same files on a shared disk would overwrite each other.
    The chief gets `backup_dir`, worker `i` `backup_dir` + `_worker{i}`.
    """
    if is_chief(strategy):
        return backup_dir
    resolver = strategy.cluster_resolver
    return f"{backup_dir}_{resolver.task_type}{resolver.task_id}"


def resumed_epoch(backup_dir):
    """The epoch `BackupAndRestore(backup_dir)` will resume at (0: a fresh run).

    `fit` restores the epoch only once it runs, after the dataset is built;
    a dataset that holds every epoch's batches up front (the fixed orders
    above) must start at that epoch, so read it here from the callback's
    metadata file (`training_metadata.json`, Keras 3.x).
    """
    path = os.path.join(backup_dir, "training_metadata.json")
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return int(json.load(f)["epoch"])


def jit_compile_default(strategy):
    """`jit_compile` to use with `strategy`: XLA on one replica only.

    XLA cannot compile a training step whose variables live on several
    devices (`MirroredStrategy`), nor one with cross-worker collectives
    (`MultiWorkerMirroredStrategy`); Keras' `jit_compile="auto"` likewise
    turns XLA off under any strategy. The default strategy keeps it.
    """
    mirrored = (
        tf.distribute.MirroredStrategy,
        tf.distribute.MultiWorkerMirroredStrategy,
    )
    return not isinstance(strategy, mirrored)


def clip_after_all_reduce(optimizer_class):
    """A subclass of a Keras optimizer class that clips the summed gradient.

    Under a strategy, the Keras trainer divides each replica's loss by the
    number of replicas and the optimizer sums the replicas' gradients after
    its clipping step, so `clipnorm` / `global_clipnorm` / `clipvalue` act
    on each replica's partial gradient. The subclass all-reduces the
    gradients first to measure the norm of their sum, exactly as a single
    device would, and scales every replica's own gradient by the resulting
    factor, so the optimizer's sum is the clipped total. (Scaling rather
    than replacing keeps the rows of sparse embedding gradients as they are,
    which Adam's moments depend on.) `clipvalue`, elementwise, clips the
    all-reduced dense gradient and hands each replica an equal share. With
    one replica or no clipping it changes nothing. It overrides the
    optimizer's `_clip_gradients` hook.

    Args:
        optimizer_class: a `keras.optimizers.Optimizer` subclass, e.g.
            `keras.optimizers.Adam`.

    Returns:
        the subclass; construct it with the usual arguments.
    """

    class ClipAfterAllReduce(optimizer_class):
        def _clip_gradients(self, grads):
            context = tf.distribute.get_replica_context()
            replicas = 1 if context is None else context.num_replicas_in_sync
            clipping = self.clipnorm or self.global_clipnorm or self.clipvalue
            if replicas == 1 or not clipping:
                return super()._clip_gradients(grads)
            present = [i for i, g in enumerate(grads) if g is not None]
            local = [grads[i] for i in present]
            total = context.all_reduce(tf.distribute.ReduceOp.SUM, local)
            if self.clipnorm or self.global_clipnorm:
                # Norms as Keras computes them (rows of sparse gradients unsummed).
                squares = [ops.sum(ops.square(g)) for g in total]
                if self.clipnorm:
                    limit = self.clipnorm
                    norms = [ops.sqrt(s) for s in squares]
                else:
                    limit = self.global_clipnorm
                    norms = [ops.sqrt(ops.sum(ops.stack(squares)))] * len(squares)
                clipped = [
                    _scale(g, limit / ops.maximum(n, limit))
                    for g, n in zip(local, norms, strict=True)
                ]
            else:
                clipped = [
                    _scale(g, 1.0 / replicas)
                    for g in super()._clip_gradients(
                        [tf.convert_to_tensor(g) for g in total]
                    )
                ]
            grads = list(grads)
            for i, g in zip(present, clipped, strict=True):
                grads[i] = g
            return grads

    ClipAfterAllReduce.__name__ = f"{optimizer_class.__name__}ClipAfterAllReduce"
    ClipAfterAllReduce.__qualname__ = ClipAfterAllReduce.__name__
    return ClipAfterAllReduce


def _scale(gradient, factor):
    factor = ops.cast(factor, gradient.dtype)
    if isinstance(gradient, tf.IndexedSlices):  # embedding gradients
        return tf.IndexedSlices(
            gradient.values * factor, gradient.indices, gradient.dense_shape
        )
    return gradient * factor
