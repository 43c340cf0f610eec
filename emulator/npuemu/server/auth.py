"""Bearer-token check for every DeviceService call (`npu-emu serve --token`), and the
operator's credential for the Observe* calls (`npu-emu serve --admin-token-file`).

Health and reflection stay open, so load balancers and `grpcurl` can look without a token.
The two credentials are separate: the token interceptor applies to every call (Observe*
included, when the server has a token), and an Observe* call needs the admin credential
as well (`AdminCredential`, checked by the servicer, which knows the device and the peer
for its log line). The client token alone never grants observing.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable, Iterable

import grpc

from npuemu.server.errors import ServiceError
from xrt.hw.wire import ADMIN_KEY

__all__ = ["AdminCredential", "TokenAuthInterceptor"]

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


class AdminCredential:
    """The operator's credential: metadata ``x-npu-emu-admin: <admin token>``.

    Args:
        token: The admin token (`--admin-token-file`); None: observing is off.
    """

    def __init__(self, token: str | None) -> None:
        self._expected = token.encode() if token else None

    @property
    def enabled(self) -> bool:
        return self._expected is not None

    def check(self, metadata: Iterable[tuple[str, str]] | None, what: str) -> None:
        """Raise ServiceError unless `metadata` (a call's invocation metadata) carries the
        admin token: PERMISSION_DENIED when observing is off or the credential is missing
        (a client, with or without the client token, is not an observer), UNAUTHENTICATED
        when it is wrong. `what` names the access for the message ("observing npu0")."""
        given = [value for key, value in (metadata or ()) if key == ADMIN_KEY]
        if self._expected is None:
            raise ServiceError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{what}: observing is off on this server (its operator turns it on with "
                "npu-emu serve --admin-token-file FILE)",
            )
        if not given:
            raise ServiceError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{what} needs the operator's credential, metadata '{ADMIN_KEY}: <admin "
                "token>' (npu-emu --observe sends $NPU_EMU_ADMIN_TOKEN); the client token "
                "does not grant it",
            )
        value = given[0]
        value_b = value.encode() if isinstance(value, str) else bytes(value)
        # One value, compared in constant time (a second value is a wrong credential).
        if not hmac.compare_digest(value_b, self._expected) or len(given) != 1:
            raise ServiceError(
                grpc.StatusCode.UNAUTHENTICATED, f"{what}: wrong admin token in '{ADMIN_KEY}'"
            )
