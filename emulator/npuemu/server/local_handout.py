"""The local fast path's front door: a lease holder on this machine gets its memory file.

Host-visible memory (``udma``) is a shared-memory file without a name
(`npuemu.server.shm`). A client on the server's machine that asked for the fast path in
``OpenDevice`` connects to the Unix socket named in its ``LocalMapping``, sends its lease id
and a newline, and gets the file's descriptor (SCM_RIGHTS) with the line ``udma SIZE``.
Sending ``LEASE_ID ring`` instead gets the lease's register ring (`xrt.hw.ring`, made on
first request: `npuemu.server.register_ring`): four descriptors (the ring file, the kick
and done eventfds, and a pidfd of the simulator serving the ring) with the line
``ring SIZE GENERATION``.
Anything else (no such lease, a lease that ended, a malformed or overlong request, no
request within `REQUEST_TIMEOUT_S`, a lease the server records: `npuemu.server.recording`)
gets one line saying why and no descriptor. At most
`MAX_CLIENTS` connections are served at a time (more are closed at once), and the accept
loop outlives any error (a descriptor shortage waits a moment and goes on). The
descriptor is that of the lease's own file: at the lease end the server puts a new file
behind ``udma``, so a descriptor (or mapping) kept by a former holder never sees the next
holder.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from pathlib import Path

import grpc

from npuemu.server.errors import ServiceError
from npuemu.server.manager import DeviceManager
from npuemu.server.register_ring import LeaseRing
from xrt.hw.ring import RING_BYTES

__all__ = ["MAX_CLIENTS", "REQUEST_TIMEOUT_S", "LocalHandout", "handout_socket"]

log = logging.getLogger("npuemu.server")

REQUEST_TIMEOUT_S = 2.0  # a connected client sends its lease id within this
MAX_CLIENTS = 32  # connections served at once; a legitimate one takes milliseconds
ACCEPT_RETRY_S = 0.1  # after an accept error (no descriptor left): wait, then go on
_MAX_REQUEST = 128  # bytes: a lease id is 24 hex digits


def handout_socket(folder: Path) -> Path:
    """Where the server in private folder `folder` serves memory-file descriptors."""
    return folder / "local.sock"


class LocalHandout:
    """Serves memory-file descriptors to lease holders on this machine.

    Args:
        folder: The server's private folder (0700); the socket is created in it.
        manager: The devices and their leases.
    """

    def __init__(self, folder: Path, manager: DeviceManager) -> None:
        self.path = handout_socket(folder)
        self.manager = manager
        self._sock: socket.socket | None = None
        self._accept_task: asyncio.Task[None] | None = None
        self._clients: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket is 0600 from the start
        try:
            sock.bind(str(self.path))
        finally:
            os.umask(old_umask)
        sock.listen(MAX_CLIENTS)
        sock.setblocking(False)
        self._sock = sock
        self._accept_task = asyncio.get_running_loop().create_task(self._accept_loop())

    async def stop(self) -> None:
        tasks = [t for t in (self._accept_task, *self._clients) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self.path.unlink(missing_ok=True)

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._sock is not None
        failing = False
        while True:
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # EMFILE and the like: the loop must not die of it
                if not failing:
                    log.warning("local.sock: cannot accept (%s): retrying", exc)
                failing = True
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            if failing:
                log.info("local.sock: accepting again")
                failing = False
            if len(self._clients) >= MAX_CLIENTS:
                conn.close()  # a flood: the clients already connected are served first
                continue
            task = loop.create_task(self._serve(conn))
            self._clients.add(task)
            task.add_done_callback(self._clients.discard)

    async def _serve(self, conn: socket.socket) -> None:
        opened: list[int] = []  # descriptors made for this answer alone
        try:
            await self._serve_conn(conn, opened)
        finally:
            for fd in opened:
                os.close(fd)

    async def _serve_conn(self, conn: socket.socket, opened: list[int]) -> None:
        loop = asyncio.get_running_loop()
        with conn:
            conn.setblocking(False)
            try:
                line = await asyncio.wait_for(self._read_line(conn), REQUEST_TIMEOUT_S)
                lease_id, _, what = line.partition(" ")
                if what == "ring":
                    ring, pidfd = await self.ring_of(lease_id)
                    answer, fds = (
                        f"ring {RING_BYTES} {ring.generation}\n",
                        [*ring.holder_fds, pidfd],
                    )
                    opened.append(pidfd)
                elif what:
                    raise ValueError("ask for LEASE_ID (its memory) or LEASE_ID ring")
                else:
                    fd, size = self.memory_of(lease_id)
                    answer, fds = f"udma {size}\n", [fd]
            except TimeoutError:
                return
            except (ServiceError, ValueError) as exc:
                reason = exc.message if isinstance(exc, ServiceError) else str(exc)
                with contextlib.suppress(OSError):
                    await loop.sock_sendall(conn, f"refused: {reason}\n".encode())
                return
            except OSError:
                return  # the client went away
            except Exception as exc:  # e.g. the worker could not attach a ring
                log.warning("local.sock: refused a request: %s", exc)
                with contextlib.suppress(OSError):
                    await loop.sock_sendall(conn, f"refused: {exc}\n".encode())
                return
            # One small message into an empty socket buffer: it does not block.
            with contextlib.suppress(OSError):
                socket.send_fds(conn, [answer.encode()], fds)

    @staticmethod
    async def _read_line(conn: socket.socket) -> str:
        loop = asyncio.get_running_loop()
        data = b""
        while not data.endswith(b"\n"):
            chunk = await loop.sock_recv(conn, _MAX_REQUEST)
            if not chunk:
                raise ValueError("no lease id before the connection closed")
            data += chunk
            if len(data) > _MAX_REQUEST:
                raise ValueError(f"request longer than {_MAX_REQUEST} bytes")
        return data.decode("ascii", errors="replace").strip()

    async def ring_of(self, lease_id: str) -> tuple[LeaseRing, int]:
        """The register ring of the device `lease_id` holds (made on first request), and a
        pidfd of the simulator serving it: the client polls it beside the ring's *done*
        eventfd, so a simulator that dies (with the server, or killed) fails the client's
        request at once instead of leaving it waiting out its timeout.

        Raises:
            ServiceError: no live lease with that id, or a device that cannot serve a ring
        """
        lease = self.manager.leases.get(lease_id)
        self.manager.check_live(lease)
        device = self.manager.devices[lease.device]
        ring = await device.open_ring(lease)
        worker = device.worker
        try:
            if worker is None or worker.pid is None:
                raise ProcessLookupError
            return ring, os.pidfd_open(worker.pid)
        except ProcessLookupError:
            raise ServiceError(
                grpc.StatusCode.UNAVAILABLE,
                f"device {device.name}'s simulation worker is restarting: ask again",
            ) from None

    def memory_of(self, lease_id: str) -> tuple[int, int]:
        """The descriptor and size of the udma file of the device `lease_id` holds.

        Raises:
            ServiceError: no live lease with that id (the message never echoes the id)
        """
        lease = self.manager.leases.get(lease_id)
        self.manager.check_live(lease)
        device = self.manager.devices[lease.device]
        if device.recording is not None:  # a mapping's accesses would bypass the recording
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"the server records this lease (--record): device {device.name}'s memory "
                "is served through it, not mapped",
            )
        return device.memory.fds["udma"], device.memory.udma.size
