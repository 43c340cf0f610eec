"""Keep a process's descriptors and memory away from other processes of the same user.

The server and each simulation worker hold a device's memory files (files without a name,
see `npuemu.server.shm`). Without a name in any folder, the only ways for another
process to reach them are /proc/PID/fd, /proc/PID/mem, /proc/PID/map_files and ptrace, and
the kernel refuses all of them to a process of the same user once the holder is
non-dumpable. Debuggers and profilers (py-spy) are refused too: ``NPU_EMU_DEBUGGABLE=1``
in the server's environment (workers inherit it) keeps both processes debuggable.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

__all__ = [
    "DEBUGGABLE_ENV",
    "drop_all_capabilities",
    "make_non_dumpable",
    "unprivileged_command",
]

DEBUGGABLE_ENV = "NPU_EMU_DEBUGGABLE"
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24

log = logging.getLogger("npuemu")


def make_non_dumpable() -> bool:
    """Make this process non-dumpable (``PR_SET_DUMPABLE`` 0), unless ``NPU_EMU_DEBUGGABLE``
    is set to something other than 0. Returns whether the process is now non-dumpable."""
    if os.environ.get(DEBUGGABLE_ENV, "") not in ("", "0"):
        log.info("%s is set: this process stays debuggable", DEBUGGABLE_ENV)
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        log.warning("cannot make the process non-dumpable: %s", os.strerror(ctypes.get_errno()))
        return False
    return True


def drop_all_capabilities() -> None:
    """Empty this process's capability bounding set, so that the program it executes next
    runs with no privileges even as root (what every process of a normal user is). A no-op
    for a process that is not root. Run by `unprivileged_command`'s launcher, in a process
    of its own: never as a ``preexec_fn``, which runs Python between fork and exec in a
    copy of a multithreaded parent (gRPC's threads) and aborted there now and then."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last_cap = int(f.read())
    for cap in range(last_cap + 1):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"cannot drop capability {cap}")


def unprivileged_command(command: list[str]) -> list[str]:
    """`command` wrapped so that it runs with an empty capability bounding set: through
    this module as a launcher (``python -m npuemu.process_guard CMD...``), which drops the
    set in its own fresh process and then executes `command` in place (same pid). For tests
    that check what an unprivileged process of the same user can reach."""
    return [sys.executable, "-m", "npuemu.process_guard", *command]


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m npuemu.process_guard COMMAND [ARG...]")
    drop_all_capabilities()
    os.execvp(sys.argv[1], sys.argv[1:])
