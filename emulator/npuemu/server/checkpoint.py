"""Device checkpoints: the file format, read as hostile input and written sealed.

A checkpoint is the whole state software can observe of one device at a quiescent point
(engines idle): the verilated model's state (every flop and SRAM: the CSRs, the cycle
counter, the DMA and compute engine with their buffers, the ZG330 OCM; Verilator's
``--savable`` serialisation), the configuration registers again in a portable form, and
the bytes of every memory behind the model (``udma``, ``plddr``: files the server shares
with the worker). Taking and applying one on a device: `npuemu.server.checkpoint_device`.

The file (format 2)::

    b"NPUCKPT2" | u32 header length | header (JSON) | sections | sha256 of all before it
    | seal (32 bytes)

The header names the target, the hardware version, the verilated model's digest (a model's
saved state fits only the same build of the same RTL), the cycle the model was saved at,
the key id of the seal (``""``: unsealed) and the sections in order, each with its codec
(``zlib`` where it paid, else ``raw``), stored and decoded sizes:

- ``model``: the model's state;
- ``regs``: the configuration registers (`xrt.hw.regs.configuration_registers`), as
  (u64 physical address, u32 value) pairs: what a checkpoint carried to another server
  restores without the model state (`Checkpoint.authenticate`, docs/emulator.md);
- ``mem:NAME``: the memory's non-zero 4 KiB pages (u32 page numbers, then the pages): zero
  pages, most of a sparse 512 MiB ``plddr``, cost nothing.

The seal is HMAC-SHA256, under the key of the server that took the file, of its sha256
digest (`npuemu.server.checkpoint_seal`); 32 zero bytes when unsealed. Format 1 files
(``NPUCKPT1``: no seal, no registers) are still read, as unsealed.

`Checkpoint.parse` checks everything before it allocates or inflates anything by a size
the file states: magic, checksum, header (its size, its JSON nesting, every field's type),
the target it names (a known one), every section's name, codec and sizes against what that
target allows (`Limits`), then one pass over every section (zlib streams inflated a step at
a time, never past their stated size; page numbers in order and in range; registers of the
target). A corrupt, truncated, oversized or foreign file is refused whole, naming the field.
Memory pages are never kept decoded: `MemoryImage.blocks` inflates them again, a step at a
time, when they are written to a device.
"""

from __future__ import annotations

import hashlib
import json
import struct
import time
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npuemu.server.checkpoint_header import (
    FORMAT,
    MAGIC,
    MAX_HEADER,
    CheckpointError,
    format_of,
    parse_header,
)
from npuemu.server.checkpoint_seal import SEAL_BYTES, SealKey
from xrt.hw.config import TargetConfig
from xrt.hw.regs import DMA, NPU, configuration_registers
from xrt.hw.targets import HW_VERSION, TARGETS, target

__all__ = [
    "FORMAT",
    "MAGIC",
    "MAX_FILE_BYTES",
    "PAGE",
    "REG_DTYPE",
    "Checkpoint",
    "CheckpointError",
    "Limits",
    "MemoryImage",
    "max_file_bytes",
]

PAGE = 4096
_LEN = struct.Struct("<I")
_DIGEST = 32
MAX_MODEL_STATE = 64 << 20  # with no model to ask: the largest state any build saves
_STEP = 1 << 20  # bytes inflated (and read from the file) at a time
# zlib is kept for a section only when it saves this share or more (random data does not
# compress: its time is not spent twice).
_ZLIB_MIN_SAVING = 0.10
_PROBE = 1 << 20  # bytes compressed first to decide
_NO_SEAL = bytes(SEAL_BYTES)

REG_DTYPE = np.dtype([("addr", "<u8"), ("value", "<u4")])
"""One configuration register of the ``regs`` section: physical address, value."""


