"""Reading recordings (the format: `xrt.recording`; what a record may hold and the bounds
of reading one: `xrt.recording_schema`): `open_recording` reads the header and gives the
records as a `RecordStream`, read and checked one at a time (bounded memory, for a file of
unknown origin: ``npu-emu replay``); `read_recording` reads them all (tools that edit one).
Every frame is bounded by its kind before it is read, decoded within limits and checked
against its kind's schema; an error names the record, its byte offset and the field.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from xrt.recording_schema import (
    BULK_KINDS,
    CLOCK_SIMULATED,
    CLOCK_WALL,
    FORMAT,
    FRAME,
    MAGIC,
    PEEK_BYTES,
    VERSION,
    FieldError,
    Kind,
    Limits,
    check_header,
    check_record,
    decode,
    decode_flat,
    peek_kind,
    show,
)

__all__ = [
    "LimitsFor",
    "Record",
    "RecordStream",
    "Recording",
    "RecordingError",
    "open_recording",
    "read_recording",
]


class RecordingError(ValueError):
    """A file that is not a readable recording; the message names where it broke."""

    def __init__(self, path: Path, message: str, offset: int = 0, index: int = 0) -> None:
        self.path, self.offset, self.index = path, offset, index
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class Record:
    """One record of a recording: its place in the file and its fields."""

    index: int  # 0 is the header
    offset: int  # byte offset of its frame in the file
    kind: str  # a `Kind` (or a kind this reader does not know: the replay decides)
    body: dict[str, Any]


class RecordStream:
    """The records of a recording after its header, read from the file one at a time each
    time it is iterated (memory holds one record, not the recording). ``cut`` says, after
    an iteration to the end, why the file ended inside a record ("" if it did not)."""

    def __init__(self, path: Path, start: int, limits: Limits) -> None:
        self.path, self.start, self.limits = path, start, limits
        self.cut = ""

    def __iter__(self) -> Iterator[Record]:
        with self.path.open("rb") as f:
            f.seek(self.start)
            for item in _records(self.path, f, self.limits, 1, self.start):
                if isinstance(item, str):
                    self.cut = item
                    return
                yield item


@dataclass
class Recording:
    """A recording as read: the header, the records after it (the end record included;
    a list, or a `RecordStream` that reads them when iterated), and ``cut`` when the file
    ends inside a record (a server that stopped mid-write)."""

    path: Path
    header: dict[str, Any]
    records: list[Record] | RecordStream = field(default_factory=list)
    cut: str = ""

    @property
    def end(self) -> dict[str, Any] | None:
        last = None
        for last in self.records:  # noqa: B007 - the last one is wanted
            pass
        return last.body if last is not None and last.kind == Kind.END else None

    @property
    def truncated(self) -> Record | None:
        return next((r for r in self.records if r.kind == Kind.TRUNCATED), None)

    @property
    def clock(self) -> str:
        """`CLOCK_SIMULATED` (a server's recording) or `CLOCK_WALL` (a board's)."""
        return str(self.header.get("clock") or CLOCK_SIMULATED)

    @property
    def wall_clock(self) -> bool:
        """True for a client-side recording of a board: no simulated instants or cycles."""
        return self.clock == CLOCK_WALL


def _where(index: int, offset: int) -> str:
    return f"record {index} at byte offset {offset}"


def _corrupt(path: Path, index: int, offset: int, what: str) -> RecordingError:
    return RecordingError(path, f"{_where(index, offset)} is corrupt: {what}", offset, index)


def _frames(
    path: Path, f: BinaryIO, limits: Limits, index: int, offset: int
) -> Iterator[tuple[int, int, bytearray | str, str | None]]:
    """(index, offset, payload, kind) per frame (kind: as its first bytes say, None when
    ``k`` is not first); a str payload says why the file ends early. A frame longer than
    its kind may be is refused before it is read."""
    largest = limits.largest_frame
    while True:
        head = f.read(FRAME.size)
        if not head:
            return
        if len(head) < FRAME.size:
            yield index, offset, f"the file ends inside record {index}'s frame header", None
            return
        length, crc = FRAME.unpack(head)
        if length == 0:  # no writer makes one: a record holds at least its kind
            raise _corrupt(path, index, offset, "an empty frame (0 bytes, no record)")
        if length > largest:
            what = f"its length {length:,} is more than any record may hold ({largest:,} bytes)"
            raise _corrupt(path, index, offset, what)
        start = f.tell()
        kind = peek_kind(f.read(min(length, PEEK_BYTES)))
        bound = limits.frame_bytes(kind)
        if length > bound:
            what = f"a {kind or 'record'} of {length:,} bytes, more than one may hold ({bound:,})"
            raise _corrupt(path, index, offset, what)
        available = os.fstat(f.fileno()).st_size - start
        if available < length:  # never allocate what the file does not hold
            cut = f"the file ends inside record {index} ({max(0, available)} of its {length} bytes)"
            yield index, offset, cut, kind
            return
        f.seek(start)
        payload = bytearray(length)
        if f.readinto(payload) != length:
            yield index, offset, f"the file ends inside record {index}", kind
            return
        if zlib.crc32(payload) != crc:
            raise _corrupt(path, index, offset, "CRC mismatch")
        yield index, offset, payload, kind
        offset += FRAME.size + length
        index += 1


def _decoded(
    path: Path, index: int, offset: int, payload: bytearray, kind: str | None, limits: Limits
) -> dict[str, Any]:
    """A frame's record, decoded within `limits` and with a kind."""
    try:
        body = decode_flat(payload) if kind in BULK_KINDS else decode(payload, limits)
    except Exception as exc:  # msgpack raises several types
        why = show(str(exc))[1:-1] or type(exc).__name__
        raise _corrupt(path, index, offset, f"undecodable ({why})") from None
    if not isinstance(body, dict) or not isinstance(body.get("k"), str):
        raise _corrupt(path, index, offset, "not a record (no kind)")
    return body


