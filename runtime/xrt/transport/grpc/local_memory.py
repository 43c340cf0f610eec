"""The client side of the local fast path: get a device's memory file from the server.

A server on this machine serves each lease holder the descriptor of its ``udma`` memory
file over a Unix socket (``npuemu.server.local_handout``): send the lease id and a
newline, receive the descriptor (SCM_RIGHTS) with the line ``udma SIZE``, or one line
saying why not.
"""

from __future__ import annotations

import os
import socket

__all__ = ["receive_memory_file"]

HANDOUT_TIMEOUT_S = 10.0


def receive_memory_file(path: str, lease_id: str, size: int) -> int:
    """The descriptor of the memory file the lease `lease_id` holds (the caller closes it).

    Raises:
        OSError: the socket cannot be reached
        ValueError: the server refused (its reason in the message) or sent something else
    """
    if not path:
        raise ValueError("the server named no socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(HANDOUT_TIMEOUT_S)
        sock.connect(path)
        sock.sendall(lease_id.encode("ascii") + b"\n")
        msg, fds, _, _ = socket.recv_fds(sock, 256, 1)
    text = msg.decode("utf-8", errors="replace").strip()
    try:
        if not fds:
            raise ValueError(text or "the server closed the socket without a memory file")
        if text != f"udma {size}":
            raise ValueError(f"unexpected answer {text[:80]!r} (expected 'udma {size}')")
        if os.fstat(fds[0]).st_size < size:
            raise ValueError(f"memory file of {os.fstat(fds[0]).st_size} B for {size} B")
    except ValueError:
        for fd in fds:
            os.close(fd)
        raise
    for fd in fds[1:]:
        os.close(fd)
    return fds[0]
