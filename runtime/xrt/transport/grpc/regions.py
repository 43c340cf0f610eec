"""The regions of a leased device: `GrpcRegRegion` (a register block) and `GrpcMemRegion`
(host-visible memory).

A region reaches its transport only through `RegionCalls`, methods that each check that the
transport is open and make one call with its retries and error mapping. A single register
read or write is one ``ReadRegister``/``WriteRegister``; `RegRegion.execute` is one
``RegisterBatch`` per 4096 ops (the server's limit), with server-side read-modify-write and
poll-until. With the lease's register ring (a client on the server's machine:
`xrt.transport.grpc.register_ring`), each of these is one ring request to the device's
simulator instead, with the same results and errors; a ring that is revoked under it (the
lease ended, the worker restarted) is dropped, and the call goes to the server, whose answer
says which. A `RegPoll` gets the ``max_cycles`` of `xrt.hw.regops`'s `poll_max_cycles`: the
server counts simulated cycles, a deterministic limit a loaded machine cannot turn into a
spurious timeout.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from xrt.errors import ErrorCode, XrtError
from xrt.hw.regmap import RegisterBlockInfo
from xrt.hw.regops import MASK32, RegKind, poll_max_cycles, to_row
from xrt.hw.ring import REGBUS_OP, RingStatus
from xrt.hw.wire import MAX_BATCH_OPS, RegisterStatus, pb
from xrt.registers import RegMaskedWrite, RegOp, RegPoll, RegRead, RegRegion, RegWrite
from xrt.transport import HostRegion
from xrt.transport.grpc.calls import RPC_SLACK_S
from xrt.transport.grpc.errors import register_status_error
from xrt.transport.grpc.register_ring import RingError, RingRevokedError

if TYPE_CHECKING:
    from xrt.transport.grpc.transport import GrpcTransport

__all__ = ["MAX_BATCH_OPS", "GrpcMemRegion", "GrpcRegRegion", "RegionCalls"]

SIM_MIN_CYCLES_PER_S = 100_000  # deadline of polls: a simulator this slow is broken


class RegionCalls(Protocol):
    """What a region asks of its transport (`GrpcTransport` provides it). Each method checks
    that the transport is open, makes one call and raises `XrtError` for any failure."""

    @property
    def lease_id(self) -> str:
        """The lease every call names."""
        ...

    def call(self, method: str, request: Any, what: str, *, timeout: float) -> Any:
        """One unary call, retried while the server says it is safe to."""
        ...

    def read_memory(self, addr: int, nbytes: int) -> bytearray:
        """Read host-visible memory (one ReadMemory stream)."""
        ...

    def write_memory(self, addr: int, data: memoryview) -> None:
        """Write host-visible memory (one WriteMemory stream)."""
        ...


class GrpcRegRegion(RegRegion):
    """A register block of a leased device (see the module docstring)."""

    def __init__(
        self,
        transport: GrpcTransport,
        name: str,
        base: int,
        size: int,
        *,
        regmap: RegisterBlockInfo | None = None,
    ) -> None:
        self._transport = transport
        self._calls: RegionCalls = transport  # the same object, seen through what regions use
        super().__init__(name, base, size, regmap=regmap)

    @property
    def transport(self) -> GrpcTransport:
        return self._transport

    def _on_ring(self, records: bytes, n_ops: int, what: str, timeout_s: float) -> list | None:
        """Run `n_ops` ops encoded as ring records (`_encode_for_ring`) on the register
        ring; None when there is no ring (any more)."""
        ring = self._transport.ring
        if ring is None:
            return None
        try:
            results = ring.batch_encoded(records, n_ops, timeout_s)
        except RingRevokedError as exc:
            self._transport.drop_ring(str(exc))
            return None
        except RingError as exc:  # a request the simulator refuses, as the server would
            code = ErrorCode.OUT_OF_RANGE if exc.status == RingStatus.BAD_REQUEST else None
            raise XrtError(code or ErrorCode.DEVICE_INTERNAL, f"{what}: {exc}") from None
        self._transport.note_cycles(ring.cycles)
        return results

    def _read32(self, addr: int) -> int:
        what = f"read of register {addr:#x} in region {self.name!r}"
        done = self._on_ring(_read_record(addr), 1, what, RPC_SLACK_S)
        if done is not None:
            ((status, value, _),) = done
            if status != RegisterStatus.OK:
                raise register_status_error(
                    status, index=None, op="read", address=addr, value=value, region=self.name
                )
            return int(value)
        calls = self._calls
        resp = calls.call(
            "ReadRegister",
            pb.ReadRegisterRequest(lease_id=calls.lease_id, address=addr),
            f"read of register {addr:#x} in region {self.name!r}",
            timeout=RPC_SLACK_S,
        )
        if resp.status != RegisterStatus.OK:
            raise register_status_error(
                resp.status, index=None, op="read", address=addr, value=resp.value, region=self.name
            )
        return int(resp.value)

    def _write32(self, addr: int, value: int) -> None:
        what = f"write of register {addr:#x} in region {self.name!r}"
        records = _PACK_OP(RegKind.WRITE, addr, value, MASK32, 0, 0, 0)
        done = self._on_ring(records, 1, what, RPC_SLACK_S)
        if done is not None:
            ((status, _, _),) = done
            if status != RegisterStatus.OK:
                raise register_status_error(
                    status, index=None, op="write", address=addr, value=value, region=self.name
                )
            return
        calls = self._calls
        resp = calls.call(
            "WriteRegister",
            pb.WriteRegisterRequest(lease_id=calls.lease_id, address=addr, value=value),
            f"write of register {addr:#x} in region {self.name!r}",
            timeout=RPC_SLACK_S,
        )
        if resp.status != RegisterStatus.OK:
            raise register_status_error(
                resp.status, index=None, op="write", address=addr, value=value, region=self.name
            )

    def _batch(self, ops: Sequence[RegOp]) -> list[int | None]:
        """One RegisterBatch per 4096 ops; masked writes are read-modify-writes in the
        simulation worker, which serves one request at a time (atomic)."""
        results: list[int | None] = []
        for start in range(0, len(ops), MAX_BATCH_OPS):
            results += self._run(ops[start : start + MAX_BATCH_OPS], start)
        return results

    def _run(self, ops: Sequence[RegOp], first_index: int) -> list[int | None]:
        if self._transport.ring is not None:
            encoded, limits = _encode_for_ring(ops)
            what = f"batch of {len(ops)} register ops in region {self.name!r}"
            timeout = RPC_SLACK_S + sum(limits.values()) / SIM_MIN_CYCLES_PER_S
            done = self._on_ring(encoded, len(ops), what, timeout)
            if done is not None:
                return self._results(ops, done, first_index, limits)
        calls = self._calls
        request = pb.RegisterBatchRequest(lease_id=calls.lease_id)
        # Fields set on added messages: a fifth of the cost of building each op with
        # RegisterOp(read=RegisterRead(...)) (measured: that was several us per op).
        add = request.ops.add
        poll_cycles = 0
        limits: dict[int, int] = {}
        for i, op in enumerate(ops):
            kind = type(op)
            if kind is RegRead:
                add().read.address = op.addr
            elif kind is RegWrite:
                body = add().write
                body.address = op.addr
                body.value = op.value
            elif kind is RegMaskedWrite:
                body = add().masked_write
                body.address = op.addr
                body.value = op.value
                body.mask = op.mask
            elif kind is RegPoll:
                cycles = poll_max_cycles(op)
                limits[i] = cycles
                poll_cycles += cycles
                body = add().poll
                body.address = op.addr
                body.mask = op.mask
                body.expected = op.expected
                body.max_cycles = cycles
            else:  # pragma: no cover - execute() passes only the four op types
                raise XrtError(ErrorCode.WRONG_TYPE, f"unknown register op {op!r}")
        resp = calls.call(
            "RegisterBatch",
            request,
            f"batch of {len(ops)} register ops in region {self.name!r}",
            timeout=RPC_SLACK_S + poll_cycles / SIM_MIN_CYCLES_PER_S,
        )
        return self._results(ops, [(r.status, r.value) for r in resp.results], first_index, limits)

    def _results(
        self,
        ops: Sequence[RegOp],
        results: Sequence[tuple[int, int]],
        first_index: int,
        limits: dict[int, int],
    ) -> list[int | None]:
        """The values of a batch's reads and polls (`results`: a status and a value first
        per op run); the first failure raises (with the poll's limit in its message)."""
        ok = RegisterStatus.OK
        if len(results) == len(ops) and all(r[0] == ok for r in results):  # the usual case
            return [
                int(r[1]) if type(op) in _VALUED else None
                for op, r in zip(ops, results, strict=True)
            ]
        out: list[int | None] = []
        for i, (op, (status, value, *_)) in enumerate(zip(ops, results, strict=False)):
            if status != RegisterStatus.OK:
                kind = type(op)
                name = {RegRead: "read", RegPoll: "poll"}.get(kind, "write")
                extra = ""
                if kind is RegPoll:
                    extra = (
                        f" after {limits[i]} simulated cycles (from max_polls={op.max_polls}, "
                        f"timeout_s={op.timeout_s}) waiting for value & {op.mask:#x} == "
                        f"{op.expected:#x}"
                    )
                raise register_status_error(
                    status,
                    index=first_index + i,
                    op=name,
                    address=op.addr,
                    value=value,
                    region=self.name,
                    extra=extra,
                )
            out.append(int(value) if type(op) in (RegRead, RegPoll) else None)
        if len(out) != len(ops):
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL,
                f"batch in region {self.name!r}: the device answered {len(results)} "
                f"results for {len(ops)} ops",
            )
        return out


