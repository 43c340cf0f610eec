"""What a recording (`xrt.recording`) may hold: the kinds of records, the fields of each
kind with their types and ranges, and the bounds of decoding a record.

Recordings are files users carry (mailed to a colleague, attached to a bug report), so a
reader treats every one as hostile input. A record is checked before anything uses it:

- **Its size, before it is read.** A frame's length is bounded by what a record of its kind
  can hold (`Limits.frame_bytes`): a memory write's data by the target's host-visible
  memory, a checkpoint's file by the largest checkpoint of the target, anything else by
  `RECORD_BYTES`. The kind is read from the frame's first bytes, where every writer puts
  ``k`` (a record whose ``k`` comes later, like the header, gets the small bound).
- **Its decoding.** msgpack with explicit limits (string, binary, array and map lengths, no
  extension types) and a count of the maps and arrays it makes (`MAX_CONTAINERS`: a few
  bytes each on the wire, a few dozen in memory). msgpack's C decoder stops nesting at
  1024 levels; nothing here recurses over decoded data. A record with a large binary field
  (`BULK_KINDS`) holds only plain values, and is decoded by `decode_flat` without copying
  that field (a memoryview of the frame).
- **Its shape.** `check_record` compares every field with the kind's schema: the fields a
  kind may and must have, each one's type and range (no unknown fields, no other nesting
  than the schema's, which is at most three levels deep). A `FieldError` names the field
  and its value, shown bounded (`show`).

What the target and the replay allow beyond this (times, cycle budgets, register windows)
is the replay's to check (`npuemu.replay_checks`).
"""

from __future__ import annotations

import enum
import math
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgpack

from xrt.hw.regops import MAX_POLL_CYCLES, RegKind
from xrt.hw.wire import MAX_BATCH_OPS, CheckpointScope, RegisterStatus, WaitOutcome

__all__ = [
    "BULK_KINDS",
    "CLOCK_SIMULATED",
    "CLOCK_WALL",
    "FORMAT",
    "FRAME",
    "MAGIC",
    "MAX_CONTAINERS",
    "OPS",
    "ORIGIN_CLIENT",
    "PEEK_BYTES",
    "RECORDED_OPS",
    "RECORD_BYTES",
    "REPLY_FIELDS",
    "VERSION",
    "FieldError",
    "Kind",
    "Limits",
    "check_header",
    "check_record",
    "decode",
    "decode_flat",
    "peek_kind",
    "plain_name",
    "show",
]

MAGIC = b"NPUEMREC"
"""A recording file's first bytes; records follow, each framed by `FRAME`."""
FORMAT = "npu-emu-recording"
VERSION = 1
FRAME = struct.Struct(">II")  # a record's payload length and the payload's CRC-32
CLOCK_SIMULATED = "simulated"
"""A header's ``clock`` (the default when absent): requests carry simulated instants."""
CLOCK_WALL = "wall"
"""A header's ``clock`` for a client-side (board) recording: times are wall-clock."""
ORIGIN_CLIENT = "client"
"""A header's ``origin`` when the runtime wrote the recording (the default: a server)."""

REPLY_FIELDS: dict[str, tuple[str, ...]] = {
    "reset": (),
    "read_reg": ("status", "value"),
    "write_reg": ("status",),
    "batch": ("results",),
    "wait_irq": ("outcome", "waited"),
}
"""What a request record keeps of each op's reply (the ops are the worker's:
``npuemu.worker.protocol.Op`` names them with these strings)."""
OPS = tuple(REPLY_FIELDS)
RECORDED_OPS = frozenset(OPS)


class Kind(enum.StrEnum):
    """What a record holds (the table in `xrt.recording`)."""

    HEADER = "header"
    REQUEST = "request"
    MEMORY_WRITE = "memory_write"
    MEMORY_READ = "memory_read"
    POLL = "poll"
    CHECKPOINT_SAVE = "checkpoint_save"
    CHECKPOINT_RESTORE = "checkpoint_restore"
    TRUNCATED = "truncated"
    WORKER_RESTART = "worker_restart"
    END = "end"


