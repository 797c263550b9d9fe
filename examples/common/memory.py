"""Memory readings of a process, for the examples' memory measurements."""


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
