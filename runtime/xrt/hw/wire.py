"""The device server's wire contract (``proto/npuemu/v1/device.proto``) and the values both
of its ends share: the protocol version, the register statuses and wait outcomes (carried
end to end with the proto's numbers: the RTL register bus master reports them, the worker,
the server and the runtime pass them on unchanged), the device states, and the retry hints
a refusal carries.

``pb`` and ``pb_grpc`` are the messages and the gRPC stubs generated from the proto by
``make regs`` (grpcio-tools); the runtime's gRPC transport and the server both import them
from here. They load on first use: ``import xrt`` on a board needs neither protobuf nor
grpc (the enums here are generated from the proto as plain Python).
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from xrt.hw._generated.wire import CheckpointScope, DeviceState, RegisterStatus, WaitOutcome

if TYPE_CHECKING:
    from xrt.hw._proto.npuemu.v1 import device_pb2 as pb
    from xrt.hw._proto.npuemu.v1 import device_pb2_grpc as pb_grpc

__all__ = [
    "ADMIN_KEY",
    "MAX_BATCH_OPS",
    "MAX_CHUNK",
    "MAX_WAIT_MS",
    "MIN_CHUNK",
    "NO_PUSHBACK",
    "PROTOCOL_VERSION",
    "REASON_BUSY",
    "REASON_RESETTING",
    "REASON_RESTARTING",
    "REASON_STARTING",
    "RETRY_AFTER_KEY",
    "RETRY_REASON_KEY",
    "XRT_CODE_KEY",
    "CheckpointScope",
    "DeviceState",
    "RegisterStatus",
    "WaitOutcome",
    "pb",
    "pb_grpc",
]

PROTOCOL_VERSION = 1
"""Sent by the client in OpenDevice and reported by the server; a mismatch is refused."""

# The server's limits on one request (larger ones are INVALID_ARGUMENT); the client sizes
# its requests to them.
MAX_CHUNK = 1 << 20
"""Bytes per memory stream message."""
MIN_CHUNK = 4 << 10
"""A ReadMemory chunk_size below this counts as this: every message costs the server the
same, so 1-byte messages would make a 64 MiB read take minutes of its time."""
MAX_BATCH_OPS = 4096
"""Register operations per RegisterBatch."""
MAX_WAIT_MS = 600_000
"""The longest WaitInterrupt."""

# Retry hints in a refusal's trailing metadata (the runtime's retry policy:
# `xrt.transport.grpc.retry`). A refusal carries them when the server did nothing and the
# call will work later; the call during which a worker died carries none.
RETRY_REASON_KEY = "npu-emu-retry-reason"
RETRY_AFTER_KEY = "npu-emu-retry-after-ms"
REASON_RESTARTING = "worker-restarting"  # the device's simulation worker is being restarted
REASON_RESETTING = "device-resetting"  # the device is being cleared between two holders
REASON_BUSY = "device-busy"  # the device is leased, or none is free
REASON_STARTING = "device-starting"  # the server is starting the device's simulation worker
XRT_CODE_KEY = "npu-emu-xrt-code"
"""Trailing metadata of a refusal for which the manual has a code of its own (11011 for a
checkpoint that cannot be loaded): the runtime raises it instead of the status's code."""
NO_PUSHBACK = ("grpc-retry-pushback-ms", "-1")
"""Trailing metadata on every status the server sends: gRPC's own retries stay off."""

ADMIN_KEY = "x-npu-emu-admin"
"""Metadata key of the operator's credential (``npu-emu serve --admin-token-file``), which
the Observe* calls need; the client token (``authorization``) never stands in for it."""


def __getattr__(name: str) -> ModuleType:
    """``pb`` and ``pb_grpc``, imported when first asked for."""
    if name == "pb":
        from xrt.hw._proto.npuemu.v1 import device_pb2

        return device_pb2
    if name == "pb_grpc":
        from xrt.hw._proto.npuemu.v1 import device_pb2_grpc

        return device_pb2_grpc
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
