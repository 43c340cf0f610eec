"""A lease's register ring, on the server's side: made on the holder's first request over
``local.sock``, handed to the device's simulator and to the holder, revoked at the lease end.

The ring (layout and protocol: `xrt.hw.ring`) is a sealed memfd (no one holding it can
shrink or grow it under the simulator's mapping) and two eventfds: *kick* (the client wakes
the simulator) and *done* (the simulator wakes the client). The server keeps its own
descriptors and mapping only to revoke: at the lease end it sets the ring's state to
REVOKED and signals *done*, so a client waiting on it wakes and learns that the ring is
gone, then tells the simulator to forget it (`Op.RING_DETACH`). A new lease gets a new
ring, with a new generation; a descriptor a former holder kept reaches a ring nobody
serves.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import secrets

from xrt.hw.ring import HEADER, RING_BYTES, RING_MAGIC, RING_MAX_OPS, RING_VERSION, RingState

__all__ = ["LeaseRing"]

_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class LeaseRing:
    """One lease's ring: the sealed file, its eventfds, its generation (see the module doc)."""

    def __init__(self) -> None:
        self.generation = secrets.randbits(63) | 1
        self.mem_fd = os.memfd_create("npu-register-ring", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(self.mem_fd, RING_BYTES)
            fcntl.fcntl(self.mem_fd, fcntl.F_ADD_SEALS, _SEALS)
            self.kick_fd = os.eventfd(0, os.EFD_CLOEXEC)
            self.done_fd = os.eventfd(0, os.EFD_CLOEXEC)
            self._map = mmap.mmap(self.mem_fd, RING_BYTES)
        except BaseException:
            os.close(self.mem_fd)
            raise
        HEADER.format.pack_into(
            self._map, 0, RING_MAGIC, RING_VERSION, RING_MAX_OPS, RingState.LIVE,
            self.generation, 0, 0, 0, 0, 0,
        )  # fmt: skip
        self.revoked = False

    @property
    def fds(self) -> list[int]:
        """The descriptors to hand out, in the order ``mem, kick, done``."""
        return [self.mem_fd, self.kick_fd, self.done_fd]

    def revoke(self) -> None:
        """The lease ended: nothing is served any more; a waiting client wakes and sees it."""
        if self.revoked:
            return
        self.revoked = True
        state = HEADER.offsets["state"]
        self._map[state : state + 4] = int(RingState.REVOKED).to_bytes(4, "little")
        os.eventfd_write(self.done_fd, 1)

    def close(self) -> None:
        """Revoke (if not yet) and let go of the server's descriptors and mapping."""
        self.revoke()
        self._map.close()
        for fd in self.fds:
            os.close(fd)