def _records(
    path: Path, f: BinaryIO, limits: Limits, index: int, offset: int
) -> Iterator[Record | str]:
    """Every record from `offset` on, each checked against its kind's schema; a str at
    the end when the file ends inside a record (``cut``)."""
    for i, at, payload, kind in _frames(path, f, limits, index, offset):
        if isinstance(payload, str):
            yield f"{payload}, at byte offset {at}"
            return
        body = _decoded(path, i, at, payload, kind, limits)
        del payload  # a bulk record's fields are views of it: they keep what they need
        try:
            check_record(body["k"], body, limits)
        except FieldError as exc:
            raise RecordingError(path, f"{_where(i, at)} is malformed: {exc}", at, i) from None
        yield Record(i, at, body["k"], body)


def _header(path: Path, f: BinaryIO) -> tuple[dict[str, Any], int]:
    """The checked header and the offset of the record after it."""
    magic = f.read(len(MAGIC))
    if magic != MAGIC:
        raise RecordingError(path, f"not an npu-emu recording (it starts with {magic[:8]!r})")
    for index, offset, payload, kind in _frames(path, f, Limits(), 0, len(MAGIC)):
        if isinstance(payload, str):
            raise RecordingError(path, f"no whole header: {payload}", offset, index)
        body = _decoded(path, index, offset, payload, kind, Limits())
        if body["k"] != Kind.HEADER or body.get("format") != FORMAT:
            raise RecordingError(path, "the first record is not a recording header")
        if body.get("version") != VERSION:
            raise RecordingError(
                path,
                f"format version {show(body.get('version'))}; this npu-emu reads version {VERSION}",
            )
        try:
            check_header(body, Limits())
        except FieldError as exc:
            raise RecordingError(
                path, f"{_where(index, offset)} (the header) is malformed: {exc}", offset, index
            ) from None
        return body, f.tell()
    raise RecordingError(path, "no header record (an empty recording)")


LimitsFor = Limits | Callable[[dict[str, Any]], Limits] | None
"""A reader's bounds: fixed, or chosen from the (checked) header, e.g. by its target."""


def open_recording(path: Path, limits: LimitsFor = None) -> Recording:
    """Read and check a recording's header; its records are a `RecordStream`, read and
    checked one at a time each time they are iterated (the way to read a recording of
    unknown origin within bounded memory).

    Raises:
        RecordingError: not a recording, an unsupported version, a bad header.
        OSError: the file cannot be read.
    """
    with path.open("rb") as f:
        header, start = _header(path, f)
    chosen = limits(header) if callable(limits) else limits or Limits()
    return Recording(path, header, RecordStream(path, start, chosen))


def read_recording(path: Path, limits: LimitsFor = None) -> Recording:
    """Read a recording whole (memory data included), every record checked (as
    `open_recording`; for tools that edit recordings).

    Raises:
        RecordingError: not a recording, an unsupported version, a corrupt or malformed
            record (the message names its index, byte offset and field).
        OSError: the file cannot be read.
    """
    with path.open("rb") as f:
        header, start = _header(path, f)
        chosen = limits(header) if callable(limits) else limits or Limits()
        rec = Recording(path, header)
        records: list[Record] = []
        for item in _records(path, f, chosen, 1, start):
            if isinstance(item, str):
                rec.cut = item
                break
            if item.kind in BULK_KINDS:  # whole-file readers get bytes, not views
                item.body.update(
                    (k, bytes(v)) for k, v in item.body.items() if isinstance(v, memoryview)
                )
            records.append(item)
        rec.records = records
        return rec
