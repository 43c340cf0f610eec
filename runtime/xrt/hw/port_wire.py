"""The device port's register batches on the wire (``npuemu.v1``): the one place where a
`RegBatch` becomes a ``RegisterBatchRequest`` and back, and its `RegResults` a
``RegisterBatchResponse`` and back. The runtime's gRPC transport and the device server
both use these (protobuf is imported here, not by `xrt.hw.port`: a board needs none).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xrt.hw.port import RegBatch, RegResults
from xrt.hw.regops import DEFAULT_POLL_CYCLES, MASK32, MAX_POLL_CYCLES, RegKind
from xrt.hw.ring import REGBUS_OP
from xrt.hw.wire import pb

__all__ = [
    "WireOpError",
    "batch_of_pb",
    "batch_to_pb",
    "refuse_wide",
    "results_of_pb",
    "results_to_pb",
]

_PACK_OP = REGBUS_OP.format.pack
_READ, _WRITE, _MASKED_WRITE, _POLL = (
    RegKind.READ,
    RegKind.WRITE,
    RegKind.MASKED_WRITE,
    RegKind.POLL,
)


class WireOpError(ValueError):
    """An op of a wire batch that is not one (the message names it by its index)."""

    def __init__(self, index: int, why: str) -> None:
        super().__init__(f"op {index}: {why}")
        self.index = index


def batch_to_pb(lease_id: str, batch: RegBatch) -> pb.RegisterBatchRequest:
    """The ``RegisterBatchRequest`` of `batch`."""
    request = pb.RegisterBatchRequest(lease_id=lease_id)
    # Fields set on added messages: a fifth of the cost of building each op with
    # RegisterOp(read=RegisterRead(...)) (measured: that was several us per op).
    add = request.ops.add
    for kind, addr, value, mask, expected, _, cycles in REGBUS_OP.format.iter_unpack(batch.records):
        if kind == _READ:
            add().read.address = addr
        elif kind == _WRITE:
            body = add().write
            body.address = addr
            body.value = value
        elif kind == _MASKED_WRITE:
            body = add().masked_write
            body.address = addr
            body.value = value
            body.mask = mask
        else:
            body = add().poll
            body.address = addr
            body.mask = mask
            body.expected = expected
            body.max_cycles = cycles
    return request


def batch_of_pb(
    ops: Sequence[pb.RegisterOp], check: Callable[[int, int], None] | None = None
) -> RegBatch:
    """The `RegBatch` of a wire batch's ops (a poll's ``max_cycles`` of 0 is
    `DEFAULT_POLL_CYCLES`). ``check(index, address)`` vets each op's address first (the
    server's register windows); an address past 32 bits is refused in any case.

    The wire's values, masks and expected values are 64-bit; this device's registers are
    32 bits, so a wider one is refused (`refuse_wide`), never truncated.

    Raises:
        WireOpError: an empty op, an address past 32 bits, a value wider than 32 bits, a
            poll longer than 2**40 cycles. Whatever `check` raises.
    """
    parts: list[bytes] = []
    append = parts.append
    for i, op in enumerate(ops):
        kind = op.WhichOneof("op")
        if kind is None:
            raise WireOpError(i, "empty")
        body = getattr(op, kind)
        address = body.address
        if check is not None:
            check(i, address)
        if address > MASK32:
            raise WireOpError(i, f"register address {address:#x} is past 32 bits")
        if kind == "read":
            append(_PACK_OP(_READ, address, 0, MASK32, 0, 0, 0))
        elif kind == "write":
            value = body.value
            if value > MASK32:
                raise WireOpError(i, refuse_wide("value", value, address))
            append(_PACK_OP(_WRITE, address, value, MASK32, 0, 0, 0))
        elif kind == "masked_write":
            value, mask = body.value, body.mask
            if value > MASK32 or mask > MASK32:
                wide = ("value", value) if value > MASK32 else ("mask", mask)
                raise WireOpError(i, refuse_wide(*wide, address))
            append(_PACK_OP(_MASKED_WRITE, address, value, mask, 0, 0, 0))
        else:
            cycles = body.max_cycles or DEFAULT_POLL_CYCLES
            if cycles > MAX_POLL_CYCLES:
                raise WireOpError(i, f"max_cycles {cycles} is more than 2**40")
            mask, expected = body.mask, body.expected
            if mask > MASK32 or expected > MASK32:
                wide = ("mask", mask) if mask > MASK32 else ("expected value", expected)
                raise WireOpError(i, refuse_wide(*wide, address))
            append(_PACK_OP(_POLL, address, 0, mask, expected, 0, cycles))
    return RegBatch(b"".join(parts), len(parts))


def refuse_wide(what: str, value: int, address: int) -> str:
    """Why a wire value wider than this device's 32-bit registers is refused."""
    return (
        f"register {what} {value:#x} at {address:#x} is wider than the device's 32-bit "
        "registers (a 64-bit quantity is a LO/HI pair: write LO, then HI)"
    )


def results_to_pb(results: RegResults, cycles: int) -> pb.RegisterBatchResponse:
    """The ``RegisterBatchResponse`` of `results`."""
    response = pb.RegisterBatchResponse(cycles=cycles)
    add = response.results.add  # fields set on added messages: a fifth of the cost of
    for status, value, _ in results:  # a RegisterResult(...) per op
        result = add()
        result.status = status  # already the proto's RegisterStatus (from the RTL on)
        result.value = value
    return response


def results_of_pb(response: pb.RegisterBatchResponse) -> list[tuple[int, int]]:
    """(status, value) per op run of a ``RegisterBatchResponse``."""
    return [(r.status, r.value) for r in response.results]