@dataclass(frozen=True)
class Limits:
    """What a checkpoint of one target may hold: every size in a file is checked against
    these before anything is allocated or inflated."""

    target: str
    memories: Mapping[str, int]  # memories kept in files (not the OCM: it is in the model)
    registers: frozenset[int]  # physical addresses of the configuration registers
    model_state_bytes: int  # the largest model state

    @classmethod
    def for_target(cls, cfg: TargetConfig, model_state_bytes: int = MAX_MODEL_STATE) -> Limits:
        regs = frozenset(
            base + reg.offset
            for base, block in ((cfg.npu_base, NPU), (cfg.dma_base, DMA))
            for reg in configuration_registers(block)
        )
        files = {m.name: m.size for m in cfg.memories if m.name != "ocm"}
        return cls(cfg.name, files, regs, model_state_bytes)

    def max_file_bytes(self) -> int:
        """The largest file: every page touched and stored raw, every section at its
        largest, the header and the trailer."""
        pages = sum(self.memories.values()) // PAGE
        regs = len(self.registers) * REG_DTYPE.itemsize
        return pages * (PAGE + 4) + self.model_state_bytes + regs + MAX_HEADER + 4096


def max_file_bytes(cfg: TargetConfig) -> int:
    """The largest checkpoint file a device of `cfg` can have."""
    return Limits.for_target(cfg).max_file_bytes()


MAX_FILE_BYTES = max(max_file_bytes(cfg) for cfg in TARGETS.values())
"""The largest checkpoint file of any target (a reader with no server to ask)."""


@dataclass(frozen=True)
class _Stored:
    """A section as the file stores it; decoded a step at a time, never past `size`."""

    name: str
    codec: str
    size: int
    data: memoryview

    def chunks(self) -> Iterator[bytes | memoryview]:
        """The decoded bytes in steps of at most `_STEP`.

        Raises:
            CheckpointError: the stream is cut, longer than `size`, or not zlib.
        """
        if self.codec == "raw":
            if len(self.data) != self.size:
                raise CheckpointError(
                    f"section {self.name!r}: {len(self.data)} bytes stored raw where the "
                    f"header says {self.size}"
                )
            for pos in range(0, self.size, _STEP):
                yield self.data[pos : pos + _STEP]
            return
        d = zlib.decompressobj()
        produced = 0
        try:
            for pos in range(0, len(self.data), _STEP):
                pending: bytes | memoryview = self.data[pos : pos + _STEP]
                while pending and not d.eof:
                    out = d.decompress(pending, _STEP)
                    produced += len(out)
                    if produced > self.size:
                        raise CheckpointError(
                            f"section {self.name!r}: its zlib stream inflates past the "
                            f"{self.size} bytes the header says"
                        )
                    if out:
                        yield out
                    pending = d.unconsumed_tail
                if d.eof:
                    break
            rest = d.flush()  # what the last step held back (at most zlib's window)
        except zlib.error as exc:
            raise CheckpointError(
                f"section {self.name!r}: its zlib stream is corrupt: {exc}"
            ) from None
        produced += len(rest)
        if produced > self.size:
            raise CheckpointError(f"section {self.name!r}: inflates past {self.size} bytes")
        if rest:
            yield rest
        if not d.eof or d.unused_data or produced != self.size:
            raise CheckpointError(
                f"section {self.name!r}: its zlib stream is cut or too long "
                f"({produced} bytes where the header says {self.size})"
            )

    def read(self) -> bytes:
        """All of it (small sections only: the model state, the registers)."""
        return b"".join(bytes(c) for c in self.chunks())


