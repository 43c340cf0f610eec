"""Shared-memory files behind a device's DDR models.

Each device has one sparse file per external memory in a private folder under /dev/shm.
The simulation worker maps them (DPI-C, `+npu_mem_<name>=PATH`); the server maps the
host-visible one (`udma`) to serve memory reads and writes without the simulator; a client
on the same machine may map it too (the local fast path). `zero()` gives memory back to
the kernel (punching holes), which reads as zeros everywhere at once, even while mapped.
`renew_udma()` puts a new file behind ``udma`` between leases (the worker remaps it in
place), so a mapping kept by a former holder never sees the next one.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import mmap
import os
import secrets
import shutil
import tempfile
from pathlib import Path

from xrt.hwconfig import TargetConfig

__all__ = ["DeviceMemory", "remove_stale_dirs", "shm_root"]

log = logging.getLogger("npuemu.server")

_PREFIX = "npu-emu-"
_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


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
    """The memory files of one device, and the server's mapping of the host-visible one."""

    def __init__(self, folder: Path, device: str, target: TargetConfig) -> None:
        self.folder = folder
        self.device = device
        self.target = target
        self.files = {name: self._new_path(name) for name in ("udma", "plddr")}
        for name, path in self.files.items():
            self._create(path, target.memory(name).size)
        self.udma = target.memory("udma")
        self._map_udma()

    def _new_path(self, name: str) -> Path:
        # A fresh, unguessable name per lease: a former holder's path names nothing.
        return self.folder / f"{self.device}-{name}-{secrets.token_hex(8)}.bin"

    @staticmethod
    def _create(path: Path, size: int) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)

    def _map_udma(self) -> None:
        self._udma_file = self.files["udma"].open("r+b")
        self._udma_map = mmap.mmap(self._udma_file.fileno(), self.udma.size)
        self.udma_view = memoryview(self._udma_map)

    def renew_udma(self) -> tuple[Path, Path]:
        """Put a new (zero) file behind ``udma`` for the next lease; return (old, new).

        The server maps the new file at once; the caller has the worker remap it too, then
        calls `forget` on the old one. A mapping a former holder kept (the local fast path)
        stays on the old file, which no one writes any more: it never sees the next holder.
        """
        old, new = self.files["udma"], self._new_path("udma")
        self._create(new, self.udma.size)
        self._unmap_udma()
        self.files["udma"] = new
        self._map_udma()
        return old, new

    @staticmethod
    def forget(path: Path) -> None:
        """Unlink a file that no longer backs a memory (its last mappings keep it alive)."""
        path.unlink(missing_ok=True)

    def _unmap_udma(self) -> None:
        with contextlib.suppress(BufferError):
            self.udma_view.release()
            self._udma_map.close()
        self._udma_file.close()

    @property
    def plusargs(self) -> list[str]:
        return [f"+npu_mem_{name}={path}" for name, path in self.files.items()]

    def zero(self) -> None:
        """Make every byte of every memory read 0 (holes: no time, no RAM)."""
        for path in self.files.values():
            fd = os.open(path, os.O_RDWR)
            try:
                size = os.fstat(fd).st_size
                mode = _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE
                if _libc.fallocate(fd, mode, ctypes.c_long(0), ctypes.c_long(size)) != 0:
                    err = ctypes.get_errno()
                    log.warning("cannot punch %s (%s): writing zeros", path, os.strerror(err))
                    with os.fdopen(os.dup(fd), "r+b") as f, mmap.mmap(f.fileno(), size) as m:
                        m[:] = bytes(size)
            finally:
                os.close(fd)

    def close(self) -> None:
        self._unmap_udma()
        for path in self.files.values():
            path.unlink(missing_ok=True)
