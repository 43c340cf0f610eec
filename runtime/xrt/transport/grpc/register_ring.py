"""The client side of the register ring (`xrt.hw.ring`): register accesses of a lease
holder on the server's machine go straight to the device's simulator, not through the
server.

`RegisterRing.receive` asks the server's hand-out socket (``local.sock``, after the lease
check) for the lease's ring: a shared-memory file, two eventfds and a pidfd of the
simulator (so a simulator that dies fails the waiting request at once). `batch` writes the
operations, kicks the simulator and waits on the *done* eventfd for the response;
`wait_irq` runs the device's clock until the interrupt. One request at a time (a lock
serialises threads). A revoked ring (the lease ended, or the device's worker restarted)
raises `RingRevokedError`: the transport then falls back to the server, whose answer says
which it was.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import select
import threading
import time
from collections.abc import Sequence

from xrt.hw.ring import (
    HEADER,
    MAX_WALL_MS,
    OPS_OFFSET,
    REGBUS_RESULT,
    REQUEST,
    REQUEST_OFFSET,
    RESPONSE,
    RESPONSE_OFFSET,
    RESULTS_OFFSET,
    RING_BYTES,
    RING_MAGIC,
    RING_MAX_OPS,
    RING_VERSION,
    RingKind,
    RingState,
    RingStatus,
    encode_ops,
    refusal,
)
from xrt.transport.grpc.local_memory import handout

__all__ = ["RegisterRing", "RingError", "RingRevokedError"]

# How long a request looks for its answer before it sleeps on *done*: a base plus the
# simulated time of its ops (a read is 1.5 to 3 cycles, 1-3 us), at most SPIN_MAX_S (a
# thread that spins holds the GIL, and takes a CPU the simulator may want).
SPIN_BEFORE_SLEEP_S, SPIN_PER_OP_S, SPIN_MAX_S = 100e-6, 3e-6, 500e-6
Row = tuple[int, int, int, int, int, int]  # `xrt.hw.regops.RegRow`'s fields
Result = tuple[int, int, int]  # (RegisterStatus, value, cycles)


class RingError(RuntimeError):
    """The simulator refused a request (its reason in the message; `status` is the
    `RingStatus`), or did not answer (`status` None)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RingRevokedError(RingError):
    """The ring is gone: the lease ended or the device's worker restarted."""


