"""The client side of the register ring (`xrt.hw.ring`): register accesses of a lease
holder on the server's machine go straight to the device's simulator, not through the
server.

`RegisterRing.receive` asks the server's hand-out socket (``local.sock``, after the lease
check) for the lease's ring: a shared-memory file, two eventfds and a pidfd of the
simulator (so a simulator that dies fails the waiting request at once). `batch` writes a
`RegBatch` (the device port's record: `xrt.hw.ring_core.RingCore` puts it), kicks the
simulator and waits on the *done* eventfd for the response; `wait_irq` runs the device's
clock until the interrupt. One request at a time (a lock
serialises threads). A revoked ring (the lease ended, or the device's worker restarted)
raises `RingRevokedError`: the transport then falls back to the server, whose answer says
which it was.
"""

from __future__ import annotations

import mmap
import os
import select
import threading
import time
from collections.abc import Sequence

from xrt.hw.port import RegBatch, RegResults, WaitResult
from xrt.hw.ring import RING_BYTES
from xrt.hw.ring_core import RingCore, RingError, RingRevokedError
from xrt.transport.grpc.local_memory import handout

__all__ = ["RegisterRing", "RingError", "RingRevokedError"]

# How long a request looks for its answer before it sleeps on *done*: a base plus the
# simulated time of its ops (a read is 1.5 to 3 cycles, 1-3 us), at most SPIN_MAX_S (a
# thread that spins holds the GIL, and takes a CPU the simulator may want).
SPIN_BEFORE_SLEEP_S, SPIN_PER_OP_S, SPIN_MAX_S = 100e-6, 3e-6, 500e-6


class RegisterRing:
    """One lease's register ring (see the module docstring).

    Args:
        fds: The ring file, the kick and the done eventfds, and the simulator's pidfd
            (taken: closed by `close`).
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
        self.closed = False
        try:
            self._core = RingCore(self._map, generation)
        except RingError:
            self._map.close()
            self._close_fds()
            self.closed = True
            raise
        self._lock = threading.Lock()
        self._poll = select.poll()
        self._poll.register(self._done, select.POLLIN)
        if self._simulator >= 0:
            self._poll.register(self._simulator, select.POLLIN)

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
        return self._core.cycles

    def batch(self, batch: RegBatch, timeout_s: float) -> RegResults:
        """Run a register batch in the simulation; one result per operation run (a batch
        stops at the first that is not OK).

        Raises:
            ValueError: more than `RING_MAX_OPS` operations.
            RingRevokedError: the ring is gone.
            RingError: the simulator refused the request or did not answer in `timeout_s`.
        """
        with self._lock:
            self._check()
            seq = self._core.put_batch(batch)
            spin_s = min(SPIN_MAX_S, SPIN_BEFORE_SLEEP_S + SPIN_PER_OP_S * batch.n)
            self._exchange(seq, timeout_s, spin_s)
            return self._core.batch_results()

    def wait_irq(self, max_cycles: int, timeout_s: float) -> WaitResult:
        """Run the device's clock until its interrupt line is high, at most `max_cycles`
        simulated cycles and `timeout_s` of wall time.

        Raises:
            RingRevokedError, RingError: as `batch`.
        """
        with self._lock:
            self._check()
            seq = self._core.put_wait(max_cycles, timeout_s)
            self._exchange(seq, timeout_s + 30.0, SPIN_BEFORE_SLEEP_S)
            return self._core.wait_result()

    def _check(self) -> None:
        if self.closed:
            raise RingRevokedError("the register ring is closed")

    def _exchange(self, seq: int, timeout_s: float, spin_s: float) -> None:
        """Kick the simulator and wait for the answer to request `seq` (looking for it
        without sleeping for `spin_s` first)."""
        os.eventfd_write(self._kick, 1)
        # Most answers come within microseconds: look without sleeping first (waking from
        # poll() costs tens of microseconds on an idle machine), then sleep on *done*.
        core = self._core
        spin_until = time.perf_counter() + spin_s
        while not core.answered(seq) and time.perf_counter() < spin_until:
            pass
        deadline_ms = max(1, int(timeout_s * 1000))
        while not core.answered(seq):
            ready = {fd for fd, _ in self._poll.poll(deadline_ms)}
            if not ready:
                raise RingError(f"the device's simulator did not answer within {timeout_s:.1f} s")
            if self._simulator in ready and not core.answered(seq):
                raise RingRevokedError("the device's simulator exited")
            if self._done not in ready:
                continue
            os.eventfd_read(self._done)
            if not core.live:
                raise RingRevokedError("the register ring was revoked")

    def close(self) -> None:
        """Let go of the ring (the simulator goes on serving it until the lease ends)."""
        if self.closed:
            return
        self.closed = True
        self._core.release()
        self._map.close()
        self._close_fds()

    def _close_fds(self) -> None:
        for fd in (self._kick, self._done, self._simulator):
            if fd >= 0:
                os.close(fd)
