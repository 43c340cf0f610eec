"""Device checkpoints: the file format, and taking or applying one on a simulated device.

A checkpoint is the whole state software can observe of one device at a quiescent point
(engines idle): the verilated model's state (every flop and SRAM: the CSRs, the cycle
counter, the DMA and compute engine with their buffers, the ZG330 OCM; Verilator's
``--savable`` serialisation) and the bytes of every memory behind the model (``udma``,
``plddr``: files the server shares with the worker).

The file::

    b"NPUCKPT1" | u32 header length | header (JSON) | sections | sha256 of all before it

The header names the target, the hardware version and the verilated model's digest (a
model's saved state fits only the same build of the same RTL: anything else is refused,
naming the mismatch), the cycle the model was saved at, and the sections in order, each
with its codec (``zlib`` where it paid, else ``raw``), stored and decoded sizes. A
memory section is a list of the memory's non-zero 4 KiB pages (u32 page numbers, then the
pages): zero pages, most of a sparse 512 MiB ``plddr``, cost nothing. `Checkpoint.parse`
checks everything (magic, checksum, format, sizes, page numbers, codecs) before anything
is changed: a corrupt, truncated or foreign file is refused whole.
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import json
import mmap
import os
import secrets
import struct
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from npuemu.worker.protocol import Op
from xrt.hw.config import TargetConfig
from xrt.hw.targets import HW_VERSION


class _Memory(Protocol):
    fds: dict[str, int]


class _Model(Protocol):
    digest: str


class SimDevice(Protocol):
    """What a checkpoint needs of a device (`npuemu.server.devices.SimDevice`)."""

    name: str
    target: TargetConfig
    model: _Model
    memory: _Memory
    folder: Path


__all__ = [
    "FORMAT",
    "MAGIC",
    "PAGE",
    "Checkpoint",
    "CheckpointError",
    "MemoryImage",
    "apply",
    "max_file_bytes",
    "memory_image",
    "take",
    "write_memory_image",
]

MAGIC = b"NPUCKPT1"
FORMAT = 1
PAGE = 4096
_LEN = struct.Struct("<I")
_DIGEST = 32
MAX_HEADER = 1 << 20
# zlib is kept for a section only when it saves this share or more (random data does not
# compress: its time is not spent twice).
_ZLIB_MIN_SAVING = 0.10
_PROBE = 1 << 20  # bytes compressed first to decide
_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used here: corrupt, truncated, or for another
    target, hardware version or model (the message names which)."""


@dataclass
class MemoryImage:
    """The non-zero pages of one memory: sorted page numbers and their bytes."""

    name: str
    size: int
    pages: np.ndarray  # uint32 page numbers, ascending
    data: bytes  # len(pages) * PAGE bytes

    def touched_bytes(self) -> int:
        return len(self.pages) * PAGE


