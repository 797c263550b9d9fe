"""What `benchmarks/gpu_check.py` and its two sections (`gpu_layers.py`,
`gpu_fit.py`) share: the candidates, the fit models, the driver's path and
the report's small helpers.

It imports only the standard library (and `keras_attention` inside
`kernel_names`), and none of the three, so that they import it without an
import circle (`tests/test_architecture.py` checks `benchmarks/` for one).
"""

import collections
import os

# A fit path's process runs the driver again.
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_check.py")
CANDIDATES = ("ours", "keras", "op")
# The model of examples/nlp/nmt_transformer.py, and a tiny one for --smoke.
FIT_MODELS = {
    "multi30k": dict(hidden_dim=256, num_heads=8, intermediate_dim=512, num_layers=3),
    "tiny": dict(hidden_dim=32, num_heads=2, intermediate_dim=64, num_layers=1),
}


def spread(values, scale=1e3, digits=3):
    """`(median, "median (min-max)")` of seconds, in milliseconds."""
    values = sorted(values)
    median = values[len(values) // 2]
    if len(values) % 2 == 0:
        median = (values[len(values) // 2 - 1] + median) / 2
    return median, (
        f"{median * scale:.{digits}g} "
        f"({values[0] * scale:.{digits}g}-{values[-1] * scale:.{digits}g})"
    )


def median(values):
    return spread(values)[0] if values else float("nan")


def short_error(exc):
    """The first line of an exception, trimmed for a table cell."""
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    text = text.replace("|", "/")
    return text[:160] + ("..." if len(text) > 160 else "")


def kernel_names():
    """`AttentionPlan.kernel` (words) -> its short name (`cudnn`, ...)."""
    from keras_attention.ops.dispatch import attention_plan as dispatch

    return {words: name for name, words in dispatch.KERNELS.items()}


def plan_names(plans):
    """`impl/kernel` of each plan, e.g. `fused/cudnn`."""
    names = kernel_names()
    return [f"{p.impl}/{names.get(p.kernel, p.kernel)}" for p in plans]


def count_text(names):
    counts = collections.Counter(names)
    return ", ".join(f"{name} x{n}" for name, n in counts.items()) or "none"
