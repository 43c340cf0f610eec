"""A lease's register ring, on the server's side: made on the holder's first request over
``local.sock``, handed to the device's simulator and to the holder, revoked at the lease end.

The ring (layout and protocol: `xrt.hw.ring`) is a sealed memfd (no one holding it can
shrink or grow it under the simulator's mapping) and two eventfds: *kick* (the client wakes
the simulator) and *done* (the simulator wakes the client). A third eventfd, *revoke*, goes
to the simulator only. The server keeps its own descriptors and mapping only to revoke: at
the lease end it sets the ring's state to REVOKED and signals *done*, so a client waiting
on it wakes and learns that the ring is gone, and signals *revoke*, so the simulator drops
a request of the ring in flight (a wait for the interrupt of a holder that was killed)
within about a thousand cycles instead of serving it to its end; then it tells the
simulator to forget the ring (`RingDetach`), which no longer queues behind that
request. The holder can rewrite the ring's state word, not *revoke*. A new lease gets a new
ring, with a new generation; a descriptor a former holder kept reaches a ring nobody
serves.
"""

from __future__ import annotations

import asyncio
import fcntl
import mmap
import os
import secrets
import time

from xrt.hw.port import RegBatch, RegResults
from xrt.hw.ring import HEADER, RING_BYTES, RING_MAGIC, RING_MAX_OPS, RING_VERSION, RingState
from xrt.hw.ring_core import RingCore

__all__ = ["LeaseRing", "ServerRing"]

_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
# How long `ServerRing.submit` looks for the answer before it leaves it to the event loop:
# a base plus a few simulated cycles' time per op, at most SPIN_MAX_S (the loop serves
# nothing else meanwhile).
SPIN_BASE_S, SPIN_PER_OP_S, SPIN_MAX_S = 30e-6, 3e-6, 100e-6


class LeaseRing:
    """One lease's ring: the sealed file, its eventfds, its generation (see the module doc)."""

    def __init__(self) -> None:
        self.generation = secrets.randbits(63) | 1
        self.mem_fd = os.memfd_create("npu-register-ring", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        made = [self.mem_fd]  # closed again when a later step fails (no descriptor leaks)
        try:
            os.ftruncate(self.mem_fd, RING_BYTES)
            fcntl.fcntl(self.mem_fd, fcntl.F_ADD_SEALS, _SEALS)
            for _ in range(3):
                made.append(os.eventfd(0, os.EFD_CLOEXEC))
            self.kick_fd, self.done_fd, self.revoke_fd = made[1:]
            self.map = mmap.mmap(self.mem_fd, RING_BYTES)
        except BaseException:
            for fd in made:
                os.close(fd)
            raise
        HEADER.format.pack_into(
            self.map, 0, RING_MAGIC, RING_VERSION, RING_MAX_OPS, RingState.LIVE,
            self.generation, 0, 0, 0, 0, 0,
        )  # fmt: skip
        self.revoked = False

    @property
    def holder_fds(self) -> list[int]:
        """The descriptors to hand out to the holder, in the order ``mem, kick, done``."""
        return [self.mem_fd, self.kick_fd, self.done_fd]

    @property
    def fds(self) -> list[int]:
        """The descriptors the simulator takes: `holder_fds` and *revoke*, which no holder
        gets."""
        return [*self.holder_fds, self.revoke_fd]

    def revoke(self) -> None:
        """The lease ended: nothing is served any more; a waiting client wakes and sees it,
        and the simulator drops the ring's request in flight."""
        if self.revoked:
            return
        self.revoked = True
        state = HEADER.offsets["state"]
        self.map[state : state + 4] = int(RingState.REVOKED).to_bytes(4, "little")
        os.eventfd_write(self.done_fd, 1)
        os.eventfd_write(self.revoke_fd, 1)

    def close(self) -> None:
        """Revoke (if not yet) and let go of the server's descriptors and mapping."""
        self.revoke()
        self.map.close()
        for fd in self.fds:
            os.close(fd)


class ServerRing:
    """The server's own ring into one worker's simulator (`RingAttach` with
    ``slot=RingSlot.SERVER``): the register reads, writes and batches of a holder that
    reaches the device through gRPC go through it to the simulator's main loop, not through
    the worker's Python request loop (no frame, no Python in the simulator process; while
    the worker's taps are on, the simulator hands them to its port all the same).

    One request at a time (`WorkerProcess.call` holds its lock). `submit` writes and kicks
    (`xrt.hw.ring_core.RingCore`, as the holder's ring does); the future it returns is
    resolved at once when the answer comes within a few microseconds (the simulator looks
    for a holder's next request for a while after each response, so a short batch is
    usually answered that fast), else by the event loop's reader on *done*, whose wake-up
    costs tens of microseconds. The simulator does not trust this ring more than a
    holder's: it checks every request the same way.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.ring = LeaseRing()
        self._core = RingCore(self.ring.map)
        self._loop = loop
        self._seq = 0
        self._waiter: asyncio.Future[None] | None = None
        os.set_blocking(self.ring.done_fd, False)
        loop.add_reader(self.ring.done_fd, self._on_done)
        self.closed = False

    @property
    def cycles(self) -> int:
        return self._core.cycles

    def submit(self, batch: RegBatch) -> asyncio.Future[None]:
        """Start a register batch (at most `RING_MAX_OPS` operations, no polls: a poll may
        run long and only the worker's path can stop it). The future resolves when the
        response is in (`results`)."""
        self._seq = seq = self._core.put_batch(batch)
        waiter = self._waiter = self._loop.create_future()
        os.eventfd_write(self.ring.kick_fd, 1)
        answered = self._core.answered
        spin_until = time.perf_counter() + min(SPIN_MAX_S, SPIN_BASE_S + SPIN_PER_OP_S * batch.n)
        while time.perf_counter() < spin_until:
            if answered(seq):
                waiter.set_result(None)
                break
        return waiter

    def rewait(self) -> asyncio.Future[None]:
        """A new future for the request in flight (its first waiter was cancelled)."""
        self._waiter = self._loop.create_future()
        if self._core.answered(self._seq):
            self._waiter.set_result(None)
        return self._waiter

    def results(self) -> RegResults:
        """The results of the batch answered.

        Raises:
            RingError: the simulator refused it (its reason in the message).
        """
        return self._core.batch_results()

    def _on_done(self) -> None:
        try:
            os.eventfd_read(self.ring.done_fd)
        except BlockingIOError:
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done() and self._core.answered(self._seq):
            waiter.set_result(None)

    def close(self) -> None:
        """Stop listening and let go of the ring (the worker is gone or going)."""
        if self.closed:
            return
        self.closed = True
        self._loop.remove_reader(self.ring.done_fd)
        self._core.release()
        self.ring.close()
