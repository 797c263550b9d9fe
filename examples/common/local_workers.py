"""Run one command as several `tf.distribute` workers on this machine.

Picks free ports on 127.0.0.1, starts the command once per worker with its
`TF_CONFIG` (`{"cluster": {"worker": [...]}, "task": {"type": "worker",
"index": i}}`), and waits for all of them under one deadline; when the
deadline passes or a worker fails, the others are killed (a worker left
alone would wait for its peers' collectives forever). Each worker's output
goes to `worker<i>.log` in `--log-dir`; the end of worker 0's is printed.

    python examples/common/local_workers.py --workers 2 --timeout 900 -- \\
        python examples/nlp/translate_dates.py --model transformer \\
        --strategy multiworker --output-dir outputs/dates-multiworker

On real machines, start the same command on every node with a `TF_CONFIG`
naming all the nodes instead (see `examples/common/distribute.py`).
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time


def free_ports(count):
    """`count` distinct TCP ports that were free on 127.0.0.1 a moment ago."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def tf_configs(count):
    """One `TF_CONFIG` string per worker of a `count`-worker local cluster."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(count)]}
    return [
        json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
        for i in range(count)
    ]


def run_workers(command, count=2, timeout=600, log_dir=".", env=None):
    """Run `command` (a list) as `count` workers; returns their exit codes.

    Raises `TimeoutError` (after killing every worker) when they are not all
    done within `timeout` seconds. A worker that fails gets its peers killed
    (their codes are then negative). `env` updates the environment.
    """
    os.makedirs(log_dir, exist_ok=True)
    processes, logs = [], []
    try:
        for index, config in enumerate(tf_configs(count)):
            logs.append(open(os.path.join(log_dir, f"worker{index}.log"), "w"))
            processes.append(
                subprocess.Popen(
                    command,
                    env={**os.environ, **(env or {}), "TF_CONFIG": config},
                    stdout=logs[-1],
                    stderr=subprocess.STDOUT,
                )
            )
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in processes):
            if any(p.returncode not in (None, 0) for p in processes):
                break  # one failed: the others would wait forever
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{count} workers did not finish within {timeout} s: {command}"
                )
            time.sleep(0.2)
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
            p.wait()
        for log in logs:
            log.close()
    return [p.returncode for p in processes]


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--workers", type=int, default=2, help="number of workers")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds before every worker is killed")  # fmt: skip
    parser.add_argument("--log-dir", default="outputs/workers",
                        help="where worker<i>.log go")  # fmt: skip
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the command, after --")  # fmt: skip
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    codes = run_workers(command, args.workers, args.timeout, args.log_dir)
    with open(os.path.join(args.log_dir, "worker0.log")) as f:
        print("".join(f.readlines()[-15:]), end="")
    print(f"worker exit codes: {codes} (logs in {args.log_dir})")
    return 0 if all(code == 0 for code in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