class GrpcMemRegion(HostRegion):
    """Host-visible memory (or a window of it) of a leased device.

    Streams bytes with ReadMemory/WriteMemory, or, on the local fast path, is a view of the
    mapped shared-memory file (then the base class never calls `_read`/`_write`).
    """

    def __init__(
        self,
        transport: GrpcTransport,
        name: str,
        base: int,
        size: int,
        view: memoryview | None,
        *,
        min_alignment: int = 64,
    ) -> None:
        self._transport = transport
        self._calls: RegionCalls = transport  # the same object, seen through what regions use
        self._view = view
        super().__init__(name, base, size, min_alignment=min_alignment)

    @property
    def transport(self) -> GrpcTransport:
        return self._transport

    def _read(self, addr: int, nbytes: int) -> bytearray:
        return self._calls.read_memory(addr, nbytes)

    def _write(self, addr: int, data: memoryview) -> None:
        self._calls.write_memory(addr, data)

    def _host_map(self) -> memoryview | None:
        return self._view


_VALUED = (RegRead, RegPoll)  # the ops whose result is a value
_PACK_OP = REGBUS_OP.format.pack


@functools.lru_cache(maxsize=1024)
def _read_record(addr: int) -> bytes:
    return _PACK_OP(RegKind.READ, addr, 0, MASK32, 0, 0, 0)


def _encode_for_ring(ops: Sequence[RegOp]) -> tuple[bytes, dict[int, int]]:
    """`ops` (checked by `execute`) as the ring's records, and each poll's limit in
    cycles by its index: what ``encode_ops([to_row(op) ...])`` gives, at a fifth of its
    Python per op (a read's record is cached by address: polls reread the same few)."""
    parts: list[bytes] = []
    append = parts.append
    limits: dict[int, int] = {}
    for i, op in enumerate(ops):
        kind = type(op)
        if kind is RegRead:
            append(_read_record(op.addr))
        elif kind is RegWrite:
            append(_PACK_OP(RegKind.WRITE, op.addr, op.value, MASK32, 0, 0, 0))
        elif kind is RegMaskedWrite:
            append(_PACK_OP(RegKind.MASKED_WRITE, op.addr, op.value, op.mask, 0, 0, 0))
        else:
            row = to_row(op)
            limits[i] = row.max_cycles
            append(_PACK_OP(*row[:5], 0, row.max_cycles))
    return b"".join(parts), limits
