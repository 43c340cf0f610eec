"""The regions of a leased device: `GrpcRegRegion` (a register block) and `GrpcMemRegion`
(host-visible memory).

A region reaches its transport only through `RegionCalls`, methods that each check that the
transport is open and make one call with its retries and error mapping. Register work is
the device port's `RegBatch` (`xrt.hw.port`) on every route: a single read or write is a
batch of one, sent as one ``ReadRegister``/``WriteRegister``; `RegRegion.execute` is one
``RegisterBatch`` per 4096 ops (the server's limit, `xrt.hw.port_wire` encodes it), with
server-side read-modify-write and poll-until. With the lease's register ring (a client on
the server's machine: `xrt.transport.grpc.register_ring`), each of these is one ring
request to the device's simulator instead, the same records, with the same results and
errors; a ring that is revoked under it (the
lease ended, the worker restarted) is dropped, and the call goes to the server, whose answer
says which. A `RegPoll` gets the ``max_cycles`` of `xrt.hw.regops`'s `poll_max_cycles`: the
server counts simulated cycles, a deterministic limit a loaded machine cannot turn into a
spurious timeout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from xrt.errors import ErrorCode, XrtError
from xrt.hw.port import RegBatch, RegResults
from xrt.hw.port_wire import batch_to_pb, results_of_pb
from xrt.hw.regmap import RegisterBlockInfo
from xrt.hw.ring import RingStatus
from xrt.hw.ring_core import RingError, RingRevokedError
from xrt.hw.targets import MIN_SIM_CYCLES_PER_S
from xrt.hw.wire import MAX_BATCH_OPS, RegisterStatus, pb
from xrt.registers import RegOp, RegPoll, RegRead, RegRegion
from xrt.transport import HostRegion
from xrt.transport.grpc.calls import RPC_SLACK_S
from xrt.transport.grpc.errors import register_status_error
from xrt.transport.grpc.register_ring import RegisterRing

__all__ = ["MAX_BATCH_OPS", "GrpcMemRegion", "GrpcRegRegion", "RegionCalls"]


class RegionCalls(Protocol):
    """What a region asks of its transport (`GrpcTransport` provides it: typed here, so
    the regions need not import the transport that makes them). Each method checks
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

    @property
    def ring(self) -> RegisterRing | None:
        """The register ring the server handed out, while it is in use."""
        ...

    def drop_ring(self, why: str) -> None:
        """Stop using the register ring (the regions fall back to the server's calls)."""
        ...

    def note_cycles(self, cycles: int) -> None:
        """The device's cycle count a reply that bypassed the server (the ring's) reported."""
        ...


class GrpcRegRegion(RegRegion):
    """A register block of a leased device (see the module docstring)."""

    def __init__(
        self,
        transport: RegionCalls,
        name: str,
        base: int,
        size: int,
        *,
        regmap: RegisterBlockInfo | None = None,
    ) -> None:
        self._transport = transport
        super().__init__(name, base, size, regmap=regmap)

    @property
    def transport(self) -> RegionCalls:
        return self._transport

    def _on_ring(self, batch: RegBatch, what: str, timeout_s: float) -> RegResults | None:
        """Run `batch` on the register ring; None when there is no ring (any more)."""
        ring = self._transport.ring
        if ring is None:
            return None
        try:
            results = ring.batch(batch, timeout_s)
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
        done = self._on_ring(RegBatch.read(addr), what, RPC_SLACK_S)
        if done is not None:
            ((status, value, _),) = done
        else:
            calls = self._transport
            resp = calls.call(
                "ReadRegister",
                pb.ReadRegisterRequest(lease_id=calls.lease_id, address=addr),
                what,
                timeout=RPC_SLACK_S,
            )
            status, value = resp.status, resp.value
        if status != RegisterStatus.OK:
            raise register_status_error(
                status, index=None, op="read", address=addr, value=value, region=self.name
            )
        return int(value)

    def _write32(self, addr: int, value: int) -> None:
        what = f"write of register {addr:#x} in region {self.name!r}"
        done = self._on_ring(RegBatch.write(addr, value), what, RPC_SLACK_S)
        if done is not None:
            ((status, _, _),) = done
        else:
            calls = self._transport
            resp = calls.call(
                "WriteRegister",
                pb.WriteRegisterRequest(lease_id=calls.lease_id, address=addr, value=value),
                what,
                timeout=RPC_SLACK_S,
            )
            status = resp.status
        if status != RegisterStatus.OK:
            raise register_status_error(
                status, index=None, op="write", address=addr, value=value, region=self.name
            )

    def _batch(self, ops: Sequence[RegOp]) -> list[int | None]:
        """One batch per 4096 ops (the server's limit); masked writes are read-modify-writes
        in the simulation worker, which serves one request at a time (atomic)."""
        results: list[int | None] = []
        for start in range(0, len(ops), MAX_BATCH_OPS):
            results += self._run(ops[start : start + MAX_BATCH_OPS], start)
        return results

    def _run(self, ops: Sequence[RegOp], first_index: int) -> list[int | None]:
        """`ops` as one `RegBatch` (the device port's record: the same on the ring and, through
        `xrt.hw.port_wire`, on the wire)."""
        batch = RegBatch.of_ops(ops)
        what = f"batch of {len(ops)} register ops in region {self.name!r}"
        timeout = RPC_SLACK_S + batch.poll_cycles() / MIN_SIM_CYCLES_PER_S
        done = self._on_ring(batch, what, timeout)
        if done is not None:
            return self._results(ops, done.pairs(), first_index, batch)
        calls = self._transport
        resp = calls.call(
            "RegisterBatch", batch_to_pb(calls.lease_id, batch), what, timeout=timeout
        )
        return self._results(ops, results_of_pb(resp), first_index, batch)

    def _results(
        self,
        ops: Sequence[RegOp],
        results: Sequence[tuple[int, int]],
        first_index: int,
        batch: RegBatch,
    ) -> list[int | None]:
        """The values of a batch's reads and polls (`results`: a status and a value per op
        run); the first failure raises (with the poll's limit in its message)."""
        ok = RegisterStatus.OK
        if len(results) == len(ops) and all(r[0] == ok for r in results):  # the usual case
            return [
                int(r[1]) if type(op) in _VALUED else None
                for op, r in zip(ops, results, strict=True)
            ]
        out: list[int | None] = []
        limits = dict(batch.polls())
        for i, (op, (status, value)) in enumerate(zip(ops, results, strict=False)):
            if status != RegisterStatus.OK:
                kind = type(op)
                name = {RegRead: "read", RegPoll: "poll"}.get(kind, "write")
                extra = ""
                if isinstance(op, RegPoll):
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
        transport: RegionCalls,
        name: str,
        base: int,
        size: int,
        view: memoryview | None,
        *,
        min_alignment: int = 64,
    ) -> None:
        self._transport = transport
        self._view = view
        super().__init__(name, base, size, min_alignment=min_alignment)

    @property
    def transport(self) -> RegionCalls:
        return self._transport

    def _read(self, addr: int, nbytes: int) -> bytearray:
        return self._transport.read_memory(addr, nbytes)

    def _write(self, addr: int, data: memoryview) -> None:
        self._transport.write_memory(addr, data)

    def _host_map(self) -> memoryview | None:
        return self._view


_VALUED = (RegRead, RegPoll)  # the ops whose result is a value
