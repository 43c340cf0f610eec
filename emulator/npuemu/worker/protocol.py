"""Framing of the server <-> worker IPC: length-prefixed msgpack maps over a Unix socket.

A frame is a 4-byte big-endian length followed by one message: a msgpack map with string
keys whose values are plain data (integers, floats, strings, booleans, None and tuples of
them). Decoding runs no code, whatever the bytes (pickle would run any code a frame names:
a process that got hold of the socket could have run code in the server), and is bounded:
a frame of at most `MAX_FRAME` bytes, strings, arrays and maps of bounded length, bounded
nesting (msgpack's own). A frame that breaks these rules closes the channel. The worker
side is blocking (it runs inside the simulator and must freeze simulated time while it
waits); the server side is an asyncio protocol (`FrameProtocol`): frames are parsed in the
event loop's reader callback and handed on at once, with no reader task to wake per message.

The messages (`Op` names the requests; every request carries ``id`` and ``op``, every reply
``id``, ``ok``, ``cycles``, ``start_ps`` (the simulated time the request started at, in
picoseconds: a recording pins each request there, `npuemu.server.recording`) and, when
not ok, ``error`` and, for a request the caller must fix, ``refusal`` (`Refusal`)):

=================  ======================================  ==============================
op                 request fields                          reply fields
=================  ======================================  ==============================
reset              -                                       -
read_reg           addr                                    status, value
write_reg          addr, value                             status
batch              ops: `xrt.hw.regops.RegRow` fields      results: (status, value) each
wait_irq           max_cycles, wall_s                      outcome, waited
remap              old: (device, inode) of the old file;   -
                   the new file comes over the fd channel
ring_attach        slot (`xrt.hw.ring.RingSlot`; the ring     -
                   file and its kick, done and revoke
                   eventfds come over the fd channel)
ring_detach        slot                                    -
model_save         path (a file in the server's folder),   time_ps (the instant the
                   max_cycles (to wait for idle engines),  state is of), registers:
                   read: addresses to read after the save  (status, value) per address
                   (the state saved is then put back)
model_restore      path (a file the server checked),       time_ps (the instant it was
                   max_cycles                              put in)
pristine_save      - (the state now is where every lease   time_ps
                   starts: after a warm start)
pristine_restore   - (back to that state: a lease ended)   time_ps
waves_start        cycles                                  (waves_error)
waves_stop         -                                       file: (path, first, last) | None
                                                           (observer: + state)
waves_status       - (read-only requests only)             state, first
waves_forget       -                                       -
advance            to_ps: an instant (ps) or None          - (replay only: time runs to
                                                           it, `npuemu.replay`)
cancel             id of the request to stop               (none: that request answers
                                                           with cancelled)
quit               -                                       -
=================  ======================================  ==============================

Statuses and outcomes are `xrt.hw.wire.RegisterStatus` and `WaitOutcome` numbers. The
worker's first message is its hello: ``{"event": "ready", "cycles": N, "savable": B,
"state_bytes": S}`` (B: the model can save its state, and took its boot state as the
pristine one; S: the size of its saved state).

**Read-only requests** (an observer's, `npuemu.server.observer`) carry ``read_only: True``
and take the same path as every other request. The worker serves them only when
`read_only_refusal` finds nothing to refuse: ``read_reg`` and ``batch`` of reads of
registers whose read has no side effect, and the observer's own waveform window
(``waves_start``, ``waves_status``, ``waves_stop``: the owner is the observer, not the
holder). Anything else is answered ``ok: False`` without running.
"""

from __future__ import annotations

import asyncio
import enum
import select
import socket
import struct
from collections.abc import Callable, Mapping
from typing import Any

import msgpack

from xrt.hw.regops import RegKind
from xrt.hw.wire import RegisterStatus
from xrt.regtrace import RegisterTraceLog

__all__ = [
    "STATE_SLACK_BYTES",
    "BlockingChannel",
    "ChannelClosedError",
    "FrameError",
    "FrameProtocol",
    "Op",
    "Refusal",
    "frame",
    "read_only_refusal",
    "trace_request",
]

