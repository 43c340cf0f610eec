"""Run as a program, without privileges: take what can be taken from starting workers.

    python startup_attacker.py SERVER_PID

Until its stdin closes, over and over: for every child process of the server (its
simulation workers), open each descriptor listed in /proc/PID/fd and take it with
``pidfd_getfd``; and connect to every abstract socket whose name starts with ``@npu-emu-``
(a server's worker hand-out) and take any descriptor sent there. Prints JSON: every
descriptor obtained, as ``{"how": ..., "pid": ..., "fd": ..., "target": ...}`` (the
target's /proc link: ``socket:[...]``, a memory file's path...), and how many looks it made.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import socket
import sys

_SYS_PIDFD_OPEN = 434
_SYS_PIDFD_GETFD = 438
_libc = ctypes.CDLL(None, use_errno=True)


def children(pid: int) -> list[int]:
    kids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(name))
    return kids


def target_of(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError as exc:
        return type(exc).__name__


def loot_process(pid: int, got: list[dict]) -> None:
    try:
        fds = [int(n) for n in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return
    pidfd = _libc.syscall(_SYS_PIDFD_OPEN, pid, 0)
    for n in fds:
        try:
            fd = os.open(f"/proc/{pid}/fd/{n}", os.O_RDONLY)
        except OSError:
            pass
        else:
            got.append({"how": "open", "pid": pid, "fd": n, "target": target_of(fd)})
            os.close(fd)
        if pidfd >= 0:
            fd = _libc.syscall(_SYS_PIDFD_GETFD, pidfd, n, 0)
            if fd >= 0:
                got.append({"how": "pidfd_getfd", "pid": pid, "fd": n, "target": target_of(fd)})
                os.close(fd)
    if pidfd >= 0:
        os.close(pidfd)


def loot_handouts(got: list[dict]) -> None:
    try:
        with open("/proc/net/unix") as f:
            names = {line.split()[-1] for line in f if "@npu-emu-" in line}
    except OSError:
        return
    for name in names:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(0.2)
            try:
                s.connect("\0" + name[1:])
                _, fds, _, _ = socket.recv_fds(s, 512, 16)
            except OSError:
                continue
            for fd in fds:
                got.append({"how": "handout", "pid": 0, "fd": fd, "target": target_of(fd)})
                os.close(fd)


def main() -> None:
    server = int(sys.argv[1])
    got: list[dict] = []
    looks = 0
    print("ready", flush=True)
    while not select.select([sys.stdin], [], [], 0)[0]:
        for pid in children(server):
            loot_process(pid, got)
        loot_handouts(got)
        looks += 1
    print(json.dumps({"got": got, "looks": looks}))


if __name__ == "__main__":
    main()
