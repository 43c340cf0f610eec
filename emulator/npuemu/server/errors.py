"""Errors the service turns into gRPC status codes, and the checks that raise them.

Every address, length, alignment and size a client sends is checked here before anything
touches a device, so a bad request changes nothing.
"""

from __future__ import annotations

import grpc

from xrt.hw.config import TargetConfig
from xrt.hw.wire import NO_PUSHBACK, RETRY_AFTER_KEY, RETRY_REASON_KEY, XRT_CODE_KEY

__all__ = [
    "ServiceError",
    "check_memory_range",
    "check_register",
    "clip",
]


MAX_ECHO = 64  # characters of a client's string echoed into logs and messages


def clip(text: str, limit: int = MAX_ECHO) -> str:
    """`text` cut to `limit` characters (with a mark), printable only: client strings go
    into logs and messages, and a client must not be able to flood either."""
    text = "".join(c if c.isprintable() else "?" for c in text[: limit + 1])
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ServiceError(Exception):
    """A request the service refuses: `code` is the gRPC status, `message` says why.

    `retry_reason` (``xrt.hw.wire``: REASON_RESTARTING, REASON_BUSY) marks a
    refusal that changed nothing and will likely succeed after `retry_after_s`: it goes to
    the client in trailing metadata, which the runtime's bounded retry keys on.
    `xrt_code` (an `xrt.errors.ErrorCode` number) is the manual's code for a refusal that
    has one of its own; it goes to the client in trailing metadata too.
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        retry_reason: str = "",
        retry_after_s: float = 0.0,
        xrt_code: int = 0,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_reason = retry_reason
        self.retry_after_s = retry_after_s
        self.xrt_code = xrt_code

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        """What goes with the status: gRPC's "do not retry" (the server's answers are
        never repeated blindly) and, when safe, the retry hint."""
        md: tuple[tuple[str, str], ...] = (NO_PUSHBACK,)
        if self.xrt_code:
            md += ((XRT_CODE_KEY, str(self.xrt_code)),)
        if self.retry_reason:
            md += (
                (RETRY_REASON_KEY, self.retry_reason),
                (RETRY_AFTER_KEY, str(round(self.retry_after_s * 1000))),
            )
        return md


def check_register(target: TargetConfig, address: int) -> None:
    """The address must be 4-byte aligned and inside a register block (npu, dma, fault)."""
    blocks = target.sim_register_blocks
    inside = any(base <= address < base + target.reg_block_size for _, base in blocks)
    if not inside:
        where = ", ".join(
            f"{name} [{base:#x}, {base + target.reg_block_size:#x})" for name, base in blocks
        )
        raise ServiceError(
            grpc.StatusCode.OUT_OF_RANGE,
            f"register address {address:#x} is outside the register blocks ({where})",
        )
    if address % 4:
        raise ServiceError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"register address {address:#x} is not 4-byte aligned",
        )


def check_memory_range(target: TargetConfig, address: int, length: int) -> int:
    """[address, address + length) must lie in host-visible memory; return its offset."""
    udma = target.memory("udma")
    if not (udma.base <= address and address + length <= udma.end):
        raise ServiceError(
            grpc.StatusCode.OUT_OF_RANGE,
            f"memory [{address:#x}, {address + length:#x}) is outside the host-visible "
            f"region udma [{udma.base:#x}, {udma.end:#x}); other memories are reached "
            "through the DMA engine",
        )
    return address - udma.base
