"""Client-side recording of a device session (``axi://BOARD?...&record=FILE``): a board has
no device server to record it, so the runtime does, in the format ``npu-emu replay`` reads
(`xrt.recording`).

`RecordingTransport` wraps a transport. Every register access, poll, interrupt wait, reset
and host-visible memory access the device classes make through it is written, in order,
with its result (`SessionRecorder`):

- single reads and writes (``RegRegion.read``/``write``): ``read_reg``/``write_reg``
  requests; a batch (``execute``, a masked write): one ``batch`` request per run of ops
  between polls, its rows and results as a device server gives them (a masked write's
  result is the value written);
- a poll-until (``RegPoll``: the DMA's ``STATUS.BUSY = 0``, ``region.poll``): one ``poll``
  record (address, mask, expected, its limits, how many reads it made, the last value,
  whether it matched), however many thousand reads the loop made;
- ``wait_irq``: a ``wait_irq`` request (its limits, INTERRUPT or DEADLINE, the wall seconds
  it waited);
- host-visible memory (``udma``): ``memory_write`` with the bytes, ``memory_read`` with the
  bytes (or their SHA-256 past `xrt.recording.INLINE_READ_BYTES`).

Times are wall-clock (the header says ``clock: "wall"``): each record carries ``w``, seconds
from the start of the recording; ``t`` and ``c`` (simulated instants and cycles) are None.

How it runs the device. Register batches and polls run as a board runs them: one 32-bit
access at a time, polls as a loop of reads on the host (`xrt.registers.RegRegion`'s
default), whatever the inner transport would do instead (that is also how a test makes a
board-like session out of the emulator's ``grpc://`` transport). Host-visible memory is
offered without a host mapping, so every byte the host moves passes through the recorder
(no zero-copy views while recording). Records are written as each access completes; the
recorder is thread-safe, and accesses of several threads are recorded in the order they
completed.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xrt.device import DeviceURL
from xrt.errors import ErrorCode, XrtError
from xrt.hw.regmap import RegisterBlockInfo
from xrt.hw.regops import RegMaskedWrite, RegOp, RegPoll, RegRead, RegWrite, to_row
from xrt.hw.targets import target as target_config
from xrt.hw.wire import RegisterStatus, WaitOutcome
from xrt.recording import (
    CLOCK_WALL,
    DEFAULT_MAX_MIB,
    FORMAT,
    INLINE_READ_BYTES,
    ORIGIN_CLIENT,
    VERSION,
    Kind,
    RecordingWriter,
)
from xrt.recording_schema import plain_name
from xrt.registers import DEFAULT_POLL_TIMEOUT_S, RegRegion
from xrt.transport import HostRegion, NpuInfo, NpuTransport

__all__ = [
    "RECORD_URL_PARAMS",
    "RecordingHostRegion",
    "RecordingRegRegion",
    "RecordingTransport",
    "SessionRecorder",
    "recording_from_url",
]

RECORD_URL_PARAMS = ("record", "record_max_mib")
"""Device URL parameters of a client-side recording: ``record=FILE`` (the recording to
create) and ``record_max_mib=N`` (its cap, default `xrt.recording.DEFAULT_MAX_MIB`)."""

_OK = int(RegisterStatus.OK)


class SessionRecorder:
    """Writes one client-side recording (thread-safe; never raises into the session once
    the file exists: a failing disk ends the recording, logged).

    Args:
        path: The file to create (it must not exist).
        info: The device recorded (target, name, register blocks, memories).
        transport: What the session runs on (``"axi"``), for the header.
        max_bytes: The recording's cap (then a truncated record, as a server's).

    Raises:
        XrtError: 11014 when the file exists or cannot be created.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        info: NpuInfo,
        *,
        transport: str = "",
        max_bytes: int = DEFAULT_MAX_MIB << 20,
    ) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        header = {
            "format": FORMAT,
            "version": VERSION,
            "target": info.target,
            "target_id": target_config(info.target).id,
            "hw_version": info.hw_version,
            "model": None,  # a board runs a bitstream, not a verilated model
            "waves": False,
            "device": _plain(info.name),
            "lease": None,
            "holder": _holder(),
            "started": time.time(),
            "clock": CLOCK_WALL,
            "origin": ORIGIN_CLIENT,
            "transport": transport,
            "blocks": {n: [b.base, b.size] for n, b in info.register_blocks.items()},
            "memories": {n: [m.base, m.size] for n, m in info.memories.items()},
            "max_bytes": max_bytes,
            "inline_read_bytes": INLINE_READ_BYTES,
        }
        try:
            self.writer = RecordingWriter(self.path, header, max_bytes)
        except OSError as exc:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL, f"cannot record the session into {self.path}: {exc}"
            ) from None

    def now(self) -> float:
        """Wall seconds since the recording started (what records carry as ``w``)."""
        return time.monotonic() - self._t0

    def _request(self, op: str, args: dict[str, Any], reply: dict[str, Any], w: float) -> None:
        body: dict[str, Any] = {"k": Kind.REQUEST, "op": op, "args": args, "reply": reply}
        body |= {"t": None, "c": None, "w": round(w, 6)}
        with self._lock:
            self.writer.record(body)

    def read(self, addr: int, value: int, w: float) -> None:
        """One register read (``RegRegion.read``) and the value it gave."""
        self._request("read_reg", {"addr": addr}, {"status": _OK, "value": value}, w)

    def write(self, addr: int, value: int, w: float) -> None:
        """One register write (``RegRegion.write``)."""
        self._request("write_reg", {"addr": addr, "value": value}, {"status": _OK}, w)

    def batch(self, rows: list[list[int]], results: list[list[int]], w: float) -> None:
        """Register ops run back to back (`xrt.hw.regops.RegRow` fields) and their
        (status, value) results."""
        self._request("batch", {"ops": rows}, {"results": results}, w)

    def poll(self, op: RegPoll, reads: int, value: int, matched: bool, w: float) -> None:
        """A poll-until the host ran: one record however many reads it made."""
        body = {
            "k": Kind.POLL,
            "addr": op.addr,
            "mask": op.mask,
            "expected": op.expected,
            "max_polls": op.max_polls,
            "timeout_s": op.timeout_s,
            "interval_s": op.interval_s,
            "reads": reads,
            "value": value,
            "matched": matched,
            "w": round(w, 6),
            "dur": round(self.now() - w, 6),
        }
        with self._lock:
            self.writer.record(body)

    def wait(self, timeout_s: float, max_cycles: int | None, high: bool, w: float) -> None:
        """An interrupt wait: INTERRUPT when the line was high, else DEADLINE."""
        outcome = WaitOutcome.INTERRUPT if high else WaitOutcome.DEADLINE
        waited_s = round(self.now() - w, 6)
        args = {"timeout_s": timeout_s, "max_cycles": max_cycles}
        body: dict[str, Any] = {"k": Kind.REQUEST, "op": "wait_irq", "args": args}
        body |= {"reply": {"outcome": int(outcome), "waited": None}, "waited_s": waited_s}
        body |= {"t": None, "c": None, "w": round(w, 6)}
        with self._lock:
            self.writer.record(body)

    def reset(self, w: float) -> None:
        """A reset the transport pulsed."""
        self._request("reset", {}, {}, w)

    def memory_write(self, address: int, data: bytes | memoryview, w: float) -> None:
        """Bytes the host wrote to host-visible memory."""
        body = {"k": Kind.MEMORY_WRITE, "address": address, "data": bytes(data), "w": round(w, 6)}
        with self._lock:
            self.writer.record(body)

    def memory_read(self, address: int, data: bytes | memoryview, w: float) -> None:
        """Bytes the host read from host-visible memory (whole when small, else SHA-256)."""
        body: dict[str, Any] = {"k": Kind.MEMORY_READ, "address": address, "n": len(data)}
        if len(data) <= INLINE_READ_BYTES:
            body["data"] = bytes(data)
        else:
            body["sha256"] = hashlib.sha256(data).hexdigest()
        body["w"] = round(w, 6)
        with self._lock:
            self.writer.record(body)

    def finish(self, reason: str) -> None:
        """Write the end record and close the file (once)."""
        with self._lock:
            self.writer.finish(reason)


