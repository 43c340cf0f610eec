"""The register ring: how a client on the server's machine reaches a device's registers
without the server in between (docs/runtime-transports.md, "The register ring").

A ring is one shared-memory file per lease, created by the server and handed, with two
eventfds, to the lease holder (over ``local.sock``, after the lease check) and to the
device's simulator, whose own C++ main loop serves it between clock steps with no Python
in the way. One request at a time (the client serialises its threads):

1. the client writes the request (`REQUEST`) and its operations (`OPS`, the layout of
   `REGBUS_OP`: the same records the simulation's register bus master takes, the device
   port's `xrt.hw.port.RegBatch`), then
   increments ``req_seq`` and writes 1 to the *kick* eventfd;
2. the simulator validates everything it reads (nothing in the ring is trusted: a bad
   request gets `RingStatus.BAD_REQUEST` and a message), runs the operations, writes the
   response (`RESPONSE`, `RESULTS`: `REGBUS_RESULT` records), sets ``resp_seq`` to
   ``req_seq`` and writes 1 to the *done* eventfd;
3. the client reads the response once ``resp_seq`` equals its ``req_seq``.

At the lease end the server sets ``state`` to `RingState.REVOKED` and wakes the client;
the simulator forgets the ring. The next holder gets a new ring (a new ``generation``).

This module is the single source of the layout: ``tools/generate.py`` writes
``rtl/generated/npu_ring_abi.h`` from it for the C++ side (the simulator and the C driver
library), and a test fails when that file is stale.
"""

from __future__ import annotations

import mmap
import struct
from enum import IntEnum
from typing import ClassVar

from xrt.hw.regops import DEFAULT_POLL_CYCLES, MAX_POLL_CYCLES
from xrt.hw.targets import MIN_SIM_CYCLES_PER_S
from xrt.hw.wire import MAX_BATCH_OPS, RegisterStatus, WaitOutcome

__all__ = [
    "HEADER",
    "MAX_CYCLES",
    "MAX_WALL_MS",
    "OPS_OFFSET",
    "REGBUS_OP",
    "REGBUS_RESULT",
    "REQUEST",
    "RESPONSE",
    "RESULTS_OFFSET",
    "RING_BYTES",
    "RING_MAGIC",
    "RING_MAX_OPS",
    "RING_VERSION",
    "RingKind",
    "RingSlot",
    "RingState",
    "RingStatus",
    "Struct",
    "c_header",
    "refusal",
]

RING_MAGIC = 0x4E50_5252  # "NPRR"
RING_VERSION = 1
RING_MAX_OPS = MAX_BATCH_OPS
"""Operations per request: as many as one RegisterBatch."""
MESSAGE_BYTES = 256
"""Room for the simulator's one-line reason of a refused request (NUL-terminated)."""


class RingState(IntEnum):
    LIVE = 0
    REVOKED = 1  # the lease ended: nothing is served any more


class RingKind(IntEnum):
    BATCH = 1  # run `n_ops` register operations (stop at the first that is not OK)
    WAIT_IRQ = 2  # run the clock until the interrupt line is high, at most `max_cycles`


class RingSlot(IntEnum):
    """Which of the simulator's two rings: a lease holder's, or the server's own (the
    register requests of holders that come through gRPC)."""

    LEASE = 0
    SERVER = 1


class RingStatus(IntEnum):
    OK = 0
    BAD_REQUEST = 1  # something in the request is out of range: nothing ran
    MASTER_HUNG = 2  # the register bus master overran its guard (a simulation bug)
    DEVICE_ERROR = 3  # the device port failed it (a lockstep divergence, the worker's error)


class Struct:
    """A little-endian C struct: fields (name, C type) at their natural offsets, with a
    Python `struct` format to pack and unpack it."""

    _TYPES: ClassVar[dict[str, str]] = {"uint16_t": "H", "uint32_t": "I", "uint64_t": "Q"}

    def __init__(self, name: str, doc: str, fields: tuple[tuple[str, str, str], ...]):
        self.name = name
        self.doc = doc
        self.fields = fields  # (name, C type, comment)
        self.format = struct.Struct("<" + "".join(self._TYPES[t] for _, t, _ in fields))
        self.size = self.format.size
        self.offsets: dict[str, int] = {}
        at = 0
        for fname, ctype, _ in fields:
            self.offsets[fname] = at
            at += struct.calcsize("<" + self._TYPES[ctype])


