"""Recordings of leases (``npu-emu serve --record DIR``): the folder of a recording server
(one writer per lease, its size budget). The format, the writer of one file and the reader
live in the runtime (`xrt.recording`, whose names this module re-exports for older imports):
the runtime writes the same format client-side for a board.

**Size policy.** A recording stops at its cap (``--record-max-mib``) with a truncated record
(and still gets its end record); when the folder holds more than `keep_bytes`, the oldest
finished recordings are deleted (a warning names them). Recordings still being written are
never deleted.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Protocol

from npuemu.server.leases import Lease
from xrt.hw.config import TargetConfig
from xrt.hw.targets import CLOCK_PERIOD_PS, HW_VERSION
from xrt.recording import (
    DEFAULT_MAX_MIB,
    FORMAT,
    INLINE_READ_BYTES,
    MAGIC,
    RECORDED_OPS,
    REPLY_FIELDS,
    SUFFIX,
    VERSION,
    Kind,
    Record,
    Recording,
    RecordingError,
    RecordingWriter,
    encode_record,
    lease_digest,
    read_recording,
    write_recording,
)


class _Model(Protocol):
    @property
    def digest(self) -> str: ...

    @property
    def waves(self) -> bool: ...


class RecordedDevice(Protocol):
    """What a recording needs of a device (`npuemu.server.devices.SimDevice`)."""

    name: str
    target: TargetConfig

    @property
    def model(self) -> _Model: ...


__all__ = [
    "DEFAULT_KEEP_MIB",
    "DEFAULT_MAX_MIB",
    "FORMAT",
    "INLINE_READ_BYTES",
    "MAGIC",
    "RECORDED_OPS",
    "REPLY_FIELDS",
    "SUFFIX",
    "VERSION",
    "Kind",
    "Record",
    "Recording",
    "RecordingError",
    "RecordingFolder",
    "RecordingWriter",
    "encode_record",
    "lease_digest",
    "read_recording",
    "write_recording",
]

log = logging.getLogger("npuemu.server")

DEFAULT_KEEP_MIB = 2048


class RecordingFolder:
    """The recordings of one server: one writer per lease, the folder's budget.

    Args:
        folder: Where recordings go (created 0700).
        max_bytes: The cap of one recording.
        keep_bytes: The folder's budget: past it the oldest finished recordings go.
    """

    def __init__(self, folder: Path, max_bytes: int, keep_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.keep_bytes = keep_bytes
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.writing: dict[Path, RecordingWriter] = {}
        if max_bytes > keep_bytes:
            log.warning(
                "a recording may reach %.0f MiB, more than the folder's budget of %.0f MiB",
                max_bytes / (1 << 20),
                keep_bytes / (1 << 20),
            )
        self.enforce_budget()

    def begin(self, device: RecordedDevice, lease: Lease) -> RecordingWriter | None:
        """Start the recording of `lease` on `device` (None, logged, if the file cannot be
        created: the lease goes on unrecorded)."""
        started = time.time()
        digest = lease_digest(lease.id)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started))
        path = self.folder / f"{stamp}-{device.name}-{digest[:8]}{SUFFIX}"
        header = {
            "format": FORMAT,
            "version": VERSION,
            "target": device.target.name,
            "target_id": device.target.id,
            "hw_version": ".".join(map(str, HW_VERSION)),
            "model": device.model.digest,
            "waves": device.model.waves,
            "device": device.name,
            "lease": digest,
            "holder": lease.holder,
            "started": started,
            "period_ps": CLOCK_PERIOD_PS,
            "max_bytes": self.max_bytes,
            "inline_read_bytes": INLINE_READ_BYTES,
        }
        try:
            writer = RecordingWriter(path, header, self.max_bytes, logger=log)
        except OSError as exc:
            log.error("cannot record the lease on %s (%s): it goes on unrecorded", device.name, exc)
            return None
        self.writing[path] = writer
        log.info("recording the lease of %s on %s to %s", lease.holder, device.name, path)
        return writer

    def finish(self, writer: RecordingWriter, reason: str) -> None:
        """End one recording, then keep the folder within its budget."""
        writer.finish(reason)
        self.writing.pop(writer.path, None)
        self.enforce_budget()

    def close_all(self, reason: str) -> None:
        """Server shutdown: end the recordings still being written."""
        for writer in list(self.writing.values()):
            self.finish(writer, reason)

    def enforce_budget(self) -> list[Path]:
        """Delete the oldest finished recordings while the folder holds more than its
        budget; return (and log) what was deleted."""
        files = []
        for path in self.folder.glob(f"*{SUFFIX}"):
            with contextlib.suppress(OSError):
                st = path.stat()
                files.append((st.st_mtime, path.name, path, st.st_size))
        total = sum(size for *_, size in files)
        deleted = []
        for _, _, path, size in sorted(files):
            if total <= self.keep_bytes:
                break
            if path in self.writing:
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            total -= size
            deleted.append(path)
        if deleted:
            log.warning(
                "recording folder %s was over its budget of %.0f MiB: deleted the oldest "
                "finished recording(s): %s",
                self.folder,
                self.keep_bytes / (1 << 20),
                ", ".join(p.name for p in deleted),
            )
        return deleted