def _holder() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container)
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


class RecordingRegRegion(RegRegion):
    """A register region that runs accesses on an inner region, as a board does, and
    records each (see the module docstring)."""

    def __init__(
        self, inner: RegRegion, recorder: SessionRecorder, regmap: RegisterBlockInfo | None
    ) -> None:
        self._inner = inner
        self._rec = recorder
        super().__init__(inner.name, inner.base, inner.size, regmap=regmap)

    def _read32(self, addr: int) -> int:  # RegRegion.read: one recorded read
        w = self._rec.now()
        value = self._inner._read32(addr)
        self._rec.read(addr, value, w)
        return value

    def _write32(self, addr: int, value: int) -> None:  # RegRegion.write
        w = self._rec.now()
        self._inner._write32(addr, value)
        self._rec.write(addr, value, w)

    def _batch(self, ops: Sequence[RegOp]) -> list[int | None]:
        inner = self._inner
        results: list[int | None] = []
        rows: list[list[int]] = []
        got: list[list[int]] = []
        w = self._rec.now()

        def flush() -> None:
            if rows:
                self._rec.batch(rows[:], got[:], w)
                rows.clear()
                got.clear()

        try:
            for op in ops:
                kind = type(op)
                if kind is RegPoll:
                    flush()
                    assert isinstance(op, RegPoll)
                    results.append(self._poll_recorded(op, len(results)))
                    w = self._rec.now()
                    continue
                value = 0
                with self._bus:  # a masked write's read and write stay together
                    if kind is RegRead:
                        value = inner._read32(op.addr)
                    elif kind is RegWrite:
                        assert isinstance(op, RegWrite)
                        inner._write32(op.addr, op.value)
                    elif kind is RegMaskedWrite:
                        assert isinstance(op, RegMaskedWrite)
                        old = inner._read32(op.addr)
                        value = (old & ~op.mask) | (op.value & op.mask)
                        inner._write32(op.addr, value)
                    else:  # pragma: no cover - execute() passes only the four op types
                        raise XrtError(ErrorCode.WRONG_TYPE, f"unknown register op {op!r}")
                results.append(value if kind is RegRead else None)
                rows.append([int(x) for x in to_row(op)])
                got.append([_OK, value])
        finally:
            flush()  # what ran is recorded, also when a later op raised
        return results

    def _poll_recorded(self, op: RegPoll, index: int) -> int:
        """`RegRegion`'s poll-until, counting its reads, recorded as one record."""
        w = self._rec.now()
        start = time.monotonic()
        timeout = op.timeout_s
        if op.max_polls is None and timeout is None:
            timeout = DEFAULT_POLL_TIMEOUT_S
        reads = 0
        while True:
            with self._bus:
                value = self._inner._read32(op.addr)
            reads += 1
            if value & op.mask == op.expected:
                self._rec.poll(op, reads, value, True, w)
                return value
            elapsed = time.monotonic() - start
            if (op.max_polls is not None and reads >= op.max_polls) or (
                timeout is not None and elapsed >= timeout
            ):
                self._rec.poll(op, reads, value, False, w)
                raise XrtError(
                    ErrorCode.TIMEOUT,
                    f"poll (op {index}) of {op.addr:#x} in region {self.name!r} for "
                    f"value & {op.mask:#x} == {op.expected:#x} gave up after {reads} reads in "
                    f"{elapsed:.3f} s; last value {value:#x}",
                )
            if op.interval_s > 0:
                time.sleep(op.interval_s)  # the poll's own interval, as RegRegion's loop

    def _close(self) -> None:
        self._inner._close()