REGBUS_OP = Struct(
    "npu_regbus_op",
    "One register operation, as the simulation's register bus master takes it.",
    (
        ("kind", "uint32_t", "0 read, 1 write, 2 masked write, 3 poll (xrt.hw.regops.RegKind)"),
        ("addr", "uint32_t", "physical address"),
        ("value", "uint32_t", "write / masked write value"),
        ("mask", "uint32_t", "masked write / poll mask"),
        ("expected", "uint32_t", "poll: wait until (read & mask) == expected"),
        ("reserved", "uint32_t", "0"),
        ("max_cycles", "uint64_t", "poll: give up after this many simulated cycles"),
    ),
)
REGBUS_RESULT = Struct(
    "npu_regbus_result",
    "The result of one register operation.",
    (
        ("status", "uint32_t", "the wire's RegisterStatus: 1 OK, 2 SLVERR, 3 DECERR, 4 timeout"),
        ("value", "uint32_t", "the value read, polled or written by a masked write"),
        ("cycles", "uint64_t", "simulated cycles the operation took"),
    ),
)
HEADER = Struct(
    "npu_ring_header",
    "At offset 0: who the ring is and the two sequence numbers.",
    (
        ("magic", "uint32_t", "RING_MAGIC"),
        ("version", "uint32_t", "RING_VERSION"),
        ("max_ops", "uint32_t", "RING_MAX_OPS"),
        ("state", "uint32_t", "RingState: written by the server and the simulator"),
        ("generation", "uint64_t", "the lease's ring: a new one per lease"),
        ("req_seq", "uint64_t", "written by the client after a request"),
        ("resp_seq", "uint64_t", "written by the simulator after the response"),
        ("cycles", "uint64_t", "the device's simulated cycles after the last response"),
        ("reserved0", "uint64_t", "0"),
        ("reserved1", "uint64_t", "0"),
    ),
)
REQUEST = Struct(
    "npu_ring_request",
    "At REQUEST_OFFSET: what to do (written by the client).",
    (
        ("kind", "uint32_t", "RingKind"),
        ("n_ops", "uint32_t", "BATCH: operations at OPS_OFFSET (1..RING_MAX_OPS)"),
        ("max_cycles", "uint64_t", "WAIT_IRQ: simulated cycles to wait at most (1..2**40)"),
        ("wall_ms", "uint64_t", "WAIT_IRQ: wall-clock milliseconds at most (1..600000)"),
        ("reserved0", "uint64_t", "0"),
    ),
)
RESPONSE = Struct(
    "npu_ring_response",
    "At RESPONSE_OFFSET: what happened (written by the simulator).",
    (
        ("status", "uint32_t", "RingStatus"),
        ("n_results", "uint32_t", "BATCH: results at RESULTS_OFFSET"),
        ("cycles", "uint64_t", "the device's simulated cycles at the end"),
        ("outcome", "uint32_t", "WAIT_IRQ: the wire's WaitOutcome"),
        ("reserved0", "uint32_t", "0"),
        ("waited", "uint64_t", "WAIT_IRQ: simulated cycles waited"),
    ),
)