@dataclass
class MemoryImage:
    """The non-zero pages of one memory: sorted page numbers, and their bytes, either held
    (`data`: a checkpoint taken here) or in a file's section (`source`, inflated on use)."""

    name: str
    size: int
    pages: np.ndarray  # uint32 page numbers, ascending
    data: bytes | None = None
    source: _Stored | None = None

    def touched_bytes(self) -> int:
        return len(self.pages) * PAGE

    def blocks(self, pages_per_block: int = 256) -> Iterator[tuple[np.ndarray, memoryview]]:
        """(page numbers, their bytes) in order, `pages_per_block` pages at a time."""
        if self.data is not None:
            view = memoryview(self.data)
            for i in range(0, len(self.pages), pages_per_block):
                yield (
                    self.pages[i : i + pages_per_block],
                    view[i * PAGE : (i + pages_per_block) * PAGE],
                )
            return
        assert self.source is not None
        skip = 4 * len(self.pages)  # the page numbers, ahead of the pages
        block = bytearray()
        done = 0
        for chunk in self.source.chunks():
            chunk = memoryview(chunk)
            if skip:
                cut = min(skip, len(chunk))
                chunk, skip = chunk[cut:], skip - cut
            block += chunk
            while len(block) >= pages_per_block * PAGE:
                yield (
                    self.pages[done : done + pages_per_block],
                    memoryview(bytes(block[: pages_per_block * PAGE])),
                )
                del block[: pages_per_block * PAGE]
                done += pages_per_block
        if block:
            yield self.pages[done:], memoryview(bytes(block))

    def same_bytes(self, other: MemoryImage) -> bool:
        if not np.array_equal(self.pages, other.pages):
            return False
        return all(
            bytes(a[1]) == bytes(b[1]) for a, b in zip(self.blocks(), other.blocks(), strict=True)
        )


