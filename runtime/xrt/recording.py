"""Recordings of device sessions: the file format and the writer of one recording file
(the reader: `xrt.recording_reader`; the fields each kind of record may hold and the bounds
of reading one: `xrt.recording_schema`; this module re-exports their names). Two writers
produce them, and ``npu-emu replay`` (the emulator's `npuemu.replay`) runs either again on
a fresh simulated device:

- a recording server (``npu-emu serve --record DIR``, `npuemu.server.recording`: the
  folder's size policy and the lease plumbing) writes one file per lease, every request at
  the simulated instant it started;
- the runtime, client-side, for a board (``axi://...?record=FILE``,
  `xrt.transport.recorder`): every register access, poll, interrupt wait and memory access
  of the session, at wall-clock times (a board counts no simulated cycles).

A recording is a header, then every request in order with its data and the device's
response, then an end record saying why the session ended. ``npu-emu replay REC --check``
runs the requests again and compares every response.

**File format** (version `VERSION`). The file starts with the 8 bytes `MAGIC`; then come
records, each framed as a 4-byte big-endian payload length, the payload's CRC-32 (4 bytes,
big-endian) and the payload: one msgpack map of plain data whose ``k`` names its `Kind`:

==================  =============================================================
kind                fields
==================  =============================================================
header              format, version, target, target_id, hw_version, model (the verilated
                    model's digest), waves, device, lease (a digest of the lease id: the
                    id itself is a credential), holder, started (Unix time), period_ps,
                    max_bytes, inline_read_bytes; a client-side recording adds clock
                    (`CLOCK_WALL`), origin (`ORIGIN_CLIENT`), transport, blocks and
                    memories (name: [base, size]) and has model, lease None
request             op (`OPS`: reset, read_reg, write_reg, batch, wait_irq), args (the
                    worker request's fields: a batch's rows are `xrt.hw.regops.RegRow`
                    fields), reply (read_reg: status, value; write_reg: status; batch:
                    results; wait_irq: outcome, waited), t (the simulated time the request
                    started at, ps after the lease's first request started), c (the
                    reply's cycle count minus the lease's first), observer (an observer's
                    read: true); or, for a request that did not finish (its caller went
                    away, the worker failed), unfinished: true
memory_write        address, data (the bytes written to host-visible memory)
memory_read         address, n, and data (the bytes read) when n <= inline_read_bytes,
                    else sha256 (hex digest of the bytes read)
poll                (client-side only) a poll-until the host ran as reads: addr, mask,
                    expected, max_polls, timeout_s, interval_s (its limits), reads (how
                    many reads it made), value (the last value read), matched (the
                    condition held), dur (wall seconds it took)
checkpoint_save     file (the checkpoint file's bytes, `npuemu.server.checkpoint`),
                    t, c (as for requests), state_t (the instant the state was
                    taken, ps after the lease's first request started)
checkpoint_restore  file (the file the holder restored), t, c, state_t (the instant
                    it was put in), scope (`xrt.hw.wire.CheckpointScope`: 1 whole,
                    2 portable; absent: whole)
truncated           requests, bytes, limit: the recording reached its cap; nothing after
                    it is recorded but the end record
worker_restart      why: the device's worker died or hung; the device restarted from reset
end                 reason (why the session ended), requests, dropped (after a cut),
                    bytes, ended (Unix time)
==================  =============================================================

Each record is written with one ``write()`` as it happens, so a writer that crashes
leaves a file readable up to its last whole record (the reader reports a cut last one).

**Timing of a server recording** (no ``clock`` in the header: `CLOCK_SIMULATED`). A device
runs its engines on between requests (`npuemu.worker.sim_main`), so when a request starts
depends on when the client sent it; every request records that instant (the worker's
``start_ps``), and a replay runs the clock to exactly there before it issues the request.
That is why a recording server's workers send every request over the IPC socket (no
server register ring: its replies do not say when they started), and why the local fast
paths (the register ring, the mapped memory) are refused while recording. Memory reads and
writes carry no instant: they are replayed between the requests they came between, so
memory a client touches while an engine works on it replays only as well as that race
allows.

**Timing of a client-side recording** (``clock: "wall"``, `CLOCK_WALL`). A board has no
simulated clock: requests carry ``t`` and ``c`` None (absent, not zero), and every record
carries ``w``, wall-clock seconds from the recording's start (monotonic) when it began;
waits add ``waited_s``, polls ``dur``. Registers report no bus status on a board (a bad
access is a bus fault, not an answer): statuses are recorded OK. A replay of such a
recording compares values, poll results, wait outcomes and memory, never times or cycles.

**Size policy.** A recording stops at `max_bytes` with a truncated record (and still gets
its end record). A file is created 0600, new (never an existing file or a symlink).

**Reading one from elsewhere.** Recordings travel (mail, bug reports): a reader bounds each
frame by its kind before reading it, decodes it within limits and checks its fields
against its kind's schema (`xrt.recording_schema`); ``npu-emu replay`` checks them against
the target and its budget too (`npuemu.replay_checks`). Writers put ``k`` first in every
record but the header (a large record's kind is read from its first bytes).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from xrt.hw.port import Served
from xrt.hw.targets import CLOCK_PERIOD_PS
from xrt.recording_port import served_record
from xrt.recording_reader import (
    Record,
    Recording,
    RecordingError,
    RecordStream,
    open_recording,
    read_recording,
)
from xrt.recording_schema import (
    CLOCK_SIMULATED,
    CLOCK_WALL,
    FORMAT,
    FRAME,
    MAGIC,
    OPS,
    ORIGIN_CLIENT,
    RECORDED_OPS,
    REPLY_FIELDS,
    VERSION,
    Kind,
    Limits,
)

__all__ = [
    "CLOCK_SIMULATED",
    "CLOCK_WALL",
    "DEFAULT_MAX_MIB",
    "FORMAT",
    "INLINE_READ_BYTES",
    "MAGIC",
    "OPS",
    "ORIGIN_CLIENT",
    "RECORDED_OPS",
    "REPLY_FIELDS",
    "SUFFIX",
    "VERSION",
    "Kind",
    "Limits",
    "Record",
    "RecordStream",
    "Recording",
    "RecordingError",
    "RecordingWriter",
    "WriterStats",
    "encode_record",
    "lease_digest",
    "open_recording",
    "read_recording",
    "write_recording",
]

log = logging.getLogger("xrt.recording")

SUFFIX = ".npurec"
DEFAULT_MAX_MIB = 256
INLINE_READ_BYTES = 64 << 10  # memory reads up to this many bytes are kept whole
RESERVE_BYTES = 4096  # kept free under the cap for the truncated and end records


def lease_digest(lease_id: str) -> str:
    """What a recording keeps of a lease id: enough to tell leases apart, nothing that
    opens one (a lease id is a bearer credential and is never written anywhere)."""
    return hashlib.sha256(lease_id.encode()).hexdigest()[:16]


def encode_record(body: Mapping[str, Any]) -> bytes:
    """One record's frame: length, CRC-32, msgpack payload."""
    payload = msgpack.packb(dict(body), use_bin_type=True)
    return FRAME.pack(len(payload), zlib.crc32(payload)) + payload