REQUEST_OFFSET = 64
RESPONSE_OFFSET = 128
MESSAGE_OFFSET = 192
OPS_OFFSET = 512
RESULTS_OFFSET = OPS_OFFSET + RING_MAX_OPS * REGBUS_OP.size
RING_BYTES = -(-(RESULTS_OFFSET + RING_MAX_OPS * REGBUS_RESULT.size) // 4096) * 4096
"""The ring file's size: whole pages."""

MAX_CYCLES = MAX_POLL_CYCLES
"""The longest poll or wait, in simulated cycles."""
MAX_WALL_MS = 600_000
"""The longest wait, in wall-clock milliseconds (as the server's WaitInterrupt)."""

assert HEADER.size <= REQUEST_OFFSET and REQUEST_OFFSET + REQUEST.size <= RESPONSE_OFFSET
assert RESPONSE_OFFSET + RESPONSE.size <= MESSAGE_OFFSET
assert MESSAGE_OFFSET + MESSAGE_BYTES <= OPS_OFFSET


def refusal(ring: bytes | bytearray | memoryview | mmap.mmap) -> str:
    """The simulator's reason for a response that is not OK, from a ring's mapping: its
    status name and the NUL-terminated message at `MESSAGE_OFFSET`."""
    status = RESPONSE.format.unpack_from(ring, RESPONSE_OFFSET)[0]
    raw = bytes(ring[MESSAGE_OFFSET : MESSAGE_OFFSET + MESSAGE_BYTES])
    text = raw.split(b"\0", 1)[0].decode("ascii", errors="replace")
    name = RingStatus(status).name if status in RingStatus._value2member_map_ else status
    return f"the device's simulator refused the request ({name}): {text}"


def c_header() -> str:
    """``rtl/generated/npu_ring_abi.h``: the layout above for C and C++."""
    out = [
        "// Generated by tools/generate.py from runtime/xrt/hw/ring.py. Do not edit: run",
        "// `make regs`. The register ring's layout (see that module's docstring).",
        "#ifndef NPU_RING_ABI_H",
        "#define NPU_RING_ABI_H",
        "",
        "#include <stdint.h>",
        "",
        "#ifdef __cplusplus",
        "#define NPU_RING_STATIC_ASSERT(c, m) static_assert(c, m)",
        "#else",
        "#define NPU_RING_STATIC_ASSERT(c, m) _Static_assert(c, m)",
        "#endif",
        "",
        f"#define NPU_RING_MAGIC 0x{RING_MAGIC:08X}u",
        f"#define NPU_RING_VERSION {RING_VERSION}u",
        f"#define NPU_RING_MAX_OPS {RING_MAX_OPS}u",
        f"#define NPU_RING_BYTES {RING_BYTES}u",
        f"#define NPU_RING_REQUEST_OFFSET {REQUEST_OFFSET}u",
        f"#define NPU_RING_RESPONSE_OFFSET {RESPONSE_OFFSET}u",
        f"#define NPU_RING_MESSAGE_OFFSET {MESSAGE_OFFSET}u",
        f"#define NPU_RING_MESSAGE_BYTES {MESSAGE_BYTES}u",
        f"#define NPU_RING_OPS_OFFSET {OPS_OFFSET}u",
        f"#define NPU_RING_RESULTS_OFFSET {RESULTS_OFFSET}u",
        f"#define NPU_RING_MAX_CYCLES {MAX_CYCLES}ull",
        f"#define NPU_RING_DEFAULT_POLL_CYCLES {DEFAULT_POLL_CYCLES}ull",
        f"#define NPU_RING_MAX_WALL_MS {MAX_WALL_MS}u",
        f"#define NPU_MIN_SIM_CYCLES_PER_S {MIN_SIM_CYCLES_PER_S}ull  /* xrt.hw.targets */",
        "",
    ]
    # The ring's enums, and the wire's values a ring carries (xrt.hw.wire): a result's
    # status, a wait's outcome.
    enums: tuple[tuple[type[IntEnum], str], ...] = (
        *((e, "NPU_RING_" + e.__name__.removeprefix("Ring").upper())
          for e in (RingState, RingKind, RingSlot, RingStatus)),
        (RegisterStatus, "NPU_REGISTER_STATUS"),
        (WaitOutcome, "NPU_WAIT_OUTCOME"),
    )  # fmt: skip
    for enum, prefix in enums:
        out += [f"#define {prefix}_{m.name} {m.value}u" for m in enum] + [""]
    for s in (REGBUS_OP, REGBUS_RESULT, HEADER, REQUEST, RESPONSE):
        out.append(f"/* {s.doc} */")
        out.append(f"struct {s.name} {{")
        out += [f"    {ctype} {name}; /* {doc} */" for name, ctype, doc in s.fields]
        out.append("};")
        out.append(
            f'NPU_RING_STATIC_ASSERT(sizeof(struct {s.name}) == {s.size}, "{s.name} layout");'
        )
        out.append("")
    out += ["#endif /* NPU_RING_ABI_H */", ""]
    return "\n".join(out)
