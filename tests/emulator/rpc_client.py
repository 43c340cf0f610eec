"""A thin client over the raw generated stubs, for the server tests (the runtime's gRPC
transport is tested in tests/integration; here the wire contract itself is the subject)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from npuemu.server.launch import ServerProcess
from xrt.hw.dma import DmaTransfer, program_ops
from xrt.hw.regops import RegWrite
from xrt.hw.wire import pb, pb_grpc

PROTOCOL = 1
NPU_BASE, DMA_BASE, UDMA_BASE, PLDDR_BASE = 0x4000_0000, 0x8000_0000, 0x1000_0000, 0x1_0000_0000


@dataclass
class Client:
    """A stub, its channel, and the lease it holds (if any)."""

    channel: grpc.Channel
    stub: pb_grpc.DeviceServiceStub
    metadata: tuple[tuple[str, str], ...] = ()
    lease: str = ""
    device: str = ""
    address: str = ""  # host:port of the server

    def open(self, device: str = "", client: str = "test", **kw) -> pb.OpenDeviceResponse:
        resp = self.stub.OpenDevice(
            pb.OpenDeviceRequest(device=device, client=client, protocol_version=PROTOCOL, **kw),
            metadata=self.metadata,
        )
        self.lease, self.device = resp.lease_id, resp.info.name
        return resp

    def close(self) -> None:
        """End the lease (quietly when it has already ended)."""
        if self.lease:
            try:
                self.stub.CloseDevice(
                    pb.CloseDeviceRequest(lease_id=self.lease), metadata=self.metadata
                )
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.ABORTED:
                    raise
            self.lease = ""

    def read(self, addr: int) -> int:
        return self.stub.ReadRegister(
            pb.ReadRegisterRequest(lease_id=self.lease, address=addr), metadata=self.metadata
        ).value

    def write(self, addr: int, value: int) -> None:
        self.stub.WriteRegister(
            pb.WriteRegisterRequest(lease_id=self.lease, address=addr, value=value),
            metadata=self.metadata,
        )

    def batch(self, *ops: pb.RegisterOp) -> pb.RegisterBatchResponse:
        return self.stub.RegisterBatch(
            pb.RegisterBatchRequest(lease_id=self.lease, ops=ops), metadata=self.metadata
        )

    def write_mem(self, addr: int, data: bytes, chunk: int = 1 << 20, length: int | None = None):
        def gen():
            yield pb.WriteMemoryRequest(
                lease_id=self.lease, address=addr, length=len(data) if length is None else length
            )
            for i in range(0, len(data), chunk):
                yield pb.WriteMemoryRequest(data=data[i : i + chunk])

        return self.stub.WriteMemory(gen(), metadata=self.metadata)

    def read_mem(self, addr: int, length: int, chunk: int = 0) -> bytes:
        return b"".join(
            m.data
            for m in self.stub.ReadMemory(
                pb.ReadMemoryRequest(
                    lease_id=self.lease, address=addr, length=length, chunk_size=chunk
                ),
                metadata=self.metadata,
            )
        )

    def wait(self, timeout_ms: int = 5000, max_cycles: int = 0) -> pb.WaitInterruptResponse:
        return self.stub.WaitInterrupt(
            pb.WaitInterruptRequest(
                lease_id=self.lease, timeout_ms=timeout_ms, max_cycles=max_cycles
            ),
            metadata=self.metadata,
        )


def rd(addr: int) -> pb.RegisterOp:
    return pb.RegisterOp(read=pb.RegisterRead(address=addr))


def wr(addr: int, value: int) -> pb.RegisterOp:
    return pb.RegisterOp(write=pb.RegisterWrite(address=addr, value=value))


def dma_ops(src: int, dst: int, n: int) -> list[pb.RegisterOp]:
    """The DMA programming sequence (docs/hardware.md) as batch ops, ending with START: the
    harness's `program_ops`, whose offsets come from the generated register map."""
    ops = program_ops(DMA_BASE, DmaTransfer(src, dst, n))
    return [wr(op.addr, op.value) for op in ops if isinstance(op, RegWrite)]


def connect(server: ServerProcess, token: str | None = None) -> Client:
    channel = grpc.insecure_channel(server.address)
    md = (("authorization", f"Bearer {token}"),) if token else ()
    return Client(channel, pb_grpc.DeviceServiceStub(channel), md, address=server.address)


def worker_pid(server: ServerProcess, device: str) -> int:
    """The newest pid the server logged for `device`'s worker."""
    pids = re.findall(rf"worker {device} ready \(pid (\d+)\)", server.log)
    assert pids, f"no worker pid for {device} in the server log"
    return int(pids[-1])


@contextlib.contextmanager
def worker_starts_fail(server: ServerProcess, device: str) -> Iterator[Callable[[], None]]:
    """While inside, every start of `device`'s worker fails (its working folder, in the
    server's worker log folder, is replaced by a file); the callable given puts the folder
    back, and leaving puts it back too."""
    logs = re.search(r"worker logs in (\S+)", server.log)
    assert logs, "no worker log folder in the server log"
    folder = Path(logs.group(1)) / device
    away = folder.with_name(folder.name + "-away")
    folder.rename(away)
    folder.write_text("not a folder")
    restored = False

    def restore() -> None:
        nonlocal restored
        if not restored:
            folder.unlink()
            away.rename(folder)
            restored = True

    try:
        yield restore
    finally:
        restore()


def children_of(pid: int, command: str = "") -> list[int]:
    """Pids of the live child processes of `pid` (a server's workers); with `command`,
    only those running it (``npu_sim``: a worker that has started its simulator, not a
    process forked a moment earlier that may still be something else)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            head, rest = stat.read_text().rsplit(")", 1)
        except OSError:
            continue
        fields = rest.split()
        name = head.split("(", 1)[1]
        if int(fields[1]) == pid and fields[0] != "Z" and (not command or name == command):
            kids.append(int(stat.parent.name))
    return kids