_HEADER = struct.Struct(">I")
MAX_FRAME = 16 << 20  # register batches and results only: never bulk data
MAX_ITEMS = 1 << 16  # elements of one array or map (a batch holds at most 4096 ops)
MAX_TEXT = 1 << 16  # bytes of one string (error messages, file paths)
_RECV_CHUNK = 1 << 16
STATE_SLACK_BYTES = 64 << 10
"""How much larger than the worker's own a model state to restore may be: its context
strings may differ in length (rtl/sim/npu_model_state.h bounds each to 4 KiB)."""


class Op(enum.StrEnum):
    """The requests a worker serves (the table in the module docstring)."""

    RESET = "reset"
    READ_REG = "read_reg"
    WRITE_REG = "write_reg"
    BATCH = "batch"
    WAIT_IRQ = "wait_irq"
    REMAP = "remap"
    RING_ATTACH = "ring_attach"
    RING_DETACH = "ring_detach"
    MODEL_SAVE = "model_save"
    MODEL_RESTORE = "model_restore"
    PRISTINE_SAVE = "pristine_save"
    PRISTINE_RESTORE = "pristine_restore"
    WAVES_START = "waves_start"
    WAVES_STOP = "waves_stop"
    WAVES_FORGET = "waves_forget"
    WAVES_STATUS = "waves_status"
    ADVANCE = "advance"
    CANCEL = "cancel"
    QUIT = "quit"


class Refusal(enum.StrEnum):
    """Why the worker refused a request that was the caller's to fix (a failed reply's
    ``refusal``; a failure without one is the worker's own)."""

    BUSY = "busy"  # a checkpoint while an engine runs
    BAD_STATE = "bad_state"  # a model state that is not this model's


class FrameError(ValueError):
    """A frame that is not a well-formed message (too long, not a map of plain data)."""


class ChannelClosedError(EOFError):
    """The other end closed the channel (or died)."""


