"""`plan_blocks`: the block sizes and head groups of the chunked path, rule
by rule (`keras_attention.ops.chunked.block_plan`'s cost model)."""

import pytest

from keras_attention.ops.chunked import block_plan
from keras_attention.ops.chunked.block_plan import plan_blocks

MIB = 1024 * 1024
XLA_CPU = dict(runtime="tensorflow-xla", device="cpu", cache_bytes=2 * MIB)


def _plan(batch, t_len, s_len, heads=8, head_dim=64, **kwargs):
    return plan_blocks(batch, t_len, s_len, heads, head_dim, **{**XLA_CPU, **kwargs})


@pytest.mark.parametrize(
    "runtime, device, block",
    [
        ("tensorflow", "cpu", 512),
        ("jax", "cpu", 512),
        ("jax", "gpu", 512),
        ("torch", "cpu", 512),
        ("tensorflow-xla", "cpu", 256),
        ("tensorflow-xla", "gpu", 256),
        ("tensorflow-xla", "tpu", 256),
    ],
)
def test_rule_1_the_block_size_by_how_the_call_is_traced(runtime, device, block):
    plan = _plan(1, 4096, 4096, runtime=runtime, device=device)
    assert (plan.query_block, plan.key_block) == (block, block)
    assert "rule 1" in plan.reason


def test_rule_2_long_blocks_once_the_diagonal_waste_is_at_most_one_sixteenth():
    """From L = 2048 * 16 = 32768 on, the longest known length decides, for
    a single sequence; unknown sizes count as short, and an accelerator or
    a larger batch keeps 256 (the long block's scores would pass 16 MiB)."""
    long = int(block_plan.XLA_LONG_BLOCK / block_plan.MAX_DIAGONAL_WASTE)
    assert long == 32768
    assert _plan(1, long - 1, None).query_block == 256
    assert _plan(1, None, None).query_block == 256
    assert _plan(1, 128, long).key_block == 2048
    assert _plan(1, 128, long).query_block == 128  # at most the length
    assert _plan(1, None, long).query_block == 2048
    assert _plan(None, long, long).query_block == 256
    assert _plan(2, long, long).query_block == 256
    assert _plan(1, long, long, device="gpu").query_block == 256
    assert _plan(1, 65536, 65536).query_block == 2048
    assert "rule 2" in _plan(1, 65536, 65536).reason


def test_rule_2_counts_the_block_in_its_dtype():
    """bfloat16 blocks take half the bytes: two sequences fit 16 MiB."""
    assert _plan(2, 32768, 32768, dtype="bfloat16").query_block == 2048
    assert _plan(2, 32768, 32768, dtype="float32").query_block == 256


@pytest.mark.parametrize(
    "batch, block, head_dim, cache, heads",
    [
        # The measured choices on the Intel VM (2 MiB of L2).
        (1, 256, 64, 2 * MIB, 4),  # 4 * 448 KiB = 1.75 MiB
        (4, 256, 64, 2 * MIB, 1),
        (1, 512, 64, 2 * MIB, 1),  # JAX's 512-blocks
        (1, 2048, 64, 2 * MIB, 1),  # at least one head
        # The working set grows with the head size and shrinks with the cache.
        (1, 256, 128, 2 * MIB, 3),  # 640 KiB a head
        (1, 256, 64, 1 * MIB, 2),
        (1, 256, 64, 32 * MIB, 8),  # never more than the heads
    ],
)
def test_rule_3_head_groups_fit_the_cache(batch, block, head_dim, cache, heads):
    plan = _plan(
        batch,
        4096,
        4096,
        head_dim=head_dim,
        runtime="jax",
        block_sizes=(block, block),
        cache_bytes=cache,
    )
    assert (plan.query_block, plan.heads_per_group) == (block, heads)


@pytest.mark.parametrize(
    "runtime, device, batch",
    [("tensorflow", "cpu", 1), ("tensorflow-xla", "gpu", 1), ("jax", "cpu", None)],
)
def test_rule_3_applies_only_to_compiled_cpu_calls_of_a_known_batch(
    runtime, device, batch
):
    plan = _plan(batch, 4096, 4096, runtime=runtime, device=device, cache_bytes=1)
    assert plan.heads_per_group == 8


def test_the_caller_s_blocks_come_first():
    plan = _plan(1, 65536, 100, block_sizes=(64, None))
    assert (plan.query_block, plan.key_block) == (64, 100)
    assert "the caller's blocks" in plan.reason


def test_the_working_set_budget_is_the_documented_default(monkeypatch):
    """4 heads of 256-blocks at B=1, head size 64 (the measured best on
    both VMs); a smaller budget, set here, halves the groups."""
    kwargs = dict(runtime="jax", device="cpu", block_sizes=(256, 256))
    assert plan_blocks(1, 4096, 4096, 8, 64, **kwargs).heads_per_group == 4
    monkeypatch.setattr(block_plan, "WORKING_SET_BYTES", 1 * MIB)
    assert plan_blocks(1, 4096, 4096, 8, 64, **kwargs).heads_per_group == 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(runtime="xla"), "`runtime` must be one of"),
        (dict(device="npu"), "`device` must be one of"),
    ],
)
def test_bad_runtime_or_device_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan_blocks(1, 8, 8, 2, 4, **{**XLA_CPU, **kwargs})