class RecordingHostRegion(HostRegion):
    """Host-visible memory through an inner region, every byte recorded (no host map)."""

    def __init__(self, inner: HostRegion, recorder: SessionRecorder, min_alignment: int) -> None:
        self._inner = inner
        self._rec = recorder
        super().__init__(inner.name, inner.base, inner.size, min_alignment=min_alignment)

    def _read(self, addr: int, nbytes: int) -> bytes:
        w = self._rec.now()
        data = bytearray(nbytes)
        self._inner._get(addr, memoryview(data))
        got = bytes(data)
        self._rec.memory_read(addr, got, w)
        return got

    def _write(self, addr: int, data: memoryview) -> None:
        w = self._rec.now()
        self._inner._put(addr, data)
        self._rec.memory_write(addr, data, w)

    def _close(self) -> None:
        self._inner._close()


class RecordingTransport(NpuTransport):
    """A transport whose session is recorded into a file (see the module docstring).

    Args:
        inner: The transport that reaches the device (a board's `MmapTransport`); owned:
            closing this closes it.
        path: The recording to create (it must not exist).
        max_bytes: The recording's cap.

    Raises:
        XrtError: 11014 when the file cannot be created (`inner` is closed then).
    """

    def __init__(
        self,
        inner: NpuTransport,
        path: str | os.PathLike[str],
        *,
        max_bytes: int = DEFAULT_MAX_MIB << 20,
    ) -> None:
        super().__init__()
        self.inner = inner
        self.info = inner.info
        kind = type(inner).__name__.removesuffix("Transport").lower()
        try:
            self.recorder = SessionRecorder(path, inner.info, transport=kind, max_bytes=max_bytes)
        except BaseException:
            inner.close()
            raise

    @property
    def path(self) -> Path:
        """The recording's file."""
        return self.recorder.path

    def reg_region(self, name: str, regmap: RegisterBlockInfo | None = None) -> RecordingRegRegion:
        self._check_open()
        return RecordingRegRegion(self.inner.reg_region(name, regmap), self.recorder, regmap)

    def host_region(
        self,
        name: str = "udma",
        *,
        base: int | None = None,
        size: int | None = None,
        min_alignment: int = 64,
    ) -> RecordingHostRegion:
        self._check_open()
        inner = self.inner.host_region(name, base=base, size=size, min_alignment=min_alignment)
        return RecordingHostRegion(inner, self.recorder, min_alignment)

    @property
    def has_irq(self) -> bool:
        return self.inner.has_irq

    def wait_irq(self, timeout_s: float, max_cycles: int | None = None) -> bool:
        w = self.recorder.now()
        high = self.inner.wait_irq(timeout_s, max_cycles)
        self.recorder.wait(timeout_s, max_cycles, high, w)
        return high

    @property
    def can_reset(self) -> bool:
        return self.inner.can_reset

    def reset(self) -> None:
        w = self.recorder.now()
        self.inner.reset()  # a board refuses (nothing happened: nothing recorded)
        self.recorder.reset(w)

    @property
    def cycles(self) -> int | None:
        return self.inner.cycles

    def _close(self) -> None:
        try:
            self.recorder.finish("the device was closed")
        finally:
            self.inner.close()

    def __repr__(self) -> str:
        return f"<RecordingTransport {self.inner!r} -> {self.path}>"