BULK_KINDS = frozenset({Kind.MEMORY_WRITE, Kind.CHECKPOINT_SAVE, Kind.CHECKPOINT_RESTORE})
"""Kinds with one large binary field (data, file) and only plain values beside it."""
RECORD_BYTES = 1 << 20
"""Any other record: a batch of `MAX_BATCH_OPS` rows and its results take about 200 KiB, an
inline memory read 64 KiB."""
MAX_TEXT = 4096  # bytes of a string field (reasons, names, digests)
MAX_FIELDS = 32  # fields of one map
MAX_CONTAINERS = 2 * MAX_BATCH_OPS + 64  # maps and arrays of one record (a full batch's rows
# and results, and a few)
PEEK_BYTES = 64  # a frame's first bytes: its map header, ``k`` and the kind
U32 = (1 << 32) - 1
U64 = (1 << 64) - 1
I64 = (1 << 63) - 1
MAX_SECONDS = 1e9  # wall-clock durations and timeouts (about 30 years)


@dataclass(frozen=True)
class Limits:
    """The bounds of one recording's records, in bytes (see the module docstring).

    Attributes:
        memory_bytes: A memory write's data, a memory read's length: the target's
            host-visible memory (``udma``) for a replay.
        checkpoint_bytes: A checkpoint record's file (``npuemu.server.checkpoint.
            max_file_bytes(target)`` for a replay).
        record_bytes: Any other record.
    """

    memory_bytes: int = 1 << 30
    checkpoint_bytes: int = 1 << 30
    record_bytes: int = RECORD_BYTES

    def frame_bytes(self, kind: str | None) -> int:
        """The longest frame a record of `kind` may have (None: ``k`` is not first)."""
        if kind == Kind.MEMORY_WRITE:
            return self.memory_bytes + PEEK_BYTES * 4
        if kind in (Kind.CHECKPOINT_SAVE, Kind.CHECKPOINT_RESTORE):
            return self.checkpoint_bytes + PEEK_BYTES * 4
        return self.record_bytes

    @property
    def largest_frame(self) -> int:
        return max(self.frame_bytes(k) for k in (None, *BULK_KINDS))


class FieldError(ValueError):
    """A field that is missing, of another type or out of range; the message names the
    field and its value (bounded)."""

    def __init__(self, name: str, value: Any, why: str, *, missing: bool = False) -> None:
        self.field, self.value = name, value
        super().__init__(f"{name} is missing" if missing else f"{name} = {show(value)}: {why}")


