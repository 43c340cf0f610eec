"""The simulator's own services, as the worker's Python reaches them (ctypes into the
simulator executable: rtl/sim/npu_sim_main.cpp, npu_ring_service.h, npu_model_state.h).

`MainLoop` holds every entry point: what the server handed out (the configuration, the
pipe and the descriptor channel), idle time, the register rings (attach, detach, and the
requests the rings hand over to Python while taps are on), and the model's state (save,
restore, pristine). A model built without the harness's main loop (cocotb's own) has none
of them: `available` is False and the worker serves its pipe alone.

Also here: taking descriptors from the server's descriptor channel and mapping a renewed
memory file in place.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xrt.hw.ring import REGBUS_OP, REGBUS_RESULT, RING_MAX_OPS, RingKind, RingSlot

__all__ = ["MainLoop", "RingRequest", "receive_fds", "remap_memory"]

_MAP_FIXED = 0x10
_MESSAGE_BYTES = 256


class RingRequest:
    """A register ring's request the simulator handed over to Python (taps are on): which
    ring, what kind, and its operations (a batch) or its limits (a wait)."""

    __slots__ = ("kind", "max_cycles", "n_ops", "records", "slot", "wall_ms")

    def __init__(self, slot: int, kind: int, n_ops: int, max_cycles: int, wall_ms: int,
                 records: bytes) -> None:  # fmt: skip
        self.slot = RingSlot(slot)
        self.kind = RingKind(kind)
        self.n_ops = n_ops
        self.max_cycles = max_cycles
        self.wall_ms = wall_ms
        self.records = records


class MainLoop:
    """The harness main loop's services (see the module docstring)."""

    def __init__(self) -> None:
        lib = ctypes.CDLL(None)  # the simulator executable itself
        self.available = hasattr(lib, "npu_worker_idle_begin")
        self.savable = self.available and hasattr(lib, "npu_worker_model_save")
        if not self.available:
            return
        self._lib = lib
        self.idle_begin = self._fn("npu_worker_idle_begin", None, ctypes.c_int)
        self._config = self._fn("npu_worker_config", ctypes.c_char_p)
        self._fd = self._fn("npu_worker_fd", ctypes.c_int, ctypes.c_char_p)
        # slot, file, kick, done, revoke
        self.ring_attach = self._fn("npu_worker_ring_attach", ctypes.c_int, *(ctypes.c_int,) * 5)
        self.ring_detach = self._fn("npu_worker_ring_detach", None, ctypes.c_int)
        self.ring_revoked = self._fn("npu_worker_ring_revoked", ctypes.c_int, ctypes.c_int)
        self.set_handover = self._fn("npu_worker_ring_handover", None, ctypes.c_int)
        # A ring request runs (woken for the pipe then, Python answers the debugger only);
        # wake me once none runs (a message was kept for then).
        self.ring_inflight = self._fn("npu_worker_ring_inflight", ctypes.c_int)
        self.idle_wake = self._fn("npu_worker_idle_wake", None, ctypes.c_int)
        self._pending = self._fn("npu_worker_ring_pending", ctypes.c_int, ctypes.c_void_p)
        self._ops = self._fn("npu_worker_ring_ops", ctypes.c_void_p)
        self._respond = self._fn(
            "npu_worker_ring_respond", None,
            ctypes.c_uint32, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_uint32,
            ctypes.c_uint64, ctypes.c_char_p, ctypes.c_uint64,
        )  # fmt: skip
        if self.savable:
            self.model_save = self._fn("npu_worker_model_save", ctypes.c_int, ctypes.c_char_p)
            self.model_restore = self._fn(
                "npu_worker_model_restore", ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t
            )
            self.model_error = self._fn("npu_worker_model_error", ctypes.c_char_p)
            self.pristine_save = self._fn("npu_worker_pristine_save", ctypes.c_int)
            self.pristine_restore = self._fn("npu_worker_pristine_restore", ctypes.c_int)
            self.state_bytes = self._fn("npu_worker_state_bytes", ctypes.c_ulonglong)
        self._info = (ctypes.c_uint64 * 5)()

    def _fn(self, name: str, restype: object, *argtypes: object) -> Callable[..., Any]:
        fn = getattr(self._lib, name)
        fn.argtypes = argtypes
        fn.restype = restype
        return fn

    # ------------------------------------------------------------------ the hand-out
    def config(self) -> str:
        """The worker's configuration text (`npuemu.worker.config.WorkerConfig`)."""
        return (self._config() or b"").decode()

    def fd(self, role: str) -> int:
        """The descriptor handed out for `role` (``ipc``, ``fdchan``).

        Raises:
            ValueError: the server handed out none.
        """
        got = int(self._fd(role.encode()))
        if got < 0:
            raise ValueError(f"the server handed out no {role!r} descriptor")
        return got

    # ------------------------------------------------------------------ ring hand-overs
    def ring_pending(self) -> RingRequest | None:
        """The ring request the simulator handed over, if any (it waits for `ring_respond`)."""
        if not self._pending(ctypes.addressof(self._info)):
            return None
        slot, kind, n_ops, max_cycles, wall_ms = (int(v) for v in self._info)
        n = min(n_ops, RING_MAX_OPS) if kind == RingKind.BATCH else 0
        records = ctypes.string_at(self._ops(), n * REGBUS_OP.size) if n else b""
        return RingRequest(slot, kind, n, max_cycles, wall_ms, records)

    def ring_respond(self, status: int, cycles: int, results: bytes = b"", outcome: int = 0,
                     waited: int = 0, message: str = "") -> None:  # fmt: skip
        """Answer the handed-over request (the simulator writes the ring's response): its
        status, the device's cycles, a batch's results or a wait's outcome."""
        n = len(results) // REGBUS_RESULT.size
        text = message.encode()[: _MESSAGE_BYTES - 1]
        self._respond(status, n, results, outcome, waited, text, cycles)


def receive_fds(channel_fd: int, count: int, what: str) -> list[int]:
    """`count` descriptors the server sent over the descriptor channel (SCM_RIGHTS)."""
    with socket.socket(fileno=os.dup(channel_fd)) as chan:
        _, fds, _, _ = socket.recv_fds(chan, 16, count)
    if len(fds) != count:
        for fd in fds:
            os.close(fd)
        raise ValueError(f"expected {count} descriptor(s) ({what}) from the server, got {len(fds)}")
    return fds


def remap_memory(old: tuple[int, int], fd: int) -> None:
    """Map memory file `fd` over the mapping(s) of the file `old` (device, inode) in this
    process, at the same address (MAP_FIXED), so the DPI-C memory model's pointers stay
    valid. Runs between requests (the simulation is frozen). The server uses it to give
    each lease a fresh ``udma`` file."""
    dev, ino = old
    spans = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)  # range perms offset major:minor inode [path]
        if len(parts) < 5 or int(parts[4]) != ino:
            continue
        major, minor = (int(x, 16) for x in parts[3].split(":"))
        if os.makedev(major, minor) == dev:
            start, end = (int(x, 16) for x in parts[0].split("-"))
            spans.append((start, end, int(parts[2], 16)))
    if not spans:
        raise ValueError(f"memory file (device {dev}, inode {ino}) is not mapped in this worker")
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    for start, end, offset in spans:
        got = libc.mmap(
            start,
            end - start,
            mmap.PROT_READ | mmap.PROT_WRITE,
            mmap.MAP_SHARED | _MAP_FIXED,
            fd,
            offset,
        )
        if got != start:
            err = ctypes.get_errno()
            raise OSError(err, f"cannot map the new memory at {start:#x}: {os.strerror(err)}")