@dataclass
class Checkpoint:
    """A device's state: the model's saved state, the configuration registers and the
    memories' non-zero pages; for a parsed file also its digest and seal."""

    target: str
    model_digest: str
    cycle: int
    model_state: bytes
    memories: list[MemoryImage]
    registers: np.ndarray = field(default_factory=lambda: np.zeros(0, REG_DTYPE))
    hw_version: str = ".".join(map(str, HW_VERSION))
    device: str = ""
    created: float = field(default_factory=time.time)
    seal_key_id: str = ""  # the key id the file names ("": unsealed)
    seal: bytes = _NO_SEAL
    digest: bytes = b""  # sha256 of the parsed file's body
    format: int = FORMAT

    # ------------------------------------------------------------------ writing
    def to_bytes(self, key: SealKey | None = None) -> bytes:
        """The file's bytes, sealed with `key` (None: unsealed)."""
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
                "seal_key": key.key_id if key is not None else "",
                "sections": sections,
            },
            sort_keys=True,
        ).encode()
        body = b"".join([MAGIC, _LEN.pack(len(header)), header, *payloads])
        digest = hashlib.sha256(body).digest()
        return body + digest + (key.seal(digest) if key is not None else _NO_SEAL)

    def _raw_sections(self) -> list[tuple[str, bytes, dict[str, Any]]]:
        out: list[tuple[str, bytes, dict[str, Any]]] = [("model", self.model_state, {})]
        regs = np.asarray(self.registers, REG_DTYPE)
        out.append(("regs", regs.tobytes(), {"count": len(regs)}))
        for m in self.memories:
            data = b"".join(bytes(b) for _, b in m.blocks())
            raw = m.pages.astype("<u4").tobytes() + data
            out.append((f"mem:{m.name}", raw, {"memory_size": m.size, "pages": len(m.pages)}))
        return out

    # ------------------------------------------------------------------ reading
    @classmethod
    def parse(
        cls, data: bytes | bytearray | memoryview, limits: Limits | None = None
    ) -> Checkpoint:
        """Check and decode a checkpoint file's bytes (kept referenced: memory pages are
        inflated from them on use).

        Args:
            data: The file.
            limits: What the file may hold; None: what the target it names allows, with
                any model state up to `MAX_MODEL_STATE`.

        Raises:
            CheckpointError: not a checkpoint, corrupt, truncated or oversized (the message
                names the field).
        """
        data = memoryview(data).cast("B")
        fmt = format_of(data)
        trailer = _DIGEST + (SEAL_BYTES if fmt >= 2 else 0)
        if len(data) < len(MAGIC) + _LEN.size + trailer:
            raise CheckpointError(f"the checkpoint is truncated ({len(data)} bytes)")
        body_end = len(data) - trailer
        digest = hashlib.sha256(data[:body_end]).digest()
        if digest != bytes(data[body_end : body_end + _DIGEST]):
            raise CheckpointError(
                "the checkpoint is corrupt or truncated: its sha256 does not match "
                f"({len(data)} bytes)"
            )
        (hlen,) = _LEN.unpack_from(data, len(MAGIC))
        start = len(MAGIC) + _LEN.size
        if hlen > MAX_HEADER or start + hlen > body_end:
            raise CheckpointError(
                f"the checkpoint's header length {hlen} is impossible (at most {MAX_HEADER})"
            )
        head = parse_header(bytes(data[start : start + hlen]), fmt)
        if limits is None:
            limits = Limits.for_target(target(head["target"]))
        elif head["target"] != limits.target:
            raise CheckpointError(
                f"the checkpoint is of a {head['target']} device; this device is {limits.target}"
            )
        ckpt = cls(
            target=head["target"],
            model_digest=head["model"],
            cycle=head["cycle"],
            model_state=b"",
            memories=[],
            hw_version=head["hw_version"],
            device=head["device"],
            created=head["created"],
            seal_key_id=head["seal_key"],
            seal=bytes(data[body_end + _DIGEST :]) if fmt >= 2 else _NO_SEAL,
            digest=digest,
            format=fmt,
        )
        ckpt._read_sections(head["sections"], data[start + hlen : body_end], limits)
        return ckpt

    def _read_sections(self, sections: list[dict[str, Any]], body: memoryview, lim: Limits) -> None:
        pos = 0
        seen: set[str] = set()
        for sec in sections:
            name = sec["name"]
            if name in seen:
                raise CheckpointError(f"section {name!r} appears twice")
            seen.add(name)
            stored = _Stored(name, sec["codec"], sec["size"], body[pos : pos + sec["stored"]])
            if pos + sec["stored"] > len(body):
                raise CheckpointError(f"section {name!r} runs past the file's end")
            pos += sec["stored"]
            if name == "model":
                if not 0 < stored.size <= lim.model_state_bytes:
                    raise CheckpointError(
                        f"section 'model': {stored.size} bytes; this model's state is at most "
                        f"{lim.model_state_bytes}"
                    )
                self.model_state = stored.read()
            elif name == "regs":
                self.registers = _registers(sec, stored, lim)
            elif name.startswith("mem:"):
                self.memories.append(_memory(sec, stored, lim))
            else:
                raise CheckpointError(f"unknown section {name!r}")
        if pos != len(body):
            raise CheckpointError(f"{len(body) - pos} bytes after the last section")
        if not self.model_state:
            raise CheckpointError("the checkpoint has no model state")

    # ------------------------------------------------------------------ using
    def authenticate(self, key: SealKey) -> str | None:
        """None when `key` sealed this file (its model state is the server's own), else
        why not, in words."""
        if self.format < 2 or not self.seal_key_id:
            return "is not sealed (taken by another tool or an older npu-emu)"
        if self.seal_key_id != key.key_id:
            return (
                f"is sealed by another server's key (key id {self.seal_key_id}; this "
                f"server's is {key.key_id})"
            )
        if not key.verifies(self.digest, self.seal):
            return "has a seal that does not match its contents (the file was changed)"
        return None

    def check_portable(self, cfg: TargetConfig) -> None:
        """Refuse a checkpoint whose memories do not fit a device of `cfg`."""
        if self.target != cfg.name:
            raise CheckpointError(
                f"the checkpoint is of a {self.target} device; this device is {cfg.name}"
            )
        for m in self.memories:
            size = cfg.memory(m.name).size if cfg.has_memory(m.name) else None
            if size != m.size:
                raise CheckpointError(
                    f"the checkpoint's memory {m.name} is {m.size} bytes; this device's is {size}"
                )

    def check_fits(self, cfg: TargetConfig, model_digest: str) -> None:
        """Refuse a checkpoint of another target, hardware version or model build (the
        saved state of one verilated build means nothing to another)."""
        self.check_portable(cfg)
        here = ".".join(map(str, HW_VERSION))
        if self.hw_version != here:
            raise CheckpointError(
                f"the checkpoint is of hardware version {self.hw_version}; this device is {here}"
            )
        if self.model_digest != model_digest:
            raise CheckpointError(
                f"the checkpoint was taken on model build {self.model_digest}; this device "
                f"runs build {model_digest} (another RTL or tool version: take a new one)"
            )

    def same_state(self, other: Checkpoint) -> str | None:
        """None when `other` holds the same device state (model state, registers and every
        memory's pages; names, times and cycles aside), else what differs first."""
        if self.model_state != other.model_state:
            a, b = self.model_state, other.model_state
            at = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            return f"the model's state (byte {at} of {len(a)})"
        if not np.array_equal(self.registers, other.registers):
            return "the configuration registers"
        mine = {m.name: m for m in self.memories}
        for m in other.memories:
            own = mine.pop(m.name, None)
            if own is None or not own.same_bytes(m):
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
            # Readable, and unambiguous across machines (the raw epoch is kept beside it)
            "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.created)),
            "created_epoch": self.created,
            "sealed_by": self.seal_key_id or None,
            "model_state_bytes": len(self.model_state),
            "registers": len(self.registers),
            "memories": {
                m.name: {"size": m.size, "touched": m.touched_bytes()} for m in self.memories
            },
        }


