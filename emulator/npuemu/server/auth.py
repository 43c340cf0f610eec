"""Bearer-token check for every DeviceService call (`npu-emu serve --token`).

Health and reflection stay open, so load balancers and `grpcurl` can look without a token.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable

import grpc

__all__ = ["TokenAuthInterceptor"]

log = logging.getLogger("npuemu.server")

OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def _deny(message: str):
    async def abort(request_or_iterator, context: grpc.aio.ServicerContext):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def abort_stream(request_or_iterator, context: grpc.aio.ServicerContext):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        yield  # pragma: no cover - makes this an async generator

    return abort, abort_stream


class TokenAuthInterceptor(grpc.aio.ServerInterceptor):
    """Refuse calls whose metadata lacks ``authorization: Bearer <token>``."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if details.method.startswith(OPEN_SERVICES) or handler is None:
            return handler
        given = dict(details.invocation_metadata or ()).get("authorization", "")
        given_b = given.encode() if isinstance(given, str) else bytes(given)
        if hmac.compare_digest(given_b, self._expected):
            return handler
        reason = "missing token" if not given else "wrong token"
        log.warning("%s refused: %s", details.method, reason)
        message = f"{reason}: this server needs metadata 'authorization: Bearer <token>'"
        unary, stream = _deny(message)
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(unary)
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(stream)
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(unary)
        return grpc.stream_stream_rpc_method_handler(stream)
