"""The client side of the local fast path: map the server's memory file behind ``udma``.

A server on this machine serves each lease holder the descriptor of its ``udma`` memory
file over a Unix socket (``npuemu.server.local_handout``): send the lease id and a
newline, receive the descriptor (SCM_RIGHTS) with the line ``udma SIZE``, or one line
saying why not (`receive_memory_file`). `map_memory_file` maps it and proves it is the
server's memory before the transport uses it instead of streaming.
"""

from __future__ import annotations

import mmap
import os
import secrets
import socket
from collections.abc import Callable, Sequence

from xrt.hw.wire import pb
from xrt.transport import MemoryInfo

__all__ = ["MappedMemory", "handout", "map_memory_file", "receive_memory_file"]

HANDOUT_TIMEOUT_S = 10.0


def handout(path: str, request: str, count: int, *, fewer: int = 0) -> tuple[str, list[int]]:
    """Ask the server's hand-out socket at `path` for `request` (``LEASE_ID`` or
    ``LEASE_ID ring``); return its answer line and the `count` descriptors it sent, or as
    few as ``count - fewer`` (an older server's answer; the caller closes them).

    Raises:
        OSError: the socket cannot be reached
        ValueError: the server refused (its reason in the message) or sent another number
            of descriptors
    """
    if not path:
        raise ValueError("the server named no socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(HANDOUT_TIMEOUT_S)
        sock.connect(path)
        sock.sendall(request.encode("ascii") + b"\n")
        msg, fds, _, _ = socket.recv_fds(sock, 256, count)
    text = msg.decode("utf-8", errors="replace").strip()
    if not count - fewer <= len(fds) <= count:
        for fd in fds:
            os.close(fd)
        raise ValueError(text or f"the server closed the socket without {count} descriptor(s)")
    return text, fds


def receive_memory_file(path: str, lease_id: str, size: int) -> int:
    """The descriptor of the memory file the lease `lease_id` holds (the caller closes it).

    Raises:
        OSError: the socket cannot be reached
        ValueError: the server refused (its reason in the message) or sent something else
    """
    text, fds = handout(path, lease_id, 1)
    try:
        if text != f"udma {size}":
            raise ValueError(f"unexpected answer {text[:80]!r} (expected 'udma {size}')")
        if os.fstat(fds[0]).st_size < size:
            raise ValueError(f"memory file of {os.fstat(fds[0]).st_size} B for {size} B")
    except ValueError:
        os.close(fds[0])
        raise
    return fds[0]


class MappedMemory:
    """The mapped memory file of ``udma``: `view` covers the whole memory."""

    def __init__(self, mapped: mmap.mmap) -> None:
        self._mapped = mapped
        self.view = memoryview(mapped)

    def close(self) -> None:
        """Unmap, unless chunks still hold views (the mapping then goes with them)."""
        try:
            self.view.release()
            self._mapped.close()
        except BufferError:
            pass  # chunks still hold views: the mapping goes with them


def map_memory_file(
    mappings: Sequence[pb.LocalMapping],
    mem: MemoryInfo,
    lease_id: str,
    read: Callable[[int, int], bytearray],
    write: Callable[[int, memoryview], None],
) -> tuple[MappedMemory | None, str]:
    """Map the memory file of ``udma`` when the server offered it, and prove it is the
    same memory (a byte pattern written through the server must show in the map).

    Args:
        mappings: What OpenDevice offered (``local_mappings``).
        mem: The ``udma`` memory.
        lease_id: The lease that may have the file.
        read: Reads through the server (address, bytes).
        write: Writes through the server (address, data).

    Returns:
        The mapping (None: stay on streams) and what happened, for ``local_note``.
    """
    m = next((m for m in mappings if m.region == "udma"), None)
    if m is None:
        return None, "the server did not offer it (another machine)"
    if m.size != mem.size:
        return None, f"mapping of {m.size} B for a {mem.size}-byte region"
    try:
        fd = receive_memory_file(m.socket, lease_id, m.size)
    except (OSError, ValueError) as exc:
        return None, f"no memory file from {m.socket}: {exc}"
    try:
        mapped = mmap.mmap(fd, m.size)
    except (OSError, ValueError) as exc:
        return None, f"cannot map the memory file: {exc}"
    finally:
        os.close(fd)
    probe = mem.end - 16
    old = bytes(read(probe, 16))
    nonce = secrets.token_bytes(16)
    write(probe, memoryview(nonce))
    same = mapped[m.size - 16 :] == nonce
    write(probe, memoryview(old))
    if not same:
        mapped.close()
        return None, "the memory file is not the server's memory"
    return MappedMemory(mapped), f"mapped the memory file from {m.socket}"