# ---------------------------------------------------------------------- the sections
def _registers(sec: dict[str, Any], stored: _Stored, lim: Limits) -> np.ndarray:
    count = sec.get("count", -1)
    if not 0 <= count <= len(lim.registers) or stored.size != count * REG_DTYPE.itemsize:
        raise CheckpointError(
            f"section 'regs': {count} registers in {stored.size} bytes (this target has "
            f"{len(lim.registers)} configuration registers)"
        )
    regs = np.frombuffer(stored.read(), REG_DTYPE).copy()
    bad = [int(a) for a in regs["addr"] if int(a) not in lim.registers]
    if bad:
        raise CheckpointError(
            f"section 'regs': {bad[0]:#x} is not a configuration register of this target"
        )
    if len(np.unique(regs["addr"])) != len(regs):
        raise CheckpointError("section 'regs': a register appears twice")
    return regs


def _memory(sec: dict[str, Any], stored: _Stored, lim: Limits) -> MemoryImage:
    name = sec["name"][4:]
    if name not in lim.memories:
        raise CheckpointError(
            f"memory section {name[:40]!r}: this target's memories are {', '.join(lim.memories)}"
        )
    size, count = sec.get("memory_size", -1), sec.get("pages", -1)
    if size != lim.memories[name]:
        raise CheckpointError(
            f"memory section {name!r}: memory_size {size}; this target's {name} is "
            f"{lim.memories[name]} bytes"
        )
    if not 0 <= count <= size // PAGE or stored.size != count * (4 + PAGE):
        raise CheckpointError(
            f"memory section {name!r}: {count} pages do not fit {stored.size} bytes "
            f"(at most {size // PAGE} pages)"
        )
    index = bytearray()
    total = 0
    for chunk in stored.chunks():  # the one pass: sizes, stream, and the page numbers
        total += len(chunk)
        if len(index) < 4 * count:
            index += bytes(chunk[: 4 * count - len(index)])
    pages = np.frombuffer(bytes(index), "<u4").astype(np.uint32)
    if count and (pages[-1] >= size // PAGE or np.any(np.diff(pages.astype(np.int64)) <= 0)):
        raise CheckpointError(f"memory section {name!r}: page numbers out of order or range")
    return MemoryImage(name, size, pages, None, stored)


def _encode(raw: bytes) -> tuple[str, bytes]:
    probe = raw[:_PROBE]
    if len(probe) >= 256 and len(zlib.compress(probe, 1)) > len(probe) * (1 - _ZLIB_MIN_SAVING):
        return "raw", raw
    packed = zlib.compress(raw, 1)
    return ("zlib", packed) if len(packed) <= len(raw) * (1 - _ZLIB_MIN_SAVING) else ("raw", raw)
