"""The gRPC transport (skeleton during the split)."""

from xrt.hw.regops import POLL_CYCLES_PER_S, poll_max_cycles
from xrt.hw.wire import PROTOCOL_VERSION, pb
from xrt.transport.grpc.transport import (
    URL_PARAMS,
    GrpcMemRegion,
    GrpcRegRegion,
    GrpcTransport,
    WaveFile,
    tls_credentials,
)

__all__ = [
    "POLL_CYCLES_PER_S",
    "PROTOCOL_VERSION",
    "URL_PARAMS",
    "GrpcMemRegion",
    "GrpcRegRegion",
    "GrpcTransport",
    "WaveFile",
    "pb",
    "poll_max_cycles",
    "tls_credentials",
]