def memory_image(name: str, fd: int, size: int) -> MemoryImage:
    """Read the non-zero pages of the memory file `fd` (`size` bytes). Holes (never
    written pages of a sparse file) are skipped without reading them (SEEK_DATA)."""
    pages: list[np.ndarray] = []
    chunks: list[bytes] = []
    with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mm:
        for start, end in _data_extents(fd, size):
            first, last = start // PAGE, -(-end // PAGE)
            block = np.frombuffer(mm, np.uint8, (last - first) * PAGE, first * PAGE)
            nonzero = np.flatnonzero(block.view(np.uint64).reshape(-1, PAGE // 8).any(axis=1))
            if len(nonzero):
                pages.append((nonzero + first).astype(np.uint32))
                chunks.append(block.reshape(-1, PAGE)[nonzero].tobytes())
            del block  # no export of the mapping may outlive it
    index = np.concatenate(pages) if pages else np.zeros(0, np.uint32)
    return MemoryImage(name, size, index, b"".join(chunks))


def _data_extents(fd: int, size: int) -> list[tuple[int, int]]:
    """Page-aligned (start, end) spans of `fd` that may hold data (all of it where the
    file system cannot tell holes)."""
    spans = []
    pos = 0
    try:
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: no data after pos
                break
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            start -= start % PAGE
            spans.append((start, end))
            pos = end
    except (AttributeError, OSError):
        return [(0, size)]
    return spans


def write_memory_image(fd: int, image: MemoryImage) -> None:
    """Make the memory file `fd` hold exactly `image`: every page zero (the file's blocks
    freed), then the image's pages written."""
    _zero_file(fd, image.size)
    if not len(image.pages):
        return
    with mmap.mmap(fd, image.size) as mm:
        view = np.frombuffer(mm, dtype=np.uint8).reshape(-1, PAGE)
        view[image.pages.astype(np.int64)] = np.frombuffer(image.data, np.uint8).reshape(-1, PAGE)
        del view


def _zero_file(fd: int, size: int) -> None:
    """Zero the file and free its blocks: punch one hole over all of it (the size stays),
    or, where the file system cannot, cut it to nothing and grow it back."""
    libc = ctypes.CDLL(None, use_errno=True)
    punch = _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE
    if libc.fallocate(fd, punch, ctypes.c_long(0), ctypes.c_long(size)) == 0:
        return
    os.ftruncate(fd, 0)
    os.ftruncate(fd, size)


@dataclass
class Checkpoint:
    """A device's state: the model's saved state and the memories' non-zero pages."""

    target: str
    model_digest: str
    cycle: int
    model_state: bytes
    memories: list[MemoryImage]
    hw_version: str = ".".join(map(str, HW_VERSION))
    device: str = ""
    created: float = field(default_factory=time.time)

    # ------------------------------------------------------------------ writing
    def to_bytes(self) -> bytes:
        """The file's bytes."""
        sections: list[dict[str, Any]] = []
        payloads: list[bytes] = []
        for name, raw, extra in self._raw_sections():
            codec, stored = _encode(raw)
            sections.append(
                {"name": name, "codec": codec, "stored": len(stored), "size": len(raw), **extra}
            )
            payloads.append(stored)
        header = json.dumps(
            {
                "format": FORMAT,
                "target": self.target,
                "hw_version": self.hw_version,
                "model": self.model_digest,
                "cycle": self.cycle,
                "device": self.device,
                "created": self.created,
                "sections": sections,
            },
            sort_keys=True,
        ).encode()
        body = b"".join([MAGIC, _LEN.pack(len(header)), header, *payloads])
        return body + hashlib.sha256(body).digest()

    def _raw_sections(self) -> list[tuple[str, bytes, dict[str, Any]]]:
        out: list[tuple[str, bytes, dict[str, Any]]] = [("model", self.model_state, {})]
        for m in self.memories:
            raw = m.pages.astype("<u4").tobytes() + m.data
            out.append((f"mem:{m.name}", raw, {"memory_size": m.size, "pages": len(m.pages)}))
        return out

    # ------------------------------------------------------------------ reading
    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview) -> Checkpoint:
        """Check and decode a checkpoint file's bytes.

        Raises:
            CheckpointError: not a checkpoint, corrupt or truncated (the message says where).
        """
        data = memoryview(data)
        if len(data) < len(MAGIC) + _LEN.size + _DIGEST or bytes(data[: len(MAGIC)]) != MAGIC:
            raise CheckpointError("not a device checkpoint (no NPUCKPT1 magic at its start)")
        if hashlib.sha256(data[:-_DIGEST]).digest() != bytes(data[-_DIGEST:]):
            raise CheckpointError(
                "the checkpoint is corrupt or truncated: its sha256 does not match "
                f"({len(data)} bytes)"
            )
        (hlen,) = _LEN.unpack_from(data, len(MAGIC))
        start = len(MAGIC) + _LEN.size
        if hlen > MAX_HEADER or start + hlen > len(data) - _DIGEST:
            raise CheckpointError(f"the checkpoint's header length {hlen} is impossible")
        try:
            head = json.loads(bytes(data[start : start + hlen]))
        except ValueError as exc:
            raise CheckpointError(f"the checkpoint's header is not JSON: {exc}") from None
        if not isinstance(head, dict) or head.get("format") != FORMAT:
            got = head.get("format") if isinstance(head, dict) else None
            raise CheckpointError(f"checkpoint format {got!r}; this server reads format {FORMAT}")
        try:
            return cls._decode(head, data[start + hlen : len(data) - _DIGEST])
        except (KeyError, TypeError, ValueError, zlib.error) as exc:
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"the checkpoint's sections are malformed: {exc}") from None

    @classmethod
    def _decode(cls, head: dict[str, Any], body: memoryview) -> Checkpoint:
        pos = 0
        model_state = b""
        memories: list[MemoryImage] = []
        for sec in head["sections"]:
            stored = int(sec["stored"])
            if stored < 0 or pos + stored > len(body):
                raise CheckpointError(f"section {sec.get('name')!r} runs past the file's end")
            raw = _decode(sec["codec"], body[pos : pos + stored], int(sec["size"]), sec["name"])
            pos += stored
            if sec["name"] == "model":
                model_state = raw
                continue
            if not str(sec["name"]).startswith("mem:"):
                raise CheckpointError(f"unknown section {sec['name']!r}")
            memories.append(_memory_section(sec, raw))
        if pos != len(body):
            raise CheckpointError(f"{len(body) - pos} bytes after the last section")
        if not model_state:
            raise CheckpointError("the checkpoint has no model state")
        return cls(
            target=str(head["target"]),
            model_digest=str(head["model"]),
            cycle=int(head["cycle"]),
            model_state=model_state,
            memories=memories,
            hw_version=str(head["hw_version"]),
            device=str(head.get("device", "")),
            created=float(head.get("created", 0.0)),
        )

    def check_fits(self, target: TargetConfig, model_digest: str) -> None:
        """Refuse a checkpoint of another target, hardware version or model build (the
        saved state of one verilated build means nothing to another)."""
        here = ".".join(map(str, HW_VERSION))
        if self.target != target.name:
            raise CheckpointError(
                f"the checkpoint is of a {self.target} device; this device is {target.name}"
            )
        if self.hw_version != here:
            raise CheckpointError(
                f"the checkpoint is of hardware version {self.hw_version}; this device is {here}"
            )
        if self.model_digest != model_digest:
            raise CheckpointError(
                f"the checkpoint was taken on model build {self.model_digest}; this device "
                f"runs build {model_digest} (another RTL or tool version: take a new one)"
            )
        for m in self.memories:
            size = target.memory(m.name).size if _has_memory(target, m.name) else None
            if size != m.size:
                raise CheckpointError(
                    f"the checkpoint's memory {m.name} is {m.size} bytes; this device's is {size}"
                )

    def same_state(self, other: Checkpoint) -> str | None:
        """None when `other` holds the same device state (model state and every memory's
        pages; names, times and cycles aside), else what differs first."""
        if self.model_state != other.model_state:
            a, b = self.model_state, other.model_state
            at = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            return f"the model's state (byte {at} of {len(a)})"
        mine = {m.name: m for m in self.memories}
        for m in other.memories:
            own = mine.pop(m.name, None)
            if own is None or not np.array_equal(own.pages, m.pages) or own.data != m.data:
                return f"memory {m.name}"
        if mine:
            return f"memory {next(iter(mine))}"
        return None

    def summary(self) -> dict[str, Any]:
        """What `npu-emu checkpoint info` prints."""
        return {
            "target": self.target,
            "hw_version": self.hw_version,
            "model": self.model_digest,
            "device": self.device,
            "cycle": self.cycle,
            "created": self.created,
            "model_state_bytes": len(self.model_state),
            "memories": {
                m.name: {"size": m.size, "touched": m.touched_bytes()} for m in self.memories
            },
        }