def recording_from_url(inner: NpuTransport, url: DeviceURL) -> NpuTransport:
    """`inner`, wrapped in a `RecordingTransport` when `url` says ``record=FILE``.

    Raises:
        XrtError: 11010/11003 for a bad ``record``/``record_max_mib`` (`inner` is closed
            then), and what `RecordingTransport` raises.
    """
    path = url.params.get("record")
    cap = url.params.get("record_max_mib")
    if path is None:
        if cap is not None:
            inner.close()
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"device URL {url.raw!r}: record_max_mib without record="
            )
        return inner
    try:
        mib = url.get_int("record_max_mib", DEFAULT_MAX_MIB)
        assert mib is not None
        if mib < 1:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"record_max_mib={mib} must be >= 1")
        if str(path) == "":
            raise XrtError(ErrorCode.WRONG_TYPE, f"device URL {url.raw!r}: record= needs a file")
    except BaseException:
        inner.close()
        raise
    return RecordingTransport(inner, str(path), max_bytes=mib << 20)


def _plain(name: str) -> str:
    """`name` as a plain name (`xrt.recording_schema.plain_name`: a replay names folders and
    files after it): a board's URL host such as ``[::1]`` or ``fe80::1%eth0`` becomes
    ``1`` or ``fe80_1_eth0``."""
    text = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._")[:64]
    return text if plain_name(text) else "board"