def show(value: Any) -> str:
    """`value` for a message: bounded in length, control characters escaped, containers
    and bytes by their size (never their contents: no recursion, no megabytes)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return str(value) if abs(value) < 1 << 64 else f"an integer of {value.bit_length()} bits"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value[:60]) + ("..." if len(value) > 60 else "")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"{len(value):,} bytes"
    if isinstance(value, list):
        return f"a list of {len(value):,}"
    if isinstance(value, dict):
        return f"a map of {len(value):,}"
    return f"a {type(value).__name__}"


_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def plain_name(text: Any) -> bool:
    """A name that is safe in a path: 1..64 letters, digits, ``_``, ``.``, ``-``, not
    starting with a dot (so no ``..``, no hidden file, no separator)."""
    return isinstance(text, str) and _PLAIN.fullmatch(text) is not None


# ------------------------------------------------------------------------ the schema
Spec = Callable[[Any, str, Limits], None]
"""Checks one value (named by the field path) and raises `FieldError`."""


def integer(lo: int, hi: int) -> Spec:
    def check(v: Any, name: str, _: Limits) -> None:
        if type(v) is not int:
            raise FieldError(name, v, "must be an integer")
        if not lo <= v <= hi:
            raise FieldError(name, v, f"must be from {lo} to {hi}")

    return check


def number(lo: float, hi: float) -> Spec:
    def check(v: Any, name: str, _: Limits) -> None:
        if type(v) not in (int, float):
            raise FieldError(name, v, "must be a number")
        if not (math.isfinite(v) and lo <= v <= hi):
            raise FieldError(name, v, f"must be from {lo:g} to {hi:g}")

    return check


def one_of(values: Any, what: str) -> Spec:
    allowed = frozenset(int(x) for x in values)

    def check(v: Any, name: str, _: Limits) -> None:
        if type(v) is not int or v not in allowed:
            raise FieldError(name, v, f"must be {what} ({', '.join(map(str, sorted(allowed)))})")

    return check


def text(max_len: int = MAX_TEXT, choices: tuple[str, ...] = ()) -> Spec:
    def check(v: Any, name: str, _: Limits) -> None:
        if not isinstance(v, str):
            raise FieldError(name, v, "must be a string")
        if len(v) > max_len:
            raise FieldError(name, v, f"must be at most {max_len} characters")
        if choices and v not in choices:
            raise FieldError(name, v, f"must be one of {', '.join(choices)}")

    return check


def name_text(v: Any, name: str, _: Limits) -> None:
    if not plain_name(v):
        why = "must be a plain name (1 to 64 of A-Z a-z 0-9 _ . -, not starting with '.')"
        raise FieldError(name, v, why)


def flag(v: Any, name: str, _: Limits) -> None:
    if not isinstance(v, bool):
        raise FieldError(name, v, "must be true or false")


def binary(limit: Callable[[Limits], int], what: str) -> Spec:
    def check(v: Any, name: str, limits: Limits) -> None:
        if not isinstance(v, (bytes, memoryview)):
            raise FieldError(name, v, "must be bytes")
        if len(v) > limit(limits):
            raise FieldError(name, v, f"more than {what} ({limit(limits):,} bytes)")

    return check


def optional(spec: Spec) -> Spec:
    def check(v: Any, name: str, limits: Limits) -> None:
        if v is not None:
            spec(v, name, limits)

    return check


def row(*specs: Spec) -> Spec:
    """A list of exactly ``len(specs)`` values, each its own spec."""

    def check(v: Any, name: str, limits: Limits) -> None:
        if not isinstance(v, list) or len(v) != len(specs):
            raise FieldError(name, v, f"must be a list of {len(specs)}")
        for i, (item, spec) in enumerate(zip(v, specs, strict=True)):
            spec(item, f"{name}[{i}]", limits)

    return check


def list_of(spec: Spec, max_len: int) -> Spec:
    def check(v: Any, name: str, limits: Limits) -> None:
        if not isinstance(v, list) or len(v) > max_len:
            raise FieldError(name, v, f"must be a list of at most {max_len:,}")
        for i, item in enumerate(v):
            spec(item, f"{name}[{i}]", limits)

    return check


def map_of(value: Spec, max_len: int) -> Spec:
    """A map of plain names to `value`."""

    def check(v: Any, name: str, limits: Limits) -> None:
        if not isinstance(v, dict) or len(v) > max_len:
            raise FieldError(name, v, f"must be a map of at most {max_len}")
        for key, item in v.items():
            name_text(key, f"{name} key", limits)
            value(item, f"{name}.{key}", limits)

    return check


def fields(required: Mapping[str, Spec], opt: Mapping[str, Spec] | None = None) -> Spec:
    """A map with every `required` field, any of `opt`, and nothing else."""
    opt = opt or {}

    def check(v: Any, name: str, limits: Limits) -> None:
        if not isinstance(v, dict):
            raise FieldError(name, v, "must be a map")
        check_fields(v, required, opt, limits, f"{name}.")

    return check


def check_fields(
    body: Mapping[str, Any],
    required: Mapping[str, Spec],
    opt: Mapping[str, Spec],
    limits: Limits,
    prefix: str = "",
) -> None:
    for key in body:
        if key not in required and key not in opt:
            raise FieldError(f"{prefix}{show(key)}", body[key], "is not a field of this record")
    for key, spec in required.items():
        if key not in body:
            raise FieldError(f"{prefix}{key}", None, "", missing=True)
        spec(body[key], f"{prefix}{key}", limits)
    for key, spec in opt.items():
        if key in body:
            spec(body[key], f"{prefix}{key}", limits)


ADDR = integer(0, U64)
WORD = integer(0, U32)
COUNT = integer(0, I64)
INSTANT = optional(integer(-I64 - 1, I64))  # ps or cycles from the lease's first request
SECONDS = number(0.0, MAX_SECONDS)
UNIX_TIME = number(0.0, 1e11)  # started, ended: Unix seconds (up to the year 5138)
STATUS = one_of(RegisterStatus, "a register status")
OUTCOME = one_of(WaitOutcome, "a wait outcome")
ROW = row(
    one_of(RegKind, "a register op kind"), ADDR, WORD, WORD, WORD, integer(0, MAX_POLL_CYCLES)
)
RESULT = row(STATUS, WORD)
WALL = {"w": SECONDS}  # a board's records: wall seconds from the start

ARGS: dict[str, Spec] = {
    "reset": fields({}),
    "read_reg": fields({"addr": ADDR}),
    "write_reg": fields({"addr": ADDR, "value": WORD}),
    "batch": fields({"ops": list_of(ROW, MAX_BATCH_OPS)}),
    # A server's wait: max_cycles, wall_s; a board's: timeout_s and max_cycles or None.
    "wait_irq": fields(
        {"max_cycles": optional(integer(1, I64))},
        {"wall_s": SECONDS, "timeout_s": optional(SECONDS)},
    ),
}
REPLY: dict[str, Spec] = {
    "reset": fields({}),
    "read_reg": fields({"status": STATUS, "value": WORD}),
    "write_reg": fields({"status": STATUS}),
    "batch": fields({"results": list_of(RESULT, MAX_BATCH_OPS)}),
    "wait_irq": fields({"outcome": OUTCOME, "waited": optional(COUNT)}),
}
_MEMORY = binary(lambda lim: lim.memory_bytes, "the target's host-visible memory")
_CHECKPOINT = binary(lambda lim: lim.checkpoint_bytes, "the largest checkpoint of the target")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_TIMED = {"t": INSTANT, "c": INSTANT}

# Per kind: (required, optional) fields; a request's args and reply depend on its op.
SCHEMA: dict[str, tuple[dict[str, Spec], dict[str, Spec]]] = {
    Kind.REQUEST: (
        {"op": text(16, OPS), "args": lambda v, n, lim: None},
        {"reply": lambda v, n, lim: None, **_TIMED, **WALL, "waited_s": SECONDS}
        | {"observer": flag, "unfinished": flag},
    ),
    Kind.MEMORY_WRITE: ({"address": ADDR, "data": _MEMORY}, dict(WALL)),
    Kind.MEMORY_READ: (
        {"address": ADDR, "n": COUNT},
        {"data": binary(lambda lim: lim.record_bytes, "a record"), "sha256": text(64)} | WALL,
    ),
    Kind.POLL: (
        {"addr": ADDR, "mask": WORD, "expected": WORD, "reads": COUNT, "value": WORD}
        | {"matched": flag, "max_polls": optional(integer(1, I64))}
        | {"timeout_s": optional(SECONDS), "interval_s": SECONDS},
        {"w": SECONDS, "dur": SECONDS},
    ),
    Kind.CHECKPOINT_SAVE: ({"file": _CHECKPOINT}, {**_TIMED, "state_t": INSTANT}),
    Kind.CHECKPOINT_RESTORE: (
        {"file": _CHECKPOINT},
        {**_TIMED, "state_t": INSTANT, "scope": one_of(CheckpointScope, "a checkpoint scope")},
    ),
    Kind.TRUNCATED: ({"requests": COUNT, "bytes": COUNT, "limit": COUNT}, {}),
    Kind.WORKER_RESTART: ({"why": text()}, {}),
    Kind.END: (
        {"reason": text()},
        {"requests": COUNT, "dropped": COUNT, "bytes": COUNT} | {"ended": UNIX_TIME},
    ),
}
_BLOCK = row(ADDR, ADDR)  # name: [base, size]
HEADER: tuple[dict[str, Spec], dict[str, Spec]] = (
    {"format": text(64), "version": integer(0, U32), "target": name_text},
    {
        "target_id": integer(0, U32),
        "hw_version": text(64),
        "model": optional(text(64)),
        "waves": flag,
        "device": name_text,  # a folder's and a waveform file's name in a replay
        "lease": optional(text(64)),
        "holder": text(256),
        "started": UNIX_TIME,
        "period_ps": integer(1, 10**9),  # 1 ps .. 1 ms; a replay wants its target's
        "max_bytes": COUNT,
        "inline_read_bytes": integer(0, RECORD_BYTES // 2),
        "clock": text(16, (CLOCK_SIMULATED, CLOCK_WALL)),
        "origin": text(16),
        "transport": text(64),
        "blocks": map_of(_BLOCK, 16),
        "memories": map_of(_BLOCK, 16),
    },
)


def check_header(body: Mapping[str, Any], limits: Limits) -> None:
    """The header's fields (``k`` aside).

    Raises:
        FieldError: the first field that is missing, unknown, of another type or range.
    """
    required, opt = HEADER
    check_fields({k: v for k, v in body.items() if k != "k"}, required, opt, limits)


def check_record(kind: str, body: Mapping[str, Any], limits: Limits) -> bool:
    """The fields of a record of `kind` (``k`` aside); False for a kind this reader does not
    know (its fields are not looked at: the replay refuses it, the listing names it).

    Raises:
        FieldError: the first field that is missing, unknown, of another type or range.
    """
    schema = SCHEMA.get(kind)
    if schema is None:
        return False
    rest = {k: v for k, v in body.items() if k != "k"}
    check_fields(rest, *schema, limits)
    if kind == Kind.REQUEST:
        op = rest["op"]
        ARGS[op](rest["args"], "args", limits)
        if "reply" in rest:
            REPLY[op](rest["reply"], "reply", limits)
        elif not rest.get("unfinished"):
            raise FieldError("reply", None, "", missing=True)
    elif kind == Kind.MEMORY_READ:
        n = rest["n"]
        if n > limits.memory_bytes:
            raise FieldError("n", n, f"more than the host-visible memory ({limits.memory_bytes:,})")
        if ("data" in rest) == ("sha256" in rest):
            raise FieldError("data", rest.get("data"), "a memory read holds data or sha256")
        if "data" in rest and len(rest["data"]) != n:
            raise FieldError("data", rest["data"], f"n says {n:,} bytes")
        if "sha256" in rest and not _SHA256.fullmatch(rest["sha256"]):
            raise FieldError("sha256", rest["sha256"], "must be 64 hex digits")
    return True


# ------------------------------------------------------------------------ decoding
def peek_kind(head: bytes | memoryview) -> str | None:
    """The kind of a record from its frame's first bytes when ``k`` is its first field
    (as every writer puts it, the header's aside), else None."""
    try:
        u = msgpack.Unpacker(raw=False, max_buffer_size=PEEK_BYTES * 2)
        u.feed(bytes(head[:PEEK_BYTES]))
        u.read_map_header()
        if u.unpack() != "k":
            return None
        kind = u.unpack()
    except Exception:  # msgpack raises several types; the full decode says what is wrong
        return None
    return kind if isinstance(kind, str) else None


class _Counter:
    """Counts the maps and arrays a decode makes, and stops it past `MAX_CONTAINERS`."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, value: Any) -> Any:
        self.n += 1
        if self.n > MAX_CONTAINERS:
            raise ValueError(f"more than {MAX_CONTAINERS:,} maps and lists")
        return value


def decode(payload: bytes | bytearray, limits: Limits) -> Any:
    """One record's payload (not a bulk kind's) with msgpack's limits and a count of the
    containers it makes.

    Raises:
        ValueError: not msgpack, trailing bytes, past a limit (the message says which).
    """
    count = _Counter()
    return msgpack.unpackb(
        payload,
        raw=False,
        strict_map_key=True,
        max_bin_len=limits.record_bytes,
        max_str_len=MAX_TEXT,
        max_array_len=MAX_BATCH_OPS,
        max_map_len=MAX_FIELDS,
        max_ext_len=0,
        list_hook=count,
        object_hook=count,
    )


_FIXED = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h"}
_FIXED |= {0xD2: ">i", 0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}
_LENGTH = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I"}
_MAP = {0xDE: ">H", 0xDF: ">I"}


def decode_flat(payload: bytes | bytearray) -> dict[str, Any]:
    """A bulk record's payload: a map of at most `MAX_FIELDS` plain values (None, booleans,
    numbers, strings, bytes); its bytes fields are memoryviews of `payload`, not copies.

    Raises:
        ValueError: anything else (a nested value, trailing bytes, a cut value).
    """
    view = memoryview(payload)
    pos = 0

    def take(fmt: str) -> Any:
        nonlocal pos
        size = struct.calcsize(fmt)
        if pos + size > len(view):
            raise ValueError("the record ends inside a value")
        (v,) = struct.unpack_from(fmt, view, pos)
        pos += size
        return v

    def value() -> Any:
        nonlocal pos
        b = take(">B")
        if b <= 0x7F or b >= 0xE0:  # fixints
            return b if b <= 0x7F else b - 0x100
        if b in (0xC0, 0xC2, 0xC3):
            return {0xC0: None, 0xC2: False, 0xC3: True}[b]
        if b in _FIXED:
            return take(_FIXED[b])
        if 0xA0 <= b <= 0xBF or b in _LENGTH:
            n = b - 0xA0 if b <= 0xBF else take(_LENGTH[b])
            if pos + n > len(view):
                raise ValueError("the record ends inside a value")
            raw, pos = view[pos : pos + n], pos + n
            if b in (0xC4, 0xC5, 0xC6):
                return raw
            if n > MAX_TEXT:
                raise ValueError(f"a string of {n:,} bytes (at most {MAX_TEXT})")
            return str(raw, "utf-8")
        raise ValueError(
            f"a value of msgpack type {b:#04x} (a record of this kind holds only plain values)"
        )

    first = take(">B")
    n = first - 0x80 if 0x80 <= first <= 0x8F else take(_MAP[first]) if first in _MAP else -1
    if not 0 <= n <= MAX_FIELDS:
        raise ValueError("not a map of at most 32 fields")
    body: dict[str, Any] = {}
    for _ in range(n):
        key = value()
        if not isinstance(key, str):
            raise ValueError(f"a field name that is not a string ({show(key)})")
        body[key] = value()
    if pos != len(view):
        raise ValueError(f"{len(view) - pos:,} bytes after the record's map")
    return body
