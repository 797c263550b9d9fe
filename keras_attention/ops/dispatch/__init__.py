"""The dispatch: which of the three paths a call takes, and why.

`attention_plan.py` holds `plan_attention` and its `AttentionPlan` (the one
place that decides, from the call's static facts and the device of
`keras_attention.ops.devices`); `plan_recording.py` hands each plan
followed to the open `recording_attention_plans` blocks. It sits above the
paths (it reads the fused path's rules) and below `multi_head_attention`,
which follows the plan. Public names are re-exported by
`keras_attention.ops`.
"""
