"""Block sizes and head groups of the chunked path: one documented rule.

`plan_blocks` turns the facts of a call (batch, lengths, heads, head size,
dtype, how it is traced, where it runs) into a `BlockPlan`: the query and
key block sizes and how many heads are attended at once. It is the only
place that knows the numbers; `chunked_attention` asks it when the caller
gives no block size, and `benchmarks/bench.py` prints what it chose.

The cost model, and the measurements behind it (`benchmarks/RESULTS.md`):

1. **Per-op overhead** decides the block size where every block op is a
   kernel launch: TensorFlow's graphs and eager ops, JAX, accelerators.
   Fewer, larger blocks win there: `OVERHEAD_BOUND_BLOCK` (512). Under
   TensorFlow's XLA the loop is compiled and the blocks' products run
   faster when small: `XLA_BLOCK` (256; "2026-12-01": causal L=8192
   2.2-2.6 s against 3.1 s with 512-blocks, L=16384 9.8 against 10.8 s).
2. **Matmul rate against diagonal waste** (TensorFlow's XLA on a CPU):
   `XLA_LONG_BLOCK` (2048) blocks run their products nearer the matmul
   rate (340-415 GFLOP/s against 155-160 for 256-blocks), but a causal
   diagonal block computes its masked half for nothing, a share
   `block / L` of the work. The long block is taken when that share is at
   most `MAX_DIAGONAL_WASTE` (1/16, so from L = 32768) and one head's
   scores block, `batch * block^2` values, stays within
   `LONG_BLOCK_MAX_BYTES` (16 MiB: a single sequence; a batch multiplies
   the blocks and was not measured). "2026-12-02, 16:20-18:30 UTC": L=32768
   22.3 s against 30.4 s, L=65536 84.5-92.7 s against 115.2 s, for 0.3-0.5
   GiB more peak memory; L=16384 keeps 256-blocks (1024-blocks were faster
   there, 6.3 s against 8.7, but took 1.68 GiB, past the 1.5 GiB target).
3. **Cache** (a CPU, compiled: TensorFlow's XLA or JAX): the heads are
   attended in groups whose working set, the float32 scores `(batch,
   heads, cq, ck)` and the query, key and value blocks `(batch, heads,
   cq + 2 ck, head_dim)`, stays within `WORKING_SET_BYTES` (2 MiB). The
   budget is a documented default, not read from the machine: the two VMs
   measured have 2 MiB (Intel) and 1 MiB (AMD) of L2 per core, and the
   best group was the same on both, 4 heads of 256-blocks at B=1 (1.75
   MiB). "2026-12-02" (Intel): two groups of 4 heads against one of 8,
   0.88-0.93x the time; groups of 2 heads 1.27x (blocks too small); B=4
   and JAX's 512-blocks one head per group, 0.79-0.94x. "2026-12-03"
   (AMD, L=16384): groups of 2 heads (a budget of its 1 MiB L2) 12.6 s and
   1.51 GiB against 6.2 s and 1.36 GiB with 4. On an accelerator all heads
   go in one kernel.

A mask modifier with its own block grid (`BlockLocal2D.chunk_size`) and
explicit `query_chunk_size` / `key_chunk_size` take precedence over rules 1
and 2 (`chunked_attention`); rule 3 then follows from the sizes in use.
"""

import dataclasses

import keras

from keras_attention.ops import devices

OVERHEAD_BOUND_BLOCK = 512
XLA_BLOCK = 256
XLA_LONG_BLOCK = 2048
MAX_DIAGONAL_WASTE = 1 / 16
LONG_BLOCK_MAX_BYTES = 16 * 1024 * 1024
WORKING_SET_BYTES = 2 * 1024 * 1024
RUNTIMES = ("tensorflow-xla", "tensorflow", "jax", "torch", "numpy")
DEVICES = ("cpu", "gpu", "tpu")


@dataclasses.dataclass(frozen=True)
class BlockPlan:
    """Block sizes and head groups of one chunked attention call.

    Attributes:
        query_block: queries per block (`cq`), at most the query length.
        key_block: keys per block (`ck`), at most the key length.
        heads_per_group: heads attended at once (all of them when the
            groups do not apply).
        reason: which rule of the cost model chose them, in words.
    """

    query_block: int
    key_block: int
    heads_per_group: int
    reason: str


