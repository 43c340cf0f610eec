"""Shared memory behind a device's DDR models.

Each memory is a file without a name: created with ``O_TMPFILE`` in the server's private
folder under /dev/shm (or ``--memory-dir``), so it uses that file system's room but no
process can open it by path. The server hands the descriptor to the simulation worker
(handed over once the worker proved its pid, passed over a socket on a renewal), which
maps it (DPI-C, ``+npu_mem_<name>=/proc/self/fd/N``). The server maps the host-visible one
(``udma``) to serve memory reads and writes without the simulator; a client on the same
machine that proves its lease gets the descriptor too (the local fast path,
`npuemu.server.local_handout`). `renew()` puts new (zero) files behind every memory between
leases (the worker maps them in place), so a descriptor or mapping of a former holder, or
of anyone who ever took one, never sees the next holder. The server and its workers are
non-dumpable (`npuemu.process_guard`, rtl/sim/npu_sim_main.cpp), so a process of the same
user cannot take a descriptor out of them through /proc/PID/fd either.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import mmap
import os
import secrets
import shutil
import tempfile
from pathlib import Path

from xrt.hw.config import TargetConfig

__all__ = ["DeviceMemory", "remove_stale_dirs", "shm_root"]

log = logging.getLogger("npuemu.server")

_PREFIX = "npu-emu-"


def shm_root() -> Path:
    """Where device memory files go: /dev/shm when it exists (RAM), else the temp folder."""
    return Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


def remove_stale_dirs(root: Path | None = None) -> list[Path]:
    """Remove folders left by servers that are gone (killed without a clean shutdown)."""
    removed = []
    for d in (root or shm_root()).glob(f"{_PREFIX}*"):
        try:
            pid = int(d.name[len(_PREFIX) :].split("-")[0])
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
        except PermissionError:
            pass  # another user's live server
    return removed


def new_server_dir(root: Path | None = None) -> Path:
    """A private folder for this server process's device files."""
    return Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=root or shm_root()))


class DeviceMemory:
    """The memory files of one device, and the server's mapping of the host-visible one.

    ``fds`` holds one descriptor per memory (``udma``, ``plddr``), which the worker gets
    at start (`npuemu.server.worker_process`).
    """

    def __init__(self, folder: Path, device: str, target: TargetConfig) -> None:
        self.folder = folder
        self.device = device
        self.target = target
        self.fds: dict[str, int] = {}
        for name in ("udma", "plddr"):
            self.fds[name] = self._create(target.memory(name).size)
        self.udma = target.memory("udma")
        self._map_udma()

    def _create(self, size: int) -> int:
        try:
            fd = os.open(self.folder, os.O_TMPFILE | os.O_RDWR, 0o600)
        except OSError as exc:  # a file system without O_TMPFILE: name it, then unlink
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR):
                raise
            path = self.folder / f"{self.device}-{secrets.token_hex(8)}.bin"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            path.unlink()
        try:
            os.ftruncate(fd, size)
        except OSError:
            os.close(fd)
            raise
        return fd

    def _map_udma(self) -> None:
        self._udma_map = mmap.mmap(self.fds["udma"], self.udma.size)
        self.udma_view = memoryview(self._udma_map)

    def renew(self) -> dict[str, int]:
        """Put a new (zero) file behind every memory for the next lease; return the old
        files' descriptors by memory name.

        The server maps the new ``udma`` at once; the caller has the worker map every new
        file in place of the old one, then calls `forget` on the old ones. A descriptor or
        mapping anyone kept (a former holder's local fast path) stays on an old file, which
        no one writes any more: it never sees the next holder. New files are sparse, so a
        renewal costs no time and frees the old holder's pages with its last mapping.
        """
        old = dict(self.fds)
        new = {name: self._create(os.fstat(fd).st_size) for name, fd in old.items()}
        self._unmap_udma()
        self.fds = new
        self._map_udma()
        return old

    @staticmethod
    def forget(fd: int) -> None:
        """Close a descriptor that no longer backs a memory (its mappings keep it alive)."""
        with contextlib.suppress(OSError):
            os.close(fd)

    def _unmap_udma(self) -> None:
        with contextlib.suppress(BufferError):
            self.udma_view.release()
            self._udma_map.close()

    def close(self) -> None:
        self._unmap_udma()
        for fd in self.fds.values():
            self.forget(fd)