@dataclass
class WriterStats:
    """What a writer did, for its log line and the bench."""

    records: int = 0
    requests: int = 0
    dropped: int = 0  # records not written after the cut
    bytes: int = 0
    write_s: float = 0.0  # time spent encoding and writing
    slowest_s: float = 0.0  # the slowest single record


class RecordingWriter:
    """One recording: a file written record by record (see the module docstring). The
    hooks `request`, `memory_write`, `memory_read`, `checkpoint` and `worker_restarted`
    are a recording server's; a client-side recorder builds its bodies and calls `record`.

    Never raises into the device's requests: a write that fails (a full disk) is logged
    once and ends the recording.

    Args:
        path: The file to create (it must not exist).
        header: The header record's fields (``k`` is added).
        max_bytes: The cap; the recording is truncated before it would pass it.
        logger: Where its warnings and summary go (default ``xrt.recording``).

    Raises:
        OSError: the file exists or cannot be created.
    """

    def __init__(
        self,
        path: Path,
        header: Mapping[str, Any],
        max_bytes: int,
        *,
        logger: logging.Logger | None = None,
    ) -> None:
        self.path = path
        self.log = logger or log
        self.max_bytes = max_bytes
        self.period_ps = int(header.get("period_ps", CLOCK_PERIOD_PS))
        self.stats = WriterStats()
        self.truncated = False
        self.closed = False
        self.base_ps: int | None = None  # when the lease's first worker request started
        # 0600, a new file (O_EXCL: never an existing one, never through a symlink).
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        self._fd: int | None = os.open(path, flags, 0o600)
        try:
            os.write(self._fd, MAGIC)
        except OSError:
            os.close(self._fd)
            raise
        self.stats.bytes = len(MAGIC)
        self._emit({**header, "k": Kind.HEADER}, force=True)

    # ---------------------------------------------------------------- hooks
    def record(self, body: Mapping[str, Any], *, request: bool = True) -> None:
        """Write one record `body` (it carries its ``k``); `request`: it counts as one of
        the session's requests (the end record says how many)."""
        if self.closed:
            return
        if request:
            self.stats.requests += 1
        self._emit(body)

    def request(self, op: str, args: Mapping[str, Any], reply: Mapping[str, Any] | None) -> None:
        """A worker request of the holder (or an observer's read, ``read_only`` in `args`)
        and its reply; `reply` None: the request did not finish (its caller went away, or
        the worker failed). Requests that do not touch the device (waveform windows) are
        not recorded."""
        if self.closed or op not in RECORDED_OPS:
            return
        self.stats.requests += 1
        body: dict[str, Any] = {"k": Kind.REQUEST, "op": str(op)}
        body["args"] = {k: v for k, v in args.items() if k != "read_only"}
        if args.get("read_only"):
            body["observer"] = True
        if reply is None:
            body["unfinished"] = True
            self._emit(body)
            return
        start = reply.get("start_ps")
        if self.base_ps is None and start is not None:
            self.base_ps = int(start)
        base = self.base_ps or 0
        body["t"] = None if start is None else int(start) - base
        body["c"] = int(reply["cycles"]) - base // self.period_ps
        body["reply"] = {name: reply[name] for name in REPLY_FIELDS[op]}
        self._emit(body)

    def served(self, served: Served) -> None:
        """A request the device port served (`xrt.hw.port`: a recording server's taps give
        it every one, whatever its route), as a request record (`xrt.recording_port`)."""
        got = served_record(served)
        if got is None:
            return
        op, args, fields = got
        if served.read_only:
            args = {**args, "read_only": True}
        reply = served.reply
        done = None if fields is None else {**fields, "cycles": reply.cycles,
                                            "start_ps": reply.start_ps}  # fmt: skip
        self.request(op, args, done)

    def memory_write(self, address: int, data: bytes | bytearray | memoryview) -> None:
        """Bytes the holder wrote to host-visible memory at `address`."""
        if self.closed:
            return
        self.stats.requests += 1
        self._emit({"k": Kind.MEMORY_WRITE, "address": address, "data": bytes(data)})

    def memory_read(self, address: int, data: bytes) -> None:
        """Bytes the holder read from host-visible memory at `address` (one message of a
        ReadMemory stream): kept whole when small, else their SHA-256."""
        if self.closed:
            return
        self.stats.requests += 1
        body: dict[str, Any] = {"k": Kind.MEMORY_READ, "address": address, "n": len(data)}
        if len(data) <= INLINE_READ_BYTES:
            body["data"] = bytes(data)
        else:
            body["sha256"] = hashlib.sha256(data).hexdigest()
        self._emit(body)

    def checkpoint(
        self,
        *,
        saved: bool,
        start_ps: int | None,
        cycles: int,
        time_ps: int,
        data: bytes,
        scope: int = 1,
    ) -> None:
        """A checkpoint the holder took (`saved`) or restored (in `scope`,
        `xrt.hw.wire.CheckpointScope`): the file's bytes, when it started (`start_ps`) and
        ended (`cycles`, as for requests) and the instant the state was taken or put in
        (`time_ps`, as ``state_t``: a replay's waveform window starts from the nearest one)."""
        if self.closed:
            return
        self.stats.requests += 1
        if self.base_ps is None and start_ps is not None:
            self.base_ps = int(start_ps)
        base = self.base_ps or 0
        kind = Kind.CHECKPOINT_SAVE if saved else Kind.CHECKPOINT_RESTORE
        body: dict[str, Any] = {"k": kind, "file": bytes(data)}
        body["t"] = None if start_ps is None else int(start_ps) - base
        body["c"] = int(cycles) - base // self.period_ps
        body["state_t"] = int(time_ps) - base
        if not saved:
            body["scope"] = int(scope)
        self._emit(body)

    def worker_restarted(self, why: str) -> None:
        """The device's worker died or hung and restarts: a replay stops here."""
        if not self.closed:
            self._emit({"k": Kind.WORKER_RESTART, "why": why[:500]})

    def finish(self, reason: str) -> None:
        """Write the end record and close the file (once; later calls do nothing)."""
        if self.closed:
            return
        s = self.stats
        self._emit(
            {
                "k": Kind.END,
                "reason": reason,
                "requests": s.requests,
                "dropped": s.dropped,
                "bytes": s.bytes,
                "ended": time.time(),
            },
            force=True,
        )
        self._close()
        self.log.info(
            "recording %s: %d request(s)%s, %.1f MiB, %.1f ms spent writing (slowest record "
            "%.2f ms)",
            self.path.name,
            s.requests,
            f" ({s.dropped} after the cut at its cap)" if self.truncated else "",
            s.bytes / (1 << 20),
            s.write_s * 1e3,
            s.slowest_s * 1e3,
        )

    # ---------------------------------------------------------------- writing
    def _emit(self, body: Mapping[str, Any], *, force: bool = False) -> None:
        if self._fd is None:
            return
        if self.truncated and not force:
            self.stats.dropped += 1
            return
        t0 = time.perf_counter()
        frame = encode_record(body)
        if not force and self.stats.bytes + len(frame) > self.max_bytes - RESERVE_BYTES:
            self.truncated = True
            self.stats.dropped += 1
            requests = self.stats.requests - 1  # the one that did not fit is not in it
            self.log.warning(
                "recording %s reached its cap of %.0f MiB after %d request(s): truncated",
                self.path.name,
                self.max_bytes / (1 << 20),
                requests,
            )
            body = {
                "k": Kind.TRUNCATED,
                "requests": requests,
                "bytes": self.stats.bytes,
                "limit": self.max_bytes,
            }
            frame = encode_record(body)
        try:
            os.write(self._fd, frame)  # one write per record: a crash cuts between records
        except OSError as exc:
            self.log.error("recording %s: cannot write (%s): recording stops", self.path.name, exc)
            self._close()
            return
        spent = time.perf_counter() - t0
        self.stats.records += 1
        self.stats.bytes += len(frame)
        self.stats.write_s += spent
        self.stats.slowest_s = max(self.stats.slowest_s, spent)

    def _close(self) -> None:
        self.closed = True
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def write_recording(path: Path, header: Mapping[str, Any], bodies: list[Mapping[str, Any]]) -> None:
    """Write a recording from its header and record bodies (the writer's framing): for
    tools and tests that edit a recording (`read_recording`, change, write back)."""
    with path.open("wb") as f:
        f.write(MAGIC)
        f.write(encode_record({**header, "k": Kind.HEADER}))
        for body in bodies:
            f.write(encode_record(body))