class BlockingChannel:
    """The worker's end: blocking send/recv, plus a non-blocking check for a request.

    `recv` reads what the socket holds in one call (a whole small frame, usually) and
    keeps any rest for the next message: one system call per request, not two.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.setblocking(True)
        self._buf = bytearray()
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)

    def pending(self) -> bool:
        """True when a request (or EOF) is waiting to be read."""
        return bool(self._buf) or bool(self._poll.poll(0))

    def _fill(self, n: int) -> None:
        while len(self._buf) < n:
            part = self.sock.recv(max(_RECV_CHUNK, n - len(self._buf)))
            if not part:
                raise ChannelClosedError("server closed the channel")
            self._buf += part

    def recv(self) -> dict[str, Any]:
        self._fill(_HEADER.size)
        (length,) = _HEADER.unpack_from(self._buf)
        if length > MAX_FRAME:
            raise FrameError(f"frame of {length} bytes exceeds {MAX_FRAME}")
        end = _HEADER.size + length
        self._fill(end)
        message = decode(self._buf[_HEADER.size : end])
        del self._buf[:end]
        return message

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(frame(message))


class FrameProtocol(asyncio.Protocol):
    """The server's end: calls `on_frame` with each message as it arrives, and `on_lost`
    once when the channel closes (EOF, an error, or a frame that cannot be read)."""

    def __init__(
        self,
        on_frame: Callable[[dict[str, Any]], None],
        on_lost: Callable[[Exception | None], None],
    ) -> None:
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._buf = bytearray()
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        while len(buf) >= _HEADER.size:
            (length,) = _HEADER.unpack_from(buf)
            end = _HEADER.size + length
            try:
                if length > MAX_FRAME:
                    raise FrameError(f"frame of {length} bytes exceeds {MAX_FRAME}")
                if len(buf) < end:
                    return
                message = decode(buf[_HEADER.size : end])
            except Exception as exc:  # a broken channel: nothing after it can be trusted
                buf.clear()
                self._on_lost(exc)
                if self._transport is not None:
                    self._transport.close()
                return
            del buf[:end]
            self._on_frame(message)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost(exc)


def frame(message: dict[str, Any]) -> bytes:
    """One message as the bytes of a frame."""
    payload = msgpack.packb(message, use_bin_type=True)
    if len(payload) > MAX_FRAME:
        raise FrameError(f"message of {len(payload)} bytes exceeds {MAX_FRAME}")
    return _HEADER.pack(len(payload)) + payload


def decode(payload: bytes | bytearray | memoryview) -> dict[str, Any]:
    """The message in one frame's payload (arrays come back as tuples).

    Raises:
        FrameError: the payload is not one msgpack map with string keys within the bounds.
    """
    try:
        message = msgpack.unpackb(
            payload,
            use_list=False,
            raw=False,
            strict_map_key=True,
            max_str_len=MAX_TEXT,
            max_bin_len=MAX_TEXT,
            max_array_len=MAX_ITEMS,
            max_map_len=MAX_ITEMS,
            max_ext_len=0,
        )
    except Exception as exc:  # msgpack raises several types: one for the caller
        raise FrameError(f"undecodable frame: {type(exc).__name__}: {exc}") from None
    if not isinstance(message, dict):
        raise FrameError(f"a frame must hold a map, not {type(message).__name__}")
    return message


READ_ONLY_OPS = frozenset({Op.READ_REG, Op.BATCH, Op.WAVES_START, Op.WAVES_STATUS, Op.WAVES_STOP})


def read_only_refusal(req: dict[str, Any], side_effects: Mapping[int, str]) -> str:
    """Why the read-only request `req` must not run (``""``: it may).

    Allowed: `READ_ONLY_OPS`; a register access must be a read (a batch: every row a read)
    of an address not in `side_effects` (address -> why reading it changes the device,
    `xrt.hw.regs.read_side_effects`).
    """
    op = req.get("op")
    if op not in READ_ONLY_OPS:
        return f"{op!r} is not a read-only request"
    if op == Op.READ_REG:
        addrs = [req.get("addr")]
    elif op == Op.BATCH:
        rows = req.get("ops", ())
        for i, row in enumerate(rows):
            kind = row[0] if row else None
            if kind != RegKind.READ:
                name = RegKind(kind).name.lower() if kind in set(RegKind) else repr(kind)
                return f"op {i} is a {name}, not a read"
        addrs = [row[1] for row in rows]
    else:
        return ""
    for addr in addrs:
        why = side_effects.get(addr) if isinstance(addr, int) else "no address"
        if why:
            return why
    return ""


_TRACE_KINDS = {
    RegKind.READ: "read",
    RegKind.WRITE: "write",
    RegKind.MASKED_WRITE: "rmw",
    RegKind.POLL: "poll",
}


def trace_request(
    log: RegisterTraceLog, device: str, op: str, args: dict[str, Any], reply: dict[str, Any]
) -> None:
    """Log the register accesses of one request (read_reg, write_reg, batch) to `log` (the
    server's ``--trace-registers``); other requests are ignored. The cycle is the reply's
    (end of the request). An observer's reads (``read_only``) are ``peek`` lines, so a
    holder's trace stays its own."""
    cycle = reply.get("cycles")
    read = "peek" if args.get("read_only") else "read"

    def status(s: int) -> str:
        return RegisterStatus(s).name if s in RegisterStatus._value2member_map_ else str(s)

    if op == Op.READ_REG:
        log.record(device, read, args["addr"], reply.get("value"), cycle, status(reply["status"]))
    elif op == Op.WRITE_REG:
        log.record(device, "write", args["addr"], args["value"], cycle, status(reply["status"]))
    elif op == Op.BATCH:
        for (kind, addr, value, *_), (s, got) in zip(
            args["ops"], reply.get("results", ()), strict=False
        ):
            shown = value if kind == RegKind.WRITE else got  # masked writes: the value written
            what = read if kind == RegKind.READ else _TRACE_KINDS.get(kind, str(kind))
            log.record(device, what, addr, shown, cycle, status(s))
