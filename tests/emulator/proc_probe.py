"""Run as a program: what this process gets when it opens the /proc doors of other processes.

    python proc_probe.py PID...

Prints JSON: for each pid, the outcome of opening every descriptor listed in /proc/PID/fd
and /proc/PID/mem ("opened" or the exception's name). The tests
run it without privileges to check that the server and its workers are non-dumpable.
"""

from __future__ import annotations

import json
import os
import sys


def _try(action) -> str:
    try:
        action()
    except OSError as exc:
        return type(exc).__name__
    return "opened"


def probe(pid: int) -> dict[str, object]:
    base = f"/proc/{pid}"
    fds = sorted(os.listdir(f"{base}/fd"), key=int)
    return {
        "fds": {
            fd: _try(lambda fd=fd: os.close(os.open(f"{base}/fd/{fd}", os.O_RDONLY))) for fd in fds
        },
        "mem": _try(lambda: os.close(os.open(f"{base}/mem", os.O_RDONLY))),
        "map_files": _try(lambda: os.listdir(f"{base}/map_files")),
    }


if __name__ == "__main__":
    print(json.dumps({pid: probe(int(pid)) for pid in sys.argv[1:]}))