class RegisterRing:
    """One lease's register ring (see the module docstring).

    Args:
        fds: The ring file, the kick and the done eventfds (taken: closed by `close`).
        generation: The generation the server named (checked against the ring's header).
    """

    def __init__(self, fds: Sequence[int], generation: int) -> None:
        mem_fd, self._kick, self._done, *rest = fds
        # The simulator's pidfd (servers before it sent three descriptors): readable when
        # the simulator exits, so a dead simulator fails a request at once.
        self._simulator = rest[0] if rest else -1
        try:
            self._map = mmap.mmap(mem_fd, RING_BYTES)
        finally:
            os.close(mem_fd)
        magic, version, max_ops, _, gen, *_ = HEADER.format.unpack_from(self._map, 0)
        if (magic, version, max_ops, gen) != (RING_MAGIC, RING_VERSION, RING_MAX_OPS, generation):
            self.close()
            raise RingError(
                f"not the register ring expected (magic {magic:#x}, version {version}, "
                f"max_ops {max_ops}, generation {gen})"
            )
        at = HEADER.offsets
        # 8-byte words read and written whole (ctypes), as the simulator reads them.
        self._state = ctypes.c_uint32.from_buffer(self._map, at["state"])
        self._req_seq = ctypes.c_uint64.from_buffer(self._map, at["req_seq"])
        self._resp_seq = ctypes.c_uint64.from_buffer(self._map, at["resp_seq"])
        self._cycles = ctypes.c_uint64.from_buffer(self._map, at["cycles"])
        self._lock = threading.Lock()
        self._poll = select.poll()
        self._poll.register(self._done, select.POLLIN)
        if self._simulator >= 0:
            self._poll.register(self._simulator, select.POLLIN)
        self.closed = False

    @classmethod
    def receive(cls, path: str, lease_id: str) -> RegisterRing:
        """The ring of lease `lease_id` from the hand-out socket at `path`.

        Raises:
            OSError: the socket cannot be reached
            ValueError: the server refused (its reason in the message)
            RingError: what came is not a ring this client speaks
        """
        text, fds = handout(path, f"{lease_id} ring", 4, fewer=1)
        parts = text.split()
        if len(parts) != 3 or parts[0] != "ring" or parts[1] != str(RING_BYTES):
            for fd in fds:
                os.close(fd)
            raise RingError(f"unexpected answer {text[:80]!r} (expected 'ring {RING_BYTES} N')")
        return cls(fds, int(parts[2]))

    @property
    def cycles(self) -> int:
        """The device's simulated cycles after the last response."""
        return int(self._cycles.value)

    def batch(self, rows: Sequence[Row], timeout_s: float) -> list[Result]:
        """Run register operations (`xrt.hw.regops.RegRow` fields) in the simulation; one
        ``(status, value, cycles)`` per operation run (a batch stops at the first that is
        not OK).

        Raises:
            ValueError: an operation out of range, or more than `RING_MAX_OPS`.
            RingRevokedError: the ring is gone.
            RingError: the simulator refused the request or did not answer in `timeout_s`.
        """
        if not 1 <= len(rows) <= RING_MAX_OPS:
            raise ValueError(f"{len(rows)} operations: a ring request takes 1..{RING_MAX_OPS}")
        return self.batch_encoded(encode_ops(rows), len(rows), timeout_s)

    def batch_encoded(self, ops: bytes, n_ops: int, timeout_s: float) -> list[Result]:
        """`batch` for `n_ops` operations already encoded (`REGBUS_OP` records, 1 to
        `RING_MAX_OPS`; the simulator checks every field all the same)."""
        with self._lock:
            self._map[OPS_OFFSET : OPS_OFFSET + len(ops)] = ops
            REQUEST.format.pack_into(self._map, REQUEST_OFFSET, RingKind.BATCH, n_ops, 0, 0, 0)
            spin_s = min(SPIN_MAX_S, SPIN_BEFORE_SLEEP_S + SPIN_PER_OP_S * n_ops)
            n = self._exchange(timeout_s, spin_s)[1]
            size = REGBUS_RESULT.size
            data = self._map[RESULTS_OFFSET : RESULTS_OFFSET + min(n, n_ops) * size]
        return list(REGBUS_RESULT.format.iter_unpack(data))

    def wait_irq(self, max_cycles: int, timeout_s: float) -> tuple[int, int]:
        """Run the device's clock until its interrupt line is high, at most `max_cycles`
        simulated cycles and `timeout_s` of wall time; returns (the wire's WaitOutcome,
        cycles waited).

        Raises:
            RingRevokedError, RingError: as `batch`.
        """
        wall_ms = max(1, min(MAX_WALL_MS, int(timeout_s * 1000)))
        with self._lock:
            REQUEST.format.pack_into(
                self._map, REQUEST_OFFSET, RingKind.WAIT_IRQ, 0, max_cycles, wall_ms, 0
            )
            _, _, _, outcome, _, waited = self._exchange(wall_ms / 1000 + 30.0, SPIN_BEFORE_SLEEP_S)
        return outcome, waited

    def _exchange(self, timeout_s: float, spin_s: float = SPIN_BEFORE_SLEEP_S) -> tuple[int, ...]:
        """Hand over the request written, wait for its response (looking for it without
        sleeping for `spin_s` first); return the response."""
        if self.closed:
            raise RingRevokedError("the register ring is closed")
        if self._state.value != RingState.LIVE:
            raise RingRevokedError("the register ring was revoked")
        seq = self._req_seq.value + 1
        self._req_seq.value = seq
        os.eventfd_write(self._kick, 1)
        # Most answers come within microseconds: look without sleeping first (waking from
        # poll() costs tens of microseconds on an idle machine), then sleep on *done*.
        resp_seq = self._resp_seq
        spin_until = time.perf_counter() + spin_s
        while resp_seq.value != seq and time.perf_counter() < spin_until:
            pass
        del resp_seq  # a traceback must not keep a view of the mapping (close() would fail)
        deadline_ms = max(1, int(timeout_s * 1000))
        while self._resp_seq.value != seq:
            ready = {fd for fd, _ in self._poll.poll(deadline_ms)}
            if not ready:
                raise RingError(f"the device's simulator did not answer within {timeout_s:.1f} s")
            if self._simulator in ready and self._resp_seq.value != seq:
                raise RingRevokedError("the device's simulator exited")
            if self._done not in ready:
                continue
            os.eventfd_read(self._done)
            if self._state.value != RingState.LIVE:
                raise RingRevokedError("the register ring was revoked")
        response = RESPONSE.format.unpack_from(self._map, RESPONSE_OFFSET)
        if response[0] != RingStatus.OK:
            raise RingError(refusal(self._map), response[0])
        return response

    def close(self) -> None:
        """Let go of the ring (the simulator goes on serving it until the lease ends)."""
        if self.closed:
            return
        self.closed = True
        for name in ("_state", "_req_seq", "_resp_seq", "_cycles"):
            if hasattr(self, name):
                delattr(self, name)  # the ctypes views hold the mapping open
        self._map.close()
        for fd in (self._kick, self._done, self._simulator):
            if fd >= 0:
                os.close(fd)