def plan_blocks(
    batch,
    query_length,
    key_length,
    num_heads,
    head_dim,
    dtype="float32",
    runtime=None,
    device=None,
    block_sizes=(None, None),
    cache_bytes=None,
):
    """The `BlockPlan` of a chunked attention call (see the module's cost model).

    Args:
        batch, query_length, key_length, num_heads, head_dim: the static
            sizes, `None` where unknown (unknown lengths count as short, an
            unknown batch forms no head groups).
        dtype: the dtype the blocks are computed in (float32 in
            `chunked_attention`); its size counts in the working set.
        runtime: one of `RUNTIMES`; `devices.runtime()` when `None`.
        device: `"cpu"`, `"gpu"` or `"tpu"`; `devices.device_kind()` when
            `None`.
        block_sizes: `(cq, ck)` the caller fixed (a mask modifier's grid,
            explicit chunk sizes); `None` entries are planned.
        cache_bytes: the working-set budget of rule 3; `WORKING_SET_BYTES`
            when `None`.

    Example:

    >>> from keras_attention.ops.chunked.block_plan import plan_blocks
    >>> plan = plan_blocks(1, 65536, 65536, 8, 64, runtime="tensorflow-xla",
    ...                    device="cpu")
    >>> plan.query_block, plan.key_block, plan.heads_per_group
    (2048, 2048, 1)
    """
    runtime = devices.runtime() if runtime is None else runtime
    device = devices.device_kind() if device is None else device
    _check_choice("runtime", runtime, RUNTIMES)
    _check_choice("device", device, DEVICES)
    itemsize = _itemsize(dtype)
    size, why = block_size(batch, (query_length, key_length), itemsize, runtime, device)
    cq = _fit(block_sizes[0] or size, query_length)
    ck = _fit(block_sizes[1] or size, key_length)
    if block_sizes != (None, None):
        why = f"the caller's blocks {block_sizes}, {why} otherwise"
    heads, how = heads_per_group(
        batch, cq, ck, num_heads, head_dim, itemsize, runtime, device, cache_bytes
    )
    return BlockPlan(cq, ck, heads, f"{why}; {how}")


def block_size(batch, lengths, itemsize, runtime, device):
    """`(size, reason)`: rules 1 and 2 of the cost model."""
    if runtime != "tensorflow-xla":
        return OVERHEAD_BOUND_BLOCK, f"{runtime}: per-op overhead bound (rule 1)"
    if device != "cpu":
        return XLA_BLOCK, f"tensorflow-xla on a {device} (rule 1)"
    known = [n for n in lengths if isinstance(n, int)]
    longest = max(known, default=0)
    block_bytes = (batch if isinstance(batch, int) else 0) * XLA_LONG_BLOCK**2
    if (
        longest
        and XLA_LONG_BLOCK / longest <= MAX_DIAGONAL_WASTE
        and 0 < block_bytes * itemsize <= LONG_BLOCK_MAX_BYTES
    ):
        return XLA_LONG_BLOCK, (
            f"L={longest}: the long block wastes at most 1/16 (rule 2)"
        )
    return XLA_BLOCK, "tensorflow-xla on a cpu (rule 1; rule 2: short or batched)"


def heads_per_group(
    batch, cq, ck, num_heads, head_dim, itemsize, runtime, device, cache_bytes=None
):
    """`(heads, reason)`: rule 3 of the cost model, at least one head."""
    compiled = runtime in ("tensorflow-xla", "jax")
    if device != "cpu" or not compiled or not isinstance(batch, int):
        return num_heads, "all heads at once"
    budget = WORKING_SET_BYTES if cache_bytes is None else cache_bytes
    per_head = itemsize * batch * (cq * ck + (cq + 2 * ck) * (head_dim or 0))
    heads = min(num_heads, max(budget // max(per_head, 1), 1))
    return heads, f"{heads} head(s) at once within {budget // 1024} KiB (rule 3)"


def _fit(size, length):
    """The block size: `size`, or a shorter static length. Unknown lengths
    (`None`, or JAX's symbolic dimensions while a functional model infers
    its shapes) keep `size`."""
    return int(min(size, length)) if isinstance(length, int) else int(size)


def _itemsize(dtype):
    dtype = keras.backend.standardize_dtype(dtype)
    return 2 if dtype in ("float16", "bfloat16") else 8 if dtype == "float64" else 4


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(
            f"`{name}` must be one of {choices}. Received: {name}={value!r}"
        )