def max_file_bytes(target: TargetConfig) -> int:
    """The largest checkpoint file a device of `target` can have (every page touched, a
    page number each, stored raw), plus room for the model's state."""
    pages = sum(m.size for m in target.memories if m.name != "ocm") // PAGE
    return pages * (PAGE + 4) + (64 << 20)


def _has_memory(target: TargetConfig, name: str) -> bool:
    return any(m.name == name for m in target.memories)


def _memory_section(sec: dict[str, Any], raw: bytes) -> MemoryImage:
    name = str(sec["name"])[4:]
    size, count = int(sec["memory_size"]), int(sec["pages"])
    if size <= 0 or size % PAGE or count < 0 or len(raw) != count * (4 + PAGE):
        raise CheckpointError(f"memory section {name!r}: {count} pages do not fit {len(raw)} bytes")
    pages = np.frombuffer(raw, dtype="<u4", count=count).astype(np.uint32)
    if count and (pages[-1] >= size // PAGE or np.any(np.diff(pages.astype(np.int64)) <= 0)):
        raise CheckpointError(f"memory section {name!r}: page numbers out of order or range")
    return MemoryImage(name, size, pages, raw[4 * count :])


def _encode(raw: bytes) -> tuple[str, bytes]:
    probe = raw[:_PROBE]
    if len(probe) >= 256 and len(zlib.compress(probe, 1)) > len(probe) * (1 - _ZLIB_MIN_SAVING):
        return "raw", raw
    packed = zlib.compress(raw, 1)
    return ("zlib", packed) if len(packed) <= len(raw) * (1 - _ZLIB_MIN_SAVING) else ("raw", raw)


def _decode(codec: str, stored: memoryview, size: int, name: str) -> bytes:
    if codec == "raw":
        raw = bytes(stored)
    elif codec == "zlib":
        d = zlib.decompressobj()
        raw = d.decompress(stored, size + 1)
        if not d.eof:
            raise CheckpointError(f"section {name!r}: its zlib stream is cut or too long")
    else:
        raise CheckpointError(f"section {name!r}: unknown codec {codec!r}")
    if len(raw) != size:
        raise CheckpointError(f"section {name!r}: {len(raw)} bytes where the header says {size}")
    return raw


# ---------------------------------------------------------------------- on a device
WorkerCall = Callable[..., Awaitable[dict[str, Any]]]


async def take(
    device: SimDevice, call: WorkerCall, wait_cycles: int = 0
) -> tuple[Checkpoint, dict[str, Any]]:
    """Take `device`'s checkpoint: the worker saves the model's state (engines idle, or it
    waits up to `wait_cycles` for them), then the memories are read here. `call` is how
    worker requests go (the lease holder's `SimDevice.call`, bound to its lease). Returns
    the checkpoint and the worker's reply (its cycle and instant: a recording keeps them)."""
    path = _state_path(device)
    try:
        reply = await call(Op.MODEL_SAVE, path=str(path), max_cycles=wait_cycles)
        state = path.read_bytes()
    finally:
        path.unlink(missing_ok=True)
    fds = _own_fds(device)

    def read() -> list[MemoryImage]:
        try:
            return [memory_image(name, fd, size) for name, (fd, size) in fds.items()]
        finally:
            _close(fds)

    taken = Checkpoint(
        target=device.target.name,
        model_digest=device.model.digest,
        cycle=int(reply["cycles"]),
        model_state=state,
        memories=await asyncio.to_thread(read),
        device=device.name,
    )
    return taken, reply


async def apply(device: SimDevice, checkpoint: Checkpoint, call: WorkerCall) -> dict[str, Any]:
    """Put `checkpoint` into `device`: the worker restores the model's state, then every
    memory file is made to hold the checkpoint's pages (memories it lacks are zeroed).
    Returns the worker's reply (the cycle and instant it restored at). Checks that the
    checkpoint fits first: a refused one changes nothing."""
    checkpoint.check_fits(device.target, device.model.digest)
    path = _state_path(device)
    try:
        path.write_bytes(checkpoint.model_state)
        reply = await call(Op.MODEL_RESTORE, path=str(path), max_cycles=0)
    finally:
        path.unlink(missing_ok=True)
    images = {m.name: m for m in checkpoint.memories}
    fds = _own_fds(device)

    def write() -> None:
        try:
            for name, (fd, size) in fds.items():
                empty = MemoryImage(name, size, np.zeros(0, np.uint32), b"")
                write_memory_image(fd, images.get(name, empty))
        finally:
            _close(fds)

    await asyncio.to_thread(write)
    return reply


def _own_fds(device: SimDevice) -> dict[str, tuple[int, int]]:
    """Duplicates of the device's memory files (and their sizes), taken with no await
    since the worker's reply: the files of the lease that asked. Should that lease end
    while a thread reads or writes them, the server renews the device's files and closes
    its own descriptors; these keep pointing at the old files, never at a number the next
    lease's files reuse."""
    return {
        name: (os.dup(fd), device.target.memory(name).size)
        for name, fd in device.memory.fds.items()
    }


def _close(fds: dict[str, tuple[int, int]]) -> None:
    for fd, _ in fds.values():
        os.close(fd)


def _state_path(device: SimDevice) -> Path:
    """A fresh file name for the model's state, in the server's private folder."""
    return device.folder / f"{device.name}-state-{secrets.token_hex(8)}.vlsave"
