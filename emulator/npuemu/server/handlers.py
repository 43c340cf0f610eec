"""The servicer's registration with the gRPC server, with request decoding that refuses
garbage with INVALID_ARGUMENT.

grpcio's generated `add_DeviceServiceServicer_to_server` decodes each request with the
message's ``FromString``; bytes that are not that message make gRPC answer INTERNAL
("Exception deserializing request"), which reads like a server fault. Here the handlers are
built from the proto's own service description with a decoder that turns undecodable bytes
into an `Undecodable` request; the servicer refuses it with INVALID_ARGUMENT naming the
method and the message (`refuse_undecodable`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message

from npuemu.server.errors import ServiceError
from xrt.hw.wire import pb

__all__ = ["Undecodable", "add_to_server", "refuse_undecodable"]

SERVICE = pb.DESCRIPTOR.services_by_name["DeviceService"]
_FACTORIES = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


@dataclass(frozen=True)
class Undecodable:
    """A request whose bytes are not the method's message."""

    message: str  # the message type expected
    nbytes: int
    why: str


def refuse_undecodable(request: object) -> None:
    """Raise INVALID_ARGUMENT when `request` (or a stream message) could not be decoded."""
    if isinstance(request, Undecodable):
        raise ServiceError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"the request is not a {request.message} ({request.nbytes} bytes: {request.why})",
        )


def _decoder(cls: type[Message]) -> Callable[[bytes], Message | Undecodable]:
    name = cls.DESCRIPTOR.full_name

    def decode(data: bytes) -> Message | Undecodable:
        try:
            return cls.FromString(data)
        except (DecodeError, ValueError) as exc:
            return Undecodable(name, len(data), str(exc)[:120] or type(exc).__name__)

    return decode


def add_to_server(servicer: Any, server: grpc.aio.Server) -> None:
    """Register every method of ``npuemu.v1.DeviceService`` that `servicer` implements."""
    handlers = {}
    for method in SERVICE.methods:
        request, response = (
            getattr(pb, method.input_type.name),
            getattr(pb, method.output_type.name),
        )
        factory = _FACTORIES[(method.client_streaming, method.server_streaming)]
        handlers[method.name] = factory(
            getattr(servicer, method.name),
            request_deserializer=_decoder(request),
            response_serializer=response.SerializeToString,
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE.full_name, handlers),)
    )
