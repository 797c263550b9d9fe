"""Memory readings of a process, for the examples' memory measurements."""

import os


def proc_status(field, pid="self"):
    """A memory field of `/proc/PID/status` (e.g. `"VmHWM:"`, the peak
    resident set) in bytes, or None where it cannot be read (not Linux)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def xla_bytes_used(dump):
    """The largest "Total bytes used" of the memory-usage reports that XLA
    wrote to `dump` (`XLA_FLAGS=--xla_dump_to=DUMP`): the buffers of the
    biggest program compiled, e.g. a training step's (arguments, outputs
    and temporaries); 0 when there is none."""
    totals = [0]
    for name in os.listdir(dump):
        if name.endswith("memory-usage-report.txt"):
            with open(os.path.join(dump, name)) as f:
                first = f.readline()  # "Total bytes used: 123 (0.12MiB)"
            if first.startswith("Total bytes used:"):
                totals.append(int(first.split(":")[1].split()[0]))
    return max(totals)
